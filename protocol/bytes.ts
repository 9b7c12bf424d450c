/**
 * Small byte helpers shared by the codec modules. They validate strictly and throw ProtocolError with the field
 * name and the observed value, so a caller never has to guess which input was wrong.
 */
import { ProtocolError } from "./errors";
import { UINT128_MAX } from "./constants";
import type { Hex } from "./types";

const HEX_PATTERN = /^0x(?:[0-9a-fA-F]{2})*$/;

/** Shortens a long value for an error message (evidence without flooding logs). */
export function preview(value: string, maxChars = 80): string {
  return value.length <= maxChars ? value : `${value.slice(0, maxChars)}…(${value.length} chars)`;
}

/** Checks that `value` is even-length hex (any case) and returns it lowercased. */
export function toHexStrict(value: unknown, field: string): Hex {
  if (typeof value !== "string" || !HEX_PATTERN.test(value)) {
    throw new ProtocolError(`${field} is not 0x-prefixed even-length hex`, {
      field,
      value: typeof value === "string" ? preview(value) : typeof value,
    });
  }
  return value.toLowerCase() as Hex;
}

/** Byte length of validated hex. */
export function hexByteLength(value: Hex): number {
  return (value.length - 2) / 2;
}

/** Checks hex of exactly `length` bytes and returns it lowercased. */
export function toFixedHex(value: unknown, length: number, field: string): Hex {
  const hex = toHexStrict(value, field);
  const actual = hexByteLength(hex);
  if (actual !== length) {
    throw new ProtocolError(`${field} must be ${length} bytes, got ${actual}`, {
      field,
      expectedBytes: length,
      actualBytes: actual,
    });
  }
  return hex;
}

export function bytesToHexString(bytes: Uint8Array): Hex {
  return `0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")}`;
}

export function hexToByteArray(hex: Hex): Uint8Array {
  return new Uint8Array(Buffer.from(hex.slice(2), "hex"));
}

/** Checks a uint128 (ns values on the wire). */
export function assertUint128(value: unknown, field: string): bigint {
  if (typeof value !== "bigint" || value < 0n || value > UINT128_MAX) {
    throw new ProtocolError(`${field} must be a uint128 bigint`, {
      field,
      value: typeof value === "bigint" ? value.toString() : typeof value,
    });
  }
  return value;
}

/** Checks a uint32 given as a JS number (accuracy in ns). */
export function assertUint32(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
    throw new ProtocolError(`${field} must be an integer in [0, 2^32)`, { field, value: String(value) });
  }
  return value;
}

/** Big-endian fixed-width encoding of a non-negative integer. */
export function bigintToFixedHex(value: bigint, length: number): Hex {
  return `0x${value.toString(16).padStart(length * 2, "0")}`;
}

export function hexToBigint(hex: Hex): bigint {
  return hex === "0x" ? 0n : BigInt(hex);
}

/** Concatenates validated hex strings. */
export function concatHexStrings(parts: readonly Hex[]): Hex {
  return `0x${parts.map((part) => part.slice(2)).join("")}`;
}

/** Bytes [start, end) of validated hex. */
export function sliceHexBytes(hex: Hex, start: number, end: number): Hex {
  return `0x${hex.slice(2 + start * 2, 2 + end * 2)}`;
}

/** A Buffer view of `bytes` (no copy). */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Big-endian fixed-width bytes of a non-negative integer below 2^(8·length) (constants, not per-call paths). */
export function bigintToBytes(value: bigint, length: number): Buffer {
  return Buffer.from(bigintToFixedHex(value, length).slice(2), "hex");
}

const UINT64_MASK = (1n << 64n) - 1n;

/** Writes a uint128 (already range-checked) as 16 big-endian bytes at `offset`. */
export function writeUint128(target: Buffer, offset: number, value: bigint): void {
  target.writeBigUInt64BE(value >> 64n, offset);
  target.writeBigUInt64BE(value & UINT64_MASK, offset + 8);
}

/** Reads 16 big-endian bytes at `offset` as a uint128. */
export function readUint128(source: Buffer, offset: number): bigint {
  return (source.readBigUInt64BE(offset) << 64n) | source.readBigUInt64BE(offset + 8);
}
