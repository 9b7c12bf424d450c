/**
 * Periodic pushes of the streaming transports (WebSocket subscriptions, gRPC StreamTime), driven by ONE timer per
 * distinct interval and bounded by ONE node-wide budget of pushes per second.
 *
 * Why: a timer per subscription at 1 ms costs a timer callback per subscription per millisecond; at the stream
 * caps (8,000 subscriptions) that took the event loop from every other client (a REST client's p99 reached
 * 564 ms). Grouping by interval makes the timer cost per interval, and the budget bounds the push work whatever
 * the subscriptions ask for: beyond it pushes are skipped (a subscriber gets fewer, never queued, updates; each
 * push carries the latest proof, so a skipped one loses nothing but freshness). Within a tick the group starts
 * where the previous tick's budget ran out, so skipping is spread over all subscribers.
 */

export interface PushSchedulerOptions {
  /** Pushes per second, node-wide (token bucket; bursts up to a tenth of a second's worth). */
  maxPushesPerSecond: number;
  /** Called with the number of pushes skipped for want of budget in one tick (metrics). */
  onSkipped?: (count: number) => void;
  /** Monotonic milliseconds (tests). */
  nowMs?: () => number;
}

interface Group {
  intervalMs: number;
  members: (() => void)[];
  /** Where the next tick starts (rotates so that skips are spread over the members). */
  cursor: number;
  timer: NodeJS.Timeout;
}

export class PushScheduler {
  readonly #groups = new Map<number, Group>();
  readonly #ratePerMs: number;
  readonly #burst: number;
  readonly #nowMs: () => number;
  readonly #onSkipped: (count: number) => void;
  #tokens: number;
  #updatedAtMs: number;

  constructor(options: PushSchedulerOptions) {
    if (!Number.isFinite(options.maxPushesPerSecond) || options.maxPushesPerSecond < 1) {
      throw new RangeError(`maxPushesPerSecond must be at least 1, got ${options.maxPushesPerSecond}`);
    }
    this.#ratePerMs = options.maxPushesPerSecond / 1_000;
    this.#burst = Math.max(1, Math.ceil(options.maxPushesPerSecond / 10));
    this.#nowMs = options.nowMs ?? (() => performance.now());
    this.#onSkipped = options.onSkipped ?? (() => undefined);
    this.#tokens = this.#burst;
    this.#updatedAtMs = this.#nowMs();
  }

  /** Distinct intervals with a running timer. */
  get timerCount(): number {
    return this.#groups.size;
  }

  /** Runs `push` every `intervalMs` (at least 1 ms) while budget allows; returns the function that stops it. */
  add(intervalMs: number, push: () => void): () => void {
    const key = Math.max(1, Math.round(intervalMs));
    let group = this.#groups.get(key);
    if (group === undefined) {
      const created: Group = { intervalMs: key, members: [], cursor: 0, timer: setInterval(() => this.#tick(created), key) };
      created.timer.unref();
      this.#groups.set(key, created);
      group = created;
    }
    group.members.push(push);
    const owner = group;
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      const index = owner.members.indexOf(push);
      if (index >= 0) owner.members.splice(index, 1);
      if (owner.members.length === 0) {
        clearInterval(owner.timer);
        this.#groups.delete(owner.intervalMs);
      }
    };
  }

  /**
   * Takes one push from the node-wide budget for a push outside the ticks (a new subscription's first update);
   * false when none is left, and the subscription then gets its first update from its interval's tick. Without
   * this, thousands of subscriptions opened at once each pushed at once, outside the budget.
   */
  tryTake(): boolean {
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /** Stops every timer (members are dropped). */
  close(): void {
    for (const group of this.#groups.values()) clearInterval(group.timer);
    this.#groups.clear();
  }

  #refill(): void {
    const nowMs = this.#nowMs();
    this.#tokens = Math.min(this.#burst, this.#tokens + (nowMs - this.#updatedAtMs) * this.#ratePerMs);
    this.#updatedAtMs = nowMs;
  }

  #tick(group: Group): void {
    this.#refill();
    const count = group.members.length;
    const allowed = Math.min(count, Math.floor(this.#tokens));
    this.#tokens -= allowed;
    const start = count === 0 ? 0 : group.cursor % count;
    // Only the members served this tick are copied (a push may remove members, e.g. a closed connection): the
    // cost of a tick is what the budget allows, not the number of subscribers.
    const due: (() => void)[] = [];
    for (let offset = 0; offset < allowed; offset += 1) due.push(group.members[(start + offset) % count]!);
    group.cursor = count === 0 ? 0 : (start + allowed) % count;
    for (const push of due) push();
    if (allowed < count) this.#onSkipped(count - allowed);
  }
}
