/**
 * The schedule store: `schedules.sqlite` in dataDir (WAL, synchronous NORMAL, exclusive to one node), its DDL and
 * migrations, its statements, and its two group commits (docs/protocol.md §9.7 "What reaches the disk"):
 *
 *   inserts   new schedules, one commit per event-loop turn, then the write-ahead log flushed off the event loop
 *             (WalSync) before any is acknowledged; after a failed flush nothing new is written until restart;
 *   updates   delivery state changes (claims aside), one commit per turn without an fsync, except a commit holding a
 *             `failed` mark, which is durable (a client may act on it).
 *
 * Rows: `scheduled` → `delivering` (attempts + 1, the proof it carries) → `delivered`, or back to `scheduled` for a
 * retry, or `failed`. A pending row (scheduled or delivering) always has next_attempt_at_ns (a CHECK constraint).
 */
import type { Logger } from "pino";
import { GroupCommit } from "../../lib/groupCommit";
import { UnavailableError } from "../../protocol/errors";
import type { ProofJson } from "../../protocol/types";
import {
  blobToNs,
  commitDurably,
  type FileSync,
  isFlushFailure,
  isSqliteError,
  nsToBlob,
  openDatabase,
  type SqliteDatabase,
  type SqliteStatement,
  WalSync,
} from "../../lib/sqlite";
import type { ScheduleRecord, ScheduleStatus } from "../core/types";

/** A stored row as SQLite returns it (ns as 16-byte big-endian blobs, lib/sqlite.ts nsToBlob). */
export interface ScheduleRow {
  id: string;
  execute_at_ns: Buffer;
  callback_url: string;
  status: ScheduleStatus;
  attempts: number;
  last_error: string | null;
  created_at_ns: Buffer;
  delivered_at_ns: Buffer | null;
  proof_json: string | null;
  next_attempt_at_ns: Buffer | null;
}

/** A pending row as the dispatcher reads it (due: its next attempt is set), with its client. */
export type DueRow = ScheduleRow & { next_attempt_at_ns: Buffer; client_key: string };

/** A new schedule's row, as schedule() queues it for the next group commit. */
export interface NewRow {
  readonly id: string;
  readonly executeAtNs: bigint;
  readonly callbackUrl: string;
  readonly createdAtNs: bigint;
  readonly clientKey: string;
}

/**
 * A change of a row's delivery state, committed with the others of its event-loop turn. `changes` is set by the
 * write: rows it changed (0 when the row was no longer in the state the change expects).
 */
export type DeliveryUpdate = { id: string; changes: number } & (
  | { kind: "delivering"; proofJson: string | null; untilBlob: Buffer }
  | { kind: "delivered"; atBlob: Buffer }
  | { kind: "retry"; error: string; nextBlob: Buffer }
  | { kind: "failed"; error: string }
);

/** Longest error text stored in last_error. */
const MAX_ERROR_CHARS = 500;
/** New schedules (and delivery updates) committed in one transaction at most (lib/groupCommit.ts). */
const MAX_ROWS_PER_COMMIT = 256;

export function truncated(text: string): string {
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;
}

