/**
 * A nanosecond wall clock from the host: the wall clock read ONCE (Date.now(), ms resolution) as an anchor, then
 * advanced by the monotonic high-resolution timer (process.hrtime.bigint()). It is monotonic (never steps back
 * when NTP adjusts the wall clock) at the cost of drifting from the wall clock by the host oscillator's error
 * over long runs; a real time card disciplines its oscillator to GPS/PTP instead.
 */
import { NS_PER_MILLISECOND } from "../../protocol/constants";

export interface HostClockSources {
  /** Wall clock, ms since the Unix epoch. */
  wallNowMs(): number;
  /** Monotonic timer, ns from an arbitrary origin. */
  monotonicNs(): bigint;
}

export const SYSTEM_CLOCK_SOURCES: HostClockSources = {
  wallNowMs: () => Date.now(),
  monotonicNs: () => process.hrtime.bigint(),
};

/** Returns a function reading ns since the Unix epoch, anchored once to the wall clock. */
export function createAnchoredClock(sources: HostClockSources = SYSTEM_CLOCK_SOURCES): () => bigint {
  const monotonicAnchorNs = sources.monotonicNs();
  const wallAnchorNs = BigInt(sources.wallNowMs()) * NS_PER_MILLISECOND;
  return () => wallAnchorNs + (sources.monotonicNs() - monotonicAnchorNs);
}
