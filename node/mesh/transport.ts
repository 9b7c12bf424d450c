/**
 * The mesh transport: authenticated packets to and from the configured peers only, over the UDP sockets of the mesh
 * port (docs/protocol.md §7.3, proto/mesh.proto, wire/mesh.ts).
 *
 * Why one file: the packet checks (listed below the imports) run in one fixed order, kept in one place so it can be
 * audited; the sockets (peerSockets.ts, strangerSocket.ts) and the budgets (peerLimits.ts) are already apart.
 * Detail: docs/protocol.md §7.3.
 */
import { randomBytes } from "node:crypto";
import { createSocket, type SocketType } from "node:dgram";
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
  MESH_SESSION_ID_LENGTH,
  packetMac,
  pairKey,
  signHello,
  type HelloPayload,
  type MeshEnvelope,
  type MeshPayload,
  type MeshPayloadKind,
  type MeshRole,
} from "../../wire/mesh";
import { isLimitedKind, PeerMessageLimits, type LimitedKind, type PeerMessageRates } from "./peerLimits";
import { PeerSockets, type HostLookup } from "./peerSockets";
import { StrangerSocket } from "./strangerSocket";

/*
 * - Strangers are shed by the kernel: each peer has a socket of its own connected to its configured address and
 *   port (peerSockets.ts), so its packets have their own receive queue; everything else lands on a catch-all
 *   socket (strangerSocket.ts) where it is counted (`unknown-source`) and never decoded, within a budget beyond
 *   which that socket closes for a while. A flood from elsewhere can neither crowd out a peer's packets nor make
 *   this node decode anything.
 * - Hellos are signed with the node key and carry its public key; from a peer's hello both sides derive the pair
 *   key (static ECDH), and every later packet carries an HMAC tag under it. Until a peer's hello is in, only
 *   hellos go to and come from it.
 * - Every packet from a peer's socket is checked, in this order, and dropped with a counted reason otherwise:
 *   decodes (size bound), addressed to this node, sent by the peer whose socket it arrived on; for a hello, within
 *   that peer's hello limiter; signature or tag; for a hello, the role this node configured for the peer; nonce fresh (its millisecond part within maxClockSkewMs of
 *   this host's clock) and never seen (a 1,024-nonce window per sender, the way IPsec and WireGuard keep theirs);
 *   for co-sign requests, relayed proofs and alerts, within the peer's budget (peerLimits.ts). Nothing
 *   unauthenticated moves the window or spends a peer's budget.
 * - The window lives in memory. What keeps a restarted node from accepting packets captured before its restart is
 *   the session id: drawn anew by every transport, carried in its hellos and bound into each pair key, so every
 *   packet tagged under the previous boot's key fails its tag.
 * - Answers go to the peer's configured address, never to the packet's source: a forged source cannot turn a
 *   node into a reflector.
 * - A request waits for its answer at most its timeout; at most MAX_PENDING_REQUESTS wait at once.
 * The timestamp a handler gets (`receivedAtNs`) is the card clock read first thing when the datagram arrives, so
 * decoding and authentication count as the responder's processing time, not as path delay.
 */
/** A configured peer: its node id, where it listens, and its role as this node's configuration states it. */
export interface MeshPeerAddress {
  readonly nodeId: Address;
  readonly host: string;
  readonly port: number;
  /** The peer's role by this node's meshPeers entry; a hello announcing another is refused (§7.6). */
  readonly role: MeshRole;
}

/** Requests awaiting an answer at once, over all peers (a bound on memory, not a rate). */
export const MAX_PENDING_REQUESTS = 4_096;
/** Nonces remembered below the highest seen per sender. */
export const REPLAY_WINDOW = 1_024n;
/** Nonce = ms × NONCE_PER_MS + counter: up to 4,096 packets per millisecond per sender. */
const NONCE_PER_MS = 4_096n;

/**
 * Least time between two hello signature checks for one peer, ms. A hello costs an ECDSA recovery; only datagrams
 * from the peer's configured address reach this limiter (its own socket), so only someone able to send with that
 * source address (on the path, or spoofing it) can spend the peer's checks. An honest peer greets once per probe
 * interval until it has a session.
 */
export const HELLO_CHECK_INTERVAL_MS = 50;

/** Why a packet was dropped (counted in stats, sampled in logs). */
export type MeshDropReason =
  | "unknown-source"
  | "malformed"
  | "wrong-receiver"
  | "unknown-sender"
  | "bad-signature"
  | "bad-mac"
  | "no-session"
  | "stale"
  | "replay"
  | "unexpected-reply"
  | "hello-rate"
  | "wrong-source"
  | "role-mismatch"
  | "cosign-rate"
  | "relayed-proof-rate"
  | "alert-rate";

