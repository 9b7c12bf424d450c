/**
 * Builds the golden vectors of protocol v1 from the fixed dev keys (protocol/devkeys.ts). Pure and
 * deterministic: card signatures use RFC 6979 k (@noble/curves, low-S), node signatures likewise, so the same
 * code always yields the same bytes. `scripts/gen-vectors.ts` writes the result to test/vectors/protocol-v1.json;
 * `test/protocol/vectors.test.ts` rebuilds it and compares with the committed file.
 *
 * File format (all integers that can exceed 2^53 are decimal strings; bytes are lowercase 0x-hex; addresses
 * EIP-55; every "…Ns" value is nanoseconds since the Unix epoch or a duration in ns):
 *
 * {
 *   "version": 1, "generator": "scripts/gen-vectors.ts", "note": "...",
 *   "constants": { HW_MESSAGE_TAG, HW_MESSAGE_LENGTH, HARDWARE_SIGNATURE_LENGTH, NODE_ENTRY_LENGTH,
 *                  P256_N, P256_HALF_N, EIP712_DOMAIN {name, version}, TIME_ATTESTATION_TYPE,
 *                  TIME_ATTESTATION_TYPEHASH, DOMAIN_SEPARATOR },
 *   "keys": { "card": Key, "otherCard": Key, "nodes": [{ privateKey, address }] }
 *            Key = { privateKey, publicKey (65 B uncompressed), x, y, cardId }   (DEV KEYS, public knowledge)
 *   "hwMessages": [{ cardId, nanoMoment, hwMessage (56 B), hwDigest (sha256) }],
 *   "hardwareSignature": { nanoMoment, encoded (96 B), cardId, r, s, hardwareSignatureHash (keccak256 r‖s) },
 *   "attestations": [{ signer, message: { cardId, nanoMoment, accuracy, hardwareSignatureHash, nodeTimestamp },
 *                      structHash, digest, entry (80 B: nodeTimestamp ‖ r ‖ yParityAndS) }],
 *   "timeProof": { proof: Proof, abiEncoded },                 -- abi.encode(TimeProof), 3 node entries
 *   "crossChainTime": { message: { networkTime, targetChain, proof, targetBlock }, abiEncoded },
 *   "verification": {
 *     "defaults": Context,                                     -- on-chain defaults, clock at a whole second
 *     "cases": [{ name, description, proof: Proof, abiEncoded, context: Context,
 *                 expected: { valid: boolean, reason: VerifyFailureReason | null } }]
 *   }
 * }
 * Proof   = { nanoMoment, hardwareSignature, nodeSignature, accuracy (JSON integer, ns) }
 * Context = { nowNs (a multiple of 1e9: on-chain now = block.timestamp * 1e9, so replay sets
 *             block.timestamp = nowNs / 1e9), nodeQuorum, maxAttestationAgeNs, maxFutureDriftNs,
 *             maxAcceptableDriftNs,
 *             cards: [{ cardId, publicKey, x, y, revoked, validFromNs, validUntilNs }],
 *             nodes: [{ address, validFromNs, validUntilNs }] }   -- windows inclusive; uint64 max = no expiry
 * The Solidity side registers `context.cards` / `context.nodes`, applies the settings, warps the clock and
 * checks `verifyTimeProof(proof) == expected.valid` (it has no reasons; they are for the TS side and people).
 */
