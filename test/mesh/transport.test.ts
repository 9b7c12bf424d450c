import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import pino from "pino";
import { NodeKey, nodePublicKeyUncompressed } from "../../protocol/keys";
import { MeshTransport, type MeshPeerAddress } from "../../node/mesh/transport";
import { encodeEnvelope, encodePacket, MESH_SESSION_ID_LENGTH, signHello, type MeshPayload, type MeshRole } from "../../wire/mesh";

const logger = pino({ level: process.env.ATS_TEST_LOG ?? "silent" });

interface Member {
  key: NodeKey;
  transport: MeshTransport;
  port: number;
}

function hello(role: MeshRole = "primary") {
  return { cardPublicKey: Buffer.alloc(0), certificateChainPem: [], cardAccuracyNs: 50, role, version: "test" };
}

/** A whole hello payload as another node would send it (its key, a session id of its own). */
function helloFrom(key: NodeKey) {
  return { ...hello(), nodePublicKey: nodePublicKeyUncompressed(key), sessionId: randomBytes(MESH_SESSION_ID_LENGTH) };
}

let clockNs = 1_700_000_000_000_000_000n;
const clock = (): bigint => (clockNs += 1_000n);

interface TransportOverrides {
  port?: number;
  wallNowMs?: () => number;
  monotonicNowMs?: () => number;
  role?: MeshRole;
  coSignRequestsPerSecond?: number;
  relayedProofsPerSecond?: number;
}

function transportFor(key: NodeKey, peers: MeshPeerAddress[], options: TransportOverrides = {}): MeshTransport {
  return new MeshTransport({
    nodeKey: key,
    host: "127.0.0.1",
    port: options.port ?? 0,
    peers,
    nodePublicKey: nodePublicKeyUncompressed(key),
    hello: hello(options.role),
    clockNs: clock,
    maxClockSkewMs: 10_000,
    peerMessageRates: { coSignRequestsPerSecond: options.coSignRequestsPerSecond ?? 100, relayedProofsPerSecond: options.relayedProofsPerSecond ?? 100 },
    logger,
    ...(options.wallNowMs === undefined ? {} : { wallNowMs: options.wallNowMs }),
    ...(options.monotonicNowMs === undefined ? {} : { monotonicNowMs: options.monotonicNowMs }),
  });
}

/** A UDP socket of the test's own on `host` (another loopback address than the peers' when 127.0.0.2). */
async function rawSocket(host = "127.0.0.1"): Promise<Socket> {
  const socket = createSocket("udp4");
  await new Promise<void>((resolve) => socket.bind(0, host, () => resolve()));
  return socket;
}

/** A hello naming `sender` (and carrying its public key) but signed by a key of the forger's. */
function forgedHello(sender: NodeKey, receiver: NodeKey, nonce: bigint): Buffer {
  const body = encodeEnvelope({ sender: sender.address, receiver: receiver.address, nonce, inReplyTo: 0n, payload: { kind: "hello", hello: helloFrom(sender) } });
  return encodePacket({ body, signature: signHello(NodeKey.generate(), body), mac: Buffer.alloc(0) });
}

