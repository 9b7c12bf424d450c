/**
 * The relayer's durable state, in one SQLite file (WAL, synchronous FULL: a commit is on disk before it returns).
 *
 * Why one file: every statement sits beside the tables it reads and writes, and what must commit together (a nonce
 * claim with its item's move, events with their cursor) is one transaction over them; the decisions are in decide.ts.
 * Detail: docs/relayer.md.
 */
import { join } from "node:path";
import { openDatabase, type SqliteDatabase } from "../lib/sqlite";
import type { Hex } from "../protocol/types";

/*
 * Tables:
 *
 *   items     one row per job: a bridge message to deliver, a scheduled call to execute, a proof to push, a card
 *             to revoke (the guardian). Status
 *             pending → submitted → done, or dead (dead-letter, with the reason), skipped (by an operator),
 *             orphaned (its source event left the canonical chain: seen by a rewind, or for a bridge message by the
 *             look at its source just before its send; a rescan revives it if the event comes back).
 *   txs       every transaction the relayer signed: chain, nonce, hash, the raw signed bytes (so it can be
 *             re-broadcast unchanged after a crash or a drop), state signed → broadcast → mined → confirmed, or
 *             replaced (another transaction took its nonce).
 *   nonces    the next nonce per chain. A job's nonce is claimed in the same SQLite transaction that records its
 *             signed transaction and moves the item to `submitted`: the job row is the nonce claim, so a crash can
 *             leave a signed transaction unsent (it is sent on restart) but never two nonces for one job.
 *   cursors   per chain, the last indexed block with its hash (reorg detection), plus the recent history of
 *             cursor positions (the walk back to the common ancestor). Events are inserted in the same transaction
 *             that advances the cursor: the cursor never passes an event that is not recorded.
 */
export const ITEM_KINDS = ["message", "call", "push", "revoke"] as const;
export type ItemKind = (typeof ITEM_KINDS)[number];
export const ITEM_STATUSES = ["pending", "submitted", "done", "dead", "skipped", "orphaned"] as const;
export type ItemStatus = (typeof ITEM_STATUSES)[number];
export const TX_STATES = ["signed", "broadcast", "mined", "confirmed", "replaced"] as const;
export type TxState = (typeof TX_STATES)[number];
/** Cursor positions kept per chain for the walk back after a reorg. */
export const CURSOR_HISTORY = 512;

export interface Item {
  id: string;
  kind: ItemKind;
  /** Where the transaction goes. */
  chainId: number;
  /** Where the event came from (null for pushes). */
  sourceChainId: number | null;
  sourceBlock: bigint | null;
  /** Kind-specific JSON (bigints as decimal strings). */
  payload: string;
  status: ItemStatus;
  attempts: number;
  nextAttemptMs: number;
  lastError: string | null;
  lastErrorName: string | null;
  /** How many decisions in a row ended with lastErrorName. */
  sameErrorCount: number;
  /** done: what happened (delivered, executed, already-delivered, …); dead: the reason. */
  outcome: string | null;
  createdMs: number;
  updatedMs: number;
}

export interface TxRecord {
  chainId: number;
  nonce: number;
  hash: Hex;
  /** null for a no-op that fills a nonce gap. */
  itemId: string | null;
  raw: Hex;
  state: TxState;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  gas: bigint;
  to: Hex;
  data: Hex;
  sentMs: number;
  minedBlock: bigint | null;
}

/** What a watcher or the pusher records; the rest of an Item starts at its defaults. */
export type NewItem = Pick<Item, "id" | "kind" | "chainId" | "sourceChainId" | "sourceBlock" | "payload" | "nextAttemptMs">;

export interface Cursor {
  blockNumber: bigint;
  blockHash: Hex;
}

export interface ItemFilter {
  status?: ItemStatus;
  kind?: ItemKind;
  chainId?: number;
  limit: number;
  /** The latest created first (default: the oldest first). */
  newestFirst?: boolean;
}

interface ItemRow {
  id: string;
  kind: ItemKind;
  chain_id: number;
  source_chain_id: number | null;
  source_block: string | null;
  payload: string;
  status: ItemStatus;
  attempts: number;
  next_attempt_ms: number;
  last_error: string | null;
  last_error_name: string | null;
  same_error_count: number;
  outcome: string | null;
  created_ms: number;
  updated_ms: number;
}

