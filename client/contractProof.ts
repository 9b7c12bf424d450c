/**
 * The REST JSON of a proof (docs/protocol.md §9.1: the body of `GET /time/current`, a schedule record's `proof`)
 * as the `TimeProof` struct of contracts/interfaces/ITimeOracle.sol, in the shape viem takes for the tuple
 * `(uint128 nanoMoment, bytes hardwareSignature, bytes nodeSignature, uint32 accuracy)`: nanoMoment a bigint,
 * the two signatures 0x-hex exactly as the node sent them, accuracy a number (from `accuracyNs`).
 */
import { parseJsonLossless, proofFromJson } from "../protocol/json";
import type { TimeProof } from "../protocol/types";

/**
 * Reads `json` strictly (protocol/json.ts proofFromJson: the same reader as the client library's, unknown keys and
 * non-canonical values refused with a ValidationError naming the field). Takes the body's text (parsed losslessly)
 * or an already parsed value; `response.json()` loses nothing of a valid proof, since its 128-bit values are
 * decimal strings and its numbers fit in 32 bits.
 */
export function contractProofFromJson(json: unknown): TimeProof {
  return proofFromJson(typeof json === "string" ? parseJsonLossless(json) : json).proof;
}
