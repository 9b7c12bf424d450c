/**
 * The one TypeScript codec of the wire format (docs/protocol.md §3–§5, §10). Pure functions: bytes in, bytes out.
 * Mirrors `contracts/libraries/TimeProofLib.sol`; both are checked against `test/vectors/*.json`.
 * Encoders validate their inputs and decoders are strict (exact lengths, canonical ABI); both throw
 * ProtocolError with the field and the observed length/value as evidence.
 */
import { createHash } from "node:crypto";
import {
  decodeAbiParameters,
  domainSeparator,
  encodeAbiParameters,
  hashStruct,
  hashTypedData,
  keccak256,
  type TypedDataDefinition,
} from "viem";
import {
  CARD_ID_LENGTH,
  EIP712_DOMAIN,
  HARDWARE_SIGNATURE_LENGTH,
  HW_MESSAGE_LENGTH,
  HW_MESSAGE_TAG,
  NODE_ENTRY_LENGTH,
  TIME_ATTESTATION_TYPE,
  TIME_ATTESTATION_TYPES,
  UINT128_LENGTH,
} from "./constants";
import { keccak256Bytes } from "./keccak";
import { ProtocolError } from "./errors";
import {
  asBuffer,
  assertUint128,
  assertUint32,
  bigintToFixedHex,
  bytesToHexString,
  concatHexStrings,
  hexByteLength,
  hexToBigint,
  hexToByteArray,
  preview,
  sliceHexBytes,
  toFixedHex,
  toHexStrict,
  writeUint128,
} from "./bytes";
import { p256PublicKeyToUncompressed, type P256PublicKeyInput } from "./keys";
import type { CrossChainTime, HardwareSignature, Hex, NodeEntry, TimeAttestation, TimeProof } from "./types";

// ---------------------------------------------------------------- identities and the hardware message (§2, §3)

/** cardId = SHA-256(0x04 ‖ X ‖ Y) of the card's P-256 public key (docs/protocol.md §2). */
export function cardIdFromPublicKey(publicKey: P256PublicKeyInput): Hex {
  const uncompressed = p256PublicKeyToUncompressed(publicKey);
  return bytesToHexString(createHash("sha256").update(hexToByteArray(uncompressed)).digest());
}

const HW_MESSAGE_TAG_BYTES = Buffer.from(HW_MESSAGE_TAG.slice(2), "hex");
const HW_MESSAGE_CARD_ID_OFFSET = HW_MESSAGE_TAG_BYTES.length;
const HW_MESSAGE_MOMENT_OFFSET = HW_MESSAGE_CARD_ID_OFFSET + CARD_ID_LENGTH;
if (HW_MESSAGE_MOMENT_OFFSET + UINT128_LENGTH !== HW_MESSAGE_LENGTH) {
  // Unreachable by construction; kept so a change of a length constant cannot go unnoticed.
  throw new ProtocolError("hwMessage length mismatch", { expected: HW_MESSAGE_LENGTH, actual: HW_MESSAGE_MOMENT_OFFSET + UINT128_LENGTH });
}

/** Writes the tag and nanoMoment (range-checked here) of an hwMessage; the caller writes the cardId. */
function writeHwMessageFrame(message: Buffer, nanoMoment: bigint): void {
  const moment = assertUint128(nanoMoment, "nanoMoment");
  message.set(HW_MESSAGE_TAG_BYTES, 0);
  writeUint128(message, HW_MESSAGE_MOMENT_OFFSET, moment);
}

/** "ATS/1 HW" (8) ‖ cardId (32) ‖ nanoMoment (16, big-endian): the 56 bytes the card signs. */
export function hwMessage(cardId: Hex, nanoMoment: bigint): Uint8Array {
  const id = toFixedHex(cardId, CARD_ID_LENGTH, "cardId");
  const message = new Uint8Array(HW_MESSAGE_LENGTH);
  const view = asBuffer(message);
  writeHwMessageFrame(view, nanoMoment);
  view.write(id.slice(2), HW_MESSAGE_CARD_ID_OFFSET, "hex");
  return message;
}

/** hwMessage with the cardId as its 32 bytes (a verifier holding the decoded hardware signature); a new Buffer. */
export function hwMessageBytes(cardId: Uint8Array, nanoMoment: bigint): Buffer {
  checkWord(cardId, "cardId");
  const message = Buffer.allocUnsafe(HW_MESSAGE_LENGTH); // every byte is written below
  writeHwMessageFrame(message, nanoMoment);
  message.set(cardId, HW_MESSAGE_CARD_ID_OFFSET);
  return message;
}