const DROP_REASONS: readonly MeshDropReason[] = [
  "unknown-source",
  "malformed",
  "wrong-receiver",
  "unknown-sender",
  "bad-signature",
  "bad-mac",
  "no-session",
  "stale",
  "replay",
  "unexpected-reply",
  "hello-rate",
  "wrong-source",
  "role-mismatch",
  "cosign-rate",
  "relayed-proof-rate",
  "alert-rate",
];

/** The drop reason of a message over its peer's budget. */
const RATE_DROP: Readonly<Record<LimitedKind, MeshDropReason>> = { cosignRequest: "cosign-rate", relayedProof: "relayed-proof-rate", alert: "alert-rate" };

/** A request the peer left unanswered for its whole timeout (not a local refusal: no session, too many pending). */
export class MeshRequestTimeoutError extends UnavailableError {}

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
  /** This node's hello, minus its public key and session id (added here). */
  readonly hello: Omit<HelloPayload, "nodePublicKey" | "sessionId">;
  /** This node's public key, uncompressed (65 bytes). */
  readonly nodePublicKey: Buffer;
  /** The card clock, ns: receipt timestamps. */
  readonly clockNs: () => bigint;
  /** The host's wall clock, ms: nonce freshness. Default Date.now. */
  readonly wallNowMs?: () => number;
  /** How far a nonce's time may be from this host's clock, ms. */
  readonly maxClockSkewMs: number;
  /** Per-peer budgets of co-sign requests and relayed proofs (settings meshPeerCoSignRequestsPerSecond, …). */
  readonly peerMessageRates: PeerMessageRates;
  /** A monotonic clock, ms: the per-peer budgets' buckets and the strangers' budget. Default performance.now. */
  readonly monotonicNowMs?: () => number;
  /** Resolves a peer's configured hostname (the address its socket connects to). Default: the system resolver. */
  readonly lookupHost?: HostLookup;
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
  /** Host clock of the last hello signature check for this peer, ms. */
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
  readonly #limits: PeerMessageLimits;
  readonly #monotonicNowMs: () => number;
  /** This boot's session id (hellos carry it; pair keys bind it). */
  readonly #sessionId = randomBytes(MESH_SESSION_ID_LENGTH);
  #peerSockets: PeerSockets | null = null;
  #strangerSocket: StrangerSocket | null = null;
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
    this.#monotonicNowMs = options.monotonicNowMs ?? (() => performance.now());
    this.#limits = new PeerMessageLimits(options.peerMessageRates, this.#peers.size, options.monotonicNowMs);
  }

  /**
   * Binds the mesh port: the catch-all socket, then one connected socket per peer. Resolves with the bound address;
   * rejects with the bind error (port in use, …).
   */
  async start(): Promise<{ host: string; port: number }> {
    const { host } = this.#options;
    const type: SocketType = host.includes(":") ? "udp6" : "udp4";
    const port = await claimPort(type, host, this.#options.port);
    const onStranger = (source: { address: string; port: number }, bytes: number): void =>
      this.#drop("unknown-source", { source: `${source.address}:${source.port}`, bytes });
    this.#strangerSocket = new StrangerSocket({ type, host, port, onDatagram: onStranger, nowMs: this.#monotonicNowMs, logger: this.#logger });
    await this.#strangerSocket.open();
    this.#peerSockets = new PeerSockets({
      type,
      host,
      port,
      peers: [...this.#peers].map(([id, peer]) => ({ id, host: peer.address.host, port: peer.address.port })),
      onDatagram: (peerId, datagram) => this.#receive(datagram, this.#peers.get(peerId)!),
      onStranger,
      nowMs: this.#wallNowMs,
      logger: this.#logger,
      ...(this.#options.lookupHost === undefined ? {} : { lookupHost: this.#options.lookupHost }),
    });
    await this.#peerSockets.open();
    return { host, port };
  }

  async close(): Promise<void> {
    for (const [nonce, pending] of this.#pending) {
      clearTimeout(pending.timer);
      pending.reject(new UnavailableError("mesh transport closed", {}));
      this.#pending.delete(nonce);
    }
    const sockets = [this.#peerSockets, this.#strangerSocket];
    this.#peerSockets = null;
    this.#strangerSocket = null;
    await Promise.all(sockets.map((socket) => socket?.close()));
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
    return Object.fromEntries(DROP_REASONS.map((reason) => [reason, this.#drops.get(reason) ?? 0])) as Record<MeshDropReason, number>;
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
        reject(new MeshRequestTimeoutError(`mesh ${payload.kind} to ${peer.nodeId} unanswered after ${timeoutMs} ms`, { peer: peer.nodeId, timeoutMs }));
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

  /**
   * Sends a hello to every peer without a session yet (and to all with `all`). A peer without a session is also
   * looked up again when configured by hostname (it may have moved; rate-bounded by peerSockets.ts).
   */
  greet(all = false): void {
    for (const [id, peer] of this.#peers) {
      if (peer.key === null) this.#peerSockets?.refresh(id);
      if (!all && peer.key !== null) continue;
      this.request(peer.nodeId, { kind: "hello", hello: this.#hello() }, 1_000).catch(() => undefined);
    }
  }

  #hello(): HelloPayload {
    return { ...this.#options.hello, nodePublicKey: this.#options.nodePublicKey, sessionId: this.#sessionId };
  }

  #nextNonce(): bigint {
    const floor = BigInt(this.#wallNowMs()) * NONCE_PER_MS;
    this.#lastNonce = this.#lastNonce >= floor ? this.#lastNonce + 1n : floor;
    return this.#lastNonce;
  }

  #send(peer: PeerState, nonce: bigint, inReplyTo: bigint, payload: MeshPayload): void {
    const sockets = this.#peerSockets;
    if (sockets === null) return;
    const body = encodeEnvelope({ sender: this.#self, receiver: peer.nodeId, nonce, inReplyTo, payload });
    const signed = isSignedKind(payload.kind);
    const packet = encodePacket({
      body,
      signature: signed ? signHello(this.#options.nodeKey, body) : Buffer.alloc(0),
      mac: signed ? Buffer.alloc(0) : packetMac(peer.key!, body),
    });
    sockets.send(peer.nodeId.toLowerCase(), packet); // the peer's configured address: its socket is connected there
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

  /** A datagram that arrived on `from`'s socket: from the address and port that peer is configured at. */
  #receive(datagram: Buffer, from: PeerState): void {
    const receivedAtNs = this.#options.clockNs();
    const sourceHost = from.address.host;
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
    const sender = envelope.sender.toLowerCase();
    // A packet naming another sender than the peer whose address it came from: a member's packets come from its
    // own configured address, so this is a forgery (or a misconfigured member), refused before any signature work.
    if (sender !== from.nodeId.toLowerCase()) {
      return this.#drop(this.#peers.has(sender) ? "wrong-source" : "unknown-sender", { sender: envelope.sender, sourceHost, arrivedAs: from.nodeId });
    }
    const peer = from;
    const { payload } = envelope;
    if (isSignedKind(payload.kind)) {
      if (payload.kind !== "hello" && payload.kind !== "helloReply") return;
      // The limiter before the ECDSA recovery.
      const nowMs = this.#wallNowMs();
      if (nowMs - peer.lastHelloCheckMs < HELLO_CHECK_INTERVAL_MS) return this.#drop("hello-rate", { sender: envelope.sender, sourceHost });
      peer.lastHelloCheckMs = nowMs;
      try {
        const signer = helloSigner(body, packet.signature, payload.hello);
        if (signer.toLowerCase() !== peer.nodeId.toLowerCase()) return this.#drop("bad-signature", { sender: envelope.sender, signer });
      } catch (error) {
        return this.#drop("bad-signature", { sender: envelope.sender, problem: error instanceof Error ? error.message : String(error) });
      }
      // Roles come from this node's configuration of the peer, never from the peer's word (§7.6): a disagreement is
      // a misconfiguration on one side, refused loudly rather than served with either side's guess.
      if (payload.hello.role !== peer.address.role) {
        return this.#drop("role-mismatch", { sender: envelope.sender, announcedRole: payload.hello.role, configuredRole: peer.address.role, setting: "meshPeers" });
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
    // After the replay window, so that a replayed packet cannot spend the genuine peer's budget.
    if (isLimitedKind(payload.kind) && !this.#limits.admit(peer.nodeId.toLowerCase(), payload.kind)) {
      return this.#drop(RATE_DROP[payload.kind], { sender: envelope.sender, kind: payload.kind });
    }

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
    // A new session id means the peer restarted: a new pair key, which retires every packet of its previous boot.
    const rekey = peer.hello === null || !peer.hello.sessionId.equals(hello.sessionId);
    const first = peer.key === null;
    peer.hello = hello;
    if (rekey) {
      peer.key = pairKey(this.#options.nodeKey, { address: this.#self, sessionId: this.#sessionId }, hello.nodePublicKey, { address: peer.nodeId, sessionId: hello.sessionId });
    }
    for (const listener of this.#helloListeners) listener(peer);
    if (rekey) this.#logger.info({ peer: peer.nodeId, role: hello.role, version: hello.version, restarted: !first }, "mesh session established");
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

/**
 * Checks that nobody holds the mesh port (the exclusive bind of a plain socket fails with EADDRINUSE, as before this
 * node shared its port between its own sockets) and returns the port (a free one for 0). The mesh's sockets then
 * bind it with SO_REUSEADDR: without this check a second node configured with the same port would bind it too and
 * silently split the traffic.
 */
async function claimPort(type: SocketType, host: string, port: number): Promise<number> {
  const probe = createSocket({ type });
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once("error", reject);
      probe.bind({ port, address: host, exclusive: true }, () => {
        probe.off("error", reject);
        resolve();
      });
    });
    return probe.address().port;
  } finally {
    await new Promise<void>((resolve) => {
      try {
        probe.close(() => resolve());
      } catch {
        resolve(); // never bound
      }
    });
  }
}
