/**
 * Group commit: the writes asked for during one turn of the event loop go to the store together, in one
 * transaction (one fsync when the commit is durable: SQLite's synchronous=FULL, lib/sqlite.ts commitDurably, or a
 * `sync` after it such as lib/sqlite.ts WalSync), and each caller's promise settles once that transaction has
 * committed (and been synced), or failed. A caller acknowledges its write only after it is committed (on disk, for
 * a durable commit), as with one commit each.
 *
 * Why: a durable commit costs a disk flush (0.2–12 ms on the machines this runs on) and better-sqlite3 runs it on
 * the event loop, so a burst of writes, one commit each, holds every other request for the sum of the flushes. In a
 * group the flush is paid once per turn: N writes arriving in the same turn cost one flush instead of N (and with
 * `sync`, not on the event loop at all).
 *
 * Detail: docs/architecture.md §4.
 */
/*
 * The batch is written at the end of the turn (setImmediate: after every I/O callback of the turn has queued its
 * write), or at once when it reaches `maxBatch`, which bounds the transaction and the callers' wait. `flush()`
 * writes what is queued now, e.g. before the store closes.
 */
export interface GroupCommitOptions<T> {
  /** Writes every item in one transaction; throws (having rolled back) when any of them cannot be written. */
  write(items: readonly T[]): void;
  /**
   * Makes a written batch durable (e.g. WalSync.sync: the flush on libuv's thread pool, not on the event loop); the
   * batch's callers settle once it settles, and are rejected with its error. Without it a batch is done when
   * `write` returns.
   */
  sync?: () => Promise<void>;
  /** Items written together at most. */
  maxBatch: number;
}

interface Queued<T> {
  readonly item: T;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

export class GroupCommit<T> {
  readonly #write: (items: readonly T[]) => void;
  readonly #sync: (() => Promise<void>) | undefined;
  readonly #maxBatch: number;
  #queue: Queued<T>[] = [];
  #flushAt: NodeJS.Immediate | null = null;

  constructor(options: GroupCommitOptions<T>) {
    if (!Number.isSafeInteger(options.maxBatch) || options.maxBatch < 1) throw new RangeError(`maxBatch must be a positive integer, got ${options.maxBatch}`);
    this.#write = options.write;
    this.#sync = options.sync;
    this.#maxBatch = options.maxBatch;
  }

  /** Items waiting for the next write. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * Resolves once `item` is committed (and synced, with `sync`); rejects with the write's or the sync's error
   * (every item of that batch then failed).
   */
  add(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (this.#queue.length >= this.#maxBatch) this.flush();
      else this.#flushAt ??= setImmediate(() => this.flush());
    });
  }

  /** Writes everything queued now, in one transaction (its callers settle after the sync, when there is one). */
  flush(): void {
    if (this.#flushAt !== null) clearImmediate(this.#flushAt);
    this.#flushAt = null;
    const batch = this.#queue;
    if (batch.length === 0) return;
    this.#queue = [];
    try {
      this.#write(batch.map((queued) => queued.item));
    } catch (error) {
      for (const queued of batch) queued.reject(error);
      return;
    }
    if (this.#sync === undefined) {
      for (const queued of batch) queued.resolve();
      return;
    }
    let synced: Promise<void>;
    try {
      synced = this.#sync();
    } catch (error) {
      for (const queued of batch) queued.reject(error);
      return;
    }
    synced.then(
      () => {
        for (const queued of batch) queued.resolve();
      },
      (error: unknown) => {
        for (const queued of batch) queued.reject(error);
      },
    );
  }
}
