/**
 * The mesh's convergence state (docs/protocol.md §7.4), a pure state machine fed by round outcomes and the count
 * of reachable peers. The exact strings are part of the protocol (the temporal JSON-RPC reports them):
 *
 *   Initializing ──first successful round──► Converging ──stable window──► Converged
 *        │                                        ▲   │                        │
 *        │                                        │   └──failures / peers lost─┤
 *        └──failures / peers lost──► Degraded ────┘ (a successful round)       ▼
 *                                                                          Degraded
 *
 * Detail: docs/protocol.md §7.4.
 */
import { consensusThreshold } from "../../protocol/consensus";
import type { ConvergenceState } from "../core/types";

/*
 * - Converged: the last `stableRounds` rounds all succeeded, their consensus offsets (median − this node's moment)
 *   lie within `windowNs` of each other, and reachable peers + 1 ≥ the threshold. It is left only for Degraded.
 * - Degraded: `failuresToDegrade` consecutive failed rounds, or reachable peers + 1 below the threshold, once the
 *   node has had a successful round (before its first one it stays Initializing, whatever fails).
 * - A successful round counts as evidence of reachability too: its valid responders answered just now, whatever the
 *   reachability registers (shifted once per probe interval) say yet.
 * - timeQuality = ⌊10,000 × stateWeight × participation × W / (W + lastAccuracy)⌋ with stateWeight Converged 1,
 *   Converging ½, Degraded ¼, Initializing 0; participation = valid readings of the last successful round / n.
 */
export type { ConvergenceState } from "../core/types";

export type RoundOutcome =
  | { readonly ok: true; readonly atNs: bigint; readonly consensusOffsetNs: bigint; readonly accuracyNs: number; readonly validResponders: number }
  | { readonly ok: false; readonly atNs: bigint; readonly error: string };

export interface ConvergenceTrackerOptions {
  /** n, this node included. */
  readonly memberCount: number;
  readonly windowNs: bigint;
  /** Consecutive stable successes that make Converged (default 8). */
  readonly stableRounds?: number;
  /** Consecutive failures that make Degraded (default 3). */
  readonly failuresToDegrade?: number;
}

export interface ConvergenceSnapshot {
  readonly state: ConvergenceState;
  readonly timeQuality: number;
  readonly consensusOffsetNs: bigint | null;
  readonly lastError: string | null;
  readonly peerCount: number;
  readonly threshold: number;
}

const STATE_WEIGHT: Record<ConvergenceState, number> = { Initializing: 0, Converging: 0.5, Converged: 1, Degraded: 0.25 };

export class ConvergenceTracker {
  readonly #memberCount: number;
  readonly #threshold: number;
  readonly #windowNs: bigint;
  readonly #stableRounds: number;
  readonly #failuresToDegrade: number;
  #state: ConvergenceState = "Initializing";
  /** Offsets of the current run of consecutive successes (at most stableRounds). */
  #recentOffsetsNs: bigint[] = [];
  #consecutiveFailures = 0;
  #reachablePeers = 0;
  #lastSuccess: { consensusOffsetNs: bigint; accuracyNs: number; validResponders: number } | null = null;
  #lastError: string | null = null;

  constructor(options: ConvergenceTrackerOptions) {
    this.#memberCount = options.memberCount;
    this.#threshold = consensusThreshold(options.memberCount);
    this.#windowNs = options.windowNs;
    this.#stableRounds = options.stableRounds ?? 8;
    this.#failuresToDegrade = options.failuresToDegrade ?? 3;
  }

  observeRound(outcome: RoundOutcome): void {
    if (outcome.ok) {
      this.#consecutiveFailures = 0;
      this.#lastError = null;
      this.#lastSuccess = { consensusOffsetNs: outcome.consensusOffsetNs, accuracyNs: outcome.accuracyNs, validResponders: outcome.validResponders };
      this.#reachablePeers = Math.max(this.#reachablePeers, outcome.validResponders - 1);
      this.#recentOffsetsNs.push(outcome.consensusOffsetNs);
      if (this.#recentOffsetsNs.length > this.#stableRounds) this.#recentOffsetsNs.shift();
      if (this.#state === "Initializing" || this.#state === "Degraded") this.#state = "Converging";
    } else {
      this.#consecutiveFailures += 1;
      this.#lastError = outcome.error;
      this.#recentOffsetsNs = [];
      if (this.#state !== "Initializing" && this.#consecutiveFailures >= this.#failuresToDegrade) this.#state = "Degraded";
    }
    this.#settle();
  }

  observePeers(reachablePeers: number): void {
    this.#reachablePeers = reachablePeers;
    this.#settle();
  }

  get state(): ConvergenceState {
    return this.#state;
  }

  get consensusOffsetNs(): bigint | null {
    return this.#lastSuccess?.consensusOffsetNs ?? null;
  }

  get lastError(): string | null {
    return this.#lastError;
  }

  timeQuality(): number {
    const last = this.#lastSuccess;
    if (last === null) return 0;
    const participation = last.validResponders / this.#memberCount;
    const windowNs = Number(this.#windowNs);
    const accuracyFactor = windowNs === 0 && last.accuracyNs === 0 ? 1 : windowNs / (windowNs + last.accuracyNs);
    return Math.floor(10_000 * STATE_WEIGHT[this.#state] * participation * accuracyFactor);
  }

  snapshot(): ConvergenceSnapshot {
    return {
      state: this.#state,
      timeQuality: this.timeQuality(),
      consensusOffsetNs: this.consensusOffsetNs,
      lastError: this.#lastError,
      peerCount: this.#reachablePeers,
      threshold: this.#threshold,
    };
  }

  /** Applies the rules that depend on the current evidence (stability, peers) after any observation. */
  #settle(): void {
    const enoughPeers = this.#reachablePeers + 1 >= this.#threshold;
    if (!enoughPeers && (this.#state === "Converged" || this.#state === "Converging")) {
      this.#state = "Degraded";
      this.#recentOffsetsNs = [];
      return;
    }
    // Stability gates entry only: once Converged, only failed rounds or lost peers leave it (no flapping on jitter,
    // since every successful round already has this node within the window of the median).
    if (this.#state === "Converging" && enoughPeers && this.#stable()) this.#state = "Converged";
  }

  /** The last stableRounds successes agree with each other within the window. */
  #stable(): boolean {
    const offsets = this.#recentOffsetsNs;
    if (offsets.length < this.#stableRounds) return false;
    let min = offsets[0]!;
    let max = offsets[0]!;
    for (const offset of offsets) {
      if (offset < min) min = offset;
      if (offset > max) max = offset;
    }
    return max - min <= this.#windowNs;
  }
}
