/**
 * The browser client (client/browser.ts) against a real attesting node on 127.0.0.1: REST over fetch, the stream
 * over a WebSocket with the browser API (the `ws` package's, injected: Node 20 has no global WebSocket), and the
 * same strict, lossless reading of proofs as the Node client.
 */
import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import WsWebSocket from "ws";
import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../protocol/constants";
import { AtsError, UnavailableError, ValidationError } from "../../protocol/errors";
import { createVerifyContext, verifyTimeProof } from "../../protocol/verify";
import { contractProofFromJson, createBrowserTimeClient, type BrowserTimeClientOptions, type StreamUpdate, type WebSocketConstructor } from "../../client/browser";
import { createTimeClient } from "../../client";
import { startTestNode, waitFor, type TestNode } from "../node/api/helpers";

async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a rejection");
}

describe("client/browser", function () {
  this.timeout(30_000);
  let t: TestNode;

  before(async function () {
    t = await startTestNode({ overrides: { corsAllowedOrigins: ["*"] } });
  });
  after(async function () {
    await t?.close();
  });

  function browserClient(options: Partial<BrowserTimeClientOptions> = {}) {
    return createBrowserTimeClient({
      endpoint: `${t.node.endpoints.rest}/`,
      // ws declares an overload `new (address: null)` first, which TypeScript compares alone: the cast says that
      // `new WebSocket(url)` and addEventListener are what the client uses, as in a browser.
      WebSocket: WsWebSocket as unknown as WebSocketConstructor,
      timeoutMs: 5_000,
      retries: 1,
      backoffBaseMs: 1,
      ...options,
    });
  }

  it("reads the current proof strictly, and the node and the local verifier both accept it", async function () {
    const fetched = await browserClient().getCurrentTime();
    expect(fetched.cardId).to.equal(t.identity.cardId);
    expect(fetched.proof.accuracy).to.equal(DEV_CARD_DRIVER_ACCURACY_NS);
    expect(fetched.proof).to.deep.equal(contractProofFromJson(fetched.json));
    const context = createVerifyContext({
      cards: { [t.identity.cardId]: { publicKey: t.identity.cardPublicKey, revoked: false } },
      nodes: [t.identity.nodeAddress],
      nowNs: BigInt(Date.now()) * 1_000_000n,
    });
    expect(verifyTimeProof(fetched.proof, context).valid).to.equal(true);
    expect(await browserClient().verifyRemote(fetched.proof)).to.deep.equal({ valid: true, reason: null });
    const lowered = await browserClient().verifyRemote({ ...fetched.proof, accuracy: fetched.proof.accuracy + 1 });
    expect(lowered.valid).to.equal(false);
    expect(lowered.reason).to.be.a("string");
  });

  it("reads the node's info against its schema", async function () {
    const info = await browserClient().info();
    expect(info.nodeId).to.equal(t.identity.nodeAddress);
    expect(info.cardId).to.equal(t.identity.cardId);
    expect(info.protocol).to.equal("ATS/1");
  });

  it("streams proofs over the WebSocket API and closes with the client's code", async function () {
    const updates: StreamUpdate[] = [];
    const closes: number[] = [];
    const errors: Error[] = [];
    const stream = await browserClient().stream({
      intervalNs: 10_000_000n,
      includeProof: true,
      onUpdate: (update) => updates.push(update),
      onError: (error) => errors.push(error),
      onClose: (code) => closes.push(code),
    });
    try {
      await waitFor(() => updates.length >= 2, "two stream updates");
      for (const update of updates.slice(0, 2)) {
        expect(update.subscriptionId).to.equal(stream.id);
        expect(update.proof?.cardId).to.equal(t.identity.cardId);
        expect(update.proof?.proof.nanoMoment).to.equal(update.nanoMoment);
      }
    } finally {
      stream.close();
    }
    await waitFor(() => closes.length === 1, "the close");
    expect(closes).to.deep.equal([1000]);
    expect(errors).to.deep.equal([]);
  });

  it("rejects a subscription the node refuses with its error message", async function () {
    const error = await rejectionOf(browserClient().stream({ intervalNs: 1n, onUpdate: () => undefined }));
    expect(error).to.be.instanceOf(ValidationError);
    expect(error.message).to.match(/interval/);
  });

  it("rejects a stream with a ValidationError where there is no WebSocket, naming what to pass", async function () {
    const holder = globalThis as { WebSocket?: unknown };
    const saved = holder.WebSocket;
    delete holder.WebSocket;
    try {
      const client = createBrowserTimeClient({ endpoint: t.node.endpoints.rest });
      const error = await rejectionOf(client.stream({ intervalNs: 10_000_000n, onUpdate: () => undefined }));
      expect(error).to.be.instanceOf(ValidationError);
      expect(error.message).to.contain("ws package");
    } finally {
      if (saved !== undefined) holder.WebSocket = saved;
    }
  });

  it("retries a 503 through the injected fetch, and never a 400", async function () {
    const calls: string[] = [];
    let answer503 = 1;
    const fetchFunction = async (url: string, init: RequestInit) => {
      calls.push(url);
      if (answer503 > 0) {
        answer503 -= 1;
        return new Response(JSON.stringify({ statusCode: 503, error: "Service Unavailable", message: "card warming up" }), { status: 503 });
      }
      return fetch(url, init);
    };
    const fetched = await browserClient({ fetch: fetchFunction }).getCurrentTime();
    expect(fetched.cardId).to.equal(t.identity.cardId);
    expect(calls).to.deep.equal([`${t.node.endpoints.rest}/time/current`, `${t.node.endpoints.rest}/time/current`]);

    calls.length = 0;
    const refuse = async (url: string) => {
      calls.push(url);
      return new Response(JSON.stringify({ statusCode: 400, error: "Bad Request", message: "nope" }), { status: 400 });
    };
    const error = await rejectionOf(browserClient({ fetch: refuse, retries: 3 }).info());
    expect(error).to.be.instanceOf(ValidationError);
    expect(calls).to.have.length(1);
  });

  it("gives up after its per-attempt timeout, every attempt, with UnavailableError", async function () {
    let attempts = 0;
    const hang = (_url: string, init: RequestInit) =>
      new Promise<Response>((_resolve, reject) => {
        attempts += 1;
        init.signal?.addEventListener("abort", () => reject(init.signal?.reason));
      });
    const error = await rejectionOf(browserClient({ fetch: hang, timeoutMs: 50, retries: 2 }).getCurrentTime());
    expect(error).to.be.instanceOf(UnavailableError);
    expect(error.message).to.equal("GET /time/current failed: no answer within 50 ms");
    expect(attempts).to.equal(3);
  });

  describe("reads malformed proofs exactly as the Node client does", function () {
    let server: Server;
    let base: string;
    let body = "";
    before(async function () {
      server = createServer((_request, response) => {
        response.writeHead(200, { "content-type": "application/json" });
        response.end(body);
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(async function () {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    it("refuses each with the same error class, field and message", async function () {
      const valid = t.service.current().json;
      const cases: [string, RegExp][] = [
        // An unquoted moment above 2^53 stays exact through the lossless parse (a float would show other digits).
        [JSON.stringify(valid).replace(`"nanoMoment":"${valid.nanoMoment}"`, `"nanoMoment":${valid.nanoMoment}`), new RegExp(`${valid.nanoMoment} \\(unquoted integer\\)`)],
        [JSON.stringify({ ...valid, extra: 1 }), /extra: is not a known field/],
        [JSON.stringify({ ...valid, proof: { ...valid.proof, nodeSignature: valid.proof.nodeSignature.toUpperCase().replace("0X", "0x") } }), /proof\.nodeSignature/],
        [JSON.stringify({ ...valid, proof: { ...valid.proof, accuracyNs: 1.5 } }), /proof\.accuracyNs/],
        [JSON.stringify({ ...valid, consensus: { members: 0 } }), /consensus/],
      ];
      const node = createTimeClient({ endpoint: base, retries: 0 });
      try {
        for (const [text, message] of cases) {
          body = text;
          const fromBrowser = await rejectionOf(createBrowserTimeClient({ endpoint: base, retries: 0 }).getCurrentTime());
          const fromNode = await rejectionOf(node.getCurrentTime());
          expect(fromBrowser, text).to.be.instanceOf(ValidationError);
          expect(fromBrowser.message, text).to.match(message);
          expect({ name: fromBrowser.name, message: fromBrowser.message, details: (fromBrowser as AtsError).details }, text).to.deep.equal({
            name: fromNode.name,
            message: fromNode.message,
            details: (fromNode as AtsError).details,
          });
        }
      } finally {
        node.close();
      }
    });
  });
});
