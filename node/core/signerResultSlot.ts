/**
 * The signer thread's shared memory: the result slot, into which the worker writes each signature it makes, and
 * the tick permit, by which the serving thread lets a self-ticking worker sign or holds it.
 *
 * The slot: a reply message reaches the parent only when its event loop polls again; under saturation a loop turn
 * answers a hundred requests, and proofs signed in the thread were served several times older than proofs signed in
 * the loop (`npm run bench:node`; figures in docs/benchmarks.md). Through the slot the serving thread takes a signature as soon as it
 * exists; checking it costs one atomic load.
 *
 * Detail: docs/node.md "Signing, transports and limits".
 */
import type { Hex } from "../../protocol/types";

/*
 * Layout (RESULT_SLOT_BYTES, little-endian): int32 at 0 = the version (even: stable; odd: being written; 0: never
 * written), int32 at 4 = the request id or the tick number, int32 at 8 = the kind (1: the answer to a request, 2: a
 * tick of a self-ticking thread), int32 at 12 = the permit epoch a tick was signed under (0 for an answer), u64 at 16 = nanoMoment, u64 at 24 = the node timestamp, u64 at 32 =
 * how long the signing took (ns), the 80-byte node entry at 40, its 32-byte EIP-712 digest at 120, the 96-byte
 * hardware signature it covers (cardId ‖ r ‖ s) at 152.
 *
 * It is a seqlock: one writer (the worker) makes the version odd, stores the record, and makes it even again; a
 * reader copies the record and keeps it only when the version was the same even number before and after the copy.
 * Every word is stored and loaded with Atomics (sequentially consistent), so no plain write can move across the
 * version stores on any CPU: a record read is whole, or the read reports nothing (and the next check finds the new
 * version). A self-ticking worker writes while the serving thread may read; that is what this rule makes safe.
 */
const ID_OFFSET = 4;
const KIND_OFFSET = 8;
const EPOCH_OFFSET = 12;
const MOMENT_OFFSET = 16;
const NODE_TIMESTAMP_OFFSET = 24;
const SIGN_DURATION_OFFSET = 32;
const ENTRY_OFFSET = 40;
const ENTRY_BYTES = 80;
const DIGEST_OFFSET = ENTRY_OFFSET + ENTRY_BYTES;
const DIGEST_BYTES = 32;
const HARDWARE_OFFSET = DIGEST_OFFSET + DIGEST_BYTES;
const HARDWARE_BYTES = 96;
export const RESULT_SLOT_BYTES = HARDWARE_OFFSET + HARDWARE_BYTES;
const SLOT_WORDS = RESULT_SLOT_BYTES / 4;
const MAX_U64 = 2n ** 64n - 1n;
/** The kinds of record, as stored at KIND_OFFSET. */
const KIND_CODES = { reply: 1, tick: 2 } as const;
export type SlotRecordKind = keyof typeof KIND_CODES;

/** One signature of the thread: the node entry, its digest, and the hardware signature the entry covers. */
export interface SlotResult {
  entry: Hex;
  digest: Hex;
  hardwareSignature: Hex;
}

/** What the slot holds: a signature with what it signed and how long it took. */
export interface SlotRecord extends SlotResult {
  /** "reply": the answer to sign request `id`; "tick": tick number `id` of a self-ticking thread. */
  kind: SlotRecordKind;
  /** The request id, or the tick number: a positive int32. */
  id: number;
  /** The TickPermit epoch the thread read before signing this tick (0 for an answer to a request). */
  permitEpoch: number;
  /** ns since the Unix epoch (below 2^64 here: the year 2554). */
  nanoMoment: bigint;
  nodeTimestampNs: bigint;
  signDurationNs: bigint;
}

function hexInto(target: Buffer, offset: number, hex: Hex, bytes: number, what: string): void {
  if (hex.length !== 2 + 2 * bytes || target.write(hex.slice(2), offset, bytes, "hex") !== bytes) {
    throw new RangeError(`result slot: ${what} must be ${bytes} bytes of hex`);
  }
}

/** `buffer` when it is shared memory of the layout's size (a view of memory another thread made must match). */
function checkedShared(buffer: unknown, bytes: number, what: string): SharedArrayBuffer {
  if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength !== bytes) throw new RangeError(`${what}: a SharedArrayBuffer of ${bytes} bytes is needed`);
  return buffer;
}

function u64Into(target: Buffer, offset: number, value: bigint, what: string): void {
  if (value < 0n || value > MAX_U64) throw new RangeError(`result slot: ${what} must fit in 64 bits, got ${value}`);
  target.writeBigUInt64LE(value, offset);
}

/** Views of one slot's shared memory, made once (checks run on every proof request). */
export class ResultSlot {
  readonly buffer: SharedArrayBuffer;
  readonly #shared: Int32Array;
  /** The record being written or read, in this thread's own memory (never shared). */
  readonly #scratchWords = new Int32Array(SLOT_WORDS);
  readonly #scratch = Buffer.from(this.#scratchWords.buffer);

