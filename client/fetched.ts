/**
 * A proof as the client library hands it out: parsed strictly from the node's JSON (protocol/json.ts), so it
 * arrives exactly as the node signed it, with the local time it arrived. A mesh node's `consensus` member is
 * checked against its wire schema (wire/rest.ts ConsensusObject) and handed out beside the proof.
 */
import { Value } from "@sinclair/typebox/value";
import { ValidationError } from "../protocol/errors";
import { proofFromJson } from "../protocol/json";
import type { ConsensusJson, ProofJson } from "../protocol/types";
import { ConsensusObject } from "../wire/rest";
import type { FetchedProof } from "./types";

function consensusOf(json: unknown): ConsensusJson | undefined {
  const consensus = (json as { consensus?: unknown }).consensus;
  if (consensus === undefined) return undefined;
  const problem = Value.Errors(ConsensusObject, consensus).First();
  if (problem !== undefined) throw new ValidationError(`consensus${problem.path.replaceAll("/", ".")}`, problem.message, {});
  return consensus as ConsensusJson;
}

export function toFetched(json: unknown): FetchedProof {
  const parsed = proofFromJson(json);
  const consensus = consensusOf(json);
  return {
    proof: parsed.proof,
    json: json as ProofJson,
    ...(consensus === undefined ? {} : { consensus }),
    cardId: parsed.cardId,
    receivedAtNs: BigInt(Date.now()) * 1_000_000n,
  };
}
