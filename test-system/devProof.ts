/** The reference verifier's verdict on a proof of a dev node (the public development card and the node's key). */
import { cardIdFromPublicKey } from "../protocol/codec";
import type { Address, TimeProof } from "../protocol/types";
import { createVerifyContext, verifyTimeProof } from "../protocol/verify";
import { devRegistrations } from "../deploy";

export function verifyDevNodeProof(proof: TimeProof, nodeAddress: Address, maxAcceptableDriftNs: bigint): ReturnType<typeof verifyTimeProof> {
  const cardPublicKey = devRegistrations().cards[0]!.publicKey; // the public development card a dev node runs
  return verifyTimeProof(
    proof,
    createVerifyContext({
      cards: { [cardIdFromPublicKey(cardPublicKey)]: { publicKey: cardPublicKey, revoked: false } },
      nodes: [nodeAddress],
      nowNs: BigInt(Date.now()) * 1_000_000n,
      maxAcceptableDriftNs,
    }),
  );
}
