import { expect } from "chai";
import { createSocket, type Socket } from "node:dgram";
import pino from "pino";
import { NodeKey, nodePublicKeyUncompressed } from "../../protocol/keys";
import { MeshTransport, type MeshPeerAddress } from "../../node/mesh/transport";
import { encodeEnvelope, encodePacket, signHello, type MeshPayload } from "../../wire/mesh";

const logger = pino({ level: process.env.ATS_TEST_LOG ?? "silent" });

interface Member {
  key: NodeKey;
  transport: MeshTransport;
  port: number;
}

function hello() {
  return { cardPublicKey: Buffer.alloc(0), certificateChainPem: [], cardAccuracyNs: 50, role: "primary" as const, version: "test" };
}

let clockNs = 1_700_000_000_000_000_000n;
const clock = (): bigint => (clockNs += 1_000n);

function transportFor(key: NodeKey, peers: MeshPeerAddress[], options: { wallNowMs?: () => number } = {}): MeshTransport {
  return new MeshTransport({
    nodeKey: key,
    host: "127.0.0.1",
    port: 0,
    peers,
    nodePublicKey: nodePublicKeyUncompressed(key),
    hello: hello(),
    clockNs: clock,
    maxClockSkewMs: 10_000,
    logger,
    ...options,
  });
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

  /** Two members that list each other; B reached through `bPortFor` (a relay by default: none). */
  async function pair(options: { relay?: boolean } = {}): Promise<{ a: Member; b: Member; relay?: Awaited<ReturnType<typeof relayTo>> }> {
    const keyA = NodeKey.generate();
    const keyB = NodeKey.generate();
    let portA = 0;
    let portB = 0;
    const relay = options.relay === true ? await relayTo(() => portB) : undefined;
    if (relay !== undefined) open.push({ close: () => new Promise<void>((resolve) => relay.socket.close(() => resolve())) });
    // Ports are known only after binding: peers read them lazily through getters.
    const peerB: MeshPeerAddress = { nodeId: keyB.address, host: "127.0.0.1", get port() { return relay?.port ?? portB; } };
    const peerA: MeshPeerAddress = { nodeId: keyA.address, host: "127.0.0.1", get port() { return portA; } };
    const a = transportFor(keyA, [peerB]);
    const b = transportFor(keyB, [peerA]);
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
    const stranger = transportFor(NodeKey.generate(), [{ nodeId: b.key.address, host: "127.0.0.1", port: b.port }]);
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
    const helloFrom = (key: NodeKey) => ({ ...hello(), nodePublicKey: nodePublicKeyUncompressed(key) });
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
      const body = encodeEnvelope({ sender: a.key.address, receiver: b.key.address, nonce: nonce + i, inReplyTo: 0n, payload: { kind: "hello", hello: { ...hello(), nodePublicKey: nodePublicKeyUncompressed(a.key) } } });
      raw.send(encodePacket({ body, signature: signHello(NodeKey.generate(), body), mac: Buffer.alloc(0) }), b.port, "127.0.0.1");
    }
    await until(() => b.transport.drops()["bad-signature"] + b.transport.drops()["hello-rate"] === 20);
    expect(b.transport.drops()["bad-signature"]).to.be.at.most(2);
    // The genuine peer still gets its session once the burst is over.
    await new Promise((resolve) => setTimeout(resolve, 60));
    a.transport.greet();
    await until(() => b.transport.hasSession(a.key.address) && a.transport.hasSession(b.key.address));
  });

  it("drops a packet whose nonce time is outside the skew bound (a replay after the window)", async function () {
    const keyA = NodeKey.generate();
    const keyB = NodeKey.generate();
    let portB = 0;
    const b = transportFor(keyB, [{ nodeId: keyA.address, host: "127.0.0.1", port: 9 }]);
    open.push(b);
    portB = (await b.start()).port;
    const hourAgo = transportFor(keyA, [{ nodeId: keyB.address, host: "127.0.0.1", port: portB }], { wallNowMs: () => Date.now() - 3_600_000 });
    open.push(hourAgo);
    await hourAgo.start();
    hourAgo.greet();
    await until(() => b.drops().stale >= 1);
    expect(b.hasSession(keyA.address)).to.equal(false);
  });
});
