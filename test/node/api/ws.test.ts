import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../../protocol/constants";
import { expect } from "chai";
import WebSocket from "ws";
import { parseJsonLossless, proofFromJson } from "../../../protocol/json";
import { createVerifyContext, verifyTimeProof } from "../../../protocol/verify";
import { freezeCurrentProof, http, startTestNode, waitFor, type TestNode } from "./helpers";
import { PushScheduler } from "../../../node/api/pushScheduler";

interface Frame {
  [key: string]: unknown;
}

/** A test client that records every frame and the close. */
class Client {
  readonly frames: Frame[] = [];
  closed: { code: number; reason: string } | null = null;
  private constructor(readonly socket: WebSocket) {
    socket.on("message", (data) => this.frames.push(parseJsonLossless(String(data)) as Frame));
    socket.on("close", (code, reason) => {
      this.closed = { code, reason: reason.toString() };
    });
  }

  static open(url: string, headers: Record<string, string> = {}): Promise<Client> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url, { headers });
      const client = new Client(socket);
      socket.once("open", () => resolve(client));
      socket.once("error", reject);
      socket.once("unexpected-response", (_request, response) => reject(new Error(`HTTP ${response.statusCode}`)));
    });
  }

  send(value: unknown): void {
    this.socket.send(typeof value === "string" ? value : JSON.stringify(value));
  }

  async next(predicate: (frame: Frame) => boolean, what: string): Promise<Frame> {
    let found: Frame | undefined;
    await waitFor(() => (found = this.frames.find(predicate)) !== undefined || this.closed !== null, what);
    if (found === undefined) throw new Error(`closed (${JSON.stringify(this.closed)}) before ${what}`);
    this.frames.splice(this.frames.indexOf(found), 1);
    return found;
  }

  close(): void {
    this.socket.terminate();
  }
}

function upgradeStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers });
    socket.once("unexpected-response", (_request, response) => {
      resolve(response.statusCode ?? 0);
      socket.terminate();
    });
    socket.once("open", () => {
      resolve(101);
      socket.terminate();
    });
    socket.once("error", (error) => reject(error));
  });
}

const isError = (frame: Frame): boolean => frame["type"] === "error";
const isUpdate = (frame: Frame): boolean => typeof frame["nanoMoment"] === "string";

