/**
 * The JSON form of proofs (docs/protocol.md §1, §9.1): nanoseconds as decimal strings, byte strings as lowercase
 * 0x-hex, lossless parsing of untrusted text. Validation is strict and every ValidationError names the field
 * (`proof.hardwareSignature`, `nanoMoment`, …) so a client sees exactly what to fix.
 */
import { isInteger, LosslessNumber, parse as parseLossless, stringify as stringifyLossless } from "lossless-json";
import { CARD_ID_LENGTH, HARDWARE_SIGNATURE_LENGTH, NODE_ENTRY_LENGTH, UINT128_MAX, UINT32_MAX } from "./constants";
import { ValidationError } from "./errors";
import { preview, sliceHexBytes } from "./bytes";
import { GPS_FIX_STATES, type GpsFixState, type GpsReference, type Hex, type ProofJson, type TimeProof } from "./types";

/**
 * Deepest array/object nesting parseJsonLossless accepts. Protocol messages nest 2 levels; the parser recurses
 * per level, so without a bound a few KB of `[[[[…` end in the engine's "Maximum call stack size exceeded".
 */
export const MAX_JSON_NESTING_DEPTH = 32;

/**
 * True when `text` opens more than `maxDepth` arrays/objects at once. One linear pass, no recursion, no
 * allocation: brackets inside strings (escapes included) do not count. Unbalanced text is left to the parser.
 */
export function exceedsJsonNestingDepth(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i += 1; // the escaped character, even a quote, is string content
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      depth += 1;
      if (depth > maxDepth) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth -= 1;
    }
  }
  return false;
}

/**
 * Parses untrusted JSON text without losing precision: safe integers become `number`, larger integers
 * `bigint` (exact, never rounded); numerals with a fraction or exponent stay `LosslessNumber` (their text kept)
 * because the protocol has no fractional fields and validators must be able to refuse them.
 * Throws ValidationError on `field` (default "$"; transports name the body or message): "nesting deeper than
 * 32 levels" (checked before parsing) or "malformed JSON (<the parser's reason>)".
 */
export function parseJsonLossless(text: string, field = "$"): unknown {
  if (exceedsJsonNestingDepth(text, MAX_JSON_NESTING_DEPTH)) {
    throw new ValidationError(field, `nesting deeper than ${MAX_JSON_NESTING_DEPTH} levels`, { maxDepth: MAX_JSON_NESTING_DEPTH });
  }
  try {
    return parseLossless(text, null, (numeral: string) => {
      if (!isInteger(numeral)) return new LosslessNumber(numeral);
      const value = BigInt(numeral);
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
    });
  } catch (cause) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    throw new ValidationError(field, `malformed JSON (${reason})`, { reason }, { cause });
  }
}

/** JSON text with bigints written as exact JSON integers. Protocol objects carry ns as strings already. */
export function stringifyJsonLossless(value: unknown, space?: number): string {
  const text = stringifyLossless(value, null, space, [{ test: (v) => typeof v === "bigint", stringify: (v) => String(v) }]);
  if (text === undefined) throw new ValidationError("$", "has no JSON representation", { type: typeof value });
  return text;
}

const DECIMAL_NS = /^(0|[1-9][0-9]*)$/;
const LOWER_HEX = /^0x(?:[0-9a-f]{2})*$/;

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(preview(value));
  if (typeof value === "bigint") return `${value} (unquoted integer)`;
  if (value instanceof LosslessNumber) return `${value.toString()} (unquoted number)`;
  if (value === null) return "null";
  return Array.isArray(value) ? "array" : typeof value;
}

/** A nanosecond value: a canonical decimal string (no sign, no leading zeros, no fraction/exponent) ≤ 2^128−1. */
export function parseNsString(value: unknown, field: string): bigint {
  if (typeof value !== "string") {
    throw new ValidationError(field, `must be a decimal string of nanoseconds, got ${describe(value)}`, { got: describe(value) });
  }
  if (!DECIMAL_NS.test(value)) {
    throw new ValidationError(field, `must contain only decimal digits without sign, fraction, exponent or leading zeros, got ${describe(value)}`, {
      got: preview(value),
    });
  }
  const ns = BigInt(value);
  if (ns > UINT128_MAX) throw new ValidationError(field, "exceeds uint128", { got: preview(value) });
  return ns;
}

