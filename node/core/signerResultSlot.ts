/**
 * The signer thread's result slot: shared memory into which the worker writes each node signature before it
 * posts the reply, so that the serving thread can take the signature as soon as it exists. A reply message
 * reaches the parent only when its event loop polls again; under saturation a loop turn answers a hundred
 * requests (1–2 ms), and proofs signed in the thread were served 5–7× older than proofs signed in the loop
 * (`npm run bench:node`, 2026-11-25). Reading the slot costs one atomic load per check.
 *
 * Layout (RESULT_SLOT_BYTES): int32 at 0 = the request id of the result in the slot (0 while none or while it is
 * being written), 4 bytes spare, the 80-byte node entry at 8, its 32-byte EIP-712 digest at 88, the 96-byte
 * hardware signature it covers (cardId ‖ r ‖ s: the card's, made by the thread or given to it) at 120. One writer (the
 * worker): it clears the id, writes the bytes, then publishes the id (Atomics: the bytes written before the
 * store are visible to a reader that loads that id). The attestor has at most one request in flight per thread
 * (a tick is armed only when the previous one finished, and a thread whose reply is late is closed), so the worker
 * never writes while the serving thread reads the pending id's result. The id is checked again after the copy
 * all the same; it is a defence, not a seqlock: JavaScript has no fence to keep the worker's later byte writes
 * behind its clearing store on weakly ordered CPUs.
 */
import type { Hex } from "../../protocol/types";

const ENTRY_OFFSET = 8;
const ENTRY_BYTES = 80;
const DIGEST_OFFSET = ENTRY_OFFSET + ENTRY_BYTES;
const DIGEST_BYTES = 32;
const HARDWARE_OFFSET = DIGEST_OFFSET + DIGEST_BYTES;
const HARDWARE_BYTES = 96;
export const RESULT_SLOT_BYTES = HARDWARE_OFFSET + HARDWARE_BYTES;

/** One signature of the thread: the node entry, its digest, and the hardware signature the entry covers. */
export interface SlotResult {
  entry: Hex;
  digest: Hex;
  hardwareSignature: Hex;
}

function hexBytes(hex: Hex, bytes: number, what: string): Buffer {
  const raw = Buffer.from(hex.slice(2), "hex");
  if (raw.length !== bytes || hex.length !== 2 + 2 * bytes) throw new RangeError(`result slot: ${what} must be ${bytes} bytes of hex`);
  return raw;
}

/** Views of one slot's shared memory, made once (checks run on every proof request). */
export class ResultSlot {
  readonly buffer: SharedArrayBuffer;
  readonly #header: Int32Array;
  readonly #bytes: Buffer;

  /** A new slot, or a view of one another thread made (it must be RESULT_SLOT_BYTES long). */
  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(RESULT_SLOT_BYTES)) {
    if (!(buffer instanceof SharedArrayBuffer) || buffer.byteLength !== RESULT_SLOT_BYTES) {
      throw new RangeError(`result slot: a SharedArrayBuffer of ${RESULT_SLOT_BYTES} bytes is needed`);
    }
    this.buffer = buffer;
    this.#header = new Int32Array(buffer, 0, 1);
    this.#bytes = Buffer.from(buffer);
  }

  /** The worker's side: publishes `result` as the result of request `id` (a positive int32). */
  write(id: number, result: SlotResult): void {
    if (!Number.isInteger(id) || id <= 0 || id > 0x7fffffff) throw new RangeError(`result slot: request id must be a positive int32, got ${id}`);
    const entryBytes = hexBytes(result.entry, ENTRY_BYTES, "the entry");
    const digestBytes = hexBytes(result.digest, DIGEST_BYTES, "the digest");
    const hardwareBytes = hexBytes(result.hardwareSignature, HARDWARE_BYTES, "the hardware signature");
    Atomics.store(this.#header, 0, 0);
    this.#bytes.set(entryBytes, ENTRY_OFFSET);
    this.#bytes.set(digestBytes, DIGEST_OFFSET);
    this.#bytes.set(hardwareBytes, HARDWARE_OFFSET);
    Atomics.store(this.#header, 0, id);
  }

  /** The id of the result in the slot now (0: none); one atomic load. */
  idNow(): number {
    return Atomics.load(this.#header, 0);
  }

  /** The serving thread's side: the result of request `id` when the slot holds it, else null. */
  read(id: number): SlotResult | null {
    if (Atomics.load(this.#header, 0) !== id) return null;
    const entry: Hex = `0x${this.#bytes.toString("hex", ENTRY_OFFSET, ENTRY_OFFSET + ENTRY_BYTES)}`;
    const digest: Hex = `0x${this.#bytes.toString("hex", DIGEST_OFFSET, DIGEST_OFFSET + DIGEST_BYTES)}`;
    const hardwareSignature: Hex = `0x${this.#bytes.toString("hex", HARDWARE_OFFSET, HARDWARE_OFFSET + HARDWARE_BYTES)}`;
    return Atomics.load(this.#header, 0) === id ? { entry, digest, hardwareSignature } : null;
  }
}
