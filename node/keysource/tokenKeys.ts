/**
 * The card key and the node key as signers backed by a PKCS#11 token (pkcs11.ts): what a card driver and the
 * attestor sign with when the `cardKeySource` / `nodeKeySource` settings say "pkcs11".
 * - card (P-256): the token signs SHA-256(hwMessage(cardId, nanoMoment)) with CKM_ECDSA, exactly the digest
 *   node:crypto's sign("sha256", message) signs for a file key (protocol/sign.ts signHardware); s is normalised
 *   to the low half (docs/protocol.md §3);
 * - node (secp256k1): the token signs the EIP-712 TimeAttestation digest itself (protocol/sign.ts
 *   signDigestCompact hands it the 32-byte digest, no further hashing); s is normalised to the low half and the
 *   y parity found by trial (tokenSignature.ts), giving the EIP-2098 compact form every node signature has.
 * Both are checked once when opened (selfTest): a token that signs with another key than it reports, or that a
 * verifier would refuse, is found at start, not in a served proof.
 */
import { createHash } from "node:crypto";
import { cardIdFromPublicKey, hwMessage } from "../../protocol/codec";
import { ProtocolError } from "../../protocol/errors";
import { NodeKey, p256PublicKeyToUncompressed } from "../../protocol/keys";
import { recoverNodeAddressFromDigest, signDigestCompact } from "../../protocol/sign";
import type { Hex } from "../../protocol/types";
import { verifyP256Signature } from "../../protocol/verify";
import type { Pkcs11Token, TokenKeyPair } from "./pkcs11";
import { eip2098Compact, recoveryIdByTrial, toLowS } from "./tokenSignature";

/** A card key that signs hardware messages; what a card driver needs of its key (node/card/dev.ts). */
export interface CardKey {
  /** SHA-256 of the uncompressed public key. */
  readonly cardId: Hex;
  /** Uncompressed P-256 public key (0x04 ‖ X ‖ Y). */
  readonly publicKey: Hex;
  /** cardId ‖ r ‖ s (96 bytes), low-S. */
  signHardware(nanoMoment: bigint): Hex;
}

/** The moment the self-test signs (any value: the signature is checked, not kept). */
const SELF_TEST_MOMENT_NS = 1_700_000_000_000_000_000n;

/** The P-256 card key held by the token under `pair`, self-tested. */
export function tokenCardKey(token: Pkcs11Token, pair: TokenKeyPair): CardKey {
  if (pair.curve !== "P-256") throw new ProtocolError("the card key must be a P-256 key", { label: pair.label, curve: pair.curve });
  const publicKey = p256PublicKeyToUncompressed(`0x${pair.publicKey.toString("hex")}`);
  const cardId = cardIdFromPublicKey(publicKey);
  const key: CardKey = {
    cardId,
    publicKey,
    signHardware(nanoMoment: bigint): Hex {
      const digest = createHash("sha256").update(hwMessage(cardId, nanoMoment)).digest();
      return `${cardId}${toLowS(token.signDigest(pair, digest), "P-256").toString("hex")}`;
    },
  };
  const signature = key.signHardware(SELF_TEST_MOMENT_NS);
  const verifies = verifyP256Signature({ message: hwMessage(cardId, SELF_TEST_MOMENT_NS) }, `0x${signature.slice(66, 130)}`, `0x${signature.slice(130, 194)}`, publicKey);
  if (!verifies) throw new ProtocolError("the token's card signature does not verify with the token's card public key", { label: pair.label, cardId });
  return key;
}

/** The secp256k1 node key held by the token under `pair` as a NodeKey (exportPrivateKey refuses), self-tested. */
export function tokenNodeKey(token: Pkcs11Token, pair: TokenKeyPair): NodeKey {
  if (pair.curve !== "secp256k1") throw new ProtocolError("the node key must be a secp256k1 key", { label: pair.label, curve: pair.curve });
  const publicKey = Buffer.from(pair.publicKey);
  const nodeKey = NodeKey.fromExternalSigner({
    publicKey,
    signDigestCompact(digest: Uint8Array): Uint8Array {
      const lowS = toLowS(token.signDigest(pair, digest), "secp256k1");
      return eip2098Compact(lowS, recoveryIdByTrial(digest, lowS, publicKey));
    },
  });
  const digest = createHash("sha256").update("ats-node token self-test").digest();
  const recovered = recoverNodeAddressFromDigest(digest, signDigestCompact(nodeKey, digest));
  if (recovered !== nodeKey.address) throw new ProtocolError("the token's node signature recovers to another address", { label: pair.label, expected: nodeKey.address, recovered });
  return nodeKey;
}
