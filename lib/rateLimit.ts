/**
 * Per-client token buckets shared by every transport of one node (a client that spreads its calls over REST,
 * WebSocket and gRPC draws from one bucket). The client key is the API key's hash prefix when a key was
 * presented, else the remote IP address (see clientKeyFor* in auth.ts).
 *
 * A bucket holds at most `burst` tokens and refills at `ratePerSecond`. Memory is bounded: buckets live in an
 * insertion-ordered Map used as an LRU of at most `maxClients` entries. Evicting a bucket only ever helps its
 * client, and a bucket idle for burst/rate seconds is full again, i.e. equal to a fresh one, so eviction of idle
 * buckets loses nothing; `sweepIdle()` drops those explicitly (the server calls it on a timer).
 */
import { RateLimitError } from "../protocol/errors";

export interface RateLimiterOptions {
  /** MAX_REQUESTS_PER_SECOND; 0 disables limiting. */
  ratePerSecond: number;
  /** Bucket size (requests that may arrive at once); defaults to ratePerSecond. */
  burst?: number;
  /** Most buckets kept; the least recently used is evicted beyond this. Default 10,000. */
  maxClients?: number;
  /** Monotonic clock in milliseconds (injectable for tests). */
  nowMs?: () => number;
}

interface Bucket {
  tokens: number;
  updatedAtMs: number;
}

export class RateLimiter {
  readonly ratePerSecond: number;
  readonly burst: number;
  readonly maxClients: number;
  private readonly buckets = new Map<string, Bucket>();
  private readonly nowMs: () => number;
  private readonly ratePerMs: number;

  constructor(options: RateLimiterOptions) {
    if (!Number.isFinite(options.ratePerSecond) || options.ratePerSecond < 0) {
      throw new RangeError(`ratePerSecond must be a finite number ≥ 0, got ${options.ratePerSecond}`);
    }
    this.ratePerSecond = options.ratePerSecond;
    this.burst = Math.max(1, options.burst ?? options.ratePerSecond);
    this.maxClients = Math.max(1, options.maxClients ?? 10_000);
    this.nowMs = options.nowMs ?? (() => performance.now());
    this.ratePerMs = options.ratePerSecond / 1000;
  }

  get enabled(): boolean {
    return this.ratePerSecond > 0;
  }

  /** Number of buckets currently held (bounded by maxClients). */
  get size(): number {
    return this.buckets.size;
  }

  /** Takes one token for `clientKey`; false when the client is over its rate. */
  tryTake(clientKey: string): boolean {
    if (this.ratePerSecond === 0) return true;
    const now = this.nowMs();
    let bucket = this.buckets.get(clientKey);
    if (bucket === undefined) {
      bucket = { tokens: this.burst, updatedAtMs: now };
      if (this.buckets.size >= this.maxClients) {
        const oldest = this.buckets.keys().next();
        if (oldest.done !== true) this.buckets.delete(oldest.value);
      }
    } else {
      this.buckets.delete(clientKey); // re-inserted below: most recently used last
      bucket.tokens = Math.min(this.burst, bucket.tokens + (now - bucket.updatedAtMs) * this.ratePerMs);
      bucket.updatedAtMs = now;
    }
    this.buckets.set(clientKey, bucket);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /**
   * Throws RateLimitError ("Rate limit exceeded") when the client is over its rate; its details carry
   * `retryAfterMs`, when the client's next token is due (errorMapping.ts turns it into Retry-After).
   */
  take(clientKey: string): void {
    if (!this.tryTake(clientKey)) throw new RateLimitError({ clientKey, retryAfterMs: Math.ceil(this.msUntilNextToken(clientKey)) });
  }

  /** Milliseconds until `clientKey` holds a whole token again (0 when it holds one, or limiting is off). */
  msUntilNextToken(clientKey: string): number {
    if (this.ratePerSecond === 0) return 0;
    const bucket = this.buckets.get(clientKey);
    if (bucket === undefined) return 0;
    const tokens = Math.min(this.burst, bucket.tokens + (this.nowMs() - bucket.updatedAtMs) * this.ratePerMs);
    return tokens >= 1 ? 0 : (1 - tokens) / this.ratePerMs;
  }

  /** Drops buckets that have refilled completely (they equal a fresh bucket). Returns how many were dropped. */
  sweepIdle(): number {
    if (this.ratePerSecond === 0) return 0;
    const now = this.nowMs();
    let dropped = 0;
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + (now - bucket.updatedAtMs) * this.ratePerMs >= this.burst) {
        this.buckets.delete(key);
        dropped += 1;
      }
    }
    return dropped;
  }
}
