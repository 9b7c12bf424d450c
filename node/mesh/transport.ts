/**
 * The mesh transport: one UDP socket, authenticated packets to and from the configured peers only
 * (docs/protocol.md §7.3, proto/mesh.proto, wire/mesh.ts).
 *
 * - Hellos are signed with the node key and carry its public key; from a peer's hello both sides derive the pair
 *   key (static ECDH), and every later packet carries an HMAC tag under it. Until a peer's hello is in, only
 *   hellos go to and come from it.
 * - Every packet is checked, in this order, and dropped with a counted reason otherwise: decodes (size bound),
 *   addressed to this node, from a configured peer, signature or tag, nonce fresh (its millisecond part within
 *   maxClockSkewMs of this host's clock) and never seen (a 1,024-nonce window per sender, the way IPsec and
 *   WireGuard keep theirs). Nothing unauthenticated moves the window.
 * - Answers go to the peer's configured address, never to the packet's source: a forged source cannot turn a
 *   node into a reflector.
 * - A request waits for its answer at most its timeout; at most MAX_PENDING_REQUESTS wait at once.
 * The timestamp a handler gets (`receivedAtNs`) is the card clock read first thing when the datagram arrives, so
 * decoding and authentication count as the responder's processing time, not as path delay.
 */
import { createSocket, type Socket } from "node:dgram";
import type { Logger } from "pino";
import { UnavailableError } from "../../protocol/errors";
import type { NodeKey } from "../../protocol/keys";
import type { Address } from "../../protocol/types";
import {
  decodeEnvelope,
  decodePacket,
  encodeEnvelope,
  encodePacket,
  helloSigner,
  isSignedKind,
  macMatches,
  MAX_MESH_PACKET_BYTES,
  packetMac,
  pairKey,
  signHello,
  type HelloPayload,
  type MeshEnvelope,
  type MeshPayload,
  type MeshPayloadKind,
} from "../../wire/mesh";

/** A configured peer: its node id and where it listens. */
export interface MeshPeerAddress {
  readonly nodeId: Address;
  readonly host: string;
  readonly port: number;
}

/** Requests awaiting an answer at once, over all peers (a bound on memory, not a rate). */
export const MAX_PENDING_REQUESTS = 4_096;
/** Nonces remembered below the highest seen per sender. */
export const REPLAY_WINDOW = 1_024n;
/** Nonce = ms × NONCE_PER_MS + counter: up to 4,096 packets per millisecond per sender. */
const NONCE_PER_MS = 4_096n;

/**
 * Least time between two hello signature checks for one claimed sender, ms. A hello costs an ECDSA recovery; peer
 * ids are public, so without this bound anyone could make a node spend a core on forged hellos naming a peer. An
 * honest peer greets once per probe interval until it has a session.
 */
export const HELLO_CHECK_INTERVAL_MS = 50;

/** Why a packet was dropped (counted in stats, sampled in logs). */
export type MeshDropReason =
  | "malformed"
  | "wrong-receiver"
  | "unknown-sender"
  | "bad-signature"
  | "bad-mac"
  | "no-session"
  | "stale"
  | "replay"
  | "unexpected-reply"
  | "hello-rate";

/** A peer as the mesh sees it through the transport. */
export interface MeshPeerLink {
  readonly nodeId: Address;
  readonly address: MeshPeerAddress;
  /** The peer's latest hello (card, role, version); null until one arrived. */
  readonly hello: HelloPayload | null;
}

export type MeshRequestHandler = (peer: MeshPeerLink, payload: MeshPayload, receivedAtNs: bigint) => MeshPayload | null;

export interface MeshTransportOptions {
  readonly nodeKey: NodeKey;
  /** Interface and port to bind (0: a free port). */
  readonly host: string;
  readonly port: number;
  readonly peers: readonly MeshPeerAddress[];
  /** This node's hello, minus its public key (added here). */
  readonly hello: Omit<HelloPayload, "nodePublicKey">;
  /** This node's public key, uncompressed (65 bytes). */
  readonly nodePublicKey: Buffer;
  /** The card clock, ns: receipt timestamps. */
  readonly clockNs: () => bigint;
  /** The host's wall clock, ms: nonce freshness. Default Date.now. */
  readonly wallNowMs?: () => number;
  /** How far a nonce's time may be from this host's clock, ms. */
  readonly maxClockSkewMs: number;
  readonly logger: Logger;
}