import { p256 } from "@noble/curves/nist.js";
import {
  DEFAULT_MAX_ACCEPTABLE_DRIFT_NS,
  DEFAULT_MAX_ATTESTATION_AGE_NS,
  DEFAULT_MAX_FUTURE_DRIFT_NS,
  DEFAULT_NODE_QUORUM,
  DEV_CARD_ACCURACY_NS,
  EIP712_DOMAIN,
  HARDWARE_SIGNATURE_LENGTH,
  HW_MESSAGE_LENGTH,
  HW_MESSAGE_TAG,
  NODE_ENTRY_LENGTH,
  NS_PER_SECOND,
  P256_HALF_N,
  P256_N,
  SECP256K1_HALF_N,
  TIME_ATTESTATION_TYPE,
  UINT128_MAX,
  assembleProof,
  attest,
  cardIdOf,
  concatEntries,
  crossChainTimeForProof,
  decodeHardwareSignature,
  encodeCrossChainTime,
  encodeHardwareSignature,
  encodeTimeProof,
  hardwareSignatureHash,
  hwDigest,
  hwMessage,
  nodeAddressFromPrivateKey,
  p256PublicKeyCoordinates,
  p256PublicKeyToUncompressed,
  signNodeEntry,
  timeAttestationDigest,
  timeAttestationDomainSeparator,
  timeAttestationForProof,
  timeAttestationStructHash,
  timeAttestationTypeHash,
  verifyTimeProof,
  type Address,
  type Hex,
  type TimeProof,
  type VerifyFailureReason,
  type VerifyTimeProofContext,
} from "../../protocol";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS, DEV_OTHER_CARD_PRIVATE_KEY } from "../../protocol/devkeys";

const UINT64_MAX = (1n << 64n) - 1n;
/** A whole second, so the chain can represent it exactly (block.timestamp * 1e9). */
export const VECTOR_NOW_NS = 1_732_268_495n * NS_PER_SECOND;
/** 1.876543211 s before now; above 2^53 so float rounding would show. */
export const VECTOR_NANO_MOMENT = VECTOR_NOW_NS - 1_876_543_211n;
/** Each node's reading differs from the card's by a few ns. */
const NODE_OFFSETS_NS = [40n, -25n, 12n] as const;

export interface ProofJsonVector {
  nanoMoment: string;
  hardwareSignature: Hex;
  nodeSignature: Hex;
  accuracy: number;
}

export interface CardVector {
  cardId: Hex;
  publicKey: Hex;
  x: Hex;
  y: Hex;
  revoked: boolean;
  validFromNs: string;
  validUntilNs: string;
}

export interface NodeVector {
  address: Address;
  validFromNs: string;
  validUntilNs: string;
}

export interface ContextVector {
  nowNs: string;
  nodeQuorum: number;
  maxAttestationAgeNs: string;
  maxFutureDriftNs: string;
  maxAcceptableDriftNs: string;
  cards: CardVector[];
  nodes: NodeVector[];
}

export interface VerificationCase {
  name: string;
  description: string;
  proof: ProofJsonVector;
  abiEncoded: Hex;
  context: ContextVector;
  expected: { valid: boolean; reason: VerifyFailureReason | null };
}

// ---------------------------------------------------------------- conversions (shared with the test)

export function proofToVector(proof: TimeProof): ProofJsonVector {
  return {
    nanoMoment: proof.nanoMoment.toString(),
    hardwareSignature: proof.hardwareSignature,
    nodeSignature: proof.nodeSignature,
    accuracy: proof.accuracy,
  };
}

export function proofFromVector(vector: ProofJsonVector): TimeProof {
  return { ...vector, nanoMoment: BigInt(vector.nanoMoment) };
}

/** The verifier context a vector describes (the same registry the contract replay builds). */
export function contextFromVector(vector: ContextVector): VerifyTimeProofContext {
  const cards = new Map(vector.cards.map((card) => [card.cardId.toLowerCase(), card]));
  const nodes = new Map(vector.nodes.map((node) => [node.address.toLowerCase(), node]));
  const within = (window: { validFromNs: string; validUntilNs: string }, nowNs: bigint): boolean =>
    nowNs >= BigInt(window.validFromNs) && nowNs <= BigInt(window.validUntilNs);
  return {
    resolveCard: (cardId) => {
      const card = cards.get(cardId.toLowerCase());
      if (card === undefined) return undefined;
      return { publicKey: card.publicKey, revoked: card.revoked, validFromNs: BigInt(card.validFromNs), validUntilNs: BigInt(card.validUntilNs) };
    },
    isActiveNode: (address, nowNs) => {
      const node = nodes.get(address.toLowerCase());
      return node !== undefined && within(node, nowNs);
    },
    nowNs: BigInt(vector.nowNs),
    nodeQuorum: vector.nodeQuorum,
    maxAttestationAgeNs: BigInt(vector.maxAttestationAgeNs),
    maxFutureDriftNs: BigInt(vector.maxFutureDriftNs),
    maxAcceptableDriftNs: BigInt(vector.maxAcceptableDriftNs),
  };
}

