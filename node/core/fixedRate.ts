/**
 * The pace of attestation ticks, shared by the attestor's timer (attestor.ts) and a self-ticking signer thread
 * (signerThread.ts): a fixed-rate schedule without catch-up bursts.
 */
const NS_PER_MS = 1_000_000n;

/**
 * The tick after one due at `previousDueNs`: one interval later, or now when that has already passed (a late tick
 * moves the schedule instead of causing a burst). `delayMs` is the timer delay to it, at least 1 ms (Node's timers
 * have millisecond granularity).
 */
export function nextFixedRateTick(previousDueNs: bigint, intervalNs: bigint, nowNs: bigint): { dueNs: bigint; delayMs: number } {
  const dueNs = previousDueNs + intervalNs < nowNs ? nowNs : previousDueNs + intervalNs;
  return { dueNs, delayMs: Math.max(1, Number((dueNs - nowNs) / NS_PER_MS)) };
}