/** A UDP relay on loopback: forwards every datagram to `target` and keeps a copy (to replay or tamper with). */
async function relayTo(targetPort: () => number): Promise<{ socket: Socket; port: number; captured: Buffer[] }> {
  const socket = createSocket("udp4");
  const captured: Buffer[] = [];
  socket.on("message", (datagram) => {
    captured.push(Buffer.from(datagram));
    socket.send(datagram, targetPort(), "127.0.0.1");
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", () => resolve()));
  return { socket, port: socket.address().port, captured };
}

function echoProbe(transport: MeshTransport): void {
  transport.handle("probe", (_peer, payload, receivedAtNs) =>
    payload.kind === "probe" ? { kind: "probeReply", t2Ns: receivedAtNs, t3Ns: receivedAtNs + 1n, cardAccuracyNs: 50, state: "Initializing" } : null,
  );
}

async function until(check: () => boolean, timeoutMs = 2_000): Promise<void> {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > timeoutMs) throw new Error("condition not reached");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe("mesh transport (UDP, authenticated)", function () {
  const open: Array<{ close(): unknown }> = [];
  afterEach(async function () {
    for (const item of open.splice(0)) await item.close();
  });

  /**
   * Two members that list each other; A reaches B through a relay when asked (B answers A directly). `a` and `b`
   * override their settings; `aConfiguredAs` is A's role in B's configuration (A announces primary).
   */
  async function pair(options: { relay?: boolean; a?: TransportOverrides; b?: TransportOverrides; aConfiguredAs?: MeshRole } = {}): Promise<{ a: Member; b: Member; relay?: Awaited<ReturnType<typeof relayTo>> }> {
    const keyA = NodeKey.generate();
    const keyB = NodeKey.generate();
    let portA = 0;
    let portB = 0;
    const relay = options.relay === true ? await relayTo(() => portB) : undefined;
    if (relay !== undefined) open.push({ close: () => new Promise<void>((resolve) => relay.socket.close(() => resolve())) });
    // Ports are known only after binding: peers read them lazily through getters.
    const peerB: MeshPeerAddress = { nodeId: keyB.address, host: "127.0.0.1", role: "primary", get port() { return relay?.port ?? portB; } };
    const peerA: MeshPeerAddress = { nodeId: keyA.address, host: "127.0.0.1", role: options.aConfiguredAs ?? "primary", get port() { return portA; } };
    const a = transportFor(keyA, [peerB], options.a);
    const b = transportFor(keyB, [peerA], options.b);
    open.push(a, b);
    portA = (await a.start()).port;
    portB = (await b.start()).port;
    return { a: { key: keyA, transport: a, port: portA }, b: { key: keyB, transport: b, port: portB }, ...(relay === undefined ? {} : { relay }) };
  }

  it("establishes a session by signed hellos, then answers requests under the pair key", async function () {
    const { a, b } = await pair();
    echoProbe(b.transport);
    expect(a.transport.hasSession(b.key.address)).to.equal(false);
    a.transport.greet();
    await until(() => a.transport.hasSession(b.key.address) && b.transport.hasSession(a.key.address));
    const answer = await a.transport.request(b.key.address, { kind: "probe", t1Ns: 5n, roundId: 0n }, 1_000);
    expect(answer.payload.kind).to.equal("probeReply");
    expect(b.transport.peers[0]!.hello?.role).to.equal("primary");
    expect(Object.values(a.transport.drops()).reduce((x, y) => x + y, 0)).to.equal(0);
  });

  it("refuses requests before a session exists, with the peer named", async function () {
    const { a, b } = await pair();
    const error = await a.transport.request(b.key.address, { kind: "probe", t1Ns: 5n, roundId: 0n }, 100).catch((e: unknown) => e);
    expect(String(error)).to.match(/no mesh session with 0x[0-9a-fA-F]{40}/);
  });

  it("drops a replayed packet, and a packet whose tag does not check", async function () {
    const { a, b, relay } = await pair({ relay: true });
    let probes = 0;
    b.transport.handle("probe", (_peer, payload: MeshPayload, receivedAtNs) => {
      probes += 1;
      return payload.kind === "probe" ? { kind: "probeReply", t2Ns: receivedAtNs, t3Ns: receivedAtNs, cardAccuracyNs: 50, state: "Initializing" } : null;
    });
    a.transport.greet();
    await until(() => a.transport.hasSession(b.key.address));
    await a.transport.request(b.key.address, { kind: "probe", t1Ns: 5n, roundId: 0n }, 1_000);
    expect(probes).to.equal(1);
    const probePacket = relay!.captured.at(-1)!;
    relay!.socket.send(probePacket, b.port, "127.0.0.1");
    await until(() => b.transport.drops().replay === 1);
    const tampered = Buffer.from(probePacket);
    tampered[tampered.length - 1] = tampered[tampered.length - 1]! ^ 0x01; // the tag's last byte
    relay!.socket.send(tampered, b.port, "127.0.0.1");
    await until(() => b.transport.drops()["bad-mac"] === 1);
    expect(probes).to.equal(1);
  });

  it("drops packets from a node that is not a configured peer, and junk", async function () {
    const { b } = await pair();
    const stranger = transportFor(NodeKey.generate(), [{ nodeId: b.key.address, host: "127.0.0.1", port: b.port, role: "primary" }]);
    open.push(stranger);
    await stranger.start();
    stranger.greet();
    await until(() => b.transport.drops()["unknown-sender"] >= 1);
    expect(stranger.hasSession(b.key.address)).to.equal(false);
    const junk = createSocket("udp4");
    open.push({ close: () => new Promise<void>((resolve) => junk.close(() => resolve())) });
    junk.send(Buffer.from("not a packet"), b.port, "127.0.0.1");
    await until(() => b.transport.drops().malformed >= 1);
  });

  it("drops a hello signed by another key than the sender it names, and a packet for another receiver", async function () {
    const { a, b } = await pair();
    const raw = createSocket("udp4");
    open.push({ close: () => new Promise<void>((resolve) => raw.close(() => resolve())) });
    const nonce = BigInt(Date.now()) * 4096n;
    // Names A as sender, carries A's public key, but is signed by another key.
    const forgedBody = encodeEnvelope({ sender: a.key.address, receiver: b.key.address, nonce, inReplyTo: 0n, payload: { kind: "hello", hello: helloFrom(a.key) } });
    raw.send(encodePacket({ body: forgedBody, signature: signHello(NodeKey.generate(), forgedBody), mac: Buffer.alloc(0) }), b.port, "127.0.0.1");
    await until(() => b.transport.drops()["bad-signature"] === 1);
    // Genuinely from A, but addressed to a third node.
    const elsewhere = encodeEnvelope({ sender: a.key.address, receiver: NodeKey.generate().address, nonce: nonce + 1n, inReplyTo: 0n, payload: { kind: "hello", hello: helloFrom(a.key) } });
    raw.send(encodePacket({ body: elsewhere, signature: signHello(a.key, elsewhere), mac: Buffer.alloc(0) }), b.port, "127.0.0.1");
    await until(() => b.transport.drops()["wrong-receiver"] === 1);
    expect(b.transport.hasSession(a.key.address)).to.equal(false);
  });

  it("checks at most one hello signature per claimed sender every 50 ms (forged hellos cannot burn a core)", async function () {
    const { a, b } = await pair();
    const raw = createSocket("udp4");
    open.push({ close: () => new Promise<void>((resolve) => raw.close(() => resolve())) });
    const nonce = BigInt(Date.now()) * 4096n;
    for (let i = 0n; i < 20n; i += 1n) {
      raw.send(forgedHello(a.key, b.key, nonce + i), b.port, "127.0.0.1");
    }
    await until(() => b.transport.drops()["bad-signature"] + b.transport.drops()["hello-rate"] === 20);
    expect(b.transport.drops()["bad-signature"]).to.be.at.most(2);
    // The genuine peer still gets its session once the burst is over.
    await new Promise((resolve) => setTimeout(resolve, 60));
    a.transport.greet();
    await until(() => b.transport.hasSession(a.key.address) && a.transport.hasSession(b.key.address));
  });

  it("a flood of forged hellos naming a peer from another address never keeps that peer's own hello from being checked", async function () {
    // B's host clock stands still: the hello limiter never refills, so without the source check one forged hello
    // checked for A's id would refuse A's genuine hello for good.
    const frozenMs = Date.now();
    const { a, b } = await pair({ b: { wallNowMs: () => frozenMs } });
    const forger = await rawSocket("127.0.0.2"); // A is configured at 127.0.0.1
    open.push({ close: () => new Promise<void>((resolve) => forger.close(() => resolve())) });
    const nonce = BigInt(frozenMs) * 4096n;
    for (let i = 0n; i < 50n; i += 1n) forger.send(forgedHello(a.key, b.key, nonce + i), b.port, "127.0.0.1");
    const forgedDropped = () => b.transport.drops()["wrong-source"] + b.transport.drops()["bad-signature"] + b.transport.drops()["hello-rate"];
    await until(() => forgedDropped() === 50);
    a.transport.greet();
    await until(() => b.transport.hasSession(a.key.address) && a.transport.hasSession(b.key.address));
    // Not one forged signature was checked: they were dropped before the limiter and the ECDSA recovery.
    expect(b.transport.drops()).to.include({ "bad-signature": 0, "hello-rate": 0, "wrong-source": 50 });
  });

  it("refuses a hello announcing another role than this node configured for the peer", async function () {
    const { a, b } = await pair({ aConfiguredAs: "secondary" }); // A announces primary; B lists it as a secondary
    a.transport.greet();
    await until(() => b.transport.drops()["role-mismatch"] >= 1 || b.transport.hasSession(a.key.address));
    expect(b.transport.hasSession(a.key.address)).to.equal(false);
    expect(b.transport.drops()["role-mismatch"]).to.equal(1);
    expect(b.transport.peers[0]!.hello).to.equal(null);
  });

  it("a packet captured before the receiver restarts is refused by its next instance (same key, new session id)", async function () {
    // A's host clock moves only when the test says: the restarted B's hello reply must not fall within A's hello
    // limiter interval of B's first one (a real restart takes longer than 50 ms).
    let aWallMs = Date.now();
    const { a, b, relay } = await pair({ relay: true, a: { wallNowMs: () => aWallMs } });
    echoProbe(b.transport);
    a.transport.greet();
    await until(() => a.transport.hasSession(b.key.address) && b.transport.hasSession(a.key.address));
    await a.transport.request(b.key.address, { kind: "probe", t1Ns: 5n, roundId: 0n }, 1_000);
    const [capturedHello, capturedProbe] = relay!.captured; // A → B: its hello, then its probe
    expect(relay!.captured).to.have.length(2);

    // B restarts: same identity, configuration and port, a new instance whose replay window is empty.
    await b.transport.close();
    const restarted = transportFor(b.key, [{ nodeId: a.key.address, host: "127.0.0.1", port: a.port, role: "primary" }], { port: b.port });
    open.push(restarted);
    const restartedPort = (await restarted.start()).port;
    let helloRepliesAtA = 0;
    a.transport.onHello(() => (helloRepliesAtA += 1));
    aWallMs += 100;
    let probes = 0;
    restarted.handle("probe", (_peer, payload, receivedAtNs) => {
      probes += 1;
      return payload.kind === "probe" ? { kind: "probeReply", t2Ns: receivedAtNs, t3Ns: receivedAtNs, cardAccuracyNs: 50, state: "Initializing" } : null;
    });
    // The attacker replays what it captured, in order, within the freshness bound: the hello is A's own (signed,
    // and its session id is still A's), so it opens a session; the probe was tagged under the old pair key.
    relay!.socket.send(capturedHello!, restartedPort, "127.0.0.1");
    await until(() => restarted.hasSession(a.key.address));
    relay!.socket.send(capturedProbe!, restartedPort, "127.0.0.1");
    await until(() => restarted.drops()["bad-mac"] === 1 || probes > 0);
    expect(probes, "the replayed probe was answered").to.equal(0);
    // The genuine peer is unaffected: A learned the new session id from the restarted B's hello reply.
    await until(() => helloRepliesAtA >= 1);
    const fresh = await a.transport.request(b.key.address, { kind: "probe", t1Ns: 6n, roundId: 0n }, 1_000);
    expect(fresh.payload.kind).to.equal("probeReply");
    expect(probes).to.equal(1);
  });

  it("limits co-sign requests, relayed proofs and alerts per peer, counting the excess by reason", async function () {
    // B's buckets never refill (a monotonic clock that stands still): exactly the burst gets through.
    const { a, b } = await pair({ b: { monotonicNowMs: () => 0, coSignRequestsPerSecond: 3, relayedProofsPerSecond: 2 } });
    const handled = { cosignRequest: 0, relayedProof: 0, alert: 0 };
    b.transport.handle("cosignRequest", () => ((handled.cosignRequest += 1), null));
    b.transport.handle("relayedProof", () => ((handled.relayedProof += 1), null));
    b.transport.handle("alert", () => ((handled.alert += 1), null));
    a.transport.greet();
    await until(() => a.transport.hasSession(b.key.address) && b.transport.hasSession(a.key.address));
    const to = b.key.address;
    for (let i = 0; i < 10; i += 1) {
      a.transport.notify(to, { kind: "cosignRequest", roundId: BigInt(i + 1), nanoMoment: 1n, accuracyNs: 1, hardwareSignature: `0x${"11".repeat(96)}` });
      a.transport.notify(to, { kind: "relayedProof", proof: { nanoMoment: 1n, hardwareSignature: `0x${"11".repeat(96)}`, nodeSignature: `0x${"22".repeat(80)}`, accuracy: 1 }, consensusJson: "{}" });
      a.transport.notify(to, { kind: "alert", alert: { kind: "tamper", cardId: `0x${"33".repeat(32)}`, reason: "x", atNs: 1n, signature: Buffer.alloc(64, 1) } });
    }
    const drops = () => b.transport.drops();
    await until(() => handled.cosignRequest + drops()["cosign-rate"] === 10 && handled.relayedProof + drops()["relayed-proof-rate"] === 10 && handled.alert + drops()["alert-rate"] === 10);
    expect(handled).to.deep.equal({ cosignRequest: 3, relayedProof: 2, alert: 4 });
    expect(drops()).to.include({ "cosign-rate": 7, "relayed-proof-rate": 8, "alert-rate": 6 });
  });

  it("drops a packet whose nonce time is outside the skew bound (a replay after the window)", async function () {
    const keyA = NodeKey.generate();
    const keyB = NodeKey.generate();
    let portB = 0;
    const b = transportFor(keyB, [{ nodeId: keyA.address, host: "127.0.0.1", port: 9, role: "primary" }]);
    open.push(b);
    portB = (await b.start()).port;
    const hourAgo = transportFor(keyA, [{ nodeId: keyB.address, host: "127.0.0.1", port: portB, role: "primary" }], { wallNowMs: () => Date.now() - 3_600_000 });
    open.push(hourAgo);
    await hourAgo.start();
    hourAgo.greet();
    await until(() => b.drops().stale >= 1);
    expect(b.hasSession(keyA.address)).to.equal(false);
  });
});