describe("node/api/ws", function () {
  let t: TestNode;
  const clients: Client[] = [];

  before(async function () {
    t = await startTestNode({ limits: { wsMaxSubscriptionsPerConnection: 2, wsMaxErrorsPerConnection: 30 } });
  });
  afterEach(function () {
    for (const client of clients.splice(0)) client.close();
  });
  after(async function () {
    await t?.close();
  });

  async function open(): Promise<Client> {
    const client = await Client.open(t.node.endpoints.ws);
    clients.push(client);
    return client;
  }

  it("subscribes and pushes {nanoMoment, accuracy} every interval, with verifiable proofs when asked", async function () {
    const client = await open();
    client.send({ type: "subscribe", interval: 10_000_000, accuracy: "hardware", includeProof: true });
    const subscribed = await client.next((frame) => frame["type"] === "subscribed", "subscribed");
    expect(subscribed["id"]).to.be.a("string");
    const first = await client.next(isUpdate, "first update");
    const second = await client.next(isUpdate, "second update");
    for (const update of [first, second]) {
      expect(update["nanoMoment"]).to.match(/^[1-9][0-9]*$/);
      expect(update["accuracy"]).to.equal(DEV_CARD_DRIVER_ACCURACY_NS);
      expect(update["id"]).to.equal(subscribed["id"]);
    }
    const { proof } = proofFromJson({ nanoMoment: second["nanoMoment"], proof: second["proof"] });
    const context = createVerifyContext({
      cards: { [t.identity.cardId]: { publicKey: t.identity.cardPublicKey, revoked: false } },
      nodes: [t.identity.nodeAddress],
      nowNs: BigInt(Date.now()) * 1_000_000n,
    });
    expect(verifyTimeProof(proof, context)).to.deep.include({ valid: true });
  });

  it("never pushes the same moment twice on a subscription: a tick with no newer proof sends nothing", async function () {
    const client = await open();
    // The served proof stands still (as between two node ticks) while the subscription's interval ticks on.
    const { frozen, reads, restore } = freezeCurrentProof(t.service);
    try {
      client.send({ type: "subscribe", interval: 2_000_000, accuracy: "hardware" });
      await client.next((frame) => frame["type"] === "subscribed", "subscribed");
      await waitFor(() => reads() >= 5, "five pushes due while the proof stands still");
    } finally {
      restore();
    }
    // A newer proof ends the wait; frames arrive in order, so every push made meanwhile arrived before it.
    await waitFor(() => client.frames.some((frame) => isUpdate(frame) && BigInt(String(frame["nanoMoment"])) > frozen.proof.nanoMoment), "a newer moment");
    const moments = client.frames.filter(isUpdate).map((frame) => BigInt(String(frame["nanoMoment"])));
    expect(moments.filter((moment) => moment === frozen.proof.nanoMoment), "the standing proof, once").to.have.length(1);
    for (let i = 1; i < moments.length; i += 1) expect(moments[i]! > moments[i - 1]!, `push ${i} newer than push ${i - 1}`).to.equal(true);
  });

  it("hands the push scheduler each connection's socket as the channel of its subscriptions", async function () {
    const channels: unknown[] = [];
    const original = PushScheduler.prototype.add;
    PushScheduler.prototype.add = function (this: PushScheduler, intervalMs, push, channel) {
      channels.push(channel);
      return original.call(this, intervalMs, push, channel);
    };
    try {
      const first = await open();
      const second = await open();
      for (const client of [first, first, second]) {
        client.send({ type: "subscribe", interval: 50_000_000, accuracy: "hardware" });
        await client.next((frame) => frame["type"] === "subscribed", "subscribed");
      }
    } finally {
      PushScheduler.prototype.add = original;
    }
    expect(channels).to.have.length(3);
    for (const channel of channels) expect(channel).to.respondTo("cork").and.to.respondTo("uncork");
    expect(channels[0], "two subscriptions of one connection").to.equal(channels[1]);
    expect(channels[2], "another connection").not.to.equal(channels[0]);
  });

  it("pushes no proof unless asked, and stops after unsubscribe", async function () {
    const client = await open();
    client.send({ type: "subscribe", interval: 5_000_000, accuracy: "hardware" });
    const { id } = await client.next((frame) => frame["type"] === "subscribed", "subscribed");
    const update = await client.next(isUpdate, "update");
    expect(Object.keys(update).sort()).to.deep.equal(["accuracy", "id", "nanoMoment"]);
    client.send({ type: "unsubscribe", id });
    await client.next((frame) => frame["type"] === "unsubscribed" && frame["id"] === id, "unsubscribed");
    client.frames.length = 0;
    // A later request/answer round trip proves the stream is quiet: only the error frame arrives.
    client.send({ type: "unsubscribe", id });
    await client.next(isError, "error for unknown id");
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(client.frames.filter(isUpdate)).to.have.length(0);
  });

  it("answers garbage frames, bad JSON, unknown types and fields, and bad intervals with clear errors and keeps the connection", async function () {
    const client = await open();
    const cases: Array<[unknown, RegExp]> = [
      ["not json at all", /malformed JSON/],
      ["[1,2,3]", /JSON object/],
      [{ type: "dance" }, /unknown message type "dance"/],
      [{ interval: 1_000_000 }, /type: is required/],
      [{ type: "subscribe", interval: "1000000", accuracy: "hardware" }, /interval: must be a JSON integer/],
      [{ type: "subscribe", interval: 1.5, accuracy: "hardware" }, /interval: must be a JSON integer/],
      [{ type: "subscribe", interval: -1, accuracy: "hardware" }, /interval: must be between/],
      [{ type: "subscribe", interval: 10, accuracy: "hardware" }, /interval: must be between/],
      ['{"type":"subscribe","interval":100000000000000000000000,"accuracy":"hardware"}', /interval: must be between/],
      [{ type: "subscribe", interval: 1_000_000, accuracy: "gps" }, /accuracy: must be "hardware"/],
      [{ type: "subscribe", interval: 1_000_000, accuracy: "hardware", extra: true }, /unknown field\(s\): extra/],
      [{ type: "subscribe", interval: 1_000_000, accuracy: "hardware", includeProof: "yes" }, /includeProof/],
      [{ type: "unsubscribe", id: 7 }, /id: must be/],
    ];
    for (const [message, expected] of cases) {
      client.send(message);
      const error = await client.next(isError, `error for ${JSON.stringify(message)}`);
      expect(error["message"], JSON.stringify(message)).to.match(expected);
    }
    client.socket.send(Buffer.from([0xde, 0xad, 0xbe, 0xef]), { binary: true });
    expect((await client.next(isError, "binary error"))["message"]).to.match(/binary frames/);
    expect(client.closed).to.equal(null);
    client.send({ type: "subscribe", interval: 5_000_000, accuracy: "hardware" });
    await client.next((frame) => frame["type"] === "subscribed", "subscribed after errors");
    expect((await http(t.node.endpoints.rest, "GET", "/time/current")).status).to.equal(200);
  });

  it("bounds subscriptions per connection and closes oversized frames (1009)", async function () {
    const client = await open();
    for (let i = 0; i < 2; i += 1) {
      client.send({ type: "subscribe", interval: 50_000_000, accuracy: "hardware" });
      await client.next((frame) => frame["type"] === "subscribed", "subscribed");
    }
    client.send({ type: "subscribe", interval: 50_000_000, accuracy: "hardware" });
    expect((await client.next(isError, "limit error"))["message"]).to.match(/at most 2 subscriptions/);
    client.send(JSON.stringify({ type: "subscribe", pad: "x".repeat(t.config.wsMaxMessageBytes + 1) }));
    await waitFor(() => client.closed !== null, "close after oversized frame");
    expect(client.closed?.code).to.equal(1009);
  });

  it("closes a connection that keeps sending bad messages (1008)", async function () {
    const client = await open();
    for (let i = 0; i <= 31; i += 1) client.send("garbage");
    await waitFor(() => client.closed !== null, "policy close");
    expect(client.closed?.code).to.equal(1008);
  });

  it("refuses other upgrade paths with 404", async function () {
    expect(await upgradeStatus(t.node.endpoints.ws.replace("/v1/stream", "/v2/other"))).to.equal(404);
  });

  it("answers messages nested deeper than 32 levels with an error naming the bound, and keeps the connection", async function () {
    // Frames large enough for 10,000 levels (the parser overflowed the stack on them before the bound).
    const deep = await startTestNode({ overrides: { wsMaxMessageBytes: 32_768 } });
    const client = await Client.open(deep.node.endpoints.ws);
    try {
      for (const message of ["[".repeat(10_000), `{"type":"subscribe","interval":${"[".repeat(33)}${"]".repeat(33)}}`]) {
        client.send(message);
        const error = await client.next(isError, `error for ${message.slice(0, 40)}`);
        expect(error["message"]).to.equal("message: nesting deeper than 32 levels");
      }
      client.send({ type: "subscribe", interval: 5_000_000, accuracy: "hardware" });
      await client.next((frame) => frame["type"] === "subscribed", "subscribed after the deep messages");
    } finally {
      client.close();
      await deep.close();
    }
  });
});

