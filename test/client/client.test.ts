import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../protocol/constants";
import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { AuthError, NotFoundError, RateLimitError, UnavailableError, ValidationError } from "../../protocol/errors";
import { createVerifyContext } from "../../protocol/verify";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { clientRequestMessage, createTimeClient } from "../../client";
import { startTestNode, type TestNode } from "../node/api/helpers";

describe("client", function () {
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
      expect(fetched.proof.accuracy).to.equal(DEV_CARD_DRIVER_ACCURACY_NS);
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
      expect(fetched.node).to.deep.equal({
        nodeId: t.identity.nodeAddress,
        cardId: t.identity.cardId,
        version: (await c.info())["version"],
        protocol: "ATS/1",
      });
      expect(fetched.consensus).to.deep.equal({ responders: 1, quorum: 1, nodeIds: [t.identity.nodeAddress] });
      expect(await c.verify(fetched.proof, { context: localContext() })).to.deep.equal({ valid: true, reason: null });
      expect(await c.grpc.verify(fetched.proof)).to.deep.equal({ valid: true, reason: null });
      await expectError(c.grpc.getCurrentTime({ type: "HISTORICAL_PROOF", atNs: 1n }), NotFoundError);
    } finally {
      c.close();
    }
  });

  it("refuses a nonce outside uint64 and an unknown type name before sending (protobufjs would encode both wrongly)", async function () {
    const c = client();
    try {
      for (const nonce of [-1n, 2n ** 64n]) await expectError(c.grpc.getCurrentTime({ nonce }), ValidationError);
      // protobufjs encodes a name it does not know as 0, i.e. CURRENT_TIME.
      await expectError(c.grpc.getCurrentTime({ type: "REQUEST_TYPE_UNSPECIFIED" as "CURRENT_TIME" }), ValidationError);
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

describe("client gRPC signed requests", function () {
  it("sends a uint64 nonce (up to 2^64 - 1) that the node checks in decimal form and accepts once", async function () {
    const account = privateKeyToAccount(generatePrivateKey());
    const t = await startTestNode({ overrides: { clientPublicKeys: { "client-a": account.address } } });
    const c = createTimeClient({ endpoint: t.node.endpoints.rest, grpcEndpoint: t.node.endpoints.grpc, retries: 0, timeoutMs: 5_000 });
    try {
      const nonce = 2n ** 64n - 1n;
      const issuedAtMs = String(Date.now());
      const message = clientRequestMessage({ requestId: "s-1", nonce: nonce.toString(), type: "CURRENT_TIME", atNs: "", clientId: "client-a", issuedAtMs });
      expect(message).to.equal(`ATS/1 REQ|s-1|18446744073709551615|CURRENT_TIME||client-a|${issuedAtMs}`);
      const clientSignature = Buffer.from((await account.signMessage({ message })).slice(2), "hex");
      const options = { requestId: "s-1", nonce, clientId: "client-a", clientSignature, issuedAtMs };
      const fetched = await c.grpc.getCurrentTime(options);
      expect(fetched.requestId).to.equal("s-1");
      expect(fetched.node?.nodeId).to.equal(t.identity.nodeAddress);
      const rejection = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (error: unknown) => error);
      const replay = await rejection(c.grpc.getCurrentTime(options));
      expect(replay).to.be.instanceOf(AuthError);
      expect((replay as AuthError).message).to.contain("Nonce already used");
      const zero = await rejection(c.grpc.getCurrentTime({ ...options, nonce: 0n }));
      expect(zero).to.be.instanceOf(AuthError);
      expect((zero as AuthError).message).to.contain("A signed request needs a non-zero nonce");
    } finally {
      c.close();
      await t.close();
    }
  });
});

describe("client retries", function () {
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

describe("client network errors", function () {
  it("names the real cause of a dead node (a closed port on 127.0.0.1) and keeps the cause chain", async function () {
    // A port that was free a moment ago and is closed now (not port 1: fetch refuses it as a "bad port").
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const c = createTimeClient({ endpoint: `http://127.0.0.1:${port}`, retries: 0, timeoutMs: 2_000 });
    let caught: unknown;
    try {
      await c.getCurrentTime();
    } catch (error) {
      caught = error;
    } finally {
      c.close();
    }
    expect(caught).to.be.instanceOf(UnavailableError);
    const error = caught as UnavailableError;
    expect(error.message).to.equal(`GET /time/current failed: connect ECONNREFUSED 127.0.0.1:${port}`);
    expect(error.cause).to.be.instanceOf(TypeError); // fetch's "fetch failed", kept as the first cause
    const root = error.walk() as NodeJS.ErrnoException;
    expect(root.code).to.equal("ECONNREFUSED");
    expect(error.walk((item) => (item as { code?: unknown }).code === "ECONNREFUSED")).to.equal(root);
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
