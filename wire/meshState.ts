/**
 * The mesh as a node reports it (`GET /mesh/state`, health, node info, the gateway's temporal_getMeshState): the
 * shape node/core builds and every reader (REST, the temporal gateway, in process or over REST) takes. Its REST
 * schema is wire/rest.ts MeshStateBody; ns values are decimal strings.
 */
import type { ContradictionEvidenceJson } from "../protocol/evidence";
import type { Address, Hex } from "../protocol/types";

/** Convergence of the node's mesh (docs/protocol.md §7.4): these exact strings. */
export type ConvergenceState = "Initializing" | "Converging" | "Converged" | "Degraded";

/** One mesh peer as this node sees it (node/mesh/peers.ts builds it); ns values as decimal strings. */
export interface MeshPeerReport {
  nodeId: Address;
  role: string | null;
  cardId: Hex | null;
  reachable: boolean;
  /** The reachability register, 0–255 (bit 0: the latest probe interval). */
  reach: number;
  /** Peer clock − this node's clock from the best filter sample; null without samples. */
  offsetNs: string | null;
  delayNs: string | null;
  jitterNs: string | null;
  lastSeenNs: string | null;
  reportedState: string | null;
  excluded: boolean;
  excludedReason: string | null;
  /** Its recent exchanges went unanswered: rounds do not wait for it, probes go on until it answers (§7.1). */
  absent: boolean;
  faultsTotal: number;
}

/** The mesh as this node sees it (`GET /mesh/state`, health, node info). A lone node: Initializing, 0 peers. */
export interface MeshStateReport {
  convergenceState: ConvergenceState;
  /** 0–10,000 (docs/protocol.md §7.4). */
  timeQuality: number;
  /** Reachable peers (not counting this node). */
  peerCount: number;
  /** n (this node included) and ⌈2n/3⌉. */
  members: number;
  threshold: number;
  /** The last successful round's median − this node's moment, ns (signed decimal); null before one. */
  consensusOffsetNs: string | null;
  /** The last round's ConsensusError message (or other failure), null after a success. */
  lastError: string | null;
  role: string;
  /** Rounds this node proposed that succeeded, and those that failed by error message. */
  roundsSucceeded: number;
  roundsFailed: Record<string, number>;
  /** Per peer: filter, reachability, exclusion (node/mesh/peers.ts PeerReport). */
  peers: readonly MeshPeerReport[];
  /** Verified tamper alerts held (this node's own and its peers'), oldest first (docs/protocol.md §7.6). */
  tamperAlerts: readonly TamperAlertReport[];
  /** Peers caught signing contradicting entries, the first evidence of each (docs/protocol.md §7.8). */
  contradictions: readonly ContradictionReport[];
  /**
   * What this node refused, counted since it started: mesh packets dropped by reason (wrong source, replay,
   * over a peer's budget, …: docs/protocol.md §7.3), co-sign requests refused (all, and those refused by a clock
   * rule of §7.5 by rule: accuracy-over-bound, future-dated, backdated), relayed proofs refused by reason.
   */
  refused: { packets: Record<string, number>; coSignRequests: number; coSignRequestsByRule: Record<string, number>; relayedProofs: Record<string, number> };
}

/** A signed tamper alert (wire/rest.ts TamperAlertJson): portable evidence for an on-chain revocation. */
export interface TamperAlertReport {
  nodeId: Address;
  cardId: Hex;
  reason: string;
  /** ns, decimal. */
  atNs: string;
  /** 64-byte compact signature of the node it is about, 0x-hex. */
  signature: Hex;
}

/** A peer caught signing contradicting entries (wire/rest.ts ContradictionReportJson; node/mesh/contradictions.ts). */
export interface ContradictionReport {
  nodeId: Address;
  /** ns, decimal: this node's clock when it found the first contradiction. */
  foundAtNs: string;
  /** Entries of that peer found contradicting an earlier one, since start. */
  contradictionsTotal: number;
  /** ns, decimal: by how much the first contradiction exceeds the rule. */
  excessNs: string;
  evidence: ContradictionEvidenceJson;
}

