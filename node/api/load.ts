/**
 * The node's `currentLoad` (GET /node/info, docs/protocol.md §8): this process's event-loop utilisation over the
 * last sampling period (about a second), 0..1, from node:perf_hooks. Sampled by an unref'd timer, never per request.
 */
import { performance, type EventLoopUtilization } from "node:perf_hooks";

export const LOAD_SAMPLE_MS = 1_000;

export interface LoadGauge {
  /** Utilisation over the last complete period (0 before the first one ends). */
  current(): number;
  stop(): void;
}

export function startLoadGauge(periodMs: number = LOAD_SAMPLE_MS): LoadGauge {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  let value = 0;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    value = performance.eventLoopUtilization(now, last).utilization;
    last = now;
  }, periodMs);
  timer.unref();
  return {
    current: () => Math.min(1, Math.max(0, value)),
    stop: () => clearInterval(timer),
  };
}
