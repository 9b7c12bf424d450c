/**
 * Messages of one connection, handled at most as many per event-loop turn as a budget shared by every connection
 * allows (turnBudget.ts); the rest wait, in order, for the next turns, with the connection's socket paused.
 *
 * Why: a read from a socket can hold many WebSocket messages, and a turn handled every message of every readable
 * socket before any other client was answered. When 1,024 connections each sent 8 subscriptions at once, that
 * was about a second of back-to-back turns of 10–50 ms (`npm run bench:attack`, attack 5). Bounded, the work of a
 * burst is spread over turns with every other client's I/O in between. What waits is bounded too: a connection
 * stops being read while it has messages waiting, so only the rest of the read that brought them can queue, and a
 * connection that queues more than `maxQueued` is refused (the caller closes it).
 */
import type { TurnBudget } from "./turnBudget";

/**
 * Messages one connection handles per pass before it goes behind the other waiting connections: waiting
 * connections are served round-robin, so one with a long backlog does not hold the turn's budget for turns.
 */
export const MAX_MESSAGES_PER_PASS = 8;

export interface TurnQueueOptions<T> {
  /** Handles one message (may close the connection: clear() then drops the rest). */
  handle(item: T): void;
  /** Stop and restart reading the connection. */
  pause(): void;
  resume(): void;
  /** Messages that may wait at once; offer() refuses beyond. */
  maxQueued: number;
}

export class TurnQueue<T> {
  readonly #budget: TurnBudget;
  readonly #options: TurnQueueOptions<T>;
  #queue: T[] = [];
  #paused = false;
  #waiting = false;
  #cleared = false;

  constructor(budget: TurnBudget, options: TurnQueueOptions<T>) {
    if (!Number.isInteger(options.maxQueued) || options.maxQueued < 1) throw new RangeError(`maxQueued must be an integer ≥ 1, got ${options.maxQueued}`);
    this.#budget = budget;
    this.#options = options;
  }

  /** Messages waiting for a later turn. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Handles `item` now if the turn allows and nothing waits, else queues it; false when the queue is full. */
  offer(item: T): boolean {
    if (this.#cleared) return true;
    if (this.#queue.length === 0 && this.#budget.take()) {
      this.#options.handle(item);
      return true;
    }
    if (this.#queue.length >= this.#options.maxQueued) return false;
    this.#queue.push(item);
    if (!this.#paused) {
      this.#paused = true;
      this.#options.pause();
    }
    this.#waitForTurn();
    return true;
  }

  /**
   * Drops what waits and handles nothing more (the connection closes). A paused connection is read again: its
   * closing handshake needs the peer's close frame.
   */
  clear(): void {
    this.#cleared = true;
    this.#queue = [];
    if (this.#paused) {
      this.#paused = false;
      this.#options.resume();
    }
  }

  #waitForTurn(): void {
    if (this.#waiting) return;
    this.#waiting = true;
    this.#budget.whenRenewed(this.#drain);
  }

  #drain = (): void => {
    this.#waiting = false;
    let handled = 0;
    while (!this.#cleared && this.#queue.length > 0 && handled < MAX_MESSAGES_PER_PASS && this.#budget.take()) {
      handled += 1;
      this.#options.handle(this.#queue.shift()!);
    }
    if (this.#cleared) return;
    if (this.#queue.length > 0) {
      this.#waitForTurn();
      return;
    }
    if (this.#paused) {
      this.#paused = false;
      this.#options.resume();
    }
  };
}
