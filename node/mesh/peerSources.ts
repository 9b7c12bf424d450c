/**
 * Which UDP source addresses a configured peer's hellos may come from (docs/protocol.md §7.3): the addresses its
 * configured host resolves to. A hello from elsewhere is dropped before it costs an ECDSA recovery or touches the
 * hello limiter, so forged hellos naming a peer from another address cannot crowd out that peer's own hello.
 *
 * An IP literal is its own address. A hostname is resolved when the transport starts and again, at most once per
 * HOSTNAME_REFRESH_INTERVAL_MS, when a hello for that peer arrives from an address it did not resolve to (its
 * address may have changed); until a lookup succeeds, that peer's hellos are dropped.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";

/** Least time between two lookups of one peer's hostname, ms (a flood of wrong-source hellos is not a DNS flood). */
export const HOSTNAME_REFRESH_INTERVAL_MS = 10_000;
/** Most addresses kept per peer (a hostname with many records). */
const MAX_ADDRESSES_PER_PEER = 16;

export type HostLookup = (host: string) => Promise<string[]>;

const defaultLookup: HostLookup = async (host) => (await lookup(host, { all: true })).map((entry) => entry.address);

/**
 * The canonical text of an IP address, so that a configured literal and a datagram's source compare equal:
 * IPv4-mapped IPv6 (`::ffff:10.0.0.1`, what a dual-stack socket reports) as IPv4, IPv6 compressed and lowercase.
 */
export function canonicalIp(address: string): string {
  const lower = address.toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(lower);
  if (mapped !== null) return mapped[1]!;
  if (isIP(lower) !== 6) return lower;
  try {
    return new URL(`http://[${lower}]/`).hostname.slice(1, -1); // the WHATWG URL parser compresses IPv6
  } catch {
    return lower; // a zone id (fe80::1%eth0) is not URL syntax: compared as written
  }
}

interface PeerHost {
  readonly host: string;
  readonly literal: boolean;
  addresses: ReadonlySet<string>;
  lastLookupMs: number;
  lookupInFlight: boolean;
}

export class PeerSourceAddresses {
  readonly #peers = new Map<string, PeerHost>();
  readonly #lookup: HostLookup;
  readonly #nowMs: () => number;
  readonly #onLookupError: (host: string, error: unknown) => void;

  /** `peers`: lowercase node id → configured host. */
  constructor(peers: ReadonlyMap<string, string>, options: { lookup?: HostLookup; nowMs?: () => number; onLookupError: (host: string, error: unknown) => void }) {
    this.#lookup = options.lookup ?? defaultLookup;
    this.#nowMs = options.nowMs ?? Date.now;
    this.#onLookupError = options.onLookupError;
    for (const [nodeId, host] of peers) {
      const literal = isIP(host) !== 0;
      this.#peers.set(nodeId, { host, literal, addresses: new Set(literal ? [canonicalIp(host)] : []), lastLookupMs: Number.NEGATIVE_INFINITY, lookupInFlight: false });
    }
  }

  /** Resolves every hostname peer once (the transport's start). Failures are reported, not thrown. */
  async resolveAll(): Promise<void> {
    await Promise.all([...this.#peers.values()].filter((peer) => !peer.literal).map((peer) => this.#resolve(peer)));
  }

  /**
   * Whether `sourceAddress` is one of the peer's configured addresses. When it is not and the peer is configured
   * by hostname, a new lookup starts (rate-bounded) so that a moved peer is admitted again soon after.
   */
  allows(nodeId: string, sourceAddress: string): boolean {
    const peer = this.#peers.get(nodeId);
    if (peer === undefined) return false;
    if (peer.addresses.has(canonicalIp(sourceAddress))) return true;
    if (!peer.literal && !peer.lookupInFlight && this.#nowMs() - peer.lastLookupMs >= HOSTNAME_REFRESH_INTERVAL_MS) void this.#resolve(peer);
    return false;
  }

  async #resolve(peer: PeerHost): Promise<void> {
    peer.lookupInFlight = true;
    peer.lastLookupMs = this.#nowMs();
    try {
      const addresses = await this.#lookup(peer.host);
      peer.addresses = new Set(addresses.slice(0, MAX_ADDRESSES_PER_PEER).map(canonicalIp));
    } catch (error) {
      this.#onLookupError(peer.host, error);
    } finally {
      peer.lookupInFlight = false;
    }
  }
}
