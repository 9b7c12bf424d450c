/**
 * What this node knows about each mesh peer (docs/protocol.md §7.4): the clock filter of its exchanges (offset,
 * delay, jitter of the minimum-delay sample among the last 8), the 8-bit reachability register, when it was
 * last heard, its card from its hello, its role from this node's configuration (meshPeers), whether it is excluded (a verified tamper alert about
 * itself, or a co-signature that did not check), and whether it is absent (its recent exchanges went unanswered:
 * rounds stop waiting for it until it answers a probe). Pure bookkeeping: the mesh feeds it.
 */
import type { Address, Hex } from "../../protocol/types";
import type { MeshRole } from "../../wire/mesh";
import type { MeshPeerReport } from "../core/types";
import { ClockFilter, ReachRegister } from "./clockFilter";

/**
 * Exchanges (a round's or a probe's) a peer may leave unanswered in a row before it is absent: rounds then no
 * longer send it their exchange, so they stop waiting out meshRoundTimeoutMs for a member that is down; probes,
 * every meshProbeIntervalMs, go on, and the first one it answers brings it back. Three: one lost packet or one
 * slow answer is not absence, and a member that is down costs at most three rounds their timeout.
 */
export const MESH_ABSENT_AFTER_MISSED_EXCHANGES = 3;

export interface PeerRecord {
  readonly nodeId: Address;
  readonly filter: ClockFilter;
  readonly reach: ReachRegister;
  /** Whether the current probe interval's probe was answered (shifted into `reach` at the next probe). */
  answeredSinceLastProbe: boolean;
  /** This node's clock when the peer last answered, ns; null when never. */
  lastSeenNs: bigint | null;
  cardId: Hex | null;
  cardPublicKey: Hex | null;
  cardAccuracyNs: number | null;
  /** The card's certificate chain from the peer's hello (leaf first), for the node's trust store. */
  certificateChainPem: readonly string[];
  /** By this node's meshPeers entry, never the peer's word (its hellos must agree, or they are refused). */
  readonly role: MeshRole;
  version: string | null;
  /** The convergence state the peer reported in its last answer. */
  reportedState: string | null;
  /** Why the peer is out of rounds and co-signing (a tamper alert it signed); null when it takes part. */
  excludedReason: string | null;
  /** Rounds in which its answer was refused (bad co-signature, reading outside the window), since start. */
  faultsTotal: number;
  /** Its exchanges left unanswered since its last answer (bounded: counting stops at the absence threshold). */
  missedExchangesInARow: number;
}

export function newPeerRecord(nodeId: Address, role: MeshRole): PeerRecord {
  return {
    nodeId,
    role,
    filter: new ClockFilter(),
    reach: new ReachRegister(),
    answeredSinceLastProbe: false,
    lastSeenNs: null,
    cardId: null,
    cardPublicKey: null,
    cardAccuracyNs: null,
    certificateChainPem: [],
    version: null,
    reportedState: null,
    excludedReason: null,
    faultsTotal: 0,
    missedExchangesInARow: 0,
  };
}

/** Whether rounds skip the peer: its last MESH_ABSENT_AFTER_MISSED_EXCHANGES exchanges went unanswered. */
export function isAbsent(peer: PeerRecord): boolean {
  return peer.missedExchangesInARow >= MESH_ABSENT_AFTER_MISSED_EXCHANGES;
}

/** An exchange with the peer went unanswered. True when that made it absent (it was not before). */
export function recordMissedExchange(peer: PeerRecord): boolean {
  if (isAbsent(peer)) return false;
  peer.missedExchangesInARow += 1;
  return isAbsent(peer);
}

/** The peer answered an exchange. True when it was absent until now. */
export function recordAnsweredExchange(peer: PeerRecord): boolean {
  const wasAbsent = isAbsent(peer);
  peer.missedExchangesInARow = 0;
  return wasAbsent;
}

/** The peer as GET /mesh/state reports it. */
export function peerReport(peer: PeerRecord): MeshPeerReport {
  const best = peer.filter.best();
  return {
    nodeId: peer.nodeId,
    role: peer.role,
    cardId: peer.cardId,
    reachable: peer.reach.reachable,
    reach: peer.reach.value,
    offsetNs: best === null ? null : best.offsetNs.toString(),
    delayNs: best === null ? null : best.delayNs.toString(),
    jitterNs: best === null ? null : peer.filter.jitterNs().toString(),
    lastSeenNs: peer.lastSeenNs === null ? null : peer.lastSeenNs.toString(),
    reportedState: peer.reportedState,
    excluded: peer.excludedReason !== null,
    excludedReason: peer.excludedReason,
    absent: isAbsent(peer),
    faultsTotal: peer.faultsTotal,
  };
}
