/**
 * What this node knows about each mesh peer (docs/protocol.md §7.4): the clock filter of its exchanges (offset,
 * delay, jitter of the minimum-delay sample among the last 8), the 8-bit reachability register, when it was
 * last heard, its card from its hello, its role from this node's configuration (meshPeers), and whether it is excluded (a verified tamper alert about
 * itself, or a co-signature that did not check). Pure bookkeeping: the mesh feeds it.
 */
import type { Address, Hex } from "../../protocol/types";
import type { MeshRole } from "../../wire/mesh";
import type { MeshPeerReport } from "../core/types";
import { ClockFilter, ReachRegister } from "./clockFilter";

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
  };
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
    faultsTotal: peer.faultsTotal,
  };
}
