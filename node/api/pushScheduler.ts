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
 *
 * Detail: docs/protocol.md §9.3.
 */

import { callEach, TurnBudget } from "./turnBudget";

/*
 * Per event-loop turn at most `maxPushesPerTurn` pushes run (turnBudget.ts); the rest of what the budget allowed
 * waits for the next turns, after the I/O of every other client. Without that bound, the budget's burst (a tenth
 * of a second's worth, 2,000 pushes at the default) ran in one timer callback when many subscriptions opened
 * together: ~60 ms during which no request was answered (`npm run bench:attack`, attack 5). What waits is bounded
 * by the burst too: a tick whose pushes would not fit skips them (counted as skipped), so pushes never queue up.
 *
 * The pushes of one drain (a tick's, or the rest of the backlog in a later turn) that go to one connection leave
 * in one write: a member may name its connection (a `PushChannel`, e.g. the WebSocket's socket), which is corked
 * before its first push of the drain and uncorked after the drain's last. A write to a loopback or LAN socket is
 * one system call that wakes the reader, ~35 µs here whatever its size: at the stream caps (8 subscriptions per
 * connection) those writes were 28 % of the busy core (`npm run bench:attack`, attack 5, CPU profile). A drain
 * runs at most maxPushesPerTurn pushes, so a connection's pushes may be split over drains; a subscription's first
 * push (tryTake) is written on its own.
 */
export interface PushSchedulerOptions {
  /** Pushes per second, node-wide (token bucket; bursts up to a tenth of a second's worth). */
  maxPushesPerSecond: number;
  /** Called with the number of pushes skipped for want of budget in one tick (metrics). */
  onSkipped?: (count: number) => void;
  /** Pushes run in one event-loop turn at most (default DEFAULT_MAX_PUSHES_PER_TURN). */
  maxPushesPerTurn?: number;
  /** Monotonic milliseconds (tests). */
  nowMs?: () => number;
}

/** ~30 µs a push (a WebSocket frame or gRPC message written): about 2 ms of pushes per event-loop turn. */
export const DEFAULT_MAX_PUSHES_PER_TURN = 64;

/** Where a member's pushes are written: its writes between cork() and uncork() leave together. */
export interface PushChannel {
  cork(): void;
  uncork(): void;
}

/**
 * One subscriber. `active` turns false when it is removed, so a push waiting for a later turn is dropped; `queued`
 * is true while its push waits, so a tick meanwhile skips it instead of queueing a second one.
 */
interface Member {
  push: () => void;
  channel: PushChannel | undefined;
  active: boolean;
  queued: boolean;
  /** Where it sits in its group's `members` (removal swaps the last member in: O(1), not a search). */
  index: number;
}

/** A drained prefix of the backlog longer than this (and than the rest) is cut off, so the array stays bounded. */
const BACKLOG_COMPACT_AFTER = 1_024;

