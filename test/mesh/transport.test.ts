import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import pino from "pino";
import { freeUdpPorts } from "../../node/cluster";
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

/** A hello naming `sender` (and carrying its public key), signed by `signer` (default: a key of the forger's). */
function forgedHello(sender: NodeKey, receiver: NodeKey, nonce: bigint, signer: NodeKey = NodeKey.generate()): Buffer {
  const body = encodeEnvelope({ sender: sender.address, receiver: receiver.address, nonce, inReplyTo: 0n, payload: { kind: "hello", hello: helloFrom(sender) } });
  return encodePacket({ body, signature: signHello(signer, body), mac: Buffer.alloc(0) });
}

/** Binds a socket sharing `port` (as the mesh's sockets do) and connects it to `remotePort`, on loopback. */
async function sharedConnected(port: number, remotePort: number): Promise<Socket> {
  const socket = createSocket({ type: "udp4", reuseAddr: true });
  socket.on("error", () => undefined);
  await new Promise<void>((resolve) => socket.bind(port, "127.0.0.1", () => resolve()));
  await new Promise<void>((resolve) => socket.connect(remotePort, "127.0.0.1", () => resolve()));
  return socket;
}

/**
 * What an attacker able to send with a peer's source address (on the path, or spoofing) can do: a socket on the
 * peer's own address and port, connected to the target. The kernel hands its datagrams to the target's socket for
 * that peer. While it is open it also takes the target's answers to that peer (the newest of two equal sockets
 * wins): tests close it before the genuine peer talks.
 */
function asPeer(peerPort: number, targetPort: number): Promise<Socket> {
  return sharedConnected(peerPort, targetPort);
}

/**
 * A UDP relay on loopback between A (which is configured to reach B at the relay) and B: what A sends reaches B from
 * A's own address and port (the relay's back side shares A's port, as an on-path attacker's packets would), and B's
 * answers come back to A through the relay. It keeps a copy of what A sent, to replay (`inject`) or tamper with.
 */
interface Relay {
  readonly port: number;
  readonly captured: Buffer[];
  /** Opens the back side: once A is listening (A's start refuses a port someone else already holds). */
  attach(): Promise<void>;
  inject(datagram: Buffer): void;
  close(): Promise<void>;
}

async function relayBetween(portA: number, portB: number): Promise<Relay> {
  const front = createSocket("udp4");
  const captured: Buffer[] = [];
  await new Promise<void>((resolve) => front.bind(0, "127.0.0.1", () => resolve()));
  let back: Socket | null = null;
  front.on("message", (datagram) => {
    captured.push(Buffer.from(datagram));
    back?.send(datagram);
  });
  return {
    port: front.address().port,
    captured,
    attach: async () => {
      back = await sharedConnected(portA, portB);
      back.on("message", (datagram) => front.send(datagram, portA, "127.0.0.1"));
    },
    inject: (datagram) => back!.send(datagram),
    close: async () => {
      await Promise.all([front, back].map((socket) => (socket === null ? undefined : new Promise<void>((resolve) => socket.close(() => resolve())))));
    },
  };
}

/** A stranger's socket connected to `port` on loopback (no peer is configured at its address). */
async function floodSocket(port: number): Promise<Socket> {
  const socket = await rawSocket();
  socket.on("error", () => undefined); // ICMP port unreachable while the target sheds strangers: expected
  await new Promise<void>((resolve) => socket.connect(port, "127.0.0.1", () => resolve()));
  return socket;
}

/**
 * Datagrams of a flood that overflows any receive buffer a mesh socket had: 600 × 8 KiB = 4.8 MiB, more than
 * twice the 2 MiB the kernel grants the 1 MiB one socket asks for; under the 1,000 datagrams the kernel's backlog
 * queue holds when its softirq runs late.
 */
const FLOOD_DATAGRAMS = 600;
const FLOOD_DATAGRAM_BYTES = 8_192;

/**
 * Sends `count` junk datagrams at once (a connected socket sends without a DNS lookup, so each leaves in the
 * call), then blocks this thread 20 ms so that the kernel delivers them before anything else of this process runs.
 */
