/**
 * The proof archive behind HISTORICAL_PROOF: a bounded on-disk store (SQLite, `archive.sqlite` in dataDir) of
 * proofs the attestor produced. It keeps one proof per `intervalNs` (not every tick: at a 1 ms tick that would be
 * 86 M rows a day) and at most `capacity` proofs, evicting the oldest. A lookup returns the stored proof nearest
 * at or before a moment.
 */
import type { Logger } from "pino";
import type { Hex } from "../../protocol/types";
import { buildSignedTime } from "./signedTime";
import { blobToNs, nsToBlob, openDatabase, type SqliteDatabase, type SqliteStatement } from "../../lib/sqlite";
import type { SignedTime } from "./types";

export interface ProofArchiveOptions {
  dataDir: string;
  /** Store at most one proof per this interval of nanoMoment, ns. */
  intervalNs: bigint;
  /** Maximum number of stored proofs. */
  capacity: number;
  logger: Logger;
}

interface ProofRow {
  nano_moment: Buffer;
  produced_at_ns: Buffer;
  hardware_signature: Buffer;
  node_signature: Buffer;
  accuracy: number;
}

const toHex = (buffer: Buffer): Hex => `0x${buffer.toString("hex")}`;
const fromHex = (hex: Hex): Buffer => Buffer.from(hex.slice(2), "hex");

export class ProofArchive {
  readonly #db: SqliteDatabase;
  readonly #options: ProofArchiveOptions;
  readonly #insert: SqliteStatement;
  readonly #evict: SqliteStatement;
  readonly #nearest: SqliteStatement;
  readonly #count: SqliteStatement;
  #lastStoredNs: bigint | null;

  constructor(options: ProofArchiveOptions) {
    this.#options = options;
    this.#db = openDatabase({ dataDir: options.dataDir, fileName: "archive.sqlite", synchronous: "NORMAL" });
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS proofs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        nano_moment BLOB NOT NULL,
        produced_at_ns BLOB NOT NULL,
        hardware_signature BLOB NOT NULL,
        node_signature BLOB NOT NULL,
        accuracy INTEGER NOT NULL
      );
      CREATE INDEX IF NOT EXISTS proofs_by_moment ON proofs (nano_moment);
    `);
    this.#insert = this.#db.prepare(
      "INSERT INTO proofs (nano_moment, produced_at_ns, hardware_signature, node_signature, accuracy) VALUES (?, ?, ?, ?, ?)",
    );
    // seq grows with insertion order, so the oldest rows have the smallest seq.
    this.#evict = this.#db.prepare("DELETE FROM proofs WHERE seq <= ?");
    this.#nearest = this.#db.prepare(
      "SELECT nano_moment, produced_at_ns, hardware_signature, node_signature, accuracy FROM proofs WHERE nano_moment <= ? ORDER BY nano_moment DESC LIMIT 1",
    );
    this.#count = this.#db.prepare("SELECT COUNT(*) AS n FROM proofs");
    const last = this.#db.prepare("SELECT MAX(nano_moment) AS m FROM proofs").get() as { m: Buffer | null };
    this.#lastStoredNs = last.m === null ? null : blobToNs(last.m);
  }

  /**
   * Stores `signed` when at least intervalNs passed since the last stored proof (returns whether it did), then
   * evicts beyond capacity. A clock that stepped back (restart on another host) stores again at once.
   */
  offer(signed: SignedTime): boolean {
    const moment = signed.proof.nanoMoment;
    const last = this.#lastStoredNs;
    if (last !== null && moment >= last && moment - last < this.#options.intervalNs) return false;
    const { proof } = signed;
    const result = this.#insert.run(
      nsToBlob(moment),
      nsToBlob(signed.producedAtNs),
      fromHex(proof.hardwareSignature),
      fromHex(proof.nodeSignature),
      proof.accuracy,
    );
    this.#lastStoredNs = moment;
    const seq = Number(result.lastInsertRowid);
    if (seq > this.#options.capacity) this.#evict.run(seq - this.#options.capacity);
    return true;
  }

  /** The stored proof with the greatest nanoMoment ≤ atNs, or undefined. */
  nearestAtOrBefore(atNs: bigint): SignedTime | undefined {
    if (atNs < 0n || atNs >> 128n !== 0n) return undefined;
    const row = this.#nearest.get(nsToBlob(atNs)) as ProofRow | undefined;
    if (row === undefined) return undefined;
    return buildSignedTime(
      {
        nanoMoment: blobToNs(row.nano_moment),
        hardwareSignature: toHex(row.hardware_signature),
        nodeSignature: toHex(row.node_signature),
        accuracy: row.accuracy,
      },
      blobToNs(row.produced_at_ns),
    );
  }

  size(): number {
    return (this.#count.get() as { n: number }).n;
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
