import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { AuthError, NotFoundError, RateLimitError, UnavailableError, ValidationError } from "../../../protocol/errors";
import { createVerifyContext } from "../../../protocol/verify";
import { createTimeClient } from "../../../node/client";
import { startTestNode, type TestNode } from "../api/helpers";

describe("node/client", function () {
  const apiKey = "client-test-api-key-0123456789";
  let t: TestNode;

  before(async function () {
    t = await startTestNode({ overrides: { apiKeys: [apiKey] } });
  });
  after(async function () {
    await t?.close();
  });

  function client(options: { apiKey?: string } = { apiKey }) {
    return createTimeClient({
      endpoint: t.node.endpoints.rest,
      grpcEndpoint: t.node.endpoints.grpc,
      ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
      timeoutMs: 5_000,
      retries: 1,
      backoffBaseMs: 1,
    });
  }

  function localContext() {
    return createVerifyContext({
      cards: { [t.identity.cardId]: { publicKey: t.identity.cardPublicKey, revoked: false } },
      nodes: [t.identity.nodeAddress],
      nowNs: BigInt(Date.now()) * 1_000_000n,
    });
  }

  it("fetches a proof over REST and verifies it locally and on the node", async function () {
    const c = client();
    try {
      const fetched = await c.getCurrentTime();
      expect(fetched.cardId).to.equal(t.identity.cardId);
      expect(fetched.proof.accuracy).to.equal(50);
      expect(await c.verify(fetched.proof, { context: localContext() })).to.deep.equal({ valid: true, reason: null });
      expect(await c.verify(fetched.proof)).to.deep.equal({ valid: true, reason: null });
      const bogus = await c.verify({ ...fetched.proof, accuracy: 7 });
      expect(bogus.valid).to.equal(false);
      expect(bogus.reason).to.be.a("string");
    } finally {
      c.close();
    }
  });

  it("fetches a proof over gRPC and verifies it", async function () {
    const c = client();
    try {
      const fetched = await c.grpc.getCurrentTime({ requestId: "abc" });
      expect(fetched.requestId).to.equal("abc");
      expect(fetched.node).to.equal(t.identity.nodeAddress);
      expect(await c.verify(fetched.proof, { context: localContext() })).to.deep.equal({ valid: true, reason: null });
      expect(await c.grpc.verify(fetched.proof)).to.deep.equal({ valid: true, reason: null });
      await expectError(c.grpc.getCurrentTime({ type: "HISTORICAL_PROOF", atNs: 1n }), NotFoundError);
    } finally {
      c.close();
    }
  });

  it("streams updates with proofs over WebSocket", async function () {
    const c = client();
    const updates: bigint[] = [];
    let withProof = 0;
    const stream = await c.stream({
      intervalNs: 5_000_000n,
      includeProof: true,
      onUpdate: (update) => {
        updates.push(update.nanoMoment);
        if (update.proof !== undefined) withProof += 1;
      },
    });
    try {
      const deadline = Date.now() + 5_000;
      while (updates.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(updates.length).to.be.at.least(2);
      expect(withProof).to.equal(updates.length);
    } finally {
      stream.close();
      c.close();
    }
  });

  it("schedules and reads a schedule back", async function () {
    const c = client();
    const executeAtNs = BigInt(Date.now()) * 1_000_000n + 3_600_000_000_000n;
    const created = await c.schedule(executeAtNs, "http://127.0.0.1:9/hook");
    expect(created).to.include({ status: "scheduled", executeAt: executeAtNs.toString() });
    expect(await c.getSchedule(created.id)).to.include({ id: created.id });
    await expectError(c.getSchedule("00000000-0000-4000-8000-000000000000"), NotFoundError);
    await expectError(c.schedule(executeAtNs, "ftp://x"), ValidationError);
  });

  it("raises AuthError without a key, on every transport, without retrying", async function () {
    const c = client({});
    try {
      await expectError(c.getCurrentTime(), AuthError);
      await expectError(c.grpc.getCurrentTime(), AuthError);
      await expectError(c.stream({ intervalNs: 5_000_000n, onUpdate: () => undefined }), AuthError);
    } finally {
      c.close();
    }
  });
});

describe("node/client retries", function () {
  let server: Server;
  let answers: number[];
  let requests = 0;

  beforeEach(async function () {
    requests = 0;
    server = createServer((_request, response) => {
      const status = answers[Math.min(requests, answers.length - 1)] ?? 500;
      requests += 1;
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify({ statusCode: status, error: "x", message: status === 429 ? "Rate limit exceeded" : "nope" }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  });
  afterEach(async function () {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  function endpoint(): string {
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it("retries 429 and 5xx with backoff, up to `retries`", async function () {
    answers = [429, 503, 503, 503];
    const c = createTimeClient({ endpoint: endpoint(), retries: 2, backoffBaseMs: 1, timeoutMs: 2_000 });
    await expectError(c.getCurrentTime(), UnavailableError);
    expect(requests).to.equal(3);
  });

  it("times out a silent node per attempt (AbortSignal.timeout) and retries", async function () {
    const silent = createServer(() => {
      requests += 1; // never answers
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const port = (silent.address() as AddressInfo).port;
      const c = createTimeClient({ endpoint: `http://127.0.0.1:${port}`, retries: 1, backoffBaseMs: 1, timeoutMs: 100 });
      await expectError(c.getCurrentTime(), UnavailableError);
      expect(requests).to.equal(2);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it("creates a schedule at most once: retries it after a 429 only, never after a 5xx it may have committed", async function () {
    const c = createTimeClient({ endpoint: endpoint(), retries: 3, backoffBaseMs: 1, timeoutMs: 2_000 });
    answers = [503, 201];
    await expectError(c.schedule(1n, "http://127.0.0.1:1/"), UnavailableError);
    expect(requests).to.equal(1);
    answers = [429, 429, 503];
    requests = 0;
    await expectError(c.schedule(1n, "http://127.0.0.1:1/"), UnavailableError);
    expect(requests).to.equal(3);
  });

  it("does not retry other 4xx", async function () {
    answers = [400];
    const c = createTimeClient({ endpoint: endpoint(), retries: 3, backoffBaseMs: 1, timeoutMs: 2_000 });
    await expectError(c.getCurrentTime(), ValidationError);
    expect(requests).to.equal(1);
    answers = [429];
    requests = 0;
    await expectError(createTimeClient({ endpoint: endpoint(), retries: 0 }).getCurrentTime(), RateLimitError);
    expect(requests).to.equal(1);
  });
});

async function expectError(promise: Promise<unknown>, type: abstract new (...args: never[]) => Error): Promise<void> {
  try {
    await promise;
  } catch (error) {
    expect(error, String(error)).to.be.instanceOf(type);
    return;
  }
  throw new Error(`expected ${type.name}`);
}