  /** A new slot, or a view of one another thread made (it must be RESULT_SLOT_BYTES long). */
  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(RESULT_SLOT_BYTES)) {
    this.buffer = checkedShared(buffer, RESULT_SLOT_BYTES, "result slot");
    this.#shared = new Int32Array(buffer);
  }

  /** The worker's side: publishes `record` (checked whole before anything is stored: a refused record changes nothing). */
  write(record: SlotRecord): void {
    const { id } = record;
    if (!Number.isInteger(id) || id <= 0 || id > 0x7fffffff) throw new RangeError(`result slot: the id must be a positive int32, got ${id}`);
    const scratch = this.#scratch;
    scratch.writeInt32LE(id, ID_OFFSET);
    const kindCode = Object.hasOwn(KIND_CODES, record.kind) ? KIND_CODES[record.kind] : undefined;
    if (kindCode === undefined) throw new RangeError(`result slot: unknown record kind ${String(record.kind)}`);
    scratch.writeInt32LE(kindCode, KIND_OFFSET);
    if (!Number.isInteger(record.permitEpoch) || record.permitEpoch < 0 || record.permitEpoch > 0x7fffffff) {
      throw new RangeError(`result slot: the permit epoch must be an int32 ≥ 0, got ${record.permitEpoch}`);
    }
    scratch.writeInt32LE(record.permitEpoch, EPOCH_OFFSET);
    u64Into(scratch, MOMENT_OFFSET, record.nanoMoment, "nanoMoment");
    u64Into(scratch, NODE_TIMESTAMP_OFFSET, record.nodeTimestampNs, "the node timestamp");
    u64Into(scratch, SIGN_DURATION_OFFSET, record.signDurationNs, "the signing duration");
    hexInto(scratch, ENTRY_OFFSET, record.entry, ENTRY_BYTES, "the entry");
    hexInto(scratch, DIGEST_OFFSET, record.digest, DIGEST_BYTES, "the digest");
    hexInto(scratch, HARDWARE_OFFSET, record.hardwareSignature, HARDWARE_BYTES, "the hardware signature");
    const shared = this.#shared;
    // The int32 version wraps after 2^31 writes (~25 days of 1 ms ticks); it skips 0, which means "never written".
    if (Atomics.load(shared, 0) === -2) Atomics.store(shared, 0, 0);
    Atomics.add(shared, 0, 1); // odd: being written
    for (let word = 1; word < SLOT_WORDS; word += 1) Atomics.store(shared, word, this.#scratchWords[word]!);
    Atomics.add(shared, 0, 1); // even again: stable
  }

  /** The slot's version now: it changes with every write (0: never written); one atomic load. */
  versionNow(): number {
    return Atomics.load(this.#shared, 0);
  }

  /**
   * The serving thread's side: the record in the slot with the version it was read at, or null when the slot was
   * never written or is being written right now (a later call sees the new version).
   */
  read(): (SlotRecord & { version: number }) | null {
    const shared = this.#shared;
    const version = Atomics.load(shared, 0);
    if (version === 0 || (version & 1) !== 0) return null;
    for (let word = 1; word < SLOT_WORDS; word += 1) this.#scratchWords[word] = Atomics.load(shared, word);
    if (Atomics.load(shared, 0) !== version) return null;
    const scratch = this.#scratch;
    return {
      version,
      kind: scratch.readInt32LE(KIND_OFFSET) === KIND_CODES.tick ? "tick" : "reply",
      id: scratch.readInt32LE(ID_OFFSET),
      permitEpoch: scratch.readInt32LE(EPOCH_OFFSET),
      nanoMoment: scratch.readBigUInt64LE(MOMENT_OFFSET),
      nodeTimestampNs: scratch.readBigUInt64LE(NODE_TIMESTAMP_OFFSET),
      signDurationNs: scratch.readBigUInt64LE(SIGN_DURATION_OFFSET),
      entry: `0x${scratch.toString("hex", ENTRY_OFFSET, ENTRY_OFFSET + ENTRY_BYTES)}`,
      digest: `0x${scratch.toString("hex", DIGEST_OFFSET, DIGEST_OFFSET + DIGEST_BYTES)}`,
      hardwareSignature: `0x${scratch.toString("hex", HARDWARE_OFFSET, HARDWARE_OFFSET + HARDWARE_BYTES)}`,
    };
  }
}

/** The bytes of a TickPermit's shared memory. */
export const TICK_PERMIT_BYTES = 4;

/**
 * Whether a self-ticking signer thread may sign (node/core/signerThread.ts), as an epoch: 0 while withheld, and a
 * new positive number each time it is granted after being withheld. The serving thread grants it after the tamper
 * and accuracy checks pass and withholds it when they fail; the thread reads it before every tick and writes the
 * epoch it read into the tick's record. The serving thread publishes only ticks of the epoch granted now: a tick
 * signed before a withdrawal (in flight, or written after the check that withdrew it) is never published, even once
 * the card is back within its bound. One writer (the serving thread). Starts withheld.
 */
export class TickPermit {
  readonly buffer: SharedArrayBuffer;
  readonly #word: Int32Array;
  /** The last epoch granted (the writer's own count; the shared word is 0 while withheld). */
  #lastEpoch = 0;

  /** A new permit, or a view of one another thread made. */
  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(TICK_PERMIT_BYTES)) {
    this.buffer = checkedShared(buffer, TICK_PERMIT_BYTES, "tick permit");
    this.#word = new Int32Array(buffer);
  }

  /** The writer's side: grants (a new epoch if it was withheld; the same one if already granted) or withholds. */
  set(granted: boolean): void {
    if (!granted) {
      Atomics.store(this.#word, 0, 0);
      return;
    }
    if (Atomics.load(this.#word, 0) !== 0) return;
    this.#lastEpoch = this.#lastEpoch >= 0x7fffffff ? 1 : this.#lastEpoch + 1;
    Atomics.store(this.#word, 0, this.#lastEpoch);
  }

  /** The epoch granted now; 0 while withheld. */
  get epoch(): number {
    return Atomics.load(this.#word, 0);
  }

  get granted(): boolean {
    return this.epoch !== 0;
  }
}
