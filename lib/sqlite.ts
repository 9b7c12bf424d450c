/**
 * Shared SQLite helpers (better-sqlite3): opening a database in WAL mode, and nanosecond values as 16-byte
 * big-endian BLOBs. SQLite INTEGER is a signed 64-bit value (ns overflow it in 2262 and uint128 values at
 * once); fixed-width big-endian BLOBs hold any uint128 exactly and sort in numeric order under memcmp.
 */
import { mkdirSync, realpathSync, statSync } from "node:fs";
import { open } from "node:fs/promises";
import { dirname, join } from "node:path";
import Database from "better-sqlite3";

export type SqliteDatabase = Database.Database;
export type SqliteStatement = Database.Statement<unknown[]>;

export interface OpenDatabaseOptions {
  /** Folder of the file; created when missing. */
  dataDir: string;
  fileName: string;
  /**
   * FULL: every commit reaches the disk before returning (the relayer's store, the temporal RPC's). NORMAL: may
   * lose the commits since the last sync on power loss, never corrupts (archive; schedules, whose accepted rows are
   * made durable by a WalSync and whose failures commit with commitDurably).
   */
  synchronous: "FULL" | "NORMAL";
}

/**
 * Whether `error` is SQLite's own (better-sqlite3 SqliteError, with SQLite's code: SQLITE_FULL, SQLITE_IOERR_…):
 * the store failed, as opposed to a bug in the caller (a TypeError, a RangeError of nsToBlob).
 */
export function isSqliteError(error: unknown): error is Error & { code: string } {
  return error instanceof Database.SqliteError;
}