/** Throws ProtocolError unless `value` is exactly 32 bytes. */
function checkWord(value: Uint8Array, field: string): void {
  if (!(value instanceof Uint8Array) || value.length !== 32) {
    throw new ProtocolError(`${field} must be 32 bytes, got ${value instanceof Uint8Array ? value.length : typeof value}`, {
      field,
      expectedBytes: 32,
      actualBytes: value instanceof Uint8Array ? value.length : null,
    });
  }
}

/** sha256(hwMessage): what the P-256 precompile checks on-chain. */
export function hwDigest(cardId: Hex, nanoMoment: bigint): Hex {
  return bytesToHexString(createHash("sha256").update(hwMessage(cardId, nanoMoment)).digest());
}

// ---------------------------------------------------------------- hardware signature (§5)

export function encodeHardwareSignature(signature: HardwareSignature): Hex {
  return concatHexStrings([
    toFixedHex(signature.cardId, 32, "hardwareSignature.cardId"),
    toFixedHex(signature.r, 32, "hardwareSignature.r"),
    toFixedHex(signature.s, 32, "hardwareSignature.s"),
  ]);
}

/** Strict: exactly 96 bytes. */
export function decodeHardwareSignature(encoded: Hex): HardwareSignature {
  const hex = toFixedHex(encoded, HARDWARE_SIGNATURE_LENGTH, "hardwareSignature");
  return { cardId: sliceHexBytes(hex, 0, 32), r: sliceHexBytes(hex, 32, 64), s: sliceHexBytes(hex, 64, 96) };
}

/** keccak256(r ‖ s) of the card's signature: the field the node signs (docs/protocol.md §4). */
export function hardwareSignatureHash(r: Hex, s: Hex): Hex {
  const rHex = toFixedHex(r, 32, "r");
  const sHex = toFixedHex(s, 32, "s");
  return bytesToHexString(keccak256Bytes(Buffer.from(`${rHex.slice(2)}${sHex.slice(2)}`, "hex")));
}

/** hardwareSignatureHash over the 64 bytes r ‖ s (bytes 32–96 of a hardware signature); 32 bytes. */
export function hardwareSignatureHashBytes(rAndS: Uint8Array): Buffer {
  if (!(rAndS instanceof Uint8Array) || rAndS.length !== 64) {
    throw new ProtocolError("r ‖ s must be 64 bytes", { field: "rAndS", expectedBytes: 64, actualBytes: rAndS instanceof Uint8Array ? rAndS.length : null });
  }
  return keccak256Bytes(rAndS);
}

// ---------------------------------------------------------------- node entries (§5)

export function encodeNodeEntry(entry: NodeEntry): Hex {
  return concatHexStrings([
    bigintToFixedHex(assertUint128(entry.nodeTimestampNs, "nodeEntry.nodeTimestampNs"), UINT128_LENGTH),
    toFixedHex(entry.r, 32, "nodeEntry.r"),
    toFixedHex(entry.yParityAndS, 32, "nodeEntry.yParityAndS"),
  ]);
}

/** Concatenates entries in the given order (sorting is `assembleProof`'s job, it needs the addresses). */
export function encodeNodeEntries(entries: readonly NodeEntry[]): Hex {
  if (entries.length === 0) throw new ProtocolError("nodeSignature needs at least one entry", { entries: 0 });
  return concatHexStrings(entries.map(encodeNodeEntry));
}

/** Strict: one entry of exactly 80 bytes. */
export function decodeNodeEntry(encoded: Hex): NodeEntry {
  const hex = toFixedHex(encoded, NODE_ENTRY_LENGTH, "nodeEntry");
  return {
    nodeTimestampNs: hexToBigint(sliceHexBytes(hex, 0, 16)),
    r: sliceHexBytes(hex, 16, 48),
    yParityAndS: sliceHexBytes(hex, 48, 80),
  };
}