// ---------------------------------------------------------------- keys

function keyVector(privateKey: Hex): { privateKey: Hex; publicKey: Hex; x: Hex; y: Hex; cardId: Hex } {
  const publicKey = p256PublicKeyToUncompressed(p256.getPublicKey(Buffer.from(privateKey.slice(2), "hex"), false));
  return { privateKey, publicKey, ...p256PublicKeyCoordinates(publicKey), cardId: cardIdOf(privateKey) };
}

const CARD = keyVector(DEV_CARD_PRIVATE_KEY);
const OTHER_CARD = keyVector(DEV_OTHER_CARD_PRIVATE_KEY);
const NODES = DEV_NODE_PRIVATE_KEYS.map((privateKey) => ({ privateKey, address: nodeAddressFromPrivateKey(privateKey) }));

function cardEntry(overrides: Partial<CardVector> = {}): CardVector {
  return {
    cardId: CARD.cardId,
    publicKey: CARD.publicKey,
    x: CARD.x,
    y: CARD.y,
    revoked: false,
    validFromNs: "0",
    validUntilNs: UINT64_MAX.toString(),
    ...overrides,
  };
}

function nodeEntries(count = NODES.length): NodeVector[] {
  return NODES.slice(0, count).map(({ address }) => ({ address, validFromNs: "0", validUntilNs: UINT64_MAX.toString() }));
}

function defaultContext(overrides: Partial<ContextVector> = {}): ContextVector {
  return {
    nowNs: VECTOR_NOW_NS.toString(),
    nodeQuorum: DEFAULT_NODE_QUORUM,
    maxAttestationAgeNs: DEFAULT_MAX_ATTESTATION_AGE_NS.toString(),
    maxFutureDriftNs: DEFAULT_MAX_FUTURE_DRIFT_NS.toString(),
    maxAcceptableDriftNs: DEFAULT_MAX_ACCEPTABLE_DRIFT_NS.toString(),
    cards: [cardEntry()],
    nodes: nodeEntries(),
    ...overrides,
  };
}

// ---------------------------------------------------------------- proof builders

interface ProofSpec {
  nanoMoment?: bigint;
  accuracy?: number;
  nodes?: number;
  card?: Hex;
}

function proofFor(spec: ProofSpec = {}): TimeProof {
  const nanoMoment = spec.nanoMoment ?? VECTOR_NANO_MOMENT;
  const keys = DEV_NODE_PRIVATE_KEYS.slice(0, spec.nodes ?? 1);
  return attest({
    card: spec.card ?? DEV_CARD_PRIVATE_KEY,
    nodes: keys,
    nanoMoment,
    accuracy: spec.accuracy ?? DEV_CARD_ACCURACY_NS,
    nodeTimestampNs: keys.map((_key, index) => nanoMoment + NODE_OFFSETS_NS[index]!),
  });
}

/** Nodes co-sign `hardwareSignature` whatever it is, so only the card part can be at fault. */
function cosigned(hardwareSignature: Hex, nanoMoment = VECTOR_NANO_MOMENT): TimeProof {
  const base = { nanoMoment, hardwareSignature, accuracy: DEV_CARD_ACCURACY_NS };
  const entry = signNodeEntry(DEV_NODE_PRIVATE_KEYS[0], timeAttestationForProof(base, nanoMoment + NODE_OFFSETS_NS[0]));
  return assembleProof({ ...base, entries: [entry] });
}

function entriesOf(proof: TimeProof): Hex[] {
  return proof.nodeSignature.slice(2).match(/.{160}/g)!.map((body) => `0x${body}` as Hex);
}

