/**
 * Per-peer clock measurement, as ntpd and chrony keep it (docs/protocol.md §7.4): a filter over the last
 * CLOCK_FILTER_SIZE exchanges whose best sample is the one with the smallest round-trip delay (the one least
 * disturbed by queueing, so its offset is the most trustworthy), the jitter of the samples around it, and NTP's
 * 8-bit reachability register. Pure bookkeeping: no clock, no I/O.
 */

export const CLOCK_FILTER_SIZE = 8;

/** One exchange's result (protocol/consensus.ts exchangeSample), with when it was taken. */
export interface PeerSample {
  /** Peer clock − this node's clock, ns. */
  readonly offsetNs: bigint;
  /** Round trip minus the peer's processing, ns. */
  readonly delayNs: bigint;
  /** This node's clock when the sample was taken, ns. */
  readonly atNs: bigint;
}

/**
 * Integer square root of a non-negative bigint, rounded up. Newton's iteration from a power of two above the root:
 * it decreases to the floor in O(log log value) steps whatever the value (a peer's absurd offsets included; a
 * float estimate corrected one by one would take ~2^(bits/2 − 53) steps).
 */
export function ceilSqrt(value: bigint): bigint {
  if (value <= 0n) return 0n;
  let x = 1n << ((BigInt(value.toString(2).length) + 1n) / 2n); // ≥ √value
  for (;;) {
    const next = (x + value / x) >> 1n;
    if (next >= x) break;
    x = next;
  }
  return x * x === value ? x : x + 1n;
}

export class ClockFilter {
  readonly #samples: PeerSample[] = [];

  /** Keeps the sample, dropping the oldest beyond CLOCK_FILTER_SIZE. */
  add(sample: PeerSample): void {
    this.#samples.push(sample);
    if (this.#samples.length > CLOCK_FILTER_SIZE) this.#samples.shift();
  }

  /** The minimum-delay sample among those kept (the newest of equals); null when empty. */
  best(): PeerSample | null {
    let best: PeerSample | null = null;
    for (const sample of this.#samples) if (best === null || sample.delayNs <= best.delayNs) best = sample;
    return best;
  }

  /** RMS of the kept samples' offsets around the best one's, rounded up, ns; 0 with fewer than 2 samples. */
  jitterNs(): bigint {
    const best = this.best();
    if (best === null || this.#samples.length < 2) return 0n;
    let sumOfSquares = 0n;
    for (const sample of this.#samples) {
      const difference = sample.offsetNs - best.offsetNs;
      sumOfSquares += difference * difference;
    }
    const count = BigInt(this.#samples.length - 1); // the best sample's own zero does not count
    return ceilSqrt((sumOfSquares + count - 1n) / count);
  }

  samples(): readonly PeerSample[] {
    return [...this.#samples];
  }

  get size(): number {
    return this.#samples.length;
  }
}

/** NTP's reachability register: one bit per probe interval, bit 0 the latest (set when the peer answered). */
export class ReachRegister {
  #value = 0;

  shift(answered: boolean): void {
    this.#value = ((this.#value << 1) | (answered ? 1 : 0)) & 0xff;
  }

  get value(): number {
    return this.#value;
  }

  /** Whether the peer answered in any of the last 8 intervals. */
  get reachable(): boolean {
    return this.#value !== 0;
  }
}
