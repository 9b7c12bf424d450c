/**
 * Node selection of the client library (docs/protocol.md §8): what each input of the score means, the score, and
 * the pick among the best five. Pure: observations in, inputs, scores and an order out; the random source is
 * injected. client/cluster.ts does the measuring and the requests.
 *
 *   score = hardwareAccuracy × 40 + (100 − avgLatencyMs) × 0.3 + recentAccuracyScore × 20 + (1 − currentLoad) × 10
 *
 * Detail: docs/protocol.md §8.
 */

/*
 * Inputs, each clamped to its range (so the score is always within 0..100):
 * - hardwareAccuracy ∈ [0, 1]: the accuracy the node advertises (GET /node/info `accuracyNs`) on a log scale,
 *   log10(1 ms / accuracyNs) / log10(1 ms / 10 ns): 10 ns and better 1, each decade worse 0.2 less, 1 ms and worse
 *   0; unknown 0. Not the linear 1 − accuracyNs / 1 ms: that gives every card better than 10 µs 0.99 or more, so the
 *   heaviest weight of the score could not tell a GPS-disciplined card (~50 ns) from one a thousand times worse.
 * - avgLatencyMs ∈ [0, 100]: this client's moving average of the node's answer time, ms (the newest answer weighs
 *   0.2); unknown 100 (the node has not answered yet).
 * - recentAccuracyScore ∈ [0, 1]: the share of the node's last 20 answers that were a well-formed proof within the
 *   client's required accuracy; failures count as misses; no answers yet 0.5 (neutral: neither trusted nor shunned).
 * - currentLoad ∈ [0, 1]: the node's event-loop utilisation over about a second, as it reports it (GET /node/info
 *   `currentLoad`); unknown 1 (a node that does not say is not assumed idle).
 *
 * NaN is a bug in the caller, never a value to clamp: it throws a RangeError, as a random source outside [0, 1) does.
 */
export interface NodeScoreInputs {
  readonly hardwareAccuracy: number;
  readonly avgLatencyMs: number;
  readonly recentAccuracyScore: number;
  readonly currentLoad: number;
}

/** What a client has observed of one node; undefined and empty mean "not known yet". */
export interface NodeObservations {
  /** The node's advertised accuracy, ns (GET /node/info `accuracyNs`). */
  readonly accuracyNs?: number | undefined;
  /** Moving average of its answer times, ms (nextAvgLatencyMs). */
  readonly avgLatencyMs?: number | undefined;
  /** Its last RECENT_ANSWERS outcomes, oldest first: true for a well-formed proof within the required accuracy. */
  readonly recentOutcomes: readonly boolean[];
  /** Its reported event-loop utilisation, 0..1 (GET /node/info `currentLoad`). */
  readonly currentLoad?: number | undefined;
}

/** How many of the best-scored nodes a request picks among (uniformly). */
export const SELECTION_POOL = 5;
/** Advertised accuracy at which hardwareAccuracy reaches 1 (no card is told apart below it), ns. */
export const HARDWARE_ACCURACY_BEST_NS = 10;
/** Advertised accuracy at which hardwareAccuracy reaches 0, ns (1 ms). */
export const HARDWARE_ACCURACY_WORST_NS = 1_000_000;
/** Answers remembered per node for recentAccuracyScore. */
export const RECENT_ANSWERS = 20;
/** Weight of the newest answer time in avgLatencyMs: about the last ten answers count. */
export const LATENCY_WEIGHT = 0.2;
/** avgLatencyMs of a node that has not answered yet, and the ceiling of the input. */
export const MAX_LATENCY_MS = 100;
/** recentAccuracyScore of a node without answers yet. */
export const NEUTRAL_RECENT_ACCURACY_SCORE = 0.5;
/** currentLoad of a node that does not report one. */
export const UNKNOWN_LOAD = 1;

function clamp(name: string, value: number, low: number, high: number): number {
  if (Number.isNaN(value)) throw new RangeError(`${name} is NaN`);
  return Math.min(high, Math.max(low, value));
}