function rawCardSignature(signingKey: Hex, cardId: Hex, nanoMoment: bigint): { r: bigint; s: bigint } {
  const signature = p256.sign(hwMessage(cardId, nanoMoment), Buffer.from(signingKey.slice(2), "hex"), { lowS: true });
  const parsed = p256.Signature.fromBytes(signature, "compact");
  return { r: parsed.r, s: parsed.s };
}

const word = (value: bigint): Hex => `0x${value.toString(16).padStart(64, "0")}`;

function highSProof(): TimeProof {
  const { r, s } = rawCardSignature(DEV_CARD_PRIVATE_KEY, CARD.cardId, VECTOR_NANO_MOMENT);
  return cosigned(encodeHardwareSignature({ cardId: CARD.cardId, r: word(r), s: word(P256_N - s) }));
}

function forgedProof(): TimeProof {
  const { r, s } = rawCardSignature(DEV_OTHER_CARD_PRIVATE_KEY, CARD.cardId, VECTOR_NANO_MOMENT);
  return cosigned(encodeHardwareSignature({ cardId: CARD.cardId, r: word(r), s: word(s) }));
}

function nodeEntryWithS(s: bigint): TimeProof {
  const proof = proofFor();
  const entry = entriesOf(proof)[0]!;
  return { ...proof, nodeSignature: `${entry.slice(0, 2 + 32 + 64)}${word(s).slice(2)}` as Hex };
}

// ---------------------------------------------------------------- cases

interface CaseSpec {
  name: string;
  description: string;
  proof: TimeProof;
  context?: Partial<ContextVector>;
  reason: VerifyFailureReason | null;
}

