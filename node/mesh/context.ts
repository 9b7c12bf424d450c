/**
 * What the parts of one node's mesh share (docs/protocol.md §7): its options, the peers as this node configured
 * them (meshPeers) with their bookkeeping (peers.ts), the membership n and its threshold, the convergence tracker,
 * the counters, and the feed of the proofs it serves. n is the configured membership: excluding a peer never lowers
 * the threshold, so getting nodes excluded cannot weaken the quorum.
 */
import type { Logger } from "pino";
import { consensusThreshold, type CoSignRule } from "../../protocol/consensus";
import type { NodeKey } from "../../protocol/keys";
import type { RecoveryMemo } from "../../protocol/sign";
import type { Address, CardRecord, Hex } from "../../protocol/types";
import { createP256KeyCache } from "../../protocol/verify";
import type { MeshRole } from "../../wire/mesh";
import type { TimeCard } from "../card/types";
import type { SignedTime } from "../core/types";
import { ConvergenceTracker } from "./convergence";
import { newPeerRecord, type PeerRecord } from "./peers";
import type { MeshTransport } from "./transport";

/** A filter sample older than this does not stand in for a round's own exchange, ns (its drift allowance grows). */
export const MAX_FILTER_SAMPLE_AGE_NS = 2_000_000_000n;

export interface MeshOptions {
  readonly transport: MeshTransport;
  readonly nodeKey: NodeKey;
  readonly card: TimeCard;
  readonly role: MeshRole;
  /** The accuracy this node's card advertises, ns (its own reading's uncertainty). */
  readonly cardAccuracyNs: number;
  /** Throws UnavailableError when this node must not sign (card tampered, accuracy refusal): the attestor's guard. */
  readonly assertCanSign: () => void;
  /** Hands a peer card's chain to the node's trust store (its verify() then accepts that card). Default: none. */
  readonly learnCardChain?: (certificateChainPem: readonly string[]) => Promise<void>;
  /**
   * The trust store's view of a card: a proposer's card is co-signed, and a primary's relayed proofs served, only
   * once its chain was certified by a trusted root and while it is not revoked. Absent (unit tests of the mesh
   * alone): the card from the hello is used as it is.
   */
  readonly resolveCard?: (cardId: Hex) => CardRecord | undefined;
  readonly windowNs: bigint;
  readonly roundIntervalMs: number;
  readonly probeIntervalMs: number;
  readonly roundTimeoutMs: number;
  /**
   * Rounds this proposer may have in flight at once (setting meshMaxRoundsInFlight): concurrent callers of
   * roundNow() pipeline up to this many, so throughput is not bounded by one round's two exchanges. Default 1
   * (unit tests of the mesh alone; node/mesh/index.ts passes the setting).
   */
  readonly maxRoundsInFlight?: number;
  /** Readings with a larger uncertainty (slow link, loose card) are left out of rounds, ns. */
  readonly maxPeerUncertaintyNs: bigint;
  /** Co-signing transit slack beyond the measured path (setting meshCoSignSlackNs, §7.5). */
  readonly coSignSlackNs: bigint;
  /** current() refuses a consensus proof older than this, ns. */
  readonly maxProofAgeNs: bigint;
  readonly recoveryMemo?: RecoveryMemo;
  readonly logger: Logger;
  /** Told the bound UDP address once the transport listens. */
  readonly onListening?: (address: { host: string; port: number }) => void;
  /** Told about every verified tamper alert (the guardian hook). */
  readonly onTamperAlert?: (alert: { nodeId: Address; cardId: Hex; reason: string; atNs: bigint; signature: Hex }) => void;
}