function floodSync(socket: Socket, count: number): void {
  const junk = randomBytes(FLOOD_DATAGRAM_BYTES);
  for (let i = 0; i < count; i += 1) socket.send(junk);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
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
   * Two members that list each other; A reaches B through a relay when asked (B answers A directly, which the relay
   * passes back). `a` and `b` override their settings; `aConfiguredAs` is A's role in B's configuration (A announces
   * primary). Ports are drawn before either starts: each connects its peer's socket at start.
   */
  async function pair(options: { relay?: boolean; a?: TransportOverrides; b?: TransportOverrides; aConfiguredAs?: MeshRole } = {}): Promise<{ a: Member; b: Member; relay?: Relay }> {
    const keyA = NodeKey.generate();
    const keyB = NodeKey.generate();
    const [portA, portB] = (await freeUdpPorts(2)) as [number, number];
    const relay = options.relay === true ? await relayBetween(portA, portB) : undefined;
    const peerB: MeshPeerAddress = { nodeId: keyB.address, host: "127.0.0.1", role: "primary", port: relay?.port ?? portB };
    const peerA: MeshPeerAddress = { nodeId: keyA.address, host: "127.0.0.1", role: options.aConfiguredAs ?? "primary", port: portA };
    const a = transportFor(keyA, [peerB], { ...options.a, port: portA });
    const b = transportFor(keyB, [peerA], { ...options.b, port: portB });
    open.push(a, b);
    if (relay !== undefined) open.push(relay);
    await a.start();
    await b.start();
    await relay?.attach();
    return { a: { key: keyA, transport: a, port: portA }, b: { key: keyB, transport: b, port: portB }, ...(relay === undefined ? {} : { relay }) };
  }

  /** Closes a test socket now (and registers nothing: for sockets a test closes itself). */
  function closeNow(socket: Socket): Promise<void> {
    return new Promise<void>((resolve) => socket.close(() => resolve()));
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
    relay!.inject(probePacket);
    await until(() => b.transport.drops().replay === 1);
    const tampered = Buffer.from(probePacket);
    tampered[tampered.length - 1] = tampered[tampered.length - 1]! ^ 0x01; // the tag's last byte
    relay!.inject(tampered);
    await until(() => b.transport.drops()["bad-mac"] === 1);
    expect(probes).to.equal(1);
  });

  it("sheds datagrams from addresses no peer is configured at before decoding them (a node that is not a peer, junk)", async function () {
    const { b } = await pair();
    const stranger = transportFor(NodeKey.generate(), [{ nodeId: b.key.address, host: "127.0.0.1", port: b.port, role: "primary" }]);
    open.push(stranger);
    await stranger.start();
    stranger.greet();
    await until(() => b.transport.drops()["unknown-source"] >= 1);
    const junk = await rawSocket();
    open.push({ close: () => closeNow(junk) });
    junk.send(Buffer.from("not a packet"), b.port, "127.0.0.1");
    await until(() => b.transport.drops()["unknown-source"] >= 2);
    expect(stranger.hasSession(b.key.address)).to.equal(false);
    expect(b.transport.drops()).to.include({ malformed: 0, "unknown-sender": 0, "bad-signature": 0 });
  });

  it("from a peer's own address, drops junk, and packets naming a sender other than that peer before any signature check", async function () {
    const keyA = NodeKey.generate();
    const keyB = NodeKey.generate();
    const keyC = NodeKey.generate();
    const [portA, portB, portC] = (await freeUdpPorts(3)) as [number, number, number];
    const b = transportFor(keyB, [
      { nodeId: keyA.address, host: "127.0.0.1", port: portA, role: "primary" },
      { nodeId: keyC.address, host: "127.0.0.1", port: portC, role: "primary" },
    ], { port: portB });
    open.push(b);
    await b.start();
    const spoofer = await asPeer(portA, portB);
    open.push({ close: () => closeNow(spoofer) });
    spoofer.send(Buffer.from("not a packet"));
    await until(() => b.drops().malformed === 1);
    const nonce = BigInt(Date.now()) * 4096n;
    // From A's address, a hello of C's (signed by C, a configured peer) and one of a node that is no peer at all.
    spoofer.send(forgedHello(keyC, keyB, nonce, keyC));
    spoofer.send(forgedHello(NodeKey.generate(), keyB, nonce + 1n));
    await until(() => b.drops()["wrong-source"] === 1 && b.drops()["unknown-sender"] === 1);
    expect(b.drops()).to.include({ "bad-signature": 0, "hello-rate": 0 });
    expect(b.hasSession(keyC.address)).to.equal(false);
  });

  it("drops a hello signed by another key than the sender it names, and a packet for another receiver", async function () {
    const { a, b } = await pair();
    const spoofer = await asPeer(a.port, b.port); // sends with A's source address
    open.push({ close: () => closeNow(spoofer) });
    const nonce = BigInt(Date.now()) * 4096n;
    // Names A as sender, carries A's public key, but is signed by another key.
    spoofer.send(forgedHello(a.key, b.key, nonce));
    await until(() => b.transport.drops()["bad-signature"] === 1);
    // Genuinely from A, but addressed to a third node (60 ms later: past B's hello limiter for A).
    await new Promise((resolve) => setTimeout(resolve, 60));
    const elsewhere = encodeEnvelope({ sender: a.key.address, receiver: NodeKey.generate().address, nonce: nonce + 1n, inReplyTo: 0n, payload: { kind: "hello", hello: helloFrom(a.key) } });
    spoofer.send(encodePacket({ body: elsewhere, signature: signHello(a.key, elsewhere), mac: Buffer.alloc(0) }));
    await until(() => b.transport.drops()["wrong-receiver"] === 1);
    expect(b.transport.hasSession(a.key.address)).to.equal(false);
  });

  it("checks at most one hello signature per claimed sender every 50 ms (forged hellos cannot burn a core)", async function () {
    const { a, b } = await pair();
    const spoofer = await asPeer(a.port, b.port);
    const nonce = BigInt(Date.now()) * 4096n;
    for (let i = 0n; i < 20n; i += 1n) spoofer.send(forgedHello(a.key, b.key, nonce + i));
    await until(() => b.transport.drops()["bad-signature"] + b.transport.drops()["hello-rate"] === 20);
    expect(b.transport.drops()["bad-signature"]).to.be.at.most(2);
    await closeNow(spoofer); // it would take B's answers to A's address
    // The genuine peer still gets its session once the burst is over.
    await new Promise((resolve) => setTimeout(resolve, 60));
    a.transport.greet();
    await until(() => b.transport.hasSession(a.key.address) && a.transport.hasSession(b.key.address));
  });

  it("a flood of forged hellos naming a peer from another address is shed unread: that peer's own hello is checked", async function () {
    // B's host clock stands still: the hello limiter never refills, so one forged hello checked for A's id would
    // refuse A's genuine hello for good.
    const frozenMs = Date.now();
    const { a, b } = await pair({ b: { wallNowMs: () => frozenMs } });
    const forger = await rawSocket("127.0.0.2"); // A is configured at 127.0.0.1
    open.push({ close: () => closeNow(forger) });
    const nonce = BigInt(frozenMs) * 4096n;
    for (let i = 0n; i < 50n; i += 1n) forger.send(forgedHello(a.key, b.key, nonce + i), b.port, "127.0.0.1");
    await until(() => b.transport.drops()["unknown-source"] === 50);
    a.transport.greet();
    await until(() => b.transport.hasSession(a.key.address) && a.transport.hasSession(b.key.address));
    // Not one forged packet was decoded: they never reached A's socket at B.
    expect(b.transport.drops()).to.include({ "bad-signature": 0, "hello-rate": 0, "wrong-source": 0, malformed: 0 });
  });

  it("refuses to start on a port another socket holds (EADDRINUSE), though its own sockets share it", async function () {
    const { b } = await pair();
    const second = transportFor(NodeKey.generate(), [{ nodeId: b.key.address, host: "127.0.0.1", port: 9, role: "primary" }], { port: b.port });
    const error = await second.start().catch((e: unknown) => e);
    await second.close();
    expect((error as NodeJS.ErrnoException).code).to.equal("EADDRINUSE");
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
    await restarted.start();
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
    relay!.inject(capturedHello!);
    await until(() => restarted.hasSession(a.key.address));
    relay!.inject(capturedProbe!);
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

  it("a peer's answer gets through while a stranger keeps the port's receive buffer full (each peer has its own socket)", async function () {
    const { a, b } = await pair();
    const flooder = await floodSocket(a.port);
    open.push({ close: () => new Promise<void>((resolve) => flooder.close(() => resolve())) });
    b.transport.handle("probe", (_peer, payload, receivedAtNs) => {
      // Right before B answers, a stranger fills A's mesh port with more than a single socket's receive buffer holds
      // (the kernel doubles the 1 MiB asked for); then this process stands still so that the kernel has delivered all
      // of it before B's answer leaves. Sharing one socket with the stranger, the answer would be dropped by the kernel.
      floodSync(flooder, FLOOD_DATAGRAMS);
      return payload.kind === "probe" ? { kind: "probeReply", t2Ns: receivedAtNs, t3Ns: receivedAtNs + 1n, cardAccuracyNs: 50, state: "Initializing" } : null;
    });
    a.transport.greet();
    await until(() => a.transport.hasSession(b.key.address) && b.transport.hasSession(a.key.address));
    const answer = await a.transport.request(b.key.address, { kind: "probe", t1Ns: 5n, roundId: 0n }, 2_000);
    expect(answer.payload.kind).to.equal("probeReply");
    // The stranger's datagrams were counted and never decoded (no "malformed"), and A's session with B is intact.
    await until(() => a.transport.drops()["unknown-source"] >= 1);
    expect(a.transport.drops().malformed).to.equal(0);
  });

  it("drops a packet whose nonce time is outside the skew bound (a replay after the window)", async function () {
    const { a, b } = await pair({ a: { wallNowMs: () => Date.now() - 3_600_000 } }); // A's host clock an hour behind
    a.transport.greet();
    await until(() => b.transport.drops().stale >= 1);
    expect(b.transport.hasSession(a.key.address)).to.equal(false);
  });
});