describe("node/api/ws messages per turn", function () {
  let t: TestNode;
  const clients: Client[] = [];

  before(async function () {
    t = await startTestNode({ limits: { wsMaxMessagesPerTurn: 2, wsMaxQueuedMessagesPerConnection: 4 } });
  });
  afterEach(function () {
    for (const client of clients.splice(0)) client.close();
  });
  after(async function () {
    await t?.close();
  });

  /** Sends every message in one write, so that the node reads them together. */
  function sendTogether(client: Client, messages: unknown[]): void {
    const socket = (client.socket as unknown as { _socket: { cork(): void; uncork(): void } })._socket;
    socket.cork();
    for (const message of messages) client.send(message);
    socket.uncork();
  }

  it("answers messages read together in order, over several turns, beyond the per-turn bound", async function () {
    const client = await Client.open(t.node.endpoints.ws);
    clients.push(client);
    sendTogether(
      client,
      [1, 2, 3, 4, 5, 6].map((n) => ({ type: "unsubscribe", id: `s${n}` })),
    );
    await waitFor(() => client.frames.length === 6, "six answers");
    expect(client.frames.map((frame) => frame["message"])).to.deep.equal([1, 2, 3, 4, 5, 6].map((n) => `id: no subscription "s${n}"`));
    expect(client.closed).to.equal(null);
  });

  /** The node's count of WebSocket messages answered with an error, and of connections closed for too many. */
  async function wsMessageCounts(): Promise<{ error: number; tooMany: number }> {
    const text = (await http(t.node.endpoints.rest, "GET", "/metrics")).text;
    const count = (status: string): number =>
      Number(new RegExp(`timerpc_requests_total\\{transport="ws",route="message",status="${status}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    return { error: count("error"), tooMany: count("too_many_messages") };
  }

  it("closes a connection that sends more messages at once than may wait (1008); what waited is dropped", async function () {
    const before = await wsMessageCounts();
    const client = await Client.open(t.node.endpoints.ws);
    clients.push(client);
    sendTogether(
      client,
      [1, 2, 3, 4, 5, 6, 7, 8].map((n) => ({ type: "unsubscribe", id: `s${n}` })),
    );
    await waitFor(() => client.closed !== null, "policy close");
    expect(client.closed).to.deep.equal({ code: 1008, reason: "Too many messages at once" });
    // The two handled in the turn they arrived were answered; the four waiting were dropped with the connection.
    expect(client.frames.map((frame) => frame["message"])).to.deep.equal([1, 2].map((n) => `id: no subscription "s${n}"`));
    const after = await wsMessageCounts();
    expect(after.error - before.error, "only the two handled were counted (the dropped ones were never handled)").to.equal(2);
    expect(after.tooMany - before.tooMany).to.equal(1);
  });
});

describe("node/api/ws auth, rate limit, connection bound and tamper", function () {
  const apiKey = "ws-test-api-key-0123456789";

  it("requires x-api-key on the upgrade and answers 'Rate limit exceeded' beyond the rate", async function () {
    const t = await startTestNode({ overrides: { apiKeys: [apiKey], maxRequestsPerSecond: 3 } });
    const clients: Client[] = [];
    try {
      expect(await upgradeStatus(t.node.endpoints.ws)).to.equal(401);
      expect(await upgradeStatus(t.node.endpoints.ws, { "x-api-key": "wrong-key-0123456789" })).to.equal(401);
      const client = await Client.open(t.node.endpoints.ws, { "x-api-key": apiKey });
      clients.push(client);
      for (let i = 0; i < 10; i += 1) client.send({ type: "unsubscribe", id: "none" });
      const limited = await client.next((frame) => isError(frame) && frame["message"] === "Rate limit exceeded", "rate limit");
      expect(limited["message"]).to.equal("Rate limit exceeded");
    } finally {
      for (const client of clients) client.close();
      await t.close();
    }
  });

  it("refuses connections beyond wsMaxConnections with 503", async function () {
    const t = await startTestNode({ overrides: { wsMaxConnections: 1 } });
    const clients: Client[] = [];
    try {
      clients.push(await Client.open(t.node.endpoints.ws));
      expect(await upgradeStatus(t.node.endpoints.ws)).to.equal(503);
    } finally {
      for (const client of clients) client.close();
      await t.close();
    }
  });

  it("holds each client to maxStreamsPerClient (429 'Rate limit exceeded') and gives the slot back on close", async function () {
    const t = await startTestNode({ overrides: { maxStreamsPerClient: 2 } });
    const clients: Client[] = [];
    try {
      clients.push(await Client.open(t.node.endpoints.ws), await Client.open(t.node.endpoints.ws));
      expect(await upgradeStatus(t.node.endpoints.ws)).to.equal(429);
      clients[0]!.close();
      await waitFor(() => clients[0]!.closed !== null, "first connection closed");
      // The slot frees when the server sees the socket close, which may trail the client's close event a little.
      let reopened: Client | undefined;
      for (let attempt = 0; attempt < 50 && reopened === undefined; attempt += 1) {
        try {
          reopened = await Client.open(t.node.endpoints.ws);
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }
      expect(reopened, "a slot after a close").to.not.equal(undefined);
      clients.push(reopened!);
    } finally {
      for (const client of clients) client.close();
      await t.close();
    }
  });

  it("closes every stream with 1013 and the tamper reason, and refuses new ones", async function () {
    const t = await startTestNode();
    const clients: Client[] = [];
    try {
      const client = await Client.open(t.node.endpoints.ws);
      clients.push(client);
      client.send({ type: "subscribe", interval: 5_000_000, accuracy: "hardware" });
      await client.next(isUpdate, "update before tamper");
      t.card.simulateTamper("key zeroised");
      await waitFor(() => client.closed !== null, "close on tamper");
      expect(client.closed?.code).to.equal(1013);
      expect(client.closed?.reason).to.contain("key zeroised");
      expect(await upgradeStatus(t.node.endpoints.ws)).to.equal(503);
    } finally {
      for (const client of clients) client.close();
      await t.close();
    }
  });
});

describe("node/api/ws Origin (corsAllowedOrigins)", function () {
  const ALLOWED = "https://app.example.org";
  const OTHER = "https://evil.example.net";

  /** The status and body of an upgrade to `url` with `origin` as its Origin header (none when undefined). */
  function upgradeWithOrigin(url: string, origin: string | undefined): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url, origin === undefined ? {} : { origin });
      socket.once("unexpected-response", (_request, response) => {
        let body = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => (body += chunk));
        response.on("end", () => {
          resolve({ status: response.statusCode ?? 0, body });
          socket.terminate();
        });
      });
      socket.once("open", () => {
        resolve({ status: 101, body: "" });
        socket.terminate();
      });
      socket.once("error", (error) => reject(error));
    });
  }

  it("refuses a browser's upgrade from any page by default (403, no slot, no token); a client without Origin still connects", async function () {
    // One stream per client and one request per second: a refused upgrade that took either would fail the last open.
    const t = await startTestNode({ overrides: { maxStreamsPerClient: 1, maxRequestsPerSecond: 1 } });
    try {
      for (const origin of [OTHER, ALLOWED, "null", "http://127.0.0.1"]) {
        const refused = await upgradeWithOrigin(t.node.endpoints.ws, origin);
        expect(refused.status, origin).to.equal(403);
        expect(JSON.parse(refused.body), origin).to.deep.equal({
          statusCode: 403,
          error: "Forbidden",
          message: `Origin ${JSON.stringify(origin)} may not open the stream: it is not in the node's corsAllowedOrigins`,
        });
      }
      expect((await upgradeWithOrigin(t.node.endpoints.ws, undefined)).status).to.equal(101);
      expect(await t.node.metrics.render()).to.match(/timerpc_requests_total\{transport="ws",route="upgrade",status="403"\} 4\n/);
    } finally {
      await t.close();
    }
  });

  it("lets only a listed origin open the stream, and any origin with '*'", async function () {
    const listed = await startTestNode({ overrides: { corsAllowedOrigins: [ALLOWED] } });
    try {
      expect((await upgradeWithOrigin(listed.node.endpoints.ws, ALLOWED)).status).to.equal(101);
      expect((await upgradeWithOrigin(listed.node.endpoints.ws, undefined)).status).to.equal(101);
      for (const origin of [OTHER, "null", `${ALLOWED}:443`, "https://APP.example.org"]) {
        expect((await upgradeWithOrigin(listed.node.endpoints.ws, origin)).status, origin).to.equal(403);
      }
    } finally {
      await listed.close();
    }
    const any = await startTestNode({ overrides: { corsAllowedOrigins: ["*"] } });
    try {
      for (const origin of [OTHER, "null", undefined]) expect((await upgradeWithOrigin(any.node.endpoints.ws, origin)).status, String(origin)).to.equal(101);
    } finally {
      await any.close();
    }
  });
});
