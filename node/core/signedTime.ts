/**
 * Building a SignedTime: the proof, its docs/protocol.md §9.1 JSON (protocol/json.ts) and the pre-serialised body,
 * made ONCE per attestation so transports only copy bytes.
 */
import { proofToJson } from "../../protocol/json";
import type { GpsReference, TimeProof } from "../../protocol/types";
import type { SignedTime } from "./types";

/** Freezes the proof and builds its JSON (with the card's GPS reference, unsigned) and body once. */
export function buildSignedTime(proof: TimeProof, producedAtNs: bigint, gps: GpsReference | null = null): SignedTime {
  const frozenProof = Object.freeze({ ...proof });
  const json = proofToJson(frozenProof, undefined, gps);
  Object.freeze(json.proof);
  Object.freeze(json);
  return Object.freeze({ proof: frozenProof, json, body: JSON.stringify(json), producedAtNs });
}