/** Nanoseconds as the decimal string the JSON form uses. */
export function formatNs(valueNs: bigint): string {
  if (valueNs < 0n || valueNs > UINT128_MAX) throw new ValidationError("ns", "must be a uint128", { got: String(valueNs) });
  return valueNs.toString(10);
}

/** Lowercase 0x-hex, optionally of an exact byte length or a non-empty multiple of `multipleOf` bytes. */
export function parseHexField(value: unknown, field: string, length?: { exact?: number; multipleOf?: number }): Hex {
  if (typeof value !== "string" || !LOWER_HEX.test(value)) {
    throw new ValidationError(field, `must be lowercase 0x-prefixed even-length hex, got ${describe(value)}`, { got: describe(value) });
  }
  const bytes = (value.length - 2) / 2;
  if (length?.exact !== undefined && bytes !== length.exact) {
    throw new ValidationError(field, `must be ${length.exact} bytes, got ${bytes}`, { expectedBytes: length.exact, actualBytes: bytes });
  }
  if (length?.multipleOf !== undefined && (bytes === 0 || bytes % length.multipleOf !== 0)) {
    throw new ValidationError(field, `must be a non-empty multiple of ${length.multipleOf} bytes, got ${bytes}`, {
      multipleOf: length.multipleOf,
      actualBytes: bytes,
    });
  }
  return value as Hex;
}

/** A uint32 duration in ns as a plain JSON integer. */
export function parseUint32Field(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > UINT32_MAX) {
    throw new ValidationError(field, `must be a JSON integer in [0, 2^32), got ${describe(value)}`, { got: describe(value) });
  }
  return value;
}

/** `value` as a plain JSON object; ValidationError on `field` otherwise. */
export function asRecord(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value) || value instanceof LosslessNumber) {
    throw new ValidationError(field, `must be an object, got ${describe(value)}`, { got: describe(value) });
  }
  return value as Record<string, unknown>;
}

/** ValidationError naming the first key of `record` outside `allowed` (closed objects, docs/protocol.md §1). */
export function rejectUnknownKeys(record: Record<string, unknown>, allowed: readonly string[], field: string): void {
  for (const key of Object.keys(record)) {
    if (!allowed.includes(key)) throw new ValidationError(field === "$" ? key : `${field}.${key}`, "is not a known field", {});
  }
}

/**
 * The REST/JSON form of a proof. `cardId` defaults to the first 32 bytes of hardwareSignature; `gps` (the card's
 * GPS reference, unsigned metadata) defaults to null.
 */
export function proofToJson(proof: TimeProof, cardId?: Hex, gps: GpsReference | null = null): ProofJson {
  const hardwareSignature = parseHexField(proof.hardwareSignature.toLowerCase(), "proof.hardwareSignature", {
    exact: HARDWARE_SIGNATURE_LENGTH,
  });
  const hardwareId = sliceHexBytes(hardwareSignature, 0, CARD_ID_LENGTH);
  if (cardId !== undefined && cardId.toLowerCase() !== hardwareId) {
    throw new ValidationError("proof.hardwareId", "does not match the cardId inside hardwareSignature", { cardId, hardwareId });
  }
  return {
    nanoMoment: formatNs(proof.nanoMoment),
    proof: {
      hardwareSignature,
      nodeSignature: parseHexField(proof.nodeSignature.toLowerCase(), "proof.nodeSignature", { multipleOf: NODE_ENTRY_LENGTH }),
      accuracyNs: parseUint32Field(proof.accuracy, "proof.accuracyNs"),
      hardwareId,
      gps: gps === null ? null : parseGpsReference(gps, "proof.gps"),
    },
  };
}

