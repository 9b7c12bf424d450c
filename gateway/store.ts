/**
 * The temporal gateway's durable state (SQLite, WAL): each transaction's canonical timestamp (when the gateway
 * received it, or when it first saw it in a block), the blocks it processed (hash, when observed, how many
 * transactions, their largest timestamp) and so the watermark: the highest canonical timestamp processed by chain
 * state. Nanoseconds are 16-byte big-endian BLOBs (lib/sqlite.ts). After a reorg, `forgetBlocksFrom` removes the
 * orphaned blocks, un-includes their transactions and drops the timestamps that only a block gave.
 */
import { blobToNs, nsToBlob, openDatabase, type SqliteDatabase } from "../lib/sqlite";
import type { Hex } from "../protocol/types";

export type TimestampSource = "received" | "observed";

export interface TxTimestamp {
  hash: Hex;
  timestampNs: bigint;
  source: TimestampSource;
  blockNumber: bigint | null;
  txIndex: number | null;
  /** For received transactions: the max fee per gas it offered (the local fee-priority queue), wei. */
  maxFeePerGasWei: bigint | null;
  /**
   * When the gateway first knew it in a block, ns: when it observed the block, or earlier, when a receipt asked for
   * (temporal_getTransactionWaitTime) showed it included (received ones: their wait ends there).
   */
  includedAtNs: bigint | null;
}

