/**
 * One UDP socket per configured peer (docs/protocol.md §7.3), each bound to the mesh port (SO_REUSEADDR, shared
 * with the other peers' sockets and the catch-all one, strangerSocket.ts) and connected to the peer's configured
 * address and port. A connected UDP socket receives only datagrams from the address it is connected to, and the
 * kernel prefers it to an unconnected one for them: each peer's packets get a receive queue of their own, which
 * nothing a stranger sends can fill, and this process spends nothing on telling them apart. Everything else lands
 * on the catch-all socket.
 *
 * So a peer's packets must come from the address and port it is configured at, which is what a member sends from
 * (its own mesh port); a NAT that rewrites the source port between members is not supported. An IP literal is its
 * own address. A hostname is resolved at start, to the first address of the socket's family (IPv4 on a udp6 socket
 * as ::ffff:a.b.c.d); while that peer has no session it is resolved again at most once per
 * HOSTNAME_REFRESH_INTERVAL_MS, and its socket reconnected when the address moved. Until a lookup succeeds, the
 * peer has no socket and its packets land on the catch-all socket.
 */
import { lookup } from "node:dns/promises";
import type { Socket, SocketType } from "node:dgram";
import { isIP } from "node:net";
import type { Logger } from "pino";
import { bindShared } from "./strangerSocket";

/** Least time between two lookups of one peer's hostname, ms. */
export const HOSTNAME_REFRESH_INTERVAL_MS = 10_000;
/** A peer's receive queue: an honest peer's traffic (a few packets per round) is small; the kernel doubles it. */
const PEER_RECV_BUFFER_BYTES = 256 * 1024;
/** Least time between two log lines about a peer socket's errors, ms. */
const ERROR_LOG_INTERVAL_MS = 10_000;

/** Resolves a hostname to its addresses (test hook; default the system resolver). */
export type HostLookup = (host: string) => Promise<string[]>;

const systemLookup: HostLookup = async (host) => (await lookup(host, { all: true })).map((entry) => entry.address);

export interface PeerEndpoint {
  /** The peer's node id, lowercase. */
  readonly id: string;
  readonly host: string;
  readonly port: number;
}

export interface PeerSocketsOptions {
  readonly type: SocketType;
  readonly host: string;
  /** The mesh port (bound by the catch-all socket first). */
  readonly port: number;
  readonly peers: readonly PeerEndpoint[];
  /** A datagram from the peer's configured address and port. */
  readonly onDatagram: (peerId: string, datagram: Buffer) => void;
  /** A datagram from elsewhere that a peer's socket read before it was connected: a stranger's. */
  readonly onStranger: (source: { address: string; port: number }, bytes: number) => void;
  readonly lookupHost?: HostLookup;
  /** The host clock, ms (lookup spacing, log sampling). */
  readonly nowMs: () => number;
  readonly logger: Logger;
}

interface PeerSocket {
  readonly endpoint: PeerEndpoint;
  readonly literal: boolean;
  socket: Socket | null;
  /** The address the socket is connected to. */
  address: string | null;
  lastLookupMs: number;
  connecting: boolean;
  lastErrorLogMs: number;
}

export class PeerSockets {
  readonly #options: PeerSocketsOptions;
  readonly #peers = new Map<string, PeerSocket>();
  readonly #lookup: HostLookup;
  #closed = false;