interface Group {
  intervalMs: number;
  members: Member[];
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
  /** Pushes the budget allowed that have not run yet (FIFO from #backlogHead), at most #burst. */
  #backlog: Member[] = [];
  #backlogHead = 0;
  /** Pushes per event-loop turn (maxPushesPerTurn), and whether a drain waits for the next turn. */
  readonly #turn: TurnBudget;
  #drainScheduled = false;

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
    const maxPerTurn = options.maxPushesPerTurn ?? DEFAULT_MAX_PUSHES_PER_TURN;
    if (!Number.isInteger(maxPerTurn) || maxPerTurn < 1) throw new RangeError(`maxPushesPerTurn must be an integer ≥ 1, got ${maxPerTurn}`);
    this.#turn = new TurnBudget(maxPerTurn);
  }

  /** Distinct intervals with a running timer. */
  get timerCount(): number {
    return this.#groups.size;
  }

  /**
   * Runs `push` every `intervalMs` (at least 1 ms) while budget allows; returns the function that stops it. Pushes
   * of one drain to the same `channel` are written together.
   */
  add(intervalMs: number, push: () => void, channel?: PushChannel): () => void {
    const key = Math.max(1, Math.round(intervalMs));
    let group = this.#groups.get(key);
    if (group === undefined) {
      const created: Group = { intervalMs: key, members: [], cursor: 0, timer: setInterval(() => this.#tick(created), key) };
      created.timer.unref();
      this.#groups.set(key, created);
      group = created;
    }
    const member: Member = { push, channel, active: true, queued: false, index: group.members.length };
    group.members.push(member);
    const owner = group;
    return () => {
      if (!member.active) return;
      member.active = false;
      // Thousands of subscriptions end together when their connections close: each removal is O(1).
      const last = owner.members.pop()!;
      if (last !== member) {
        owner.members[member.index] = last;
        last.index = member.index;
      }
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
    // The push runs at once, in this turn: it takes from the turn's allowance as well as from the budget.
    if (this.#tokens < 1 || !this.#turn.take()) return false;
    this.#tokens -= 1;
    return true;
  }

  /** Pushes allowed by the budget and waiting for a later event-loop turn (tests, metrics). */
  get backlog(): number {
    return this.#backlog.length - this.#backlogHead;
  }

  /** Stops every timer (members are dropped, waiting pushes too). */
  close(): void {
    for (const group of this.#groups.values()) {
      clearInterval(group.timer);
      for (const member of group.members) member.active = false;
    }
    this.#groups.clear();
    this.#backlog = [];
    this.#backlogHead = 0;
  }

  #refill(): void {
    const nowMs = this.#nowMs();
    this.#tokens = Math.min(this.#burst, this.#tokens + (nowMs - this.#updatedAtMs) * this.#ratePerMs);
    this.#updatedAtMs = nowMs;
  }

  #tick(group: Group): void {
    this.#refill();
    const count = group.members.length;
    // What waits from earlier ticks counts against the burst: pushes are skipped, never queued without bound.
    const room = Math.max(0, this.#burst - this.backlog);
    const allowed = Math.min(count, Math.floor(this.#tokens), room);
    const start = count === 0 ? 0 : group.cursor % count;
    // Only the members served this tick are queued (a push may remove members, e.g. a closed connection): the
    // cost of a tick is what the budget allows, not the number of subscribers. A member whose previous push still
    // waits is passed over (skipped): a subscriber gets fewer updates, never a queue of stale ones.
    let queued = 0;
    let offset = 0;
    for (; offset < count && queued < allowed; offset += 1) {
      const member = group.members[(start + offset) % count]!;
      if (member.queued) continue;
      member.queued = true;
      this.#backlog.push(member);
      queued += 1;
    }
    this.#tokens -= queued;
    group.cursor = count === 0 ? 0 : (start + offset) % count;
    if (queued < count) this.#onSkipped(count - queued);
    if (!this.#drainScheduled) this.#drain();
  }

  /** Runs waiting pushes up to this turn's allowance; what is left runs in the next turns. */
  #drain = (): void => {
    this.#drainScheduled = false;
    const corked = new Set<PushChannel>();
    let pushFailure: { error: unknown } | null = null;
    try {
      while (this.#backlogHead < this.#backlog.length) {
        const member = this.#backlog[this.#backlogHead]!;
        if (member.active && !this.#turn.take()) break;
        this.#backlogHead += 1;
        member.queued = false;
        if (!member.active) continue; // one removed while waiting is dropped, and uses no allowance
        if (member.channel !== undefined && !corked.has(member.channel)) {
          member.channel.cork();
          corked.add(member.channel);
        }
        member.push();
      }
    } catch (error) {
      pushFailure = { error };
    }
    // Every channel, whatever a push or another channel throws: a channel left corked would hold its pushes for good.
    const uncorkFailure = callEach(corked, (channel) => channel.uncork());
    if (pushFailure !== null) throw pushFailure.error;
    if (uncorkFailure !== null) throw uncorkFailure.error;
    if (this.#backlogHead >= this.#backlog.length) {
      this.#backlog = [];
      this.#backlogHead = 0;
      return;
    }
    if (this.#backlogHead > BACKLOG_COMPACT_AFTER && this.#backlogHead * 2 > this.#backlog.length) {
      this.#backlog = this.#backlog.slice(this.#backlogHead);
      this.#backlogHead = 0;
    }
    if (!this.#drainScheduled) {
      this.#drainScheduled = true;
      this.#turn.whenRenewed(this.#drain);
    }
  };
}