interface TxRow {
  chain_id: number;
  nonce: number;
  hash: Hex;
  item_id: string | null;
  raw: Hex;
  state: TxState;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  gas: string;
  to_address: Hex;
  data: Hex;
  sent_ms: number;
  mined_block: string | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS items (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('message','call','push','revoke')),
  chain_id INTEGER NOT NULL,
  source_chain_id INTEGER,
  source_block TEXT,
  payload TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending','submitted','done','dead','skipped','orphaned')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_ms INTEGER NOT NULL,
  last_error TEXT,
  last_error_name TEXT,
  same_error_count INTEGER NOT NULL DEFAULT 0,
  outcome TEXT,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS items_due ON items (status, next_attempt_ms);
CREATE TABLE IF NOT EXISTS txs (
  chain_id INTEGER NOT NULL,
  nonce INTEGER NOT NULL,
  hash TEXT PRIMARY KEY,
  item_id TEXT REFERENCES items (id),
  raw TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('signed','broadcast','mined','confirmed','replaced')),
  max_fee_per_gas TEXT NOT NULL,
  max_priority_fee_per_gas TEXT NOT NULL,
  gas TEXT NOT NULL,
  to_address TEXT NOT NULL,
  data TEXT NOT NULL,
  sent_ms INTEGER NOT NULL,
  mined_block TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS txs_open ON txs (chain_id, state, nonce);
CREATE INDEX IF NOT EXISTS txs_item ON txs (item_id);
CREATE TABLE IF NOT EXISTS nonces (
  chain_id INTEGER PRIMARY KEY,
  next_nonce INTEGER NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS cursors (
  chain_id INTEGER NOT NULL,
  block_number TEXT NOT NULL,
  block_hash TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (chain_id, seq)
) STRICT;
`;

function itemFromRow(row: ItemRow): Item {
  return {
    id: row.id,
    kind: row.kind,
    chainId: row.chain_id,
    sourceChainId: row.source_chain_id,
    sourceBlock: row.source_block === null ? null : BigInt(row.source_block),
    payload: row.payload,
    status: row.status,
    attempts: row.attempts,
    nextAttemptMs: row.next_attempt_ms,
    lastError: row.last_error,
    lastErrorName: row.last_error_name,
    sameErrorCount: row.same_error_count,
    outcome: row.outcome,
    createdMs: row.created_ms,
    updatedMs: row.updated_ms,
  };
}

function txFromRow(row: TxRow): TxRecord {
  return {
    chainId: row.chain_id,
    nonce: row.nonce,
    hash: row.hash,
    itemId: row.item_id,
    raw: row.raw,
    state: row.state,
    maxFeePerGas: BigInt(row.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(row.max_priority_fee_per_gas),
    gas: BigInt(row.gas),
    to: row.to_address,
    data: row.data,
    sentMs: row.sent_ms,
    minedBlock: row.mined_block === null ? null : BigInt(row.mined_block),
  };
}

/** Longest error text kept per item (an RPC error can carry kilobytes of data). */
const MAX_ERROR_TEXT = 500;

export class RelayerStore {
  readonly db: SqliteDatabase;

  constructor(dataDir: string, private readonly nowMs: () => number = Date.now) {
    this.db = openDatabase({ dataDir, fileName: "relayer.db", synchronous: "FULL" });
    this.db.exec(SCHEMA);
  }

  static fileIn(dataDir: string): string {
    return join(dataDir, "relayer.db");
  }

  close(): void {
    this.db.close();
  }

  // ---- cursors -------------------------------------------------------------------------------------------------

  cursor(chainId: number): Cursor | undefined {
    const row = this.db
      .prepare("SELECT block_number, block_hash FROM cursors WHERE chain_id = ? ORDER BY seq DESC LIMIT 1")
      .get(chainId) as { block_number: string; block_hash: Hex } | undefined;
    return row === undefined ? undefined : { blockNumber: BigInt(row.block_number), blockHash: row.block_hash };
  }

  /** Cursor positions, newest first (the walk back after a reorg). */
  cursorHistory(chainId: number): Cursor[] {
    const rows = this.db
      .prepare("SELECT block_number, block_hash FROM cursors WHERE chain_id = ? ORDER BY seq DESC")
      .all(chainId) as { block_number: string; block_hash: Hex }[];
    return rows.map((row) => ({ blockNumber: BigInt(row.block_number), blockHash: row.block_hash }));
  }

  /** Records the events of a scanned range and advances the cursor to its end, in one transaction. */
  advanceCursor(chainId: number, to: Cursor, items: readonly NewItem[]): number {
    return this.db.transaction(() => {
      let inserted = 0;
      for (const item of items) inserted += this.insertItem(item) ? 1 : 0;
      const last = this.db.prepare("SELECT MAX(seq) AS seq FROM cursors WHERE chain_id = ?").get(chainId) as { seq: number | null };
      const seq = (last.seq ?? 0) + 1;
      this.db
        .prepare("INSERT INTO cursors (chain_id, block_number, block_hash, seq) VALUES (?, ?, ?, ?)")
        .run(chainId, to.blockNumber.toString(), to.blockHash, seq);
      this.db.prepare("DELETE FROM cursors WHERE chain_id = ? AND seq <= ?").run(chainId, seq - CURSOR_HISTORY);
      return inserted;
    })();
  }

  /**
   * After a reorg: moves the cursor back to `ancestor` (a position of the history that is still canonical) and
   * marks the open (pending or submitted) items of the chain's orphaned blocks `orphaned`, with the reason as their
   * outcome (which block left the canonical chain, back to which ancestor), and returns their ids.
   * The target chain's submitter cancels the transactions it had sent for them (Submitter.keepAlive).
   * A bridge message is orphaned here only once `submitted` (its transaction is out and is to be cancelled): a
   * pending one is looked at on its source chain immediately before its send (worker.ts sourceOfMessage), which
   * also covers a send that comes before this walk back, and is orphaned there if its event is gone.
   */
  rewindCursor(chainId: number, ancestor: Cursor | undefined): string[] {
    return this.db.transaction(() => {
      const above = ancestor?.blockNumber ?? -1n;
      const orphanedRows = (
        this.db
          .prepare(
            "SELECT id, source_block FROM items WHERE source_chain_id = ? AND (status = 'submitted' OR (status = 'pending' AND kind != 'message')) AND source_block IS NOT NULL",
          )
          .all(chainId) as { id: string; source_block: string }[]
      ).filter((row) => BigInt(row.source_block) > above);
      const orphaned = orphanedRows.map((row) => row.id);
      const mark = this.db.prepare("UPDATE items SET status = 'orphaned', outcome = ?, updated_ms = ? WHERE id = ?");
      const back = ancestor === undefined ? "the start block" : `block ${ancestor.blockNumber}`;
      for (const { id, source_block } of orphanedRows) {
        mark.run(`orphaned: its source block ${source_block} left the canonical chain (a reorg back to ${back})`, this.nowMs(), id);
      }
      const rows = this.db.prepare("SELECT seq, block_number FROM cursors WHERE chain_id = ?").all(chainId) as {
        seq: number;
        block_number: string;
      }[];
      const drop = this.db.prepare("DELETE FROM cursors WHERE chain_id = ? AND seq = ?");
      for (const row of rows) if (BigInt(row.block_number) > above) drop.run(chainId, row.seq);
      return orphaned;
    })();
  }

  // ---- items ---------------------------------------------------------------------------------------------------

  /**
   * Inserts a new item; an orphaned one with the same id comes back: to `submitted` when a transaction of its own is
   * still open (not yet cancelled: it stands, and a second nonce for one job is never sent), else to `pending`.
   * An open (pending or submitted) one takes the event's new place (a rescan after a reorg found it in another
   * block): the check before a message's send looks there. Returns whether it is new or revived.
   */
  insertItem(item: NewItem): boolean {
    const now = this.nowMs();
    this.db
      .prepare(
        "UPDATE items SET source_chain_id = @chain, source_block = @block, updated_ms = @now WHERE id = @id AND status IN ('pending','submitted') AND (source_chain_id IS NOT @chain OR source_block IS NOT @block)",
      )
      .run({ chain: item.sourceChainId, block: item.sourceBlock?.toString() ?? null, now, id: item.id });
    const result = this.db
      .prepare(
        `INSERT INTO items (id, kind, chain_id, source_chain_id, source_block, payload, status, next_attempt_ms, created_ms, updated_ms)
         VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET
           status = CASE WHEN EXISTS (
             SELECT 1 FROM txs WHERE txs.item_id = items.id AND txs.state IN ('signed','broadcast','mined')
           ) THEN 'submitted' ELSE 'pending' END,
           source_block = excluded.source_block, outcome = NULL, updated_ms = excluded.updated_ms
         WHERE items.status = 'orphaned'`,
      )
      .run(item.id, item.kind, item.chainId, item.sourceChainId, item.sourceBlock?.toString() ?? null, item.payload, item.nextAttemptMs, now, now);
    return result.changes > 0;
  }

  item(id: string): Item | undefined {
    const row = this.db.prepare("SELECT * FROM items WHERE id = ?").get(id) as ItemRow | undefined;
    return row === undefined ? undefined : itemFromRow(row);
  }

  items(filter: ItemFilter): Item[] {
    const where: string[] = [];
    const args: (string | number)[] = [];
    for (const [column, value] of [
      ["status", filter.status],
      ["kind", filter.kind],
      ["chain_id", filter.chainId],
    ] as const) {
      if (value === undefined) continue;
      where.push(`${column} = ?`);
      args.push(value);
    }
    const order = filter.newestFirst === true ? "created_ms DESC, id DESC" : "created_ms, id";
    const sql = `SELECT * FROM items ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY ${order} LIMIT ?`;
    return (this.db.prepare(sql).all(...args, filter.limit) as ItemRow[]).map(itemFromRow);
  }

  /** Pending items due now on a chain, oldest due first. */
  /**
   * Items `submitted` with no open transaction of their own (signed, broadcast, or mined but not confirmed) go back
   * to `pending`, due now, and their ids are returned. A submitted item always has one, except after a crash
   * between a nonce's settlement (settleNonce) and the item's outcome (the worker's onSettled, a separate commit):
   * then nothing would ever look at it again. Deciding it again is safe, since every decision reads on-chain state
   * (a delivered message is done, a settled call is done).
   */
  reviveStrandedSubmissions(chainId: number): string[] {
    return this.db.transaction(() => {
      const ids = (
        this.db
          .prepare(
            `SELECT id FROM items WHERE chain_id = ? AND status = 'submitted' AND NOT EXISTS (
               SELECT 1 FROM txs WHERE txs.item_id = items.id AND txs.state IN ('signed','broadcast','mined'))`,
          )
          .all(chainId) as { id: string }[]
      ).map((row) => row.id);
      const revive = this.db.prepare("UPDATE items SET status = 'pending', next_attempt_ms = ?, updated_ms = ? WHERE id = ?");
      for (const id of ids) revive.run(this.nowMs(), this.nowMs(), id);
      return ids;
    })();
  }

  dueItems(chainId: number, limit: number): Item[] {
    const rows = this.db
      .prepare("SELECT * FROM items WHERE chain_id = ? AND status = 'pending' AND next_attempt_ms <= ? ORDER BY next_attempt_ms, id LIMIT ?")
      .all(chainId, this.nowMs(), limit) as ItemRow[];
    return rows.map(itemFromRow);
  }

  /** How long the oldest due pending item of a chain has been due, ms (0 when none). */
  oldestDueAgeMs(chainId: number): number {
    const now = this.nowMs();
    const row = this.db
      .prepare("SELECT MIN(next_attempt_ms) AS due FROM items WHERE chain_id = ? AND status = 'pending' AND next_attempt_ms <= ?")
      .get(chainId, now) as { due: number | null };
    return row.due === null ? 0 : now - row.due;
  }

  hasOpenItem(chainId: number, kind: ItemKind): boolean {
    return (
      this.db.prepare("SELECT 1 FROM items WHERE chain_id = ? AND kind = ? AND status IN ('pending','submitted') LIMIT 1").get(chainId, kind) !==
      undefined
    );
  }

  countsByStatus(): Record<string, number> {
    const rows = this.db.prepare("SELECT kind, status, COUNT(*) AS n FROM items GROUP BY kind, status").all() as {
      kind: string;
      status: string;
      n: number;
    }[];
    return Object.fromEntries(rows.map((row) => [`${row.kind}/${row.status}`, row.n]));
  }

  /**
   * Final: done with an outcome. Only pending or submitted items finish (an operator's skip stays); an orphaned one
   * too with `evenOrphaned` (its transaction was mined before its cancellation: the store tells what happened).
   */
  finish(id: string, outcome: string, evenOrphaned = false): void {
    this.db
      .prepare(`UPDATE items SET status = 'done', outcome = ?, updated_ms = ? WHERE id = ? AND status IN ('pending','submitted'${evenOrphaned ? ",'orphaned'" : ""})`)
      .run(outcome, this.nowMs(), id);
  }

  /**
   * Its source event is gone (seen before its send): `orphaned` with the reason, as a rewind does; a rescan that
   * finds the event again revives it (insertItem).
   */
  orphan(id: string, reason: string): void {
    this.db
      .prepare("UPDATE items SET status = 'orphaned', outcome = ?, updated_ms = ? WHERE id = ? AND status IN ('pending','submitted')")
      .run(reason.slice(0, MAX_ERROR_TEXT), this.nowMs(), id);
  }

  deadLetter(id: string, reason: string): void {
    this.db
      .prepare("UPDATE items SET status = 'dead', outcome = ?, updated_ms = ? WHERE id = ? AND status IN ('pending','submitted')")
      .run(reason.slice(0, MAX_ERROR_TEXT), this.nowMs(), id);
  }

  /** Not now: try again at `nextAttemptMs` (a wait, not a failure: counters stay). */
  postpone(id: string, nextAttemptMs: number, note: string | null): void {
    this.db
      .prepare("UPDATE items SET status = 'pending', next_attempt_ms = ?, last_error = COALESCE(?, last_error), updated_ms = ? WHERE id = ? AND status IN ('pending','submitted')")
      .run(nextAttemptMs, note, this.nowMs(), id);
  }

  /**
   * A failed attempt: counts it, remembers the error (its name, for the deterministic-revert rule) and schedules
   * the next attempt. Returns how many times in a row this error name was seen.
   */
  recordFailure(id: string, errorName: string, message: string, nextAttemptMs: number): number {
    return this.db.transaction(() => {
      const row = this.db.prepare("SELECT last_error_name, same_error_count FROM items WHERE id = ?").get(id) as
        | { last_error_name: string | null; same_error_count: number }
        | undefined;
      if (row === undefined) return 0;
      const same = row.last_error_name === errorName ? row.same_error_count + 1 : 1;
      this.db
        .prepare(
          "UPDATE items SET status = 'pending', attempts = attempts + 1, next_attempt_ms = ?, last_error = ?, last_error_name = ?, same_error_count = ?, updated_ms = ? WHERE id = ? AND status IN ('pending','submitted')",
        )
        .run(nextAttemptMs, message.slice(0, MAX_ERROR_TEXT), errorName, same, this.nowMs(), id);
      return same;
    })();
  }

  /** Operator: a dead, skipped or pending item is tried again now, with its counters reset. */
  retry(id: string): boolean {
    const result = this.db
      .prepare(
        "UPDATE items SET status = 'pending', next_attempt_ms = ?, attempts = 0, same_error_count = 0, last_error_name = NULL, outcome = NULL, updated_ms = ? WHERE id = ? AND status IN ('dead','skipped','pending')",
      )
      .run(this.nowMs(), this.nowMs(), id);
    return result.changes > 0;
  }

  /** Operator: a pending or dead item is given up. A submitted one is not (its transaction is out). */
  skip(id: string): boolean {
    const result = this.db
      .prepare("UPDATE items SET status = 'skipped', updated_ms = ? WHERE id = ? AND status IN ('pending','dead')")
      .run(this.nowMs(), id);
    return result.changes > 0;
  }

  // ---- nonces and transactions ---------------------------------------------------------------------------------

  nextNonce(chainId: number): number | undefined {
    const row = this.db.prepare("SELECT next_nonce FROM nonces WHERE chain_id = ?").get(chainId) as { next_nonce: number } | undefined;
    return row?.next_nonce;
  }

  setNextNonce(chainId: number, nonce: number): void {
    this.db
      .prepare("INSERT INTO nonces (chain_id, next_nonce) VALUES (?, ?) ON CONFLICT (chain_id) DO UPDATE SET next_nonce = excluded.next_nonce")
      .run(chainId, nonce);
  }

  /**
   * The nonce claim: records a signed transaction for `tx.nonce`, moves the next nonce past it (when the
   * transaction takes a new nonce) and the item to `submitted`, in one transaction. Throws when `tx.nonce` is not
   * the next nonce of the chain and not a replacement of an open one (a bug, never two nonces for one job).
   */
  recordSigned(tx: Omit<TxRecord, "state" | "minedBlock">, replacement: boolean): void {
    this.db.transaction(() => {
      const next = this.nextNonce(tx.chainId);
      if (!replacement && next !== tx.nonce) throw new Error(`nonce claim out of order on chain ${tx.chainId}: next ${next}, claimed ${tx.nonce}`);
      this.db
        .prepare(
          `INSERT INTO txs (chain_id, nonce, hash, item_id, raw, state, max_fee_per_gas, max_priority_fee_per_gas, gas, to_address, data, sent_ms)
           VALUES (?, ?, ?, ?, ?, 'signed', ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          tx.chainId,
          tx.nonce,
          tx.hash,
          tx.itemId,
          tx.raw,
          tx.maxFeePerGas.toString(),
          tx.maxPriorityFeePerGas.toString(),
          tx.gas.toString(),
          tx.to,
          tx.data,
          tx.sentMs,
        );
      if (!replacement) this.setNextNonce(tx.chainId, tx.nonce + 1);
      if (tx.itemId !== null) {
        this.db.prepare("UPDATE items SET status = 'submitted', attempts = attempts + 1, updated_ms = ? WHERE id = ?").run(this.nowMs(), tx.itemId);
      }
    })();
  }

  /**
   * A nonce whose settled transaction the chain no longer has: a reorg deeper than the confirmation depth took its
   * block back, and the chain's nonce is below it again. Its confirmed transaction goes back to `broadcast`, to be
   * sent again at that nonce with its own raw bytes (the same job, so a message is still delivered once: a copy that
   * lands after someone else's delivery reverts), and its item from `done` back to `submitted`, so the settlement
   * decides its outcome again. Returns the items reopened.
   */
  reopenRevertedNonce(chainId: number, nonce: number): string[] {
    return this.db.transaction(() => {
      const reopened: string[] = [];
      for (const tx of this.txsOfNonce(chainId, nonce)) {
        if (tx.state !== "confirmed") continue;
        this.setTxState(tx.hash, "broadcast");
        if (tx.itemId === null) continue;
        const changed = this.db
          .prepare("UPDATE items SET status = 'submitted', outcome = NULL, updated_ms = ? WHERE id = ? AND status = 'done'")
          .run(this.nowMs(), tx.itemId).changes;
        if (changed > 0) reopened.push(tx.itemId);
      }
      return reopened;
    })();
  }

  setTxState(hash: Hex, state: TxState, minedBlock: bigint | null = null): void {
    this.db.prepare("UPDATE txs SET state = ?, mined_block = ? WHERE hash = ?").run(state, minedBlock?.toString() ?? null, hash);
  }

  /** Transactions whose fate is open (signed, broadcast, mined not yet confirmed) on a chain, by nonce. */
  openTxs(chainId: number): TxRecord[] {
    return (
      this.db
        .prepare("SELECT * FROM txs WHERE chain_id = ? AND state IN ('signed','broadcast','mined') ORDER BY nonce, sent_ms, rowid")
        .all(chainId) as TxRow[]
    ).map(txFromRow);
  }

  txsOfNonce(chainId: number, nonce: number): TxRecord[] {
    return (this.db.prepare("SELECT * FROM txs WHERE chain_id = ? AND nonce = ? ORDER BY sent_ms, rowid").all(chainId, nonce) as TxRow[]).map(
      txFromRow,
    );
  }

  txsOfItem(itemId: string): TxRecord[] {
    return (this.db.prepare("SELECT * FROM txs WHERE item_id = ? ORDER BY nonce, sent_ms, rowid").all(itemId) as TxRow[]).map(txFromRow);
  }

  /**
   * A nonce settled: `winner` (one of our transactions, or null when a transaction we did not record took it) is
   * confirmed, every other transaction of the nonce is replaced; the items of replaced transactions that are
   * still `submitted` come back to `pending`, to be decided again from on-chain state.
   */
  settleNonce(chainId: number, nonce: number, winner: Hex | null, minedBlock: bigint | null): void {
    this.db.transaction(() => {
      const txs = this.txsOfNonce(chainId, nonce);
      const winnerItem = txs.find((tx) => tx.hash === winner)?.itemId ?? null;
      for (const tx of txs) {
        if (tx.hash === winner) {
          this.setTxState(tx.hash, "confirmed", minedBlock);
          continue;
        }
        this.setTxState(tx.hash, "replaced");
        // A fee bump of the winner's own item is not a lost job.
        if (tx.itemId !== null && tx.itemId !== winnerItem) {
          this.db
            .prepare("UPDATE items SET status = 'pending', next_attempt_ms = ?, updated_ms = ? WHERE id = ? AND status = 'submitted'")
            .run(this.nowMs(), this.nowMs(), tx.itemId);
        }
      }
    })();
  }
}
