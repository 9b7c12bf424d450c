/**
 * What the attestor checks of a signer thread before it publishes any of the thread's signatures (docs/architecture.md,
 * the signer thread): its known-answer test when it is ready, and a self-ticking thread's first tick. The node entry
 * and digest must be byte for byte what protocol/sign.ts makes (RFC 6979 is deterministic); a card signature made
 * in the thread must verify with the card's public key (P-256 signatures are randomised: checked, not compared).
 */
import { hwMessage, timeAttestationDigest, timeAttestationForProof } from "../../protocol/codec";
import type { NodeKey } from "../../protocol/keys";
import { signNodeEntry } from "../../protocol/sign";
import type { Hex } from "../../protocol/types";
import { verifyP256Signature } from "../../protocol/verify";
import type { TimeCard } from "../card/types";
import type { SlotResult } from "./signerResultSlot";
import type { NodeSignerThread, ThreadSignRequest } from "./signerWorker";

/** What is wrong with signatures the thread made for `request` (null: nothing). */
export function threadSignatureProblem(card: Pick<TimeCard, "cardId" | "publicKey">, nodeKey: NodeKey, request: ThreadSignRequest, result: SlotResult): string | null {
  const { hardwareSignature } = result;
  if (request.hardwareSignature === undefined) {
    const cardSigned =
      hardwareSignature.length === 2 + 2 * 96 &&
      hardwareSignature.slice(0, 66) === card.cardId &&
      verifyP256Signature({ message: hwMessage(card.cardId, request.nanoMoment) }, `0x${hardwareSignature.slice(66, 130)}`, `0x${hardwareSignature.slice(130, 194)}`, card.publicKey);
    if (!cardSigned) return "its card signature does not verify with the card's public key";
  } else if (hardwareSignature !== request.hardwareSignature) {
    return "it did not keep the hardware signature it was given";
  }
  const att = timeAttestationForProof({ nanoMoment: request.nanoMoment, hardwareSignature, accuracy: request.accuracy }, request.nodeTimestampNs);
  if (result.digest !== timeAttestationDigest(att) || result.entry !== signNodeEntry(nodeKey, att)) {
    return "digest or entry differs from protocol/sign.ts";
  }
  return null;
}

/** Signs a fixed attestation in the thread and checks it; rejects naming the problem. */
export async function knownAnswerTest(signer: NodeSignerThread, card: Pick<TimeCard, "cardId" | "publicKey">, nodeKey: NodeKey, accuracyNs: number): Promise<void> {
  const request: ThreadSignRequest = {
    nanoMoment: 1_700_000_000_123_456_789n,
    ...(signer.signsHardware ? {} : { hardwareSignature: `0x${card.cardId.slice(2)}${"11".repeat(32)}${"22".repeat(32)}` as Hex }),
    accuracy: accuracyNs,
    nodeTimestampNs: 1_700_000_000_123_457_000n,
  };
  const problem = threadSignatureProblem(card, nodeKey, request, await signer.sign(request));
  if (problem !== null) throw new Error(`signer thread failed its known-answer test (${problem})`);
}
