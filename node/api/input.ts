/**
 * Boundary checks shared by the transports. Decimal-string ns values are parsed with protocol/json.ts
 * `parseNsString`; everything throws ValidationError naming the field (400 / INVALID_ARGUMENT via errorMapping).
 */
import { ValidationError } from "../../protocol/errors";
import type { SignedTime } from "../core/types";

/** Bounds a duration in ns. */
export function checkDurationNs(field: string, valueNs: bigint, minNs: bigint, maxNs: bigint): bigint {
  if (valueNs < minNs || valueNs > maxNs) {
    throw new ValidationError(field, `must be between ${minNs} and ${maxNs} nanoseconds`, {
      min: minNs.toString(),
      max: maxNs.toString(),
    });
  }
  return valueNs;
}

/** Number of 80-byte node entries in a proof (its consensus size). */
export function nodeEntryCount(signed: SignedTime): number {
  return (signed.proof.nodeSignature.length - 2) / 160;
}
