/**
 * Node selection of the client library (docs/protocol.md §8): the score of each node and the pick among the best
 * five. Pure: inputs in, choice out; the random source is injected.
 *
 *   score = hardwareAccuracy × 40 + (100 − avgLatencyMs) × 0.3 + recentAccuracyScore × 20 + (1 − currentLoad) × 10
 *
 * Inputs, each clamped to its range:
 * - hardwareAccuracy ∈ [0, 1]: from the accuracy the node advertises (GET /node/info `accuracyNs`):
 *   1 − min(accuracyNs, 1 ms) / 1 ms, so 50 ns scores 0.99995, 100 µs 0.9, 1 ms and worse 0; unknown 0.
 * - avgLatencyMs ∈ [0, 100]: this client's moving average (weight 0.2 per answer) of the node's answer time, ms;
 *   unknown 100 (the node has not answered yet).
 * - recentAccuracyScore ∈ [0, 1]: the share of the node's last 20 answers that were a well-formed proof within the
 *   client's required accuracy; failures count as misses; no answers yet: 0.5 (neutral).
 * - currentLoad ∈ [0, 1]: the node's event-loop utilisation over about a second, as it reports it (GET /node/info
 *   `currentLoad`); unknown 1.
 */

export interface NodeScoreInputs {
  readonly hardwareAccuracy: number;
  readonly avgLatencyMs: number;
  readonly recentAccuracyScore: number;
  readonly currentLoad: number;
}

/** How many of the best-scored nodes a request picks among (uniformly). */
export const SELECTION_POOL = 5;
/** Accuracy at which hardwareAccuracy reaches 0, ns. */
export const HARDWARE_ACCURACY_SCALE_NS = 1_000_000;

function clamp(value: number, low: number, high: number): number {
  if (Number.isNaN(value)) return low;
  return Math.min(high, Math.max(low, value));
}

/** §8's score of one node. */
export function nodeScore(inputs: NodeScoreInputs): number {
  return (
    clamp(inputs.hardwareAccuracy, 0, 1) * 40 +
    (100 - clamp(inputs.avgLatencyMs, 0, 100)) * 0.3 +
    clamp(inputs.recentAccuracyScore, 0, 1) * 20 +
    (1 - clamp(inputs.currentLoad, 0, 1)) * 10
  );
}

/** hardwareAccuracy from an advertised accuracy in ns (module comment); undefined → 0. */
export function hardwareAccuracyOf(accuracyNs: number | undefined): number {
  if (accuracyNs === undefined || !Number.isFinite(accuracyNs) || accuracyNs < 0) return 0;
  return 1 - Math.min(accuracyNs, HARDWARE_ACCURACY_SCALE_NS) / HARDWARE_ACCURACY_SCALE_NS;
}

/**
 * The order in which a request tries the nodes: first one picked uniformly at random among the SELECTION_POOL
 * highest scores, then every other node by descending score (failover). Ties keep the given order.
 */
export function selectionOrder<T>(nodes: readonly T[], scoreOf: (node: T) => number, random: () => number = Math.random): T[] {
  const ranked = nodes.map((node, index) => ({ node, index, score: scoreOf(node) })).sort((a, b) => b.score - a.score || a.index - b.index);
  if (ranked.length === 0) return [];
  const pool = Math.min(SELECTION_POOL, ranked.length);
  const pick = Math.min(pool - 1, Math.floor(random() * pool));
  const [first] = ranked.splice(pick, 1);
  return [first!.node, ...ranked.map((entry) => entry.node)];
}