function caseSpecs(): CaseSpec[] {
  const three = proofFor({ nodes: 3 });
  const single = proofFor();
  const signedAt2000 = proofFor({ accuracy: 2_000 });
  return [
    { name: "valid-1-node", description: "one node entry, default settings", proof: single, reason: null },
    { name: "valid-3-nodes", description: "three node entries, quorum 3", proof: three, context: { nodeQuorum: 3 }, reason: null },
    {
      name: "valid-at-max-age",
      description: "nanoMoment exactly maxAttestationAge before now (inclusive bound)",
      proof: proofFor({ nanoMoment: VECTOR_NOW_NS - DEFAULT_MAX_ATTESTATION_AGE_NS }),
      reason: null,
    },
    {
      name: "valid-at-max-future-drift",
      description: "nanoMoment exactly maxFutureDrift after now (inclusive bound)",
      proof: proofFor({ nanoMoment: VECTOR_NOW_NS + DEFAULT_MAX_FUTURE_DRIFT_NS }),
      reason: null,
    },
    {
      name: "valid-20s-old",
      description: "20 s old: outside the 15 s future bound but that bound only applies ahead of now",
      proof: proofFor({ nanoMoment: VECTOR_NOW_NS - 20n * NS_PER_SECOND }),
      reason: null,
    },
    {
      name: "valid-accuracy-at-bound",
      description: "accuracy equal to maxAcceptableDrift",
      proof: proofFor({ accuracy: Number(DEFAULT_MAX_ACCEPTABLE_DRIFT_NS) }),
      reason: null,
    },
    {
      name: "hardware-signature-95-bytes",
      description: "hardwareSignature one byte short",
      proof: { ...single, hardwareSignature: single.hardwareSignature.slice(0, -2) as Hex },
      reason: "hardware-signature-length",
    },
    {
      name: "hardware-signature-97-bytes",
      description: "hardwareSignature one byte long",
      proof: { ...single, hardwareSignature: `${single.hardwareSignature}00` },
      reason: "hardware-signature-length",
    },
    { name: "unknown-card", description: "signed by a card that is not registered", proof: proofFor({ card: DEV_OTHER_CARD_PRIVATE_KEY }), reason: "unknown-card" },
    { name: "revoked-card", description: "the card is revoked", proof: single, context: { cards: [cardEntry({ revoked: true })] }, reason: "revoked-card" },
    {
      name: "card-expired",
      description: "the card's validity window ended 1 ns before now",
      proof: single,
      context: { cards: [cardEntry({ validUntilNs: (VECTOR_NOW_NS - 1n).toString() })] },
      reason: "card-not-valid-now",
    },
    { name: "high-s", description: "the card's valid signature with s replaced by n − s (nodes co-signed it)", proof: highSProof(), reason: "high-s" },
    { name: "forged-card-signature", description: "cardId of the registered card, signature by another key", proof: forgedProof(), reason: "bad-hardware-signature" },
    {
      name: "card-signature-other-moment",
      description: "nodes signed nanoMoment+1 but the card signature is for nanoMoment",
      proof: { ...proofFor({ nanoMoment: VECTOR_NANO_MOMENT + 1n }), hardwareSignature: single.hardwareSignature },
      reason: "bad-hardware-signature",
    },
    { name: "node-signature-empty", description: "no node entry", proof: { ...single, nodeSignature: "0x" }, reason: "node-signature-length" },
    {
      name: "node-signature-79-bytes",
      description: "node entry one byte short",
      proof: { ...single, nodeSignature: single.nodeSignature.slice(0, -2) as Hex },
      reason: "node-signature-length",
    },
    { name: "node-s-above-half-n", description: "node entry s = secp256k1 n/2 + 1", proof: nodeEntryWithS(SECP256K1_HALF_N + 1n), reason: "bad-node-signature" },
    { name: "node-s-zero", description: "node entry s = 0", proof: nodeEntryWithS(0n), reason: "bad-node-signature" },
    {
      name: "unknown-node",
      description: "the third node signed but is not registered",
      proof: three,
      context: { nodes: nodeEntries(2) },
      reason: "unknown-node",
    },
    {
      name: "node-expired",
      description: "the only node's validity window ended 1 ns before now",
      proof: single,
      context: { nodes: nodeEntries(1).map((node) => ({ ...node, validUntilNs: (VECTOR_NOW_NS - 1n).toString() })) },
      reason: "unknown-node",
    },
    {
      name: "nodes-descending",
      description: "three valid entries in descending address order",
      proof: { ...three, nodeSignature: concatEntries([...entriesOf(three)].reverse()) },
      reason: "nodes-not-ascending",
    },
    {
      name: "node-duplicated",
      description: "the same entry twice, quorum 2 (one node must not count twice)",
      proof: { ...single, nodeSignature: concatEntries([entriesOf(single)[0]!, entriesOf(single)[0]!]) },
      context: { nodeQuorum: 2 },
      reason: "nodes-not-ascending",
    },
    { name: "quorum-not-met", description: "two nodes, quorum 3", proof: proofFor({ nodes: 2 }), context: { nodeQuorum: 3 }, reason: "quorum-not-met" },
    {
      name: "too-old",
      description: "1 ns older than maxAttestationAge",
      proof: proofFor({ nanoMoment: VECTOR_NOW_NS - DEFAULT_MAX_ATTESTATION_AGE_NS - 1n }),
      reason: "too-old",
    },
    {
      name: "too-far-in-future",
      description: "1 ns beyond maxFutureDrift",
      proof: proofFor({ nanoMoment: VECTOR_NOW_NS + DEFAULT_MAX_FUTURE_DRIFT_NS + 1n }),
      reason: "too-far-in-future",
    },
    {
      name: "future-20s",
      description: "20 s ahead: inside the 60 s age bound, so an abs() check would wrongly accept it",
      proof: proofFor({ nanoMoment: VECTOR_NOW_NS + 20n * NS_PER_SECOND }),
      reason: "too-far-in-future",
    },
    {
      name: "accuracy-too-low",
      description: "accuracy 1 ns above maxAcceptableDrift",
      proof: proofFor({ accuracy: Number(DEFAULT_MAX_ACCEPTABLE_DRIFT_NS) + 1 }),
      reason: "accuracy-too-low",
    },
    {
      name: "accuracy-lowered-after-signing",
      description: "nodes signed accuracy 2000, a relayer rewrote it to 10: the entry no longer recovers to a registered node",
      proof: { ...signedAt2000, accuracy: 10 },
      reason: "unknown-node",
    },
  ];
}

