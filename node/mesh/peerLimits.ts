/**
 * Per-peer budgets for the mesh messages that cost this node signature work (docs/protocol.md §7.3): co-sign
 * requests (a P-256 verification and a secp256k1 signature each), relayed proofs (a P-256 verification and up to
 * 32 ECDSA recoveries) and tamper alerts (an ECDSA recovery). An authenticated peer is trusted to be a member, not
 * to be well-behaved: a faulty one must not be able to make this node sign or verify without bound. One token
 * bucket (lib/rateLimit.ts) per peer and kind; a message over its peer's budget is dropped and counted by the
 * transport. Probes are not limited here: answering one costs two clock reads and an HMAC.
 */
import { RateLimiter } from "../../lib/rateLimit";
import type { MeshPayloadKind } from "../../wire/mesh";

/**
 * Tamper alerts a peer may send per second, and at once. An honest node sends one alert per tamper event (and a
 * tampered card stays tampered), so this only bounds a faulty peer's recoveries; not a setting.
 */
export const MESH_ALERTS_PER_SECOND = 1;
export const MESH_ALERT_BURST = 4;

export interface PeerMessageRates {
  /** Co-sign requests per second per peer (burst the same): setting meshPeerCoSignRequestsPerSecond. */
  readonly coSignRequestsPerSecond: number;
  /** Relayed proofs per second per peer (burst the same): setting meshPeerRelayedProofsPerSecond. */
  readonly relayedProofsPerSecond: number;
}

/** The kinds with a per-peer budget. */
export type LimitedKind = "cosignRequest" | "relayedProof" | "alert";

export function isLimitedKind(kind: MeshPayloadKind): kind is LimitedKind {
  return kind === "cosignRequest" || kind === "relayedProof" || kind === "alert";
}

export class PeerMessageLimits {
  readonly #limiters: Readonly<Record<LimitedKind, RateLimiter>>;

  /** `peerCount` sizes the buckets' table: one bucket per configured peer and kind, never evicted. */
  constructor(rates: PeerMessageRates, peerCount: number, nowMs?: () => number) {
    for (const [name, rate] of Object.entries(rates)) {
      if (!Number.isFinite(rate) || rate < 1) throw new RangeError(`${name} must be a number ≥ 1, got ${rate}`);
    }
    const limiter = (ratePerSecond: number, burst: number): RateLimiter =>
      new RateLimiter({ ratePerSecond, burst, maxClients: Math.max(1, peerCount), ...(nowMs === undefined ? {} : { nowMs }) });
    this.#limiters = {
      cosignRequest: limiter(rates.coSignRequestsPerSecond, rates.coSignRequestsPerSecond),
      relayedProof: limiter(rates.relayedProofsPerSecond, rates.relayedProofsPerSecond),
      alert: limiter(MESH_ALERTS_PER_SECOND, MESH_ALERT_BURST),
    };
  }

  /** Takes one token of `kind` from the peer's bucket; false when the peer is over its budget. */
  admit(peerId: string, kind: LimitedKind): boolean {
    return this.#limiters[kind].tryTake(peerId);
  }
}
