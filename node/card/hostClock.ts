/**
 * A nanosecond wall clock from the host: the wall clock read once, precisely, as an anchor, then advanced by the
 * monotonic high-resolution timer (process.hrtime.bigint()). It is monotonic (never steps back when NTP adjusts the
 * wall clock) at the cost of drifting from the wall clock by the host oscillator's error over long runs; a real time
 * card disciplines its oscillator to GPS/PTP instead.
 *
 * Detail: docs/protocol.md §14.16.
 */
import { NS_PER_MILLISECOND } from "../../protocol/constants";

/*
 * The anchor: Date.now() is the realtime clock truncated to whole milliseconds, so reading it once is up to 1 ms
 * off, and two dev nodes on one host anchored that way disagree by up to 1 ms — more than a mesh round's window.
 * Instead the anchor is taken at a millisecond *edge*: a short spin reads the monotonic timer, then Date.now(),
 * until Date.now() changes; the realtime clock crossed that millisecond between the monotonic reads just before the
 * previous and just after the changed reading, and the midpoint of that span is the anchor, with half the span
 * (typically well under a microsecond) as its uncertainty. Several edges are combined by intersecting what each
 * says about the offset between the two clocks (intersectAnchors), so that spans widened by preemption still narrow
 * it down; the spin is bounded (ANCHOR_MAX_SPIN_MS per edge), and without an edge (a frozen or fake clock) the
 * classic single read is used with its honest 1 ms uncertainty.
 */
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

/** Millisecond edges sampled per anchoring; the tightest wins. */
export const ANCHOR_EDGES = 3;
/** Longest spin for one edge, ms (an edge comes within 1 ms of real time; the rest is margin for a busy host). */
export const ANCHOR_MAX_SPIN_MS = 3;
/** Most reads per edge whatever the monotonic timer says (a frozen or fake timer must not spin for ever). */
const ANCHOR_MAX_READS = 200_000;

/** Where the wall clock was on the monotonic timer, and how well that is known. */
export interface WallClockAnchor {
  /** Wall clock at the anchor, ns since the Unix epoch. */
  readonly wallNs: bigint;
  /** Monotonic timer at the same instant, ns. */
  readonly monotonicNs: bigint;
  /** How far the anchor may be off, ns (half the span the edge was caught in; 1 ms without an edge). */
  readonly uncertaintyNs: bigint;
}

/** One millisecond edge of the wall clock located on the monotonic timer, or null when none came in time. */
function catchEdge(sources: HostClockSources): WallClockAnchor | null {
  const spinLimitNs = BigInt(ANCHOR_MAX_SPIN_MS) * NS_PER_MILLISECOND;
  let beforeNs = sources.monotonicNs();
  let wallMs = sources.wallNowMs();
  const startNs = beforeNs;
  for (let reads = 0; reads < ANCHOR_MAX_READS; reads += 1) {
    const readBeforeNs = sources.monotonicNs();
    const nextWallMs = sources.wallNowMs();
    if (nextWallMs !== wallMs) {
      // The edge lies after the read that still showed `wallMs` began (beforeNs) and before this one ended.
      const afterNs = sources.monotonicNs();
      return {
        wallNs: BigInt(nextWallMs) * NS_PER_MILLISECOND,
        monotonicNs: (beforeNs + afterNs) / 2n,
        uncertaintyNs: (afterNs - beforeNs + 1n) / 2n,
      };
    }
    beforeNs = readBeforeNs;
    wallMs = nextWallMs;
    if (readBeforeNs - startNs > spinLimitNs) return null;
  }
  return null;
}

/**
 * What two anchors together say about the offset between the wall clock and the monotonic timer (wallNs -
 * monotonicNs): each confines it to ±uncertaintyNs around its own, so the truth lies in both intervals. Null when the
 * intervals are disjoint, which means the wall clock was stepped between them: then neither may be combined with the
 * other. Sound because Linux slews CLOCK_REALTIME and CLOCK_MONOTONIC alike, so their offset moves only by steps.
 */
export function intersectAnchors(first: WallClockAnchor, second: WallClockAnchor): WallClockAnchor | null {
  const offsetOf = (anchor: WallClockAnchor): bigint => anchor.wallNs - anchor.monotonicNs;
  const lowNs = maxOf(offsetOf(first) - first.uncertaintyNs, offsetOf(second) - second.uncertaintyNs);
  const highNs = minOf(offsetOf(first) + first.uncertaintyNs, offsetOf(second) + second.uncertaintyNs);
  if (lowNs > highNs) return null;
  // Rounded up, so that the midpoint ± uncertainty still covers [lowNs, highNs].
  const uncertaintyNs = (highNs - lowNs + 1n) / 2n;
  const offsetNs = lowNs + uncertaintyNs;
  return { wallNs: second.monotonicNs + offsetNs, monotonicNs: second.monotonicNs, uncertaintyNs };
}

/** Folds a new anchor into what is known: their intersection, or the newer alone after a wall-clock step. */
export function refineAnchor(known: WallClockAnchor | null, next: WallClockAnchor): WallClockAnchor {
  if (known === null) return next;
  return intersectAnchors(known, next) ?? next;
}

const maxOf = (a: bigint, b: bigint): bigint => (a > b ? a : b);
const minOf = (a: bigint, b: bigint): bigint => (a < b ? a : b);

/**
 * Anchors the monotonic timer to the wall clock (module comment): `edges` edges (ANCHOR_EDGES by default; each costs
 * up to 1 ms of spinning, so a driver that re-anchors often takes one), combined by refineAnchor.
 */
export function anchorToWallClock(sources: HostClockSources = SYSTEM_CLOCK_SOURCES, edges: number = ANCHOR_EDGES): WallClockAnchor {
  let best: WallClockAnchor | null = null;
  for (let edge = 0; edge < edges; edge += 1) {
    const anchor = catchEdge(sources);
    if (anchor !== null) best = refineAnchor(best, anchor);
  }
  if (best !== null) return best;
  // No edge: the wall clock is frozen or coarse. A single read is somewhere in its millisecond: say so.
  const monotonicNs = sources.monotonicNs();
  return { wallNs: BigInt(sources.wallNowMs()) * NS_PER_MILLISECOND + NS_PER_MILLISECOND / 2n, monotonicNs, uncertaintyNs: NS_PER_MILLISECOND / 2n };
}

/** The clock an anchor defines: ns since the Unix epoch, advanced by the monotonic timer of `sources`. */
export function clockFromAnchor(anchor: WallClockAnchor, sources: HostClockSources = SYSTEM_CLOCK_SOURCES): () => bigint {
  return () => anchor.wallNs + (sources.monotonicNs() - anchor.monotonicNs);
}

/** Returns a function reading ns since the Unix epoch, anchored once to the wall clock (anchorToWallClock). */
export function createAnchoredClock(sources: HostClockSources = SYSTEM_CLOCK_SOURCES): () => bigint {
  return clockFromAnchor(anchorToWallClock(sources), sources);
}