function buildCase(spec: CaseSpec): VerificationCase {
  const context = defaultContext(spec.context);
  const result = verifyTimeProof(spec.proof, contextFromVector(context));
  const reason = result.valid ? null : result.reason;
  if (reason !== spec.reason) {
    // The generator refuses to write a vector whose meaning differs from what it claims.
    throw new Error(`vector ${spec.name}: expected ${spec.reason ?? "valid"}, verifier says ${reason ?? "valid"}`);
  }
  return {
    name: spec.name,
    description: spec.description,
    proof: proofToVector(spec.proof),
    abiEncoded: encodeTimeProof(spec.proof),
    context,
    expected: { valid: reason === null, reason },
  };
}

// ---------------------------------------------------------------- the file

export function buildVectors() {
  const three = proofFor({ nodes: 3 });
  const hardware = decodeHardwareSignature(three.hardwareSignature);
  const message = crossChainTimeForProof(three, 31_338n);
  return {
    version: 1,
    generator: "scripts/gen-vectors.ts",
    note: "Golden vectors of Attested Time protocol v1 (docs/protocol.md). Keys are PUBLIC DEV KEYS. Regenerate with `npx hardhat run scripts/gen-vectors.ts`.",
    constants: {
      HW_MESSAGE_TAG,
      HW_MESSAGE_LENGTH,
      HARDWARE_SIGNATURE_LENGTH,
      NODE_ENTRY_LENGTH,
      P256_N: P256_N.toString(),
      P256_HALF_N: P256_HALF_N.toString(),
      EIP712_DOMAIN,
      TIME_ATTESTATION_TYPE,
      TIME_ATTESTATION_TYPEHASH: timeAttestationTypeHash(),
      DOMAIN_SEPARATOR: timeAttestationDomainSeparator(),
    },
    keys: { card: CARD, otherCard: OTHER_CARD, nodes: NODES },
    hwMessages: [0n, 1n, VECTOR_NANO_MOMENT, UINT128_MAX].map((nanoMoment) => ({
      cardId: CARD.cardId,
      nanoMoment: nanoMoment.toString(),
      hwMessage: `0x${Buffer.from(hwMessage(CARD.cardId, nanoMoment)).toString("hex")}` as Hex,
      hwDigest: hwDigest(CARD.cardId, nanoMoment),
    })),
    hardwareSignature: {
      nanoMoment: three.nanoMoment.toString(),
      encoded: three.hardwareSignature,
      ...hardware,
      hardwareSignatureHash: hardwareSignatureHash(hardware.r, hardware.s),
    },
    attestations: NODES.map(({ privateKey, address }, index) => {
      const att = timeAttestationForProof(three, three.nanoMoment + NODE_OFFSETS_NS[index]!);
      return {
        signer: address,
        message: { ...att, nanoMoment: att.nanoMoment.toString(), nodeTimestamp: att.nodeTimestamp.toString() },
        structHash: timeAttestationStructHash(att),
        digest: timeAttestationDigest(att),
        entry: signNodeEntry(privateKey, att),
      };
    }),
    timeProof: { proof: proofToVector(three), abiEncoded: encodeTimeProof(three) },
    crossChainTime: {
      message: { ...message, networkTime: message.networkTime.toString(), targetChain: message.targetChain.toString(), targetBlock: message.targetBlock.toString() },
      abiEncoded: encodeCrossChainTime(message),
    },
    verification: { defaults: defaultContext(), cases: caseSpecs().map(buildCase) },
  };
}

export type ProtocolVectors = ReturnType<typeof buildVectors>;

/** Deterministic JSON text of the vectors (2-space indent, trailing newline). */
export function vectorsText(): string {
  return `${JSON.stringify(buildVectors(), null, 2)}\n`;
}

export const VECTORS_FILE_NAME = "protocol-v1.json";