/** Strict: a non-empty multiple of 80 bytes. */
export function decodeNodeEntries(encoded: Hex): NodeEntry[] {
  const hex = toHexStrict(encoded, "nodeSignature");
  const length = hexByteLength(hex);
  if (length === 0 || length % NODE_ENTRY_LENGTH !== 0) {
    throw new ProtocolError(`nodeSignature must be a non-empty multiple of ${NODE_ENTRY_LENGTH} bytes, got ${length}`, {
      field: "nodeSignature",
      actualBytes: length,
      entryBytes: NODE_ENTRY_LENGTH,
    });
  }
  const entries: NodeEntry[] = [];
  for (let offset = 0; offset < length; offset += NODE_ENTRY_LENGTH) {
    entries.push(decodeNodeEntry(sliceHexBytes(hex, offset, offset + NODE_ENTRY_LENGTH)));
  }
  return entries;
}

// ---------------------------------------------------------------- EIP-712 attestation (§4)

export type TimeAttestationTypedData = TypedDataDefinition<typeof TIME_ATTESTATION_TYPES, "TimeAttestation">;

function checkedAttestation(att: TimeAttestation): TimeAttestation {
  return {
    cardId: toFixedHex(att.cardId, 32, "attestation.cardId"),
    nanoMoment: assertUint128(att.nanoMoment, "attestation.nanoMoment"),
    accuracy: assertUint32(att.accuracy, "attestation.accuracy"),
    hardwareSignatureHash: toFixedHex(att.hardwareSignatureHash, 32, "attestation.hardwareSignatureHash"),
    nodeTimestamp: assertUint128(att.nodeTimestamp, "attestation.nodeTimestamp"),
  };
}

/** The viem typed-data definition (domain without chainId/verifyingContract, docs/protocol.md §4). */
export function timeAttestationTypedData(att: TimeAttestation): TimeAttestationTypedData {
  const checked = checkedAttestation(att);
  return {
    domain: EIP712_DOMAIN,
    types: TIME_ATTESTATION_TYPES,
    primaryType: "TimeAttestation",
    message: { ...checked },
  };
}

/** keccak256 of the domain `EIP712Domain(string name,string version)` with name "AttestedTime", version "1". */
export function timeAttestationDomainSeparator(): Hex {
  return DOMAIN_SEPARATOR;
}

/** keccak256 of the type string: the Solidity `TIME_ATTESTATION_TYPEHASH`. */
export function timeAttestationTypeHash(): Hex {
  return TIME_ATTESTATION_TYPEHASH;
}

// Computed once through viem (the reference implementation of EIP-712); the per-attestation path below then
// only hashes fixed-size words, because every TimeAttestation field is a static type. Measured by NODE-CORE:
// viem's generic hashTypedData costs ~0.4 ms per call under load; this path is a fraction of that.
const DOMAIN_SEPARATOR: Hex = domainSeparator({ domain: EIP712_DOMAIN });
const TIME_ATTESTATION_TYPEHASH: Hex = keccak256(`0x${Buffer.from(TIME_ATTESTATION_TYPE, "ascii").toString("hex")}`);

/** A TimeAttestation whose 32-byte fields are bytes: what a verifier holds after decoding a proof. */
export interface TimeAttestationBytes {
  /** 32 bytes. */
  cardId: Uint8Array;
  /** The card's timestamp, ns (uint128). */
  nanoMoment: bigint;
  /** ns (uint32). */
  accuracy: number;
  /** keccak256(r ‖ s) of the card's signature (32 bytes). */
  hardwareSignatureHash: Uint8Array;
  /** The signing node's own reading, ns (uint128). */
  nodeTimestamp: bigint;
}

// Scratch space of the hashing below: abi.encode(TYPEHASH, cardId, nanoMoment, accuracy, hardwareSignatureHash,
// nodeTimestamp) as six words, and 0x1901 ‖ domainSeparator ‖ structHash. Each call fills and hashes them
// synchronously (keccak copies its input), so reusing them is safe in this single-threaded module.
const STRUCT_WORDS = Buffer.alloc(6 * 32);
STRUCT_WORDS.write(TIME_ATTESTATION_TYPEHASH.slice(2), 0, "hex");
const WORD_CARD_ID = 32;
const WORD_NANO_MOMENT = 64;
const WORD_ACCURACY = 96;
const WORD_HARDWARE_SIGNATURE_HASH = 128;
const WORD_NODE_TIMESTAMP = 160;
const DIGEST_INPUT = Buffer.alloc(2 + 32 + 32);
DIGEST_INPUT.write(`1901${DOMAIN_SEPARATOR.slice(2)}`, 0, "hex");

