/**
 * Shared fixtures of the protocol tests: the fixed dev keys, a registry context with the on-chain defaults,
 * and builders for proofs that break exactly one rule of docs/protocol.md §6.2 (everything else stays valid, so a
 * test fails as soon as that one rule is removed from the verifier).
 */
import { p256 } from "@noble/curves/nist.js";
import {
  assembleProof,
  attest,
  cardIdOf,
  concatEntries,
  createVerifyContext,
  DEV_CARD_ACCURACY_NS,
  encodeHardwareSignature,
  hwMessage,
  nodeAddressFromPrivateKey,
  NS_PER_SECOND,
  P256_N,
  p256PublicKeyToUncompressed,
  signNodeEntry,
  timeAttestationForProof,
  type CreateVerifyContextParameters,
  type Hex,
  type TimeProof,
  type VerifyTimeProofContext,
} from "../../protocol";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS, DEV_OTHER_CARD_PRIVATE_KEY } from "../../protocol/devkeys";

export { concatEntries };

export const CARD_KEY = DEV_CARD_PRIVATE_KEY;
export const OTHER_CARD_KEY = DEV_OTHER_CARD_PRIVATE_KEY;
export const NODE_KEYS = DEV_NODE_PRIVATE_KEYS;
export const CARD_ID = cardIdOf(CARD_KEY);
export const CARD_PUBLIC_KEY = publicKeyOf(CARD_KEY);
export const NODE_ADDRESSES = NODE_KEYS.map(nodeAddressFromPrivateKey);
/** 2024-11-22T09:41:33.123456789Z in ns: above 2^53, so any float rounding shows. */
export const NANO_MOMENT = 1_732_268_493_123_456_789n;
export const NOW_NS = NANO_MOMENT + 2n * NS_PER_SECOND;
export const ACCURACY_NS = DEV_CARD_ACCURACY_NS;

export function publicKeyOf(scalar: Hex): Hex {
  return p256PublicKeyToUncompressed(p256.getPublicKey(Buffer.from(scalar.slice(2), "hex"), false));
}

/** The registry: the dev card and the three dev nodes, on-chain default settings, clock at NOW_NS. */
export function context(overrides: Partial<CreateVerifyContextParameters> = {}): VerifyTimeProofContext {
  return createVerifyContext({
    cards: { [CARD_ID]: { publicKey: CARD_PUBLIC_KEY, revoked: false } },
    nodes: NODE_ADDRESSES,
    nowNs: NOW_NS,
    ...overrides,
  });
}

export interface ProofOptions {
  nanoMoment?: bigint;
  accuracy?: number;
  nodes?: readonly Hex[];
  card?: Hex;
}

/** A valid proof (card + nodes sign, entries sorted). */
export function validProof(options: ProofOptions = {}): TimeProof {
  const nanoMoment = options.nanoMoment ?? NANO_MOMENT;
  return attest({
    card: options.card ?? CARD_KEY,
    nodes: options.nodes ?? NODE_KEYS,
    nanoMoment,
    accuracy: options.accuracy ?? ACCURACY_NS,
    nodeTimestampNs: nanoMoment + 40n,
  });
}

/** Nodes co-sign an arbitrary hardware signature, so the node part is valid whatever the card part is. */
export function withHardwareSignature(hardwareSignature: Hex, options: ProofOptions = {}): TimeProof {
  const base = { nanoMoment: options.nanoMoment ?? NANO_MOMENT, hardwareSignature, accuracy: options.accuracy ?? ACCURACY_NS };
  const entries = (options.nodes ?? NODE_KEYS).map((key) => signNodeEntry(key, timeAttestationForProof(base, base.nanoMoment + 40n)));
  return assembleProof({ ...base, entries });
}

/** The card's valid signature turned into its high-S twin (s → n − s), nodes re-signed over it. */
export function highSProof(): TimeProof {
  const signature = p256.sign(hwMessage(CARD_ID, NANO_MOMENT), Buffer.from(CARD_KEY.slice(2), "hex"), { lowS: true });
  const parsed = p256.Signature.fromBytes(signature, "compact");
  const highS = P256_N - parsed.s;
  return withHardwareSignature(
    encodeHardwareSignature({ cardId: CARD_ID, r: toWord(parsed.r), s: toWord(highS) }),
  );
}

/** A signature by OTHER_CARD_KEY claiming to be CARD_ID's. */
export function forgedCardProof(): TimeProof {
  const signature = p256.sign(hwMessage(CARD_ID, NANO_MOMENT), Buffer.from(OTHER_CARD_KEY.slice(2), "hex"), { lowS: true });
  const parsed = p256.Signature.fromBytes(signature, "compact");
  return withHardwareSignature(encodeHardwareSignature({ cardId: CARD_ID, r: toWord(parsed.r), s: toWord(parsed.s) }));
}

export function toWord(value: bigint): Hex {
  return `0x${value.toString(16).padStart(64, "0")}`;
}

/** Splits nodeSignature into its 80-byte entries (hex). */
export function entriesOf(proof: TimeProof): Hex[] {
  const body = proof.nodeSignature.slice(2);
  const entries: Hex[] = [];
  for (let i = 0; i < body.length; i += 160) entries.push(`0x${body.slice(i, i + 160)}`);
  return entries;
}