export function errorText(error: unknown): string {
  return truncated(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
}

/** The refusal of every new schedule after the store failed an fsync: nothing of it is written (503). */
export function storeFailedEarlier(failure: Error & { code: string }): UnavailableError {
  return new UnavailableError(
    `the schedule store could not flush to disk (${failure.code}): the node takes no new schedules until it restarts`,
    { code: failure.code },
    { cause: failure },
  );
}

/**
 * A write of the schedule store failed (disk full, I/O error): the node's fault, not the schedule's. The attempt
 * writes nothing more and is not counted against the schedule or its client; the row keeps its stored state and is
 * due again when its claim expires.
 */
export class StoreWriteError extends Error {
  constructor(cause: unknown) {
    super(`schedule store write failed: ${errorText(cause)}`, { cause });
    this.name = "StoreWriteError";
  }
}

/**
 * Opens schedules.sqlite for this process alone. One node per dataDir: two would both resume 'delivering' rows
 * and deliver them twice. In exclusive locking mode SQLite keeps the lock taken by the first write until close,
 * so a second node fails here (after the busy timeout) instead of sharing the rows.
 */
function openExclusively(dataDir: string): SqliteDatabase {
  let db: SqliteDatabase | undefined;
  try {
    db = openDatabase({ dataDir, fileName: "schedules.sqlite", synchronous: "NORMAL" });
    db.pragma("locking_mode = EXCLUSIVE");
    db.exec("BEGIN EXCLUSIVE; COMMIT;");
    return db;
  } catch (cause) {
    db?.close();
    if (isSqliteError(cause) && cause.code === "SQLITE_BUSY") {
      throw new UnavailableError(`dataDir ${dataDir} is in use by another node (schedules.sqlite is locked)`, {}, { cause });
    }
    throw cause;
  }
}

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS schedules (
    id TEXT PRIMARY KEY,
    execute_at_ns BLOB NOT NULL,
    callback_url TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('scheduled', 'delivering', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    created_at_ns BLOB NOT NULL,
    delivered_at_ns BLOB,
    proof_json TEXT,
    next_attempt_at_ns BLOB,
    CHECK ((status IN ('scheduled', 'delivering')) = (next_attempt_at_ns IS NOT NULL))
  );
  CREATE INDEX IF NOT EXISTS schedules_due ON schedules (next_attempt_at_ns) WHERE next_attempt_at_ns IS NOT NULL;
`;

/** Brings a file of an earlier version up to date. */
function migrate(db: SqliteDatabase): void {
  // Added after the first release: older files get the column (existing rows belong to no client, '').
  const hasClientKey = (db.prepare("PRAGMA table_info(schedules)").all() as { name: string }[]).some((column) => column.name === "client_key");
  if (!hasClientKey) db.exec("ALTER TABLE schedules ADD COLUMN client_key TEXT NOT NULL DEFAULT ''");
  // A client's pending rows in due order (dueOfClient; pendingByClient uses its prefix). It replaces the index on
  // client_key alone of earlier versions.
  db.exec(`
    CREATE INDEX IF NOT EXISTS schedules_due_by_client ON schedules (client_key, next_attempt_at_ns) WHERE next_attempt_at_ns IS NOT NULL;
    DROP INDEX IF EXISTS schedules_pending_by_client;
  `);
}

const COLUMNS = "id, execute_at_ns, callback_url, status, attempts, last_error, created_at_ns, delivered_at_ns, proof_json, next_attempt_at_ns";

type StatementName =
  | "insert" | "get" | "nextDue" | "due" | "dueOfClient" | "pendingByClient" | "claim"
  | "markDelivering" | "markDelivered" | "markRetry" | "markFailed" | "resumeInFlight";

function prepareStatements(db: SqliteDatabase): Record<StatementName, SqliteStatement> {
  return {
    insert: db.prepare(
      "INSERT INTO schedules (id, execute_at_ns, callback_url, status, attempts, created_at_ns, next_attempt_at_ns, client_key) VALUES (?, ?, ?, 'scheduled', 0, ?, ?, ?)",
    ),
    get: db.prepare(`SELECT ${COLUMNS} FROM schedules WHERE id = ?`),
    // Both walk the schedules_due index in due order, leaving out the clients (a JSON array) that may take no
    // slot now: their rows neither wake the worker (no busy loop while they wait) nor fill the LIMIT (hiding the
    // row of a client that may). The cost is the excluded clients' rows ahead of the first eligible one, at most
    // their pending quota each, not every due row.
    nextDue: db.prepare(
      `SELECT next_attempt_at_ns FROM schedules WHERE next_attempt_at_ns IS NOT NULL
         AND client_key NOT IN (SELECT value FROM json_each(?)) ORDER BY next_attempt_at_ns LIMIT 1`,
    ),
    due: db.prepare(
      `SELECT ${COLUMNS}, client_key FROM schedules WHERE next_attempt_at_ns IS NOT NULL AND next_attempt_at_ns <= ?
         AND client_key NOT IN (SELECT value FROM json_each(?)) ORDER BY next_attempt_at_ns LIMIT ?`,
    ),
    dueOfClient: db.prepare(
      `SELECT ${COLUMNS}, client_key FROM schedules WHERE client_key = ? AND next_attempt_at_ns IS NOT NULL
         AND next_attempt_at_ns <= ? ORDER BY next_attempt_at_ns LIMIT 1`,
    ),
    pendingByClient: db.prepare("SELECT client_key, COUNT(*) AS n FROM schedules WHERE next_attempt_at_ns IS NOT NULL GROUP BY client_key"),
    claim: db.prepare("UPDATE schedules SET next_attempt_at_ns = ? WHERE id = ? AND next_attempt_at_ns IS NOT NULL"),
    markDelivering: db.prepare(
      "UPDATE schedules SET status = 'delivering', attempts = attempts + 1, proof_json = ?, next_attempt_at_ns = ? WHERE id = ? AND status IN ('scheduled', 'delivering')",
    ),
    markDelivered: db.prepare(
      "UPDATE schedules SET status = 'delivered', delivered_at_ns = ?, last_error = NULL, next_attempt_at_ns = NULL WHERE id = ? AND status = 'delivering'",
    ),
    markRetry: db.prepare(
      "UPDATE schedules SET status = 'scheduled', last_error = ?, next_attempt_at_ns = ? WHERE id = ? AND status IN ('scheduled', 'delivering')",
    ),
    markFailed: db.prepare(
      "UPDATE schedules SET status = 'failed', last_error = ?, next_attempt_at_ns = NULL WHERE id = ? AND status IN ('scheduled', 'delivering')",
    ),
    // After a restart nothing is in flight: rows left `delivering` (crash mid-POST) are due again at once.
    resumeInFlight: db.prepare("UPDATE schedules SET next_attempt_at_ns = ? WHERE status = 'delivering'"),
  };
}

function rowToRecord(row: ScheduleRow): ScheduleRecord {
  return {
    id: row.id,
    executeAtNs: blobToNs(row.execute_at_ns),
    callbackUrl: row.callback_url,
    status: row.status,
    attempts: row.attempts,
    lastError: row.last_error,
    createdAtNs: blobToNs(row.created_at_ns),
    deliveredAtNs: row.delivered_at_ns === null ? null : blobToNs(row.delivered_at_ns),
    proof: row.proof_json === null ? null : (JSON.parse(row.proof_json) as ProofJson),
    nextAttemptAtNs: row.next_attempt_at_ns === null ? null : blobToNs(row.next_attempt_at_ns),
  };
}

export interface ScheduleStoreOptions {
  dataDir: string;
  /** Flushes the write-ahead log and folder (default: lib/sqlite.ts datasync; tests inject failures). */
  syncFile?: FileSync;
  logger: Logger;
}

export class ScheduleStore {
  readonly #logger: Logger;
  readonly #db: SqliteDatabase;
  readonly #statements: Record<StatementName, SqliteStatement>;
  /** Claims a dispatch pass's rows (next attempt moved to the claim's end) in one transaction. */
  readonly #claimAll: (ids: readonly string[], untilBlob: Buffer) => void;
  /** New rows, committed together once per event-loop turn, then flushed (an accepted schedule is on disk). */
  readonly #inserts: GroupCommit<NewRow>;
  /** Flushes the write-ahead log after the inserts' commits, off the event loop. */
  readonly #walSync: WalSync;
  /**
   * Delivery state changes, committed together once per event-loop turn (a commit each held the event loop twice
   * per delivery). An attempt still waits for its `delivering` commit before it POSTs.
   */
  readonly #updates: GroupCommit<DeliveryUpdate>;
  #checkpointScheduled = false;
  #writeErrorsTotal = 0;

  constructor(options: ScheduleStoreOptions) {
    this.#logger = options.logger;
    this.#db = openExclusively(options.dataDir);
    this.#db.exec(SCHEMA);
    migrate(this.#db);
    const statements = prepareStatements(this.#db);
    this.#statements = statements;
    const insertAll = this.#db.transaction((rows: readonly NewRow[]) => {
      for (const row of rows) {
        statements.insert.run(row.id, nsToBlob(row.executeAtNs), row.callbackUrl, nsToBlob(row.createdAtNs), nsToBlob(row.executeAtNs), row.clientKey);
      }
    });
    this.#claimAll = this.#db.transaction((ids: readonly string[], untilBlob: Buffer) => {
      for (const id of ids) statements.claim.run(untilBlob, id);
    });
    this.#walSync = new WalSync(this.#db, options.syncFile === undefined ? {} : { syncFile: options.syncFile });
    this.#inserts = new GroupCommit({
      write: (rows) => {
        // Checked again here, at the write: a flush may have failed since schedule() checked (same turn).
        const failure = this.#walSync.failure;
        if (failure !== null) throw storeFailedEarlier(failure);
        insertAll(rows);
        this.#checkpointSoon();
      },
      sync: () => this.#walSync.sync(),
      maxBatch: MAX_ROWS_PER_COMMIT,
    });
    const updateAll = this.#db.transaction((updates: readonly DeliveryUpdate[]) => {
      for (const update of updates) update.changes = this.#runUpdate(update);
    });
    this.#updates = new GroupCommit({
      write: (updates) => {
        if (updates.some((update) => update.kind === "failed")) commitDurably(this.#db, () => updateAll(updates));
        else updateAll(updates);
        this.#checkpointSoon();
      },
      maxBatch: MAX_ROWS_PER_COMMIT,
    });
  }

  get open(): boolean {
    return this.#db.open;
  }

  /** The failed flush that ends new schedules until restart, or null. */
  get flushFailure(): (Error & { code: string }) | null {
    return this.#walSync.failure;
  }

  /** Failed store writes seen so far (ScheduleStats.storeWriteErrorsTotal). */
  get writeErrorsTotal(): number {
    return this.#writeErrorsTotal;
  }

  /** Resolves once the row is committed and flushed to disk (with this turn's other new rows). */
  insert(row: NewRow): Promise<void> {
    return this.#inserts.add(row);
  }

  /** Queues a delivery state change for this turn's commit; rejects with StoreWriteError when that commit fails. */
  update(update: DeliveryUpdate): Promise<void> {
    return this.#updates.add(update).catch((error: unknown) => {
      throw new StoreWriteError(error);
    });
  }

  /** Moves the rows' next attempt to `untilNs` in one transaction (all or none). */
  claim(ids: readonly string[], untilNs: bigint): void {
    this.#claimAll(ids, nsToBlob(untilNs));
  }

  record(id: string): ScheduleRecord | undefined {
    const row = this.#statements.get.get(id) as ScheduleRow | undefined;
    return row === undefined ? undefined : rowToRecord(row);
  }

  /** When the earliest pending row of a client not in `excludedClientsJson` (a JSON array) is due. */
  nextDueNs(excludedClientsJson: string): bigint | undefined {
    const next = this.#statements.nextDue.get(excludedClientsJson) as { next_attempt_at_ns: Buffer } | undefined;
    return next === undefined ? undefined : blobToNs(next.next_attempt_at_ns);
  }

  /** Up to `limit` rows due at `nowNs`, in due order, of clients not in `excludedClientsJson`. */
  due(nowNs: bigint, excludedClientsJson: string, limit: number): DueRow[] {
    return this.#statements.due.all(nsToBlob(nowNs), excludedClientsJson, limit) as DueRow[];
  }

  /** The earliest row of one client due at `nowNs`. */
  dueOfClient(clientKey: string, nowNs: bigint): DueRow | undefined {
    return this.#statements.dueOfClient.get(clientKey, nsToBlob(nowNs)) as DueRow | undefined;
  }

  /** Pending rows per client (counted once at open). */
  pendingByClient(): { client_key: string; n: number }[] {
    return this.#statements.pendingByClient.all() as { client_key: string; n: number }[];
  }

  /** Makes rows left `delivering` by a previous run due at `nowNs`; returns how many. */
  resumeInFlight(nowNs: bigint): number {
    return this.#statements.resumeInFlight.run(nsToBlob(nowNs)).changes;
  }

  /**
   * Counts a failed store write; a failed flush of SQLite's own (its fsync, e.g. a `failed` mark's durable commit or
   * a checkpoint) also ends new schedules until restart, as a failed flush of a new schedule's log does (WalSync).
   */
  noteWriteFailure(error: unknown): void {
    this.#writeErrorsTotal += 1;
    if (isFlushFailure(error)) this.#walSync.noteFailure(error);
  }

  /** Commits (and flushes) what is queued, waits for the log's flushes, closes the file. */
  async close(): Promise<void> {
    if (this.#db.open) this.#inserts.flush();
    if (this.#db.open) this.#updates.flush();
    // Unbounded on purpose: a disk that hangs an fsync would hang the close's own checkpoint the same way.
    await this.#walSync.idle();
    if (this.#db.open) this.#db.close();
  }

  /**
   * Checkpoints the log, when due, after this turn's commits (WalSync takes SQLite's automatic checkpoints over so
   * that their fsync errors are seen): outside any caller's write, so that a failed checkpoint fails no write that
   * already committed, and ends new schedules instead (noteWriteFailure).
   */
  #checkpointSoon(): void {
    if (this.#checkpointScheduled) return;
    this.#checkpointScheduled = true;
    setImmediate(() => {
      this.#checkpointScheduled = false;
      if (!this.#db.open) return;
      try {
        this.#walSync.checkpointIfDue();
      } catch (error) {
        this.noteWriteFailure(error);
        this.#logger.error({ err: (error as Error).message, code: (error as { code?: unknown }).code }, "schedule store: checkpoint failed");
      }
    });
  }

  /** Writes one delivery state change (inside the updates' transaction); returns the rows it changed. */
  #runUpdate(update: DeliveryUpdate): number {
    switch (update.kind) {
      case "delivering":
        return this.#statements.markDelivering.run(update.proofJson, update.untilBlob, update.id).changes;
      case "delivered":
        return this.#statements.markDelivered.run(update.atBlob, update.id).changes;
      case "retry":
        return this.#statements.markRetry.run(update.error, update.nextBlob, update.id).changes;
      case "failed":
        return this.#statements.markFailed.run(update.error, update.id).changes;
    }
  }
}