export function openDatabase(options: OpenDatabaseOptions): SqliteDatabase {
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const db = new Database(join(options.dataDir, options.fileName));
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${options.synchronous}`);
  db.pragma("busy_timeout = 5000");
  return db;
}

/**
 * Runs `commit` (one transaction, never inside another: SQLite refuses to change the level there) with
 * synchronous = FULL on a connection opened with NORMAL: in WAL mode the WAL is synced when that commit returns,
 * so it (and every commit before it) survives a power loss, while the connection's other commits skip the fsync
 * (milliseconds each, docs/benchmarks.md, all of it on the event loop; SQLite's automatic checkpoints, about every 1,000
 * pages of WAL, still sync). For a store where only some writes are promises to a client (schedules.ts: a failed
 * schedule) and the rest is bookkeeping that a power loss may roll back a little (delivery attempts, which are
 * redone). A process crash loses no commit either way: the WAL is in the operating system's cache. WalSync below
 * gives the same guarantee without holding the event loop, for callers that can wait for a promise.
 */
export function commitDurably<T>(db: SqliteDatabase, commit: () => T): T {
  db.pragma("synchronous = FULL");
  try {
    return commit();
  } finally {
    try {
      db.pragma("synchronous = NORMAL");
    } catch {
      // Left at FULL: every later commit is durable too, only slower. The commit above stands either way.
    }
  }
}

/**
 * A WalSync failed: the write-ahead log (or the folder that holds it) could not be flushed to disk, now or earlier.
 * The commits it was to make durable are in the database but may not survive a power loss.
 */
export class WalSyncError extends Error {
  /** The operating system's code (EIO, ENOSPC, …), or WAL_SYNC_FAILED_EARLIER for every sync after a failure. */
  readonly code: string;
  readonly path: string;

  constructor(message: string, code: string, path: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "WalSyncError";
    this.code = code;
    this.path = path;
  }
}

/** Whether `error` is the store's failure (SQLite's own, or a WalSync's), as opposed to a bug in the caller. */
export function isStoreFailure(error: unknown): error is Error & { code: string } {
  return isSqliteError(error) || error instanceof WalSyncError;
}

/** Flushes the file or folder at `path` to disk (fdatasync; fsync for a folder); null when it does not exist. */
export type FileSync = (path: string, kind: "file" | "folder") => Promise<{ inode: number } | null>;

/** The real FileSync: open, flush, close, all on libuv's thread pool (never on the event loop). */
export const datasync: FileSync = async (path, kind) => {
  let handle;
  try {
    // A regular file opened for writing: some systems refuse to flush a read-only descriptor.
    handle = await open(path, kind === "file" ? "r+" : "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
  try {
    if (kind === "file") await handle.datasync();
    else await handle.sync();
    return { inode: (await handle.stat()).ino };
  } finally {
    await handle.close();
  }
};

interface SyncWaiter {
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/** Whether `error` is SQLite reporting that one of its own flushes (fsync) failed. */
export function isFlushFailure(error: unknown): error is Error & { code: "SQLITE_IOERR_FSYNC" | "SQLITE_IOERR_DIR_FSYNC" } {
  return isSqliteError(error) && (error.code === "SQLITE_IOERR_FSYNC" || error.code === "SQLITE_IOERR_DIR_FSYNC");
}

/**
 * Makes a WAL-mode connection's commits durable off the event loop. A commit at synchronous = NORMAL writes its
 * frames to the write-ahead log without flushing it; `sync()` then flushes that file on libuv's thread pool and
 * resolves once it is on disk, which is what synchronous = FULL would have done inside the commit (an fdatasync of
 * the log after the frames: SQLite flushes nothing else at FULL in WAL mode, and at NORMAL it still flushes the
 * log's header before a restarted log's first frame and the database after each checkpoint). The difference is
 * where the 5–12 ms of the flush are spent: not on the event loop, so a burst of durable writes (schedules.ts:
 * one per event-loop turn) no longer holds every other request meanwhile. SQLite locks the database and `-shm`
 * files, never the log, so opening and closing the log here releases none of its locks; the database file itself
 * is never opened here (closing any descriptor of it would drop the connection's POSIX locks).
 *
 * What it does not change: SQLite's readers see a commit as soon as it returns, before `sync()` resolves; a caller
 * must not tell anyone outside the process about the commit before then.
 *
 * Syncs are grouped: callers that arrive while a flush runs share the next one (it must start after their commit),
 * so there is at most one flush running and one waiting. The folder is flushed too the first time a log file is
 * seen, so that the log's name survives with its content; as in SQLite, a folder that cannot be flushed (some
 * network and virtual file systems refuse) is not an error. A missing log is one: SQLite removes it only when the
 * connection closes (after checkpointing it into the database file and flushing that, so a sync after the close
 * has nothing left to do), and otherwise a commit in an unflushed, unnamed file is no promise.
 *
 * A failed flush fails every later sync too, until the process restarts (WAL_SYNC_FAILED_EARLIER), and so does a
 * failed flush of SQLite's own that the caller reports (`noteFailure`, also while a flush runs): after a failed
 * fsync the kernel may have dropped the unwritten pages and report the next fsync as a success, and a log frame
 * lost in the middle makes SQLite's recovery drop every commit after it. So nothing is acknowledged as durable
 * after a failure (the fsyncgate lesson that PostgreSQL learned in 2018); `failure` tells callers to refuse before
 * they write. SQLite's automatic checkpoint would hide one failure: it discards the error of its own fsyncs (its
 * default WAL hook returns OK whatever happened), and Linux reports a writeback error once to each descriptor, and
 * only to one opened before it was first seen, so neither SQLite's next FULL commit nor this flush (its descriptor
 * opened afterwards) would be told. So WalSync takes checkpoints over: it turns the automatic ones off
 * (`wal_autocheckpoint = 0`) and the store calls {@link WalSync.checkpointIfDue} after its commits, which runs
 * `wal_checkpoint(PASSIVE)` once the log passes `checkpointWalBytes` (SQLite's own default: 1,000 pages of 4 KiB)
 * and notes a failed flush there like any other.
 */
/** Log size at which WalSync checkpoints: SQLite's automatic default, 1,000 pages of 4 KiB. */
export const DEFAULT_CHECKPOINT_WAL_BYTES = 1_000 * 4_096;

export class WalSync {
  readonly #db: SqliteDatabase;
  readonly #logPath: string;
  readonly #folderPath: string;
  readonly #syncFile: FileSync;
  /** The inode of the log whose folder entry was flushed (null: none yet). */
  #folderSyncedForInode: number | null = null;
  #failure: WalSyncError | null = null;
  #running = false;
  #waiting: SyncWaiter[] = [];
  #idleWaiters: (() => void)[] = [];
  readonly #checkpointWalBytes: number;

  constructor(db: SqliteDatabase, options: { syncFile?: FileSync; checkpointWalBytes?: number } = {}) {
    if (db.memory) throw new RangeError("WalSync needs a database file, not an in-memory database");
    this.#db = db;
    this.#checkpointWalBytes = options.checkpointWalBytes ?? DEFAULT_CHECKPOINT_WAL_BYTES;
    // Checkpoints are ours from here on (see the class comment): SQLite's would discard their fsync errors.
    db.pragma("wal_autocheckpoint = 0");
    // SQLite names the log after the database file's real path (a symbolic link resolved), absolute.
    let databasePath: string;
    try {
      databasePath = realpathSync(db.name);
    } catch (cause) {
      throw new RangeError(`WalSync: cannot resolve the database file ${db.name}`, { cause });
    }
    this.#logPath = `${databasePath}-wal`;
    this.#folderPath = dirname(databasePath);
    this.#syncFile = options.syncFile ?? datasync;
  }

  /** The failure that makes every sync fail until the process restarts (null: none). */
  get failure(): WalSyncError | null {
    return this.#failure;
  }

  /** Records a failed flush that SQLite reported on this connection (isFlushFailure): later syncs fail too. */
  noteFailure(error: Error & { code: string }): void {
    this.#failure ??= new WalSyncError(`SQLite could not flush ${this.#logPath} to disk (${error.code})`, error.code, this.#logPath, { cause: error });
  }

  /**
   * Checkpoints the log into the database file once it holds `checkpointWalBytes` or more (a stat of the log
   * otherwise). Call it after commits, outside any transaction; it throws what {@link checkpoint} throws.
   */
  checkpointIfDue(): void {
    const size = statSync(this.#logPath, { throwIfNoEntry: false })?.size ?? 0;
    if (size >= this.#checkpointWalBytes) this.checkpoint();
  }

  /**
   * `wal_checkpoint(PASSIVE)` on the event loop, as SQLite's automatic checkpoint ran inside a commit: copies what
   * no reader still needs into the database file and flushes it. A failed flush is noted (every later sync fails,
   * see the class comment) and rethrown, as is any other error of SQLite's.
   */
  checkpoint(): void {
    try {
      this.#db.pragma("wal_checkpoint(PASSIVE)");
    } catch (error) {
      if (isFlushFailure(error)) this.noteFailure(error);
      throw error;
    }
  }

  /** Resolves once every commit that returned before this call is on disk; rejects with a WalSyncError. */
  sync(): Promise<void> {
    if (this.#failure !== null) return Promise.reject(this.#failedEarlier(this.#failure));
    return new Promise<void>((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      if (this.#running) return;
      this.#running = true;
      // After the current task's other callers (their commits are done too), so that they share the flush.
      queueMicrotask(() => void this.#drain());
    });
  }

  /** Resolves when no flush is running or waiting (e.g. before the connection is closed). */
  idle(): Promise<void> {
    if (!this.#running) return Promise.resolve();
    return new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
  }

  async #drain(): Promise<void> {
    while (this.#waiting.length > 0) {
      // Only these callers' commits are known to precede the flush about to start.
      const batch = this.#waiting;
      this.#waiting = [];
      try {
        if (this.#failure !== null) throw this.#failedEarlier(this.#failure);
        await this.#flush();
        // A failure noted while the flush ran (SQLite's own fsync, on the event loop) may have cost these frames.
        if (this.#failure !== null) throw this.#failedEarlier(this.#failure);
      } catch (error) {
        for (const waiter of batch) waiter.reject(error);
        continue;
      }
      for (const waiter of batch) waiter.resolve();
    }
    this.#running = false;
    const idle = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of idle) resolve();
  }

  async #flush(): Promise<void> {
    let log: { inode: number } | null;
    try {
      log = await this.#syncFile(this.#logPath, "file");
    } catch (cause) {
      const code = (cause as NodeJS.ErrnoException).code ?? "UNKNOWN";
      this.#failure = new WalSyncError(`could not flush ${this.#logPath} to disk (${code})`, code, this.#logPath, { cause });
      throw this.#failure;
    }
    if (log === null) {
      // Closed: the close checkpointed the log into the database file and flushed it.
      if (!this.#db.open) return;
      this.#failure = new WalSyncError(`${this.#logPath} is missing while its database is open`, "WAL_MISSING", this.#logPath);
      throw this.#failure;
    }
    if (log.inode !== this.#folderSyncedForInode && process.platform !== "win32") {
      // Best effort, as SQLite's own flush of the folder of a log it created.
      await Promise.resolve()
        .then(() => this.#syncFile(this.#folderPath, "folder"))
        .catch(() => undefined);
      this.#folderSyncedForInode = log.inode;
    }
  }

  #failedEarlier(failure: WalSyncError): WalSyncError {
    return new WalSyncError(
      `an earlier flush of ${failure.path} failed (${failure.code}): no commit can be confirmed on disk until the process restarts`,
      "WAL_SYNC_FAILED_EARLIER",
      failure.path,
      { cause: failure },
    );
  }
}

const UINT128_BYTES = 16;

export function nsToBlob(valueNs: bigint): Buffer {
  if (valueNs < 0n || valueNs >> 128n !== 0n) throw new RangeError(`not a uint128: ${valueNs}`);
  return Buffer.from(valueNs.toString(16).padStart(UINT128_BYTES * 2, "0"), "hex");
}

export function blobToNs(blob: Buffer): bigint {
  if (blob.length !== UINT128_BYTES) throw new RangeError(`expected ${UINT128_BYTES} bytes, got ${blob.length}`);
  return BigInt(`0x${blob.toString("hex")}`);
}