/** Writes the integer words (range-checked by the caller); the word's high bytes stay zero. */
function fillStructIntegers(nanoMoment: bigint, accuracy: number, nodeTimestamp: bigint): void {
  writeUint128(STRUCT_WORDS, WORD_NANO_MOMENT + 16, nanoMoment);
  STRUCT_WORDS.writeUInt32BE(accuracy, WORD_ACCURACY + 28);
  writeUint128(STRUCT_WORDS, WORD_NODE_TIMESTAMP + 16, nodeTimestamp);
}

/** Fills STRUCT_WORDS from a hex attestation, with checkedAttestation's checks and errors. */
function fillStructFromHex(att: TimeAttestation): void {
  const checked = checkedAttestation(att);
  STRUCT_WORDS.write(checked.cardId.slice(2), WORD_CARD_ID, "hex");
  STRUCT_WORDS.write(checked.hardwareSignatureHash.slice(2), WORD_HARDWARE_SIGNATURE_HASH, "hex");
  fillStructIntegers(checked.nanoMoment, checked.accuracy, checked.nodeTimestamp);
}

function digestOfFilledStruct(): Buffer {
  DIGEST_INPUT.set(keccak256Bytes(STRUCT_WORDS), 34);
  return keccak256Bytes(DIGEST_INPUT);
}

/** hashStruct(TimeAttestation) = keccak256(abi.encode(TYPEHASH, cardId, nanoMoment, accuracy, hwSigHash, nodeTimestamp)). */
export function timeAttestationStructHash(att: TimeAttestation): Hex {
  fillStructFromHex(att);
  return bytesToHexString(keccak256Bytes(STRUCT_WORDS));
}

/** The EIP-712 digest each node signs: keccak256(0x1901 ‖ domainSeparator ‖ structHash). */
export function timeAttestationDigest(att: TimeAttestation): Hex {
  return bytesToHexString(timeAttestationDigestBuffer(att));
}

/** timeAttestationDigest as its 32 bytes. */
export function timeAttestationDigestBuffer(att: TimeAttestation): Buffer {
  fillStructFromHex(att);
  return digestOfFilledStruct();
}

/** timeAttestationDigest of an attestation held as bytes (same checks on the integers); 32 bytes. */
export function timeAttestationDigestBytes(att: TimeAttestationBytes): Buffer {
  checkWord(att.cardId, "attestation.cardId");
  const nanoMoment = assertUint128(att.nanoMoment, "attestation.nanoMoment");
  const accuracy = assertUint32(att.accuracy, "attestation.accuracy");
  checkWord(att.hardwareSignatureHash, "attestation.hardwareSignatureHash");
  const nodeTimestamp = assertUint128(att.nodeTimestamp, "attestation.nodeTimestamp");
  STRUCT_WORDS.set(att.cardId, WORD_CARD_ID);
  STRUCT_WORDS.set(att.hardwareSignatureHash, WORD_HARDWARE_SIGNATURE_HASH);
  fillStructIntegers(nanoMoment, accuracy, nodeTimestamp);
  return digestOfFilledStruct();
}

/** The same digest through viem's generic EIP-712 code: the oracle the fast path is tested against. */
export function timeAttestationDigestViem(att: TimeAttestation): Hex {
  return hashTypedData(timeAttestationTypedData(att));
}

/** The same struct hash through viem's generic EIP-712 code. */
export function timeAttestationStructHashViem(att: TimeAttestation): Hex {
  const typed = timeAttestationTypedData(att);
  return hashStruct({ data: typed.message, primaryType: "TimeAttestation", types: TIME_ATTESTATION_TYPES });
}

/** The attestation a node entry of `proof` signs: the proof's fields plus that entry's own timestamp. */
export function timeAttestationForProof(
  proof: Pick<TimeProof, "nanoMoment" | "hardwareSignature" | "accuracy">,
  nodeTimestampNs: bigint,
): TimeAttestation {
  // decodeHardwareSignature and hardwareSignatureHash, with the one validation of the 96 bytes.
  const hardware = toFixedHex(proof.hardwareSignature, HARDWARE_SIGNATURE_LENGTH, "hardwareSignature");
  return {
    cardId: sliceHexBytes(hardware, 0, 32),
    nanoMoment: proof.nanoMoment,
    accuracy: proof.accuracy,
    hardwareSignatureHash: bytesToHexString(keccak256Bytes(Buffer.from(hardware.slice(66), "hex"))),
    nodeTimestamp: nodeTimestampNs,
  };
}

// ---------------------------------------------------------------- ABI encodings (§5, §10)