/** §8's score of one node, 0..100. */
export function nodeScore(inputs: NodeScoreInputs): number {
  return (
    clamp("hardwareAccuracy", inputs.hardwareAccuracy, 0, 1) * 40 +
    (MAX_LATENCY_MS - clamp("avgLatencyMs", inputs.avgLatencyMs, 0, MAX_LATENCY_MS)) * 0.3 +
    clamp("recentAccuracyScore", inputs.recentAccuracyScore, 0, 1) * 20 +
    (1 - clamp("currentLoad", inputs.currentLoad, 0, 1)) * 10
  );
}

/** hardwareAccuracy of an advertised accuracy in ns (module comment); undefined (not known) → 0. */
export function hardwareAccuracyOf(accuracyNs: number | undefined): number {
  if (accuracyNs === undefined) return 0;
  if (Number.isNaN(accuracyNs) || accuracyNs < 0) throw new RangeError(`accuracyNs must be a number ≥ 0, got ${accuracyNs}`);
  if (accuracyNs <= HARDWARE_ACCURACY_BEST_NS) return 1;
  const decades = Math.log10(HARDWARE_ACCURACY_WORST_NS / accuracyNs) / Math.log10(HARDWARE_ACCURACY_WORST_NS / HARDWARE_ACCURACY_BEST_NS);
  return Math.max(0, decades);
}

/** recentAccuracyScore of a node's last outcomes (true: accurate proof); none yet → neutral. */
export function recentAccuracyScoreOf(outcomes: readonly boolean[]): number {
  const recent = outcomes.slice(-RECENT_ANSWERS);
  if (recent.length === 0) return NEUTRAL_RECENT_ACCURACY_SCORE;
  return recent.filter(Boolean).length / recent.length;
}

/** The outcomes with `outcome` appended, keeping the last RECENT_ANSWERS. */
export function withOutcome(outcomes: readonly boolean[], outcome: boolean): boolean[] {
  return [...outcomes, outcome].slice(-RECENT_ANSWERS);
}

/** The moving average after one more answer that took `sampleMs`; the first answer is taken as is. */
export function nextAvgLatencyMs(previousMs: number | undefined, sampleMs: number): number {
  if (Number.isNaN(sampleMs) || sampleMs < 0) throw new RangeError(`an answer time must be a number ≥ 0 ms, got ${sampleMs}`);
  return previousMs === undefined ? sampleMs : previousMs + LATENCY_WEIGHT * (sampleMs - previousMs);
}

/** The score's inputs from what was observed of a node, with the unknowns of the module comment. */
export function scoreInputsOf(observed: NodeObservations): NodeScoreInputs {
  return {
    hardwareAccuracy: hardwareAccuracyOf(observed.accuracyNs),
    avgLatencyMs: observed.avgLatencyMs ?? MAX_LATENCY_MS,
    recentAccuracyScore: recentAccuracyScoreOf(observed.recentOutcomes),
    currentLoad: observed.currentLoad ?? UNKNOWN_LOAD,
  };
}

/**
 * The order in which a request tries the nodes: first one picked uniformly at random among the SELECTION_POOL
 * highest scores, then every other node by descending score (failover). Ties keep the given order, so the pool is
 * exactly five even when the fifth score is shared. `random` returns numbers in [0, 1), as Math.random.
 */
export function selectionOrder<T>(nodes: readonly T[], scoreOf: (node: T) => number, random: () => number = Math.random): T[] {
  const ranked = nodes.map((node, index) => ({ node, index, score: scoreOf(node) }));
  for (const entry of ranked) if (Number.isNaN(entry.score)) throw new RangeError(`the score of node ${entry.index} is NaN`);
  ranked.sort((a, b) => b.score - a.score || a.index - b.index);
  if (ranked.length === 0) return [];
  const draw = random();
  if (!(draw >= 0 && draw < 1)) throw new RangeError(`the random source must return a number in [0, 1), got ${draw}`);
  const pool = Math.min(SELECTION_POOL, ranked.length);
  // min: a product of rounding can reach `pool` for a draw just below 1.
  const [first] = ranked.splice(Math.min(pool - 1, Math.floor(draw * pool)), 1);
  return [first!.node, ...ranked.map((entry) => entry.node)];
}