/** Checks a GPS reference (docs/protocol.md §9.1): exactly its four fields, each in range. */
export function parseGpsReference(value: unknown, field: string): GpsReference {
  const record = asRecord(value, field);
  rejectUnknownKeys(record, ["fixState", "satellites", "ppsOffsetNs", "observedAtNs"], field);
  if (typeof record.fixState !== "string" || !(GPS_FIX_STATES as readonly string[]).includes(record.fixState)) {
    throw new ValidationError(`${field}.fixState`, `must be one of ${GPS_FIX_STATES.join(", ")}, got ${describe(record.fixState)}`, {});
  }
  if (typeof record.satellites !== "number" || !Number.isInteger(record.satellites) || record.satellites < 0 || record.satellites > 64) {
    throw new ValidationError(`${field}.satellites`, `must be an integer from 0 to 64, got ${describe(record.satellites)}`, {});
  }
  if (typeof record.ppsOffsetNs !== "number" || !Number.isInteger(record.ppsOffsetNs) || Math.abs(record.ppsOffsetNs) >= 1_000_000_000) {
    throw new ValidationError(`${field}.ppsOffsetNs`, `must be an integer of ns above −1 s and below 1 s, got ${describe(record.ppsOffsetNs)}`, {});
  }
  parseNsString(record.observedAtNs, `${field}.observedAtNs`);
  return { fixState: record.fixState as GpsFixState, satellites: record.satellites, ppsOffsetNs: record.ppsOffsetNs, observedAtNs: record.observedAtNs as string };
}

export interface ProofFromJsonReturnType {
  proof: TimeProof;
  /** The card named by hardwareId (equal to the cardId inside hardwareSignature). */
  cardId: Hex;
}

/**
 * Validates an already-parsed JSON value (use parseJsonLossless for text) in the §9 shape
 * `{ nanoMoment, proof: { hardwareSignature, nodeSignature, accuracyNs, hardwareId, gps }, consensus? }`.
 * `hardwareId` and `gps` may be omitted (POST /time/verify bodies); when present they are checked.
 */
export function proofFromJson(value: unknown): ProofFromJsonReturnType {
  const body = asRecord(value, "$");
  // `consensus` (a mesh node's account of the round, §9.1) sits beside the proof and is not part of it: its shape is
  // checked by the reader that uses it (the client library, with the wire schema).
  rejectUnknownKeys(body, ["nanoMoment", "proof", "consensus"], "$");
  const nanoMoment = parseNsString(body.nanoMoment, "nanoMoment");
  const inner = asRecord(body.proof, "proof");
  rejectUnknownKeys(inner, ["hardwareSignature", "nodeSignature", "accuracyNs", "hardwareId", "gps"], "proof");
  const hardwareSignature = parseHexField(inner.hardwareSignature, "proof.hardwareSignature", { exact: HARDWARE_SIGNATURE_LENGTH });
  const nodeSignature = parseHexField(inner.nodeSignature, "proof.nodeSignature", { multipleOf: NODE_ENTRY_LENGTH });
  const accuracy = parseUint32Field(inner.accuracyNs, "proof.accuracyNs");
  const cardId = sliceHexBytes(hardwareSignature, 0, CARD_ID_LENGTH);
  if (inner.hardwareId !== undefined) {
    const hardwareId = parseHexField(inner.hardwareId, "proof.hardwareId", { exact: CARD_ID_LENGTH });
    if (hardwareId !== cardId) {
      throw new ValidationError("proof.hardwareId", "does not match the cardId inside hardwareSignature", { hardwareId, cardId });
    }
  }
  if (inner.gps !== undefined && inner.gps !== null) parseGpsReference(inner.gps, "proof.gps");
  return { proof: { nanoMoment, hardwareSignature, nodeSignature, accuracy }, cardId };
}

/** parseJsonLossless + proofFromJson. */
export function proofFromJsonText(text: string): ProofFromJsonReturnType {
  return proofFromJson(parseJsonLossless(text));
}