  constructor(options: PeerSocketsOptions) {
    this.#options = options;
    this.#lookup = options.lookupHost ?? systemLookup;
    for (const endpoint of options.peers) {
      const literal = isIP(endpoint.host) !== 0;
      this.#peers.set(endpoint.id, {
        endpoint,
        literal,
        socket: null,
        address: null,
        lastLookupMs: Number.NEGATIVE_INFINITY,
        connecting: false,
        lastErrorLogMs: Number.NEGATIVE_INFINITY,
      });
    }
  }

  /** Connects every peer's socket. A hostname that does not resolve is logged, not thrown (refresh() retries). */
  async open(): Promise<void> {
    await Promise.all([...this.#peers.values()].map((peer) => this.#connect(peer)));
  }

  /** Sends to the peer; false when it has no socket (its hostname never resolved). */
  send(peerId: string, packet: Buffer): boolean {
    const socket = this.#peers.get(peerId)?.socket;
    if (socket == null) return false;
    socket.send(packet);
    return true;
  }

  /**
   * For a peer without a session: resolves its hostname again (at most once per HOSTNAME_REFRESH_INTERVAL_MS) and
   * reconnects its socket when the address moved or was never resolved. An IP literal never moves.
   */
  refresh(peerId: string): void {
    const peer = this.#peers.get(peerId);
    if (peer === undefined || peer.literal || peer.connecting) return;
    if (this.#options.nowMs() - peer.lastLookupMs < HOSTNAME_REFRESH_INTERVAL_MS) return;
    void this.#connect(peer);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#peers.values()].map((peer) => closeSocket(peer.socket)));
    for (const peer of this.#peers.values()) peer.socket = null;
  }

  async #connect(peer: PeerSocket): Promise<void> {
    peer.connecting = true;
    try {
      const address = await this.#resolve(peer);
      if (address === null || address === peer.address || this.#closed) return;
      const socket = await this.#bindConnected(peer, address);
      if (this.#closed) {
        await closeSocket(socket);
        return;
      }
      const previous = peer.socket;
      peer.socket = socket;
      peer.address = address;
      if (previous !== null) {
        this.#options.logger.info({ peer: peer.endpoint.id, host: peer.endpoint.host, address }, "mesh peer's host moved: its socket reconnected");
        await closeSocket(previous);
      }
    } catch (error) {
      this.#options.logger.warn({ peer: peer.endpoint.id, host: peer.endpoint.host, err: error }, "cannot open the socket to a mesh peer: its packets are dropped until it opens");
    } finally {
      peer.connecting = false;
    }
  }

  /** The address to connect the peer's socket to, or null when its hostname does not resolve (logged). */
  async #resolve(peer: PeerSocket): Promise<string | null> {
    const { host } = peer.endpoint;
    if (peer.literal) return this.#forFamily([host]);
    peer.lastLookupMs = this.#options.nowMs();
    try {
      const address = this.#forFamily(await this.#lookup(host));
      if (address === null) this.#options.logger.warn({ peer: peer.endpoint.id, host, type: this.#options.type }, "a mesh peer's host has no address of the mesh socket's family");
      return address;
    } catch (error) {
      this.#options.logger.warn({ peer: peer.endpoint.id, host, err: error }, "cannot resolve a mesh peer's host: its packets are dropped until it resolves");
      return null;
    }
  }

  /** The first address a socket of this family can connect to (IPv4 mapped into IPv6 on a udp6 socket). */
  #forFamily(addresses: readonly string[]): string | null {
    if (this.#options.type === "udp4") return addresses.find((address) => isIP(address) === 4) ?? null;
    const v6 = addresses.find((address) => isIP(address) === 6);
    if (v6 !== undefined) return v6;
    const v4 = addresses.find((address) => isIP(address) === 4);
    return v4 === undefined ? null : `::ffff:${v4}`;
  }

  async #bindConnected(peer: PeerSocket, address: string): Promise<Socket> {
    const { type, host, port } = this.#options;
    const socket = await bindShared(type, host, port, PEER_RECV_BUFFER_BYTES);
    try {
      await new Promise<void>((resolve, reject) => socket.connect(peer.endpoint.port, address, (error?: Error) => (error === undefined || error === null ? resolve() : reject(error))));
    } catch (error) {
      await closeSocket(socket);
      throw error;
    }
    const remote = socket.remoteAddress();
    socket.on("message", (datagram, source) => {
      // Between bind and connect the socket was not yet a peer's: what it read then came from anyone.
      if (source.port !== remote.port || source.address !== remote.address) return this.#options.onStranger(source, datagram.length);
      this.#options.onDatagram(peer.endpoint.id, datagram);
    });
    socket.on("error", (error: NodeJS.ErrnoException) => this.#socketError(peer, error));
    return socket;
  }

  #socketError(peer: PeerSocket, error: NodeJS.ErrnoException): void {
    // ICMP port unreachable reported on a connected socket: the peer's port is closed (it is down). Its reachability
    // register already says so, probe after probe; a log line each time would say nothing more.
    if (error.code === "ECONNREFUSED") return;
    const nowMs = this.#options.nowMs();
    if (nowMs - peer.lastErrorLogMs < ERROR_LOG_INTERVAL_MS) return;
    peer.lastErrorLogMs = nowMs;
    this.#options.logger.warn({ peer: peer.endpoint.id, err: error }, "mesh peer socket error");
  }
}

async function closeSocket(socket: Socket | null): Promise<void> {
  if (socket === null) return;
  await new Promise<void>((resolve) => {
    try {
      socket.close(() => resolve());
    } catch {
      resolve(); // already closed
    }
  });
}
