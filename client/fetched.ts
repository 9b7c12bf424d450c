/**
 * A proof as the client library hands it out: parsed strictly from the node's JSON (protocol/json.ts), so it
 * arrives exactly as the node signed it, with the local time it arrived.
 */
import { proofFromJson } from "../protocol/json";
import type { ProofJson } from "../protocol/types";
import type { FetchedProof } from "./types";

export function toFetched(json: unknown): FetchedProof {
  const parsed = proofFromJson(json);
  return { proof: parsed.proof, json: json as ProofJson, cardId: parsed.cardId, receivedAtNs: BigInt(Date.now()) * 1_000_000n };
}
