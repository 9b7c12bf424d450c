/**
 * The mesh's watch for peers that sign contradicting entries (docs/protocol.md §7.8). The mesh hands it every
 * peer entry it has verified (co-signatures it asked for, entries of relayed proofs); each is checked against what
 * the watch remembers of that peer, and a contradiction becomes portable evidence (protocol/evidence.ts).
 *
 * Detail: docs/protocol.md §7.8.
 */
import { claimContradiction, CONTRADICTION_EVIDENCE_KIND, CONTRADICTION_EVIDENCE_VERSION, type SignedClaim } from "../../protocol/evidence";
import { MAX_SIGNING_DELAY_NS } from "../../protocol/constants";
import { proofToJson } from "../../protocol/json";
import type { Address, Hex, TimeProof } from "../../protocol/types";
import { MAX_CONTRADICTION_REPORTS } from "../../wire/rest";
import type { ContradictionReport } from "../core/types";

/*
 * What it remembers per peer is bounded, and chosen for the rule: a contradiction needs two moments more than
 * MAX_SIGNING_DELAY_NS apart, so the last few entries in arrival order (a second of rounds) would never hold one.
 * Kept instead:
 * - checkpoints: an entry whenever its moment lies at least CHECKPOINT_SPACING_NS after the last checkpoint's, the
 *   newest MAX_CHECKPOINTS_PER_PEER of them (about 8 × MAX_SIGNING_DELAY_NS of history): a peer stamping a later
 *   entry with an old nodeTimestamp meets an older checkpoint signed "after" it;
 * - the entry with the largest nodeTimestamp seen: a peer stamping an entry ahead of its clock is met by every later
 *   honest entry, until one's moment has passed the lie by more than the signing delay.
 * A sample, not a proof of absence: a liar that keeps its nodeTimestamps consistent with its lies is not caught
 * here or anywhere (§7.8).
 */
/** Least moment spacing between two checkpoints of one peer, ns. */
export const CHECKPOINT_SPACING_NS = MAX_SIGNING_DELAY_NS / 4n;
/** Checkpoints kept per peer (oldest dropped first). */
export const MAX_CHECKPOINTS_PER_PEER = 32;

/** One verified entry of a peer, with the proof fields it signs (its evidence, should it contradict another). */
interface WatchedEntry extends SignedClaim {
  /** The proof cut down to this one entry: a complete §9.1 proof, the entry at index 0. */
  readonly proof: TimeProof;
}

interface PeerWindow {
  readonly checkpoints: WatchedEntry[];
  latestStamped: WatchedEntry | null;
}

/** A contradiction just found: what the mesh logs. */
export interface ContradictionFound {
  readonly report: ContradictionReport;
  /** True for the first contradiction of that peer (log it); later ones are only counted. */
  readonly first: boolean;
}

export class ContradictionWatch {
  readonly #windows = new Map<string, PeerWindow>();
  readonly #reports = new Map<string, ContradictionReport>();

  /**
   * Checks a verified entry of `nodeId` (its signature over `proof`'s fields and its `nodeTimestampNs`, already
   * recovered to that node by the caller) against the peer's window, then remembers it. `atNs`: this node's clock.
   */
  observe(nodeId: Address, proof: Pick<TimeProof, "nanoMoment" | "hardwareSignature" | "accuracy">, entry: Hex, nodeTimestampNs: bigint, atNs: bigint): ContradictionFound | null {
    const key = nodeId.toLowerCase();
    let window = this.#windows.get(key);
    if (window === undefined) {
      window = { checkpoints: [], latestStamped: null };
      this.#windows.set(key, window);
    }
    const observed: WatchedEntry = {
      proof: { nanoMoment: proof.nanoMoment, hardwareSignature: proof.hardwareSignature, accuracy: proof.accuracy, nodeSignature: entry },
      nanoMoment: proof.nanoMoment,
      accuracyNs: proof.accuracy,
      nodeTimestampNs,
    };
    const found = this.#check(nodeId, window, observed, atNs);
    remember(window, observed);
    return found;
  }

  /** The reports held, one per peer, in the order found (at most MAX_CONTRADICTION_REPORTS). */
  reports(): ContradictionReport[] {
    return [...this.#reports.values()].map((report) => ({ ...report }));
  }

  #check(nodeId: Address, window: PeerWindow, observed: WatchedEntry, atNs: bigint): ContradictionFound | null {
    const candidates = window.latestStamped === null ? window.checkpoints : [...window.checkpoints, window.latestStamped];
    let best: ReturnType<typeof claimContradiction<WatchedEntry>> = null;
    for (const held of candidates) {
      const contradiction = claimContradiction(held, observed);
      if (contradiction !== null && (best === null || contradiction.excessNs > best.excessNs)) best = contradiction;
    }
    if (best === null) return null;
    const key = nodeId.toLowerCase();
    const held = this.#reports.get(key);
    if (held !== undefined) {
      held.contradictionsTotal += 1;
      return { report: { ...held }, first: false };
    }
    const report: ContradictionReport = {
      nodeId,
      foundAtNs: atNs.toString(),
      contradictionsTotal: 1,
      excessNs: best.excessNs.toString(),
      evidence: {
        kind: CONTRADICTION_EVIDENCE_KIND,
        version: CONTRADICTION_EVIDENCE_VERSION,
        nodeId,
        proofs: [
          { entryIndex: 0, timeProof: proofToJson(best.earlier.proof) },
          { entryIndex: 0, timeProof: proofToJson(best.later.proof) },
        ],
      },
    };
    // Bounded: one report per peer, and a mesh has at most that many peers; beyond it, counted in the log only.
    if (this.#reports.size < MAX_CONTRADICTION_REPORTS) this.#reports.set(key, report);
    return { report: { ...report }, first: true };
  }
}

/** Adds `observed` to the window: a checkpoint when spaced from the last one, and the largest-timestamp slot. */
function remember(window: PeerWindow, observed: WatchedEntry): void {
  const last = window.checkpoints[window.checkpoints.length - 1];
  if (last === undefined || observed.nanoMoment - last.nanoMoment >= CHECKPOINT_SPACING_NS) {
    window.checkpoints.push(observed);
    if (window.checkpoints.length > MAX_CHECKPOINTS_PER_PEER) window.checkpoints.shift();
  }
  if (window.latestStamped === null || observed.nodeTimestampNs > window.latestStamped.nodeTimestampNs) window.latestStamped = observed;
}
