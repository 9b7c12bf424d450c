/**
 * Shared SQLite helpers (better-sqlite3): opening a database in WAL mode, and nanosecond values as 16-byte
 * big-endian BLOBs. SQLite INTEGER is a signed 64-bit value (ns overflow it in 2262 and uint128 values at
 * once); fixed-width big-endian BLOBs hold any uint128 exactly and sort in numeric order under memcmp.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";

export type SqliteDatabase = Database.Database;
export type SqliteStatement = Database.Statement<unknown[]>;

export interface OpenDatabaseOptions {
  /** Folder of the file; created when missing. */
  dataDir: string;
  fileName: string;
  /**
   * FULL: every commit reaches the disk before returning (the relayer's store, the temporal RPC's). NORMAL: may
   * lose the commits since the last sync on power loss, never corrupts (archive; schedules, whose accepted rows and
   * failures commit with commitDurably).
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
 * (~5–12 ms each on this machine, all of it on the event loop; SQLite's automatic checkpoints, about every 1,000
 * pages of WAL, still sync). For a store where only some writes are promises to a client (schedules.ts: an
 * accepted schedule) and the rest is bookkeeping that a power loss may roll back a little (delivery attempts,
 * which are redone). A process crash loses no commit either way: the WAL is in the operating system's cache.
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

const UINT128_BYTES = 16;

export function nsToBlob(valueNs: bigint): Buffer {
  if (valueNs < 0n || valueNs >> 128n !== 0n) throw new RangeError(`not a uint128: ${valueNs}`);
  return Buffer.from(valueNs.toString(16).padStart(UINT128_BYTES * 2, "0"), "hex");
}

export function blobToNs(blob: Buffer): bigint {
  if (blob.length !== UINT128_BYTES) throw new RangeError(`expected ${UINT128_BYTES} bytes, got ${blob.length}`);
  return BigInt(`0x${blob.toString("hex")}`);
}