/** ABI parameter of the Solidity `TimeProof` struct. */
export const TIME_PROOF_ABI_PARAMETER = {
  type: "tuple",
  name: "proof",
  components: [
    { name: "nanoMoment", type: "uint128" },
    { name: "hardwareSignature", type: "bytes" },
    { name: "nodeSignature", type: "bytes" },
    { name: "accuracy", type: "uint32" },
  ],
} as const;

/** ABI parameter of the Solidity `CrossChainTime` struct. */
export const CROSS_CHAIN_TIME_ABI_PARAMETER = {
  type: "tuple",
  name: "message",
  components: [
    { name: "networkTime", type: "uint128" },
    { name: "targetChain", type: "uint256" },
    { name: "proof", type: "bytes" },
    { name: "targetBlock", type: "uint256" },
  ],
} as const;

/** abi.encode(TimeProof). Does not check the inner byte lengths: verification rejects those, not the codec. */
export function encodeTimeProof(proof: TimeProof): Hex {
  return encodeAbiParameters(
    [TIME_PROOF_ABI_PARAMETER],
    [
      {
        nanoMoment: assertUint128(proof.nanoMoment, "proof.nanoMoment"),
        hardwareSignature: toHexStrict(proof.hardwareSignature, "proof.hardwareSignature"),
        nodeSignature: toHexStrict(proof.nodeSignature, "proof.nodeSignature"),
        accuracy: assertUint32(proof.accuracy, "proof.accuracy"),
      },
    ],
  );
}

/**
 * Decodes abi.encode(X) and insists that re-encoding gives the same bytes, so padding garbage, trailing bytes
 * and non-canonical offsets are rejected (one proof has one encoding).
 */
function decodeCanonical<T>(encoded: Hex, what: string, decode: (hex: Hex) => T, encode: (value: T) => Hex): T {
  const hex = toHexStrict(encoded, what);
  let value: T;
  try {
    value = decode(hex);
  } catch (cause) {
    throw new ProtocolError(`${what} is not valid ABI`, { field: what, bytes: hexByteLength(hex), value: preview(hex) }, { cause });
  }
  if (encode(value) !== hex) {
    throw new ProtocolError(`${what} is not canonically ABI-encoded`, { field: what, bytes: hexByteLength(hex) });
  }
  return value;
}

export function decodeTimeProof(encoded: Hex): TimeProof {
  return decodeCanonical(
    encoded,
    "timeProof",
    (hex) => {
      const [decoded] = decodeAbiParameters([TIME_PROOF_ABI_PARAMETER], hex);
      return {
        nanoMoment: decoded.nanoMoment,
        hardwareSignature: decoded.hardwareSignature,
        nodeSignature: decoded.nodeSignature,
        accuracy: decoded.accuracy,
      };
    },
    encodeTimeProof,
  );
}

export function encodeCrossChainTime(message: CrossChainTime): Hex {
  return encodeAbiParameters(
    [CROSS_CHAIN_TIME_ABI_PARAMETER],
    [
      {
        networkTime: assertUint128(message.networkTime, "crossChainTime.networkTime"),
        targetChain: message.targetChain,
        proof: toHexStrict(message.proof, "crossChainTime.proof"),
        targetBlock: message.targetBlock,
      },
    ],
  );
}

export function decodeCrossChainTime(encoded: Hex): CrossChainTime {
  return decodeCanonical(
    encoded,
    "crossChainTime",
    (hex) => {
      const [decoded] = decodeAbiParameters([CROSS_CHAIN_TIME_ABI_PARAMETER], hex);
      return {
        networkTime: decoded.networkTime,
        targetChain: decoded.targetChain,
        proof: decoded.proof,
        targetBlock: decoded.targetBlock,
      };
    },
    encodeCrossChainTime,
  );
}

/** Builds the message `sendTime` emits for `proof` (networkTime = nanoMoment, targetBlock = 0, docs/protocol.md §10). */
export function crossChainTimeForProof(proof: TimeProof, targetChain: bigint): CrossChainTime {
  return { networkTime: proof.nanoMoment, targetChain, proof: encodeTimeProof(proof), targetBlock: 0n };
}

/** Concatenates already-encoded 80-byte entries in the given order (tests and vectors build bad orders). */
export function concatEntries(entries: readonly Hex[]): Hex {
  return concatHexStrings(entries.map((entry) => toFixedHex(entry, NODE_ENTRY_LENGTH, "nodeEntry")));
}