/** Round outcomes by result, for metrics. */
export interface MeshStats {
  roundsTotal: number;
  roundsFailedTotal: Record<string, number>;
  /** Duration of the last successful round (card reading → proof), ns. */
  lastRoundDurationNs: bigint | null;
  coSignaturesGivenTotal: number;
  coSignaturesRefusedTotal: number;
  /** Co-sign requests refused by a clock rule of §7.5 (coSignDecision), by rule; also in coSignaturesRefusedTotal. */
  coSignRequestsRefusedByRule: Partial<Record<CoSignRule, number>>;
  /** Relayed proofs refused (each also a fault of the sender), by RelayRefusal. */
  relayedProofsRefusedTotal: Partial<Record<RelayRefusal, number>>;
  /** Round exchanges not sent to an absent peer (its recent exchanges went unanswered), so not waited for. */
  roundExchangesSkippedTotal: number;
}

/** Why a relayed proof was refused (a fixed set: metric labels). */
export type RelayRefusal = "future-dated" | "malformed-consensus" | "untrusted-card" | "invalid";

export function sortByAddress<T extends { nodeId: Address }>(items: T[]): T[] {
  return items.sort((a, b) => (a.nodeId.toLowerCase() < b.nodeId.toLowerCase() ? -1 : 1));
}

/** The proofs the mesh serves: the latest, and who is told of each new one. */
export class ProofFeed {
  readonly #listeners = new Set<(signed: SignedTime) => void>();
  readonly #logger: Logger;
  latest: SignedTime | null = null;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  onProof(listener: (signed: SignedTime) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  publish(signed: SignedTime): void {
    this.latest = signed;
    for (const listener of this.#listeners) {
      try {
        listener(signed);
      } catch (error) {
        this.#logger.error({ err: error }, "mesh proof listener failed");
      }
    }
  }
}

export class MeshContext {
  readonly options: MeshOptions;
  readonly logger: Logger;
  readonly self: Address;
  /** By lower-case node id; only the configured peers. */
  readonly peers = new Map<string, PeerRecord>();
  /** n: this node and its configured peers. */
  readonly members: number;
  readonly threshold: number;
  readonly tracker: ConvergenceTracker;
  readonly p256Keys = createP256KeyCache();
  readonly feed: ProofFeed;
  readonly stats: MeshStats = {
    roundsTotal: 0,
    roundsFailedTotal: {},
    lastRoundDurationNs: null,
    coSignaturesGivenTotal: 0,
    coSignaturesRefusedTotal: 0,
    coSignRequestsRefusedByRule: {},
    relayedProofsRefusedTotal: {},
    roundExchangesSkippedTotal: 0,
  };
  running = false;

  constructor(options: MeshOptions) {
    this.options = options;
    this.logger = options.logger.child({ component: "mesh" });
    this.self = options.nodeKey.address;
    for (const link of options.transport.peers) this.peers.set(link.nodeId.toLowerCase(), newPeerRecord(link.nodeId, link.address.role));
    this.members = this.peers.size + 1;
    this.threshold = consensusThreshold(this.members);
    this.tracker = new ConvergenceTracker({ memberCount: this.members, windowNs: options.windowNs });
    this.feed = new ProofFeed(this.logger);
  }

  peer(nodeId: Address): PeerRecord | undefined {
    return this.peers.get(nodeId.toLowerCase());
  }

  /** Peers reachable and not excluded (the mesh state's peerCount). */
  reachablePeers(): number {
    let count = 0;
    for (const peer of this.peers.values()) if (peer.reach.reachable && peer.excludedReason === null) count += 1;
    return count;
  }

  /** The peer's card as this node trusts it (certified, not revoked), or why it does not. */
  trustedCard(peer: PeerRecord): { publicKey: Hex; cardId: Hex } | string {
    if (peer.cardPublicKey === null || peer.cardId === null) return "the peer announced no card";
    if (this.options.resolveCard === undefined) return { publicKey: peer.cardPublicKey, cardId: peer.cardId };
    const record = this.options.resolveCard(peer.cardId);
    if (record === undefined) return `the peer's card ${peer.cardId} is not certified by a trusted root (yet)`;
    if (record.revoked) return `the peer's card ${peer.cardId} is revoked`;
    return { publicKey: record.publicKey, cardId: peer.cardId };
  }
}