class ReplayWindow {
  #highest = 0n;
  #seen = 0n; // bit i set: nonce (highest − i) was accepted

  /** Records the nonce; false when it was seen or is below the window. */
  accept(nonce: bigint): boolean {
    if (nonce > this.#highest) {
      const shift = nonce - this.#highest;
      this.#seen = shift >= REPLAY_WINDOW ? 1n : ((this.#seen << shift) | 1n) & ((1n << REPLAY_WINDOW) - 1n);
      this.#highest = nonce;
      return true;
    }
    const age = this.#highest - nonce;
    if (age >= REPLAY_WINDOW) return false;
    const bit = 1n << age;
    if ((this.#seen & bit) !== 0n) return false;
    this.#seen |= bit;
    return true;
  }
}

interface PeerState {
  readonly nodeId: Address;
  readonly address: MeshPeerAddress;
  hello: HelloPayload | null;
  key: Buffer | null;
  readonly replay: ReplayWindow;
  /** Host clock of the last hello signature check for this sender, ms. */
  lastHelloCheckMs: number;
}

interface PendingRequest {
  readonly peer: string;
  readonly expect: MeshPayloadKind;
  readonly resolve: (answer: { payload: MeshPayload; receivedAtNs: bigint }) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** The answer kind each request kind expects. */
const ANSWER_KIND: Partial<Record<MeshPayloadKind, MeshPayloadKind>> = {
  hello: "helloReply",
  probe: "probeReply",
  cosignRequest: "cosignReply",
};

export class MeshTransport {
  readonly #options: MeshTransportOptions;
  readonly #self: Address;
  readonly #selfLower: string;
  readonly #peers = new Map<string, PeerState>();
  readonly #pending = new Map<bigint, PendingRequest>();
  readonly #handlers = new Map<MeshPayloadKind, MeshRequestHandler>();
  readonly #helloListeners = new Set<(peer: MeshPeerLink) => void>();
  readonly #drops = new Map<MeshDropReason, number>();
  readonly #wallNowMs: () => number;
  readonly #logger: Logger;
  #socket: Socket | null = null;
  #lastNonce = 0n;
  #lastDropLogMs = 0;

  constructor(options: MeshTransportOptions) {
    this.#options = options;
    this.#self = options.nodeKey.address;
    this.#selfLower = this.#self.toLowerCase();
    this.#wallNowMs = options.wallNowMs ?? Date.now;
    this.#logger = options.logger.child({ component: "mesh-transport" });
    for (const address of options.peers) {
      const id = address.nodeId.toLowerCase();
      if (id === this.#selfLower) throw new RangeError(`meshPeers lists this node itself (${address.nodeId})`);
      if (this.#peers.has(id)) throw new RangeError(`meshPeers lists ${address.nodeId} twice`);
      this.#peers.set(id, { nodeId: address.nodeId, address, hello: null, key: null, replay: new ReplayWindow(), lastHelloCheckMs: Number.NEGATIVE_INFINITY });
    }
  }

  /** Binds the socket. Resolves with the bound address; rejects with the bind error (port in use, …). */
  async start(): Promise<{ host: string; port: number }> {
    const socket = createSocket({ type: this.#options.host.includes(":") ? "udp6" : "udp4", recvBufferSize: 1 << 20 });
    this.#socket = socket;
    socket.on("message", (datagram, remote) => this.#receive(datagram, remote.address));
    socket.on("error", (error) => this.#logger.warn({ err: error }, "mesh socket error"));
    await new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind(this.#options.port, this.#options.host, () => {
        socket.off("error", reject);
        resolve();
      });
    });
    const bound = socket.address();
    return { host: bound.address, port: bound.port };
  }

  async close(): Promise<void> {
    for (const [nonce, pending] of this.#pending) {
      clearTimeout(pending.timer);
      pending.reject(new UnavailableError("mesh transport closed", {}));
      this.#pending.delete(nonce);
    }
    const socket = this.#socket;
    this.#socket = null;
    if (socket !== null) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }

  /** The handler answering requests of `kind` (one per kind). A null answer sends nothing. */
  handle(kind: MeshPayloadKind, handler: MeshRequestHandler): void {
    this.#handlers.set(kind, handler);
  }

  /** Called whenever a peer's hello (or hello reply) is accepted. */
  onHello(listener: (peer: MeshPeerLink) => void): () => void {
    this.#helloListeners.add(listener);
    return () => this.#helloListeners.delete(listener);
  }

  get peers(): readonly MeshPeerLink[] {
    return [...this.#peers.values()];
  }

  /** Whether packets other than hellos can go to this peer (its hello was accepted). */
  hasSession(nodeId: Address): boolean {
    return this.#peers.get(nodeId.toLowerCase())?.key != null;
  }

  /** Dropped packets by reason since start. */
  drops(): Readonly<Record<MeshDropReason, number>> {
    const reasons: MeshDropReason[] = ["malformed", "wrong-receiver", "unknown-sender", "bad-signature", "bad-mac", "no-session", "stale", "replay", "unexpected-reply", "hello-rate"];
    return Object.fromEntries(reasons.map((reason) => [reason, this.#drops.get(reason) ?? 0])) as Record<MeshDropReason, number>;
  }

  /**
   * Sends a request and waits for its answer (the payload and this node's card clock when it arrived). Rejects
   * with UnavailableError on timeout, without a session (no hello yet), or when too many requests wait.
   */
  request(nodeId: Address, payload: MeshPayload, timeoutMs: number): Promise<{ payload: MeshPayload; receivedAtNs: bigint }> {
    const peer = this.#peers.get(nodeId.toLowerCase());
    const expect = ANSWER_KIND[payload.kind];
    if (peer === undefined || expect === undefined) throw new RangeError(`cannot request ${payload.kind} from ${nodeId}`);
    if (!isSignedKind(payload.kind) && peer.key === null) {
      return Promise.reject(new UnavailableError(`no mesh session with ${peer.nodeId} yet (no hello received)`, { peer: peer.nodeId }));
    }
    if (this.#pending.size >= MAX_PENDING_REQUESTS) {
      return Promise.reject(new UnavailableError("too many mesh requests in flight", { pending: this.#pending.size }));
    }
    const nonce = this.#nextNonce();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(nonce);
        reject(new UnavailableError(`mesh ${payload.kind} to ${peer.nodeId} unanswered after ${timeoutMs} ms`, { peer: peer.nodeId, timeoutMs }));
      }, timeoutMs);
      this.#pending.set(nonce, { peer: peer.nodeId.toLowerCase(), expect, resolve, reject, timer });
      this.#send(peer, nonce, 0n, payload);
    });
  }

  /** Sends a payload that expects no answer (alerts). Peers without a session are skipped. */
  notify(nodeId: Address, payload: MeshPayload): boolean {
    const peer = this.#peers.get(nodeId.toLowerCase());
    if (peer === undefined || peer.key === null) return false;
    this.#send(peer, this.#nextNonce(), 0n, payload);
    return true;
  }

  /** Sends a hello to every peer without a session yet (and to all with `all`). */
  greet(all = false): void {
    for (const peer of this.#peers.values()) {
      if (!all && peer.key !== null) continue;
      this.request(peer.nodeId, { kind: "hello", hello: this.#hello() }, 1_000).catch(() => undefined);
    }
  }

  #hello(): HelloPayload {
    return { ...this.#options.hello, nodePublicKey: this.#options.nodePublicKey };
  }

  #nextNonce(): bigint {
    const floor = BigInt(this.#wallNowMs()) * NONCE_PER_MS;
    this.#lastNonce = this.#lastNonce >= floor ? this.#lastNonce + 1n : floor;
    return this.#lastNonce;
  }

  #send(peer: PeerState, nonce: bigint, inReplyTo: bigint, payload: MeshPayload): void {
    const socket = this.#socket;
    if (socket === null) return;
    const body = encodeEnvelope({ sender: this.#self, receiver: peer.nodeId, nonce, inReplyTo, payload });
    const signed = isSignedKind(payload.kind);
    const packet = encodePacket({
      body,
      signature: signed ? signHello(this.#options.nodeKey, body) : Buffer.alloc(0),
      mac: signed ? Buffer.alloc(0) : packetMac(peer.key!, body),
    });
    socket.send(packet, peer.address.port, peer.address.host);
  }

  #drop(reason: MeshDropReason, details: Record<string, unknown>): void {
    this.#drops.set(reason, (this.#drops.get(reason) ?? 0) + 1);
    // Sampled: a flood of junk must not become a flood of log lines (at most one per second).
    const nowMs = this.#wallNowMs();
    if (nowMs - this.#lastDropLogMs >= 1_000) {
      this.#lastDropLogMs = nowMs;
      this.#logger.warn({ reason, ...details, drops: this.drops() }, "mesh packet dropped");
    }
  }

  #receive(datagram: Buffer, sourceHost: string): void {
    const receivedAtNs = this.#options.clockNs();
    if (datagram.length > MAX_MESH_PACKET_BYTES) return this.#drop("malformed", { sourceHost, bytes: datagram.length });
    let envelope: MeshEnvelope;
    let body: Buffer;
    let packet: ReturnType<typeof decodePacket>;
    try {
      packet = decodePacket(datagram);
      body = packet.body;
      envelope = decodeEnvelope(body);
    } catch (error) {
      return this.#drop("malformed", { sourceHost, problem: error instanceof Error ? error.message : String(error) });
    }
    if (envelope.receiver.toLowerCase() !== this.#selfLower) return this.#drop("wrong-receiver", { sourceHost, receiver: envelope.receiver });
    const peer = this.#peers.get(envelope.sender.toLowerCase());
    if (peer === undefined) return this.#drop("unknown-sender", { sourceHost, sender: envelope.sender });
    const { payload } = envelope;
    if (isSignedKind(payload.kind)) {
      if (payload.kind !== "hello" && payload.kind !== "helloReply") return;
      const nowMs = this.#wallNowMs();
      if (nowMs - peer.lastHelloCheckMs < HELLO_CHECK_INTERVAL_MS) return this.#drop("hello-rate", { sender: envelope.sender });
      peer.lastHelloCheckMs = nowMs;
      try {
        const signer = helloSigner(body, packet.signature, payload.hello);
        if (signer.toLowerCase() !== peer.nodeId.toLowerCase()) return this.#drop("bad-signature", { sender: envelope.sender, signer });
      } catch (error) {
        return this.#drop("bad-signature", { sender: envelope.sender, problem: error instanceof Error ? error.message : String(error) });
      }
    } else {
      if (peer.key === null) return this.#drop("no-session", { sender: envelope.sender });
      if (!macMatches(peer.key, body, packet.mac)) return this.#drop("bad-mac", { sender: envelope.sender });
    }
    const nonceMs = Number(envelope.nonce / NONCE_PER_MS);
    if (Math.abs(nonceMs - this.#wallNowMs()) > this.#options.maxClockSkewMs) {
      return this.#drop("stale", { sender: envelope.sender, nonceMs, maxClockSkewMs: this.#options.maxClockSkewMs });
    }
    if (!peer.replay.accept(envelope.nonce)) return this.#drop("replay", { sender: envelope.sender, nonce: envelope.nonce.toString() });

    if (payload.kind === "hello" || payload.kind === "helloReply") this.#acceptHello(peer, payload.hello);
    if (envelope.inReplyTo !== 0n) return this.#answer(peer, envelope, receivedAtNs);
    if (payload.kind === "hello") {
      this.#send(peer, this.#nextNonce(), envelope.nonce, { kind: "helloReply", hello: this.#hello() });
      return;
    }
    const handler = this.#handlers.get(payload.kind);
    if (handler === undefined) return;
    let answer: MeshPayload | null;
    try {
      answer = handler(peer, payload, receivedAtNs);
    } catch (error) {
      this.#logger.error({ err: error, kind: payload.kind, peer: peer.nodeId }, "mesh handler failed");
      return;
    }
    if (answer !== null) this.#send(peer, this.#nextNonce(), envelope.nonce, answer);
  }

  #acceptHello(peer: PeerState, hello: HelloPayload): void {
    const first = peer.key === null;
    peer.hello = hello;
    if (first) peer.key = pairKey(this.#options.nodeKey, this.#self, hello.nodePublicKey, peer.nodeId);
    for (const listener of this.#helloListeners) listener(peer);
    if (first) this.#logger.info({ peer: peer.nodeId, role: hello.role, version: hello.version }, "mesh session established");
  }

  #answer(peer: PeerState, envelope: MeshEnvelope, receivedAtNs: bigint): void {
    const pending = this.#pending.get(envelope.inReplyTo);
    if (pending === undefined || pending.peer !== peer.nodeId.toLowerCase() || pending.expect !== envelope.payload.kind) {
      return this.#drop("unexpected-reply", { sender: envelope.sender, kind: envelope.payload.kind });
    }
    this.#pending.delete(envelope.inReplyTo);
    clearTimeout(pending.timer);
    pending.resolve({ payload: envelope.payload, receivedAtNs });
  }
}