export interface BlockRecord {
  number: bigint;
  hash: Hex;
  parentHash: Hex;
  observedAtNs: bigint;
  transactionCount: number;
  /** The largest canonical timestamp of its transactions; null for an empty block. */
  maxTimestampNs: bigint | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tx_timestamps (
  hash TEXT PRIMARY KEY,
  timestamp_ns BLOB NOT NULL,
  source TEXT NOT NULL CHECK (source IN ('received','observed')),
  block_number INTEGER,
  tx_index INTEGER,
  max_fee_wei TEXT,
  included_at_ns BLOB
) STRICT;
CREATE INDEX IF NOT EXISTS tx_block ON tx_timestamps (block_number, tx_index);
CREATE TABLE IF NOT EXISTS blocks (
  number INTEGER PRIMARY KEY,
  hash TEXT NOT NULL,
  parent_hash TEXT NOT NULL,
  observed_at_ns BLOB NOT NULL,
  tx_count INTEGER NOT NULL,
  max_timestamp_ns BLOB
) STRICT;
`;

interface TxRow {
  hash: Hex;
  timestamp_ns: Buffer;
  source: TimestampSource;
  block_number: number | null;
  tx_index: number | null;
  max_fee_wei: string | null;
  included_at_ns: Buffer | null;
}

interface BlockRow {
  number: number;
  hash: Hex;
  parent_hash: Hex;
  observed_at_ns: Buffer;
  tx_count: number;
  max_timestamp_ns: Buffer | null;
}

function txFromRow(row: TxRow): TxTimestamp {
  return {
    hash: row.hash,
    timestampNs: blobToNs(row.timestamp_ns),
    source: row.source,
    blockNumber: row.block_number === null ? null : BigInt(row.block_number),
    txIndex: row.tx_index,
    maxFeePerGasWei: row.max_fee_wei === null ? null : BigInt(row.max_fee_wei),
    includedAtNs: row.included_at_ns === null ? null : blobToNs(row.included_at_ns),
  };
}

function blockFromRow(row: BlockRow): BlockRecord {
  return {
    number: BigInt(row.number),
    hash: row.hash,
    parentHash: row.parent_hash,
    observedAtNs: blobToNs(row.observed_at_ns),
    transactionCount: row.tx_count,
    maxTimestampNs: row.max_timestamp_ns === null ? null : blobToNs(row.max_timestamp_ns),
  };
}

export class TemporalStore {
  readonly db: SqliteDatabase;

  constructor(dataDir: string) {
    this.db = openDatabase({ dataDir, fileName: "temporal.db", synchronous: "FULL" });
    this.db.exec(SCHEMA);
  }

  close(): void {
    this.db.close();
  }

  /** A transaction the gateway forwarded: its timestamp is its arrival in consensus time (kept if already known). */
  recordReceived(hash: Hex, timestampNs: bigint, maxFeePerGasWei: bigint | null): TxTimestamp {
    this.db
      .prepare("INSERT INTO tx_timestamps (hash, timestamp_ns, source, max_fee_wei) VALUES (?, ?, 'received', ?) ON CONFLICT (hash) DO NOTHING")
      .run(hash.toLowerCase(), nsToBlob(timestampNs), maxFeePerGasWei?.toString() ?? null);
    return this.transaction(hash)!;
  }

  transaction(hash: Hex): TxTimestamp | undefined {
    const row = this.db.prepare("SELECT * FROM tx_timestamps WHERE hash = ?").get(hash.toLowerCase()) as TxRow | undefined;
    return row === undefined ? undefined : txFromRow(row);
  }

  block(number: bigint): BlockRecord | undefined {
    const row = this.db.prepare("SELECT * FROM blocks WHERE number = ?").get(Number(number)) as BlockRow | undefined;
    return row === undefined ? undefined : blockFromRow(row);
  }

  /** The first block this gateway recorded (its history starts there). */
  firstBlock(): BlockRecord | undefined {
    const row = this.db.prepare("SELECT * FROM blocks ORDER BY number ASC LIMIT 1").get() as BlockRow | undefined;
    return row === undefined ? undefined : blockFromRow(row);
  }

  latestBlock(): BlockRecord | undefined {
    const row = this.db.prepare("SELECT * FROM blocks ORDER BY number DESC LIMIT 1").get() as BlockRow | undefined;
    return row === undefined ? undefined : blockFromRow(row);
  }

  /** The transactions of a block with their timestamps, in block order. */
  blockTransactions(number: bigint): TxTimestamp[] {
    return (this.db.prepare("SELECT * FROM tx_timestamps WHERE block_number = ? ORDER BY tx_index").all(Number(number)) as TxRow[]).map(txFromRow);
  }

  /**
   * A received transaction that a receipt shows in block `blockNumber` before the gateway recorded that block: it is
   * included from `atNs` on. Recording the block keeps that moment (recordBlock); a block recorded at that number
   * without the transaction un-includes it, and a reorg forgets it with the block (forgetBlocksFrom).
   */
  markIncluded(hash: Hex, blockNumber: bigint, txIndex: number, atNs: bigint): void {
    this.db
      .prepare("UPDATE tx_timestamps SET block_number = ?, tx_index = ?, included_at_ns = ? WHERE hash = ? AND block_number IS NULL")
      .run(Number(blockNumber), txIndex, nsToBlob(atNs), hash.toLowerCase());
  }

  /**
   * Records a block and its transactions, in one commit: a transaction not seen before gets `observedAtNs` as its
   * timestamp (source "observed"); one received earlier keeps its own and is marked included (from when a receipt
   * first showed it in this block, if one did: markIncluded). One marked included at this number by a receipt but
   * absent from the block (the receipt's block was reorged away before it was recorded) is un-included.
   */
  recordBlock(block: Omit<BlockRecord, "transactionCount" | "maxTimestampNs">, txHashes: readonly Hex[]): BlockRecord {
    return this.db.transaction(() => {
      const insertObserved = this.db.prepare("INSERT INTO tx_timestamps (hash, timestamp_ns, source) VALUES (?, ?, 'observed') ON CONFLICT (hash) DO NOTHING");
      const include = this.db.prepare(
        "UPDATE tx_timestamps SET included_at_ns = CASE WHEN block_number = @number AND included_at_ns IS NOT NULL THEN included_at_ns ELSE @atNs END, block_number = @number, tx_index = @index WHERE hash = @hash",
      );
      const hashes = txHashes.map((raw) => raw.toLowerCase());
      const inBlock = new Set(hashes);
      const markedHere = this.db.prepare("SELECT hash FROM tx_timestamps WHERE block_number = ?").all(Number(block.number)) as { hash: string }[];
      const unInclude = this.db.prepare("UPDATE tx_timestamps SET block_number = NULL, tx_index = NULL, included_at_ns = NULL WHERE hash = ?");
      for (const { hash } of markedHere) if (!inBlock.has(hash)) unInclude.run(hash);
      let maxTimestampNs: bigint | null = null;
      hashes.forEach((hash, index) => {
        insertObserved.run(hash, nsToBlob(block.observedAtNs));
        include.run({ number: Number(block.number), index, atNs: nsToBlob(block.observedAtNs), hash });
        const timestampNs = this.transaction(hash as Hex)!.timestampNs;
        if (maxTimestampNs === null || timestampNs > maxTimestampNs) maxTimestampNs = timestampNs;
      });
      this.db
        .prepare("INSERT INTO blocks (number, hash, parent_hash, observed_at_ns, tx_count, max_timestamp_ns) VALUES (?, ?, ?, ?, ?, ?)")
        .run(Number(block.number), block.hash, block.parentHash, nsToBlob(block.observedAtNs), txHashes.length, maxTimestampNs === null ? null : nsToBlob(maxTimestampNs));
      return { ...block, transactionCount: txHashes.length, maxTimestampNs };
    })();
  }

  /**
   * A reorg: forgets the blocks from `number` on. Their transactions are no longer included; a timestamp that only
   * the orphaned block gave (source "observed") is dropped, so the transaction gets a new one if a block includes it
   * again; a received transaction keeps its arrival time.
   */
  forgetBlocksFrom(number: bigint): number {
    return this.db.transaction(() => {
      this.db.prepare("DELETE FROM tx_timestamps WHERE source = 'observed' AND block_number >= ?").run(Number(number));
      this.db.prepare("UPDATE tx_timestamps SET block_number = NULL, tx_index = NULL, included_at_ns = NULL WHERE block_number >= ?").run(Number(number));
      return this.db.prepare("DELETE FROM blocks WHERE number >= ?").run(Number(number)).changes;
    })();
  }

  /** The highest canonical timestamp among the processed blocks' transactions, with the block holding it. */
  watermark(): { watermarkNs: bigint; blockNumber: bigint } | null {
    const rows = this.db.prepare("SELECT number, max_timestamp_ns FROM blocks WHERE max_timestamp_ns IS NOT NULL ORDER BY max_timestamp_ns DESC LIMIT 1").all() as {
      number: number;
      max_timestamp_ns: Buffer;
    }[];
    const row = rows[0];
    return row === undefined ? null : { watermarkNs: blobToNs(row.max_timestamp_ns), blockNumber: BigInt(row.number) };
  }

  /** Received transactions not yet seen in a block, highest fee first (the node-local fee-priority queue). */
  pendingReceived(limit: number): TxTimestamp[] {
    const rows = this.db
      .prepare("SELECT * FROM tx_timestamps WHERE source = 'received' AND block_number IS NULL ORDER BY CAST(max_fee_wei AS REAL) DESC, timestamp_ns LIMIT ?")
      .all(limit) as TxRow[];
    return rows.map(txFromRow);
  }

  countPendingReceived(): number {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM tx_timestamps WHERE source = 'received' AND block_number IS NULL").get() as { n: number }).n;
  }

  /** The latest included received transactions (their wait: inclusion − arrival), newest first. */
  recentIncludedReceived(limit: number): TxTimestamp[] {
    const rows = this.db
      .prepare("SELECT * FROM tx_timestamps WHERE source = 'received' AND block_number IS NOT NULL ORDER BY block_number DESC, tx_index DESC LIMIT ?")
      .all(limit) as TxRow[];
    return rows.map(txFromRow);
  }
}
