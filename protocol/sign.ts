/**
 * Signing (card: P-256, node: secp256k1 over EIP-712) and node-address recovery (docs/protocol.md §3–§5).
 * Every signature this module produces is low-S: a high-S signature is invalid everywhere (§3), and the
 * compact EIP-2098 form cannot carry one unambiguously anyway.
 *
 * Recovery results are memoised only in a RecoveryMemo the caller creates and passes (createRecoveryMemo); this
 * module keeps no recovery cache of its own. Its one module-level table, the cardId of a card KeyObject
 * (cardIdOf), is a WeakMap keyed by the caller's key objects: a pure function of the key, freed with it.
 */
import { sign as cryptoSign, type KeyObject } from "node:crypto";
import { p256 } from "@noble/curves/nist.js";
import { NODE_ENTRY_LENGTH, P256_HALF_N, P256_N, SECP256K1_HALF_N, SECP256K1_N } from "./constants";
import { ProtocolError } from "./errors";
import { asBuffer, bigintToBytes, bigintToFixedHex, bytesToHexString, concatHexStrings, hexToBigint, hexToByteArray, toFixedHex, writeUint128 } from "./bytes";
import { cardIdFromPublicKey, decodeNodeEntry, encodeNodeEntry, hwMessage, timeAttestationDigestBuffer, timeAttestationForProof } from "./codec";
import { addressOfUncompressedKey, externalNodeSignerOf, nodeAddressFromPrivateKey, nodePrivateKeyHex, p256PublicKeyToUncompressed, type NodeKeyInput } from "./keys";
import { BoundedLru } from "./lru";
import { recoverUncompressedPublicKey, signDigest } from "./secp256k1";
import type { Address, Hex, NodeEntry, TimeAttestation, TimeProof } from "./types";

/**
 * A card signing key: a node:crypto P-256 private KeyObject (production: randomized k from OpenSSL), or a raw
 * 32-byte scalar (deterministic RFC 6979 k through @noble/curves, so golden vectors are reproducible).
 */
export type CardSigningKey = KeyObject | Hex;

/** s → n − s when s > n/2, for P-256. */
export function normalizeP256S(s: bigint): bigint {
  return s > P256_HALF_N ? P256_N - s : s;
}

const P256_HALF_N_BYTES = bigintToBytes(P256_HALF_N, 32);

/** A copy of the 64-byte P-256 r ‖ s with s normalised to the low half (docs/protocol.md §3). */
function lowSP256Bytes(signature: Uint8Array): Buffer {
  if (signature.length !== 64) {
    throw new ProtocolError("P-256 signature must be 64 bytes (IEEE P1363)", { actualBytes: signature.length });
  }
  const bytes = Buffer.from(signature);
  // s > n/2 compared as big-endian bytes; only the high half (about every other OpenSSL signature) needs n − s.
  if (bytes.compare(P256_HALF_N_BYTES, 0, 32, 32, 64) > 0) {
    const s = BigInt(`0x${bytes.toString("hex", 32, 64)}`);
    // No signer returns s ≥ n; n − s would be negative and has no 32-byte encoding.
    if (s >= P256_N) throw new ProtocolError("P-256 signature s is not below n", { s: bigintToFixedHex(s, 32) });
    bytes.write(bigintToFixedHex(normalizeP256S(s), 32).slice(2), 32, "hex");
  }
  return bytes;
}

/** A 64-byte P-256 r ‖ s with s normalised to the low half (docs/protocol.md §3). */
export function toLowSP256Signature(signature: Uint8Array): { r: Hex; s: Hex } {
  const bytes = lowSP256Bytes(signature);
  return { r: `0x${bytes.toString("hex", 0, 32)}`, s: `0x${bytes.toString("hex", 32, 64)}` };
}

function cardPublicKeyOf(cardKey: CardSigningKey): Hex {
  if (typeof cardKey === "string") {
    return bytesToHexString(p256.getPublicKey(hexToByteArray(toFixedHex(cardKey, 32, "cardPrivateKey")), false));
  }
  return p256PublicKeyToUncompressed(cardKey);
}

function rawP256Sign(cardKey: CardSigningKey, message: Uint8Array): Uint8Array {
  if (typeof cardKey === "string") {
    // prehash: sha256(message), the same digest node:crypto computes; lowS normalises inside noble.
    return p256.sign(message, hexToByteArray(cardKey), { prehash: true, lowS: true, format: "compact" });
  }
  return cryptoSign("sha256", message, { key: cardKey, dsaEncoding: "ieee-p1363" });
}

// Exporting a KeyObject as JWK and hashing it costs more than the signature itself; a card signs many times.
const CARD_ID_BY_KEY = new WeakMap<KeyObject, Hex>();

/** The card's cardId (SHA-256 of its uncompressed public key). */
export function cardIdOf(cardKey: CardSigningKey): Hex {
  if (typeof cardKey === "string") return cardIdFromPublicKey(cardPublicKeyOf(cardKey));
  let cardId = CARD_ID_BY_KEY.get(cardKey);
  if (cardId === undefined) {
    cardId = cardIdFromPublicKey(cardPublicKeyOf(cardKey));
    CARD_ID_BY_KEY.set(cardKey, cardId);
  }
  return cardId;
}

/** Signs hwMessage(cardId, nanoMoment) with the card key: returns the 96-byte cardId ‖ r ‖ s, always low-S. */
export function signHardware(cardKey: CardSigningKey, nanoMoment: bigint): Hex {
  const cardId = cardIdOf(cardKey); // lowercase 32-byte hex: encodeHardwareSignature's checks hold by construction
  return `${cardId}${lowSP256Bytes(rawP256Sign(cardKey, hwMessage(cardId, nanoMoment))).toString("hex")}`;
}

/**
 * Signs a 32-byte digest with a node key in EIP-2098 compact form: r (32) ‖ yParityAndS (32), low-S. The form of
 * every node signature (entries, mesh hellos and alerts); recoverNodeAddressFromDigest reads it back.
 */
export function signDigestCompact(nodePrivateKey: NodeKeyInput, digest: Uint8Array): Buffer {
  if (digest.length !== 32) throw new ProtocolError("a digest is 32 bytes", { actualBytes: digest.length });
  const external = externalNodeSignerOf(nodePrivateKey);
  if (external !== undefined) return externalCompactSignature(external.signDigestCompact(digest));
  const signature = signDigest(digest, hexToByteArray(nodePrivateKeyHex(nodePrivateKey)));
  if (signature.recovery !== 0 && signature.recovery !== 1) {
    // Recovery ids 2/3 (r ≥ n − p) have probability ~2^-128 and EIP-2098 cannot express them.
    throw new ProtocolError("node signature has an unrepresentable recovery id", { recovery: signature.recovery });
  }
  // s ≤ n/2 < 2^255 leaves bit 255 free for the y parity.
  const compact = Buffer.from(signature.compact);
  compact[32] = compact[32]! | (signature.recovery << 7);
  return compact;
}

/** An external signer's compact signature, checked for the shape and the low-S rule every node signature keeps. */
function externalCompactSignature(compact: Uint8Array): Buffer {
  if (compact.length !== 64) throw new ProtocolError("external node signer must return 64 bytes r ‖ yParityAndS", { actualBytes: compact.length });
  const bytes = Buffer.from(compact);
  const s = Buffer.from(bytes.subarray(32));
  s[0] = s[0]! & 0x7f;
  if (s.compare(SECP256K1_HALF_N_BYTES) > 0) throw new ProtocolError("external node signer returned a high-S signature", { s: `0x${s.toString("hex")}` });
  return bytes;
}

/** The 80-byte entry and the 32-byte EIP-712 digest it signs (signNodeEntry, signNodeEntryWithDigest). */
function signNodeEntryBytes(nodePrivateKey: NodeKeyInput, att: TimeAttestation): { entry: Buffer; digest: Buffer } {
  const digest = timeAttestationDigestBuffer(att); // checks every field of att, nodeTimestamp included
  // nodeTimestamp (16) ‖ r (32) ‖ yParityAndS (32).
  const entry = Buffer.alloc(NODE_ENTRY_LENGTH);
  writeUint128(entry, 0, att.nodeTimestamp);
  entry.set(signDigestCompact(nodePrivateKey, digest), 16);
  return { entry, digest };
}

/**
 * Signs the EIP-712 digest of `att` with the node's secp256k1 key and returns the 80-byte entry
 * nodeTimestamp ‖ r ‖ yParityAndS (EIP-2098). Signing is RFC 6979 deterministic and low-S with either backend
 * of protocol/secp256k1.ts (libsecp256k1 when its addon loads, @noble/curves otherwise): same bytes.
 * With a `memo` and a NodeKey signer, the entry is remembered in `memo`, so verifying the proof through that memo
 * costs no ecrecover (a raw hex key would need a point multiplication to learn its address: not seeded).
 */
export function signNodeEntry(nodePrivateKey: NodeKeyInput, att: TimeAttestation, memo?: RecoveryMemo): Hex {
  const { entry, digest } = signNodeEntryBytes(nodePrivateKey, att);
  if (memo !== undefined && typeof nodePrivateKey !== "string") {
    entriesOf(memo).set(nodeAddressMemoKeyOf(digest, entry.subarray(16)), nodePrivateKey.address);
  }
  return `0x${entry.toString("hex")}`;
}

/**
 * signNodeEntry, also returning the EIP-712 digest the entry signs (computed once), for a signer that hands both
 * to another thread (node/core/signerThread.ts: the parent seeds its RecoveryMemo with the digest). Seeds no memo
 * itself.
 */
export function signNodeEntryWithDigest(nodePrivateKey: NodeKeyInput, att: TimeAttestation): { entry: Hex; digest: Hex } {
  const { entry, digest } = signNodeEntryBytes(nodePrivateKey, att);
  return { entry: `0x${entry.toString("hex")}`, digest: `0x${digest.toString("hex")}` };
}

// ---------------------------------------------------------------- recovery memo

/** Entries a RecoveryMemo keeps unless createRecoveryMemo is told otherwise (least recently used evicted first). */
export const DEFAULT_RECOVERY_MEMO_MAX_ENTRIES = 4_096;

export interface CreateRecoveryMemoParameters {
  /** At most this many recoveries are kept (least recently used evicted first). Default DEFAULT_RECOVERY_MEMO_MAX_ENTRIES. */
  maxEntries?: number;
}

/** The LRU behind a memo, for this module's recovery functions only (set in RecoveryMemo's static block). */
let entriesOf: (memo: RecoveryMemo) => BoundedLru<string, Address>;

/**
 * A node-address recovery memo: digest ‖ r ‖ yParityAndS (lowercase hex) → recovered address, a bounded LRU owned
 * by whoever creates it (createRecoveryMemo) and passed to recoverNodeAddress, recoverNodeAddressFromDigest,
 * signNodeEntry (which seeds it) or, through VerifyTimeProofContext.recoveryMemo, to verifyTimeProof. protocol/
 * keeps no memo of its own: a call without one always recovers, and two memos never share entries.
 *
 * Public-key recovery is a pure function of those three values, so a hit returns exactly what recovery would; a
 * proof is typically verified many times (every client, every relay, the node itself) while one secp256k1
 * recovery costs ~0.1 ms with libsecp256k1 and ~1–3 ms in pure JS. Range and high-S checks run BEFORE the memo is
 * consulted, and failures are never stored, so the memo cannot change which signatures are refused. Only
 * remember() can make it answer wrongly: seed it with your own signatures only.
 */
export class RecoveryMemo {
  readonly #entries: BoundedLru<string, Address>;

  static {
    entriesOf = (memo) => memo.#entries;
  }

  constructor(parameters: CreateRecoveryMemoParameters = {}) {
    this.#entries = new BoundedLru(parameters.maxEntries ?? DEFAULT_RECOVERY_MEMO_MAX_ENTRIES, "recovery memo");
  }

  /** The bound on size. */
  get maxEntries(): number {
    return this.#entries.maxEntries;
  }

  /** The number of memoised recoveries (tests, metrics). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Seeds the memo with a signature the caller PRODUCED itself with the key of `address` over `digest` (the
   * attestor does, for entries signed in its worker thread). Never call it with a signature received from
   * elsewhere: a wrong seed would make recovery through this memo report a signer that did not sign.
   */
  remember(digest: Hex, entry: Pick<NodeEntry, "r" | "yParityAndS">, address: Address): void {
    const key = nodeAddressMemoKey(toFixedHex(digest, 32, "digest"), toFixedHex(entry.r, 32, "nodeEntry.r"), toFixedHex(entry.yParityAndS, 32, "nodeEntry.yParityAndS"));
    this.#entries.set(key, address);
  }

  /** Empties the memo (tests and benchmarks measuring cold verification). */
  clear(): void {
    this.#entries.clear();
  }
}

/** A new, empty RecoveryMemo (bounded LRU, DEFAULT_RECOVERY_MEMO_MAX_ENTRIES unless `maxEntries` says otherwise). */
export function createRecoveryMemo(parameters: CreateRecoveryMemoParameters = {}): RecoveryMemo {
  return new RecoveryMemo(parameters);
}

function nodeAddressMemoKey(digest: Hex, r: Hex, yParityAndS: Hex): string {
  return `${digest}${r.slice(2)}${yParityAndS.slice(2)}`.toLowerCase();
}

/** nodeAddressMemoKey of bytes: digest (32) and the entry's r ‖ yParityAndS (64). Buffer hex is lowercase. */
function nodeAddressMemoKeyOf(digest: Buffer, signature: Buffer): string {
  return `0x${digest.toString("hex")}${signature.toString("hex")}`;
}

/** Splits EIP-2098 yParityAndS into the y parity (bit 255) and s (low 255 bits). */
export function splitYParityAndS(yParityAndS: Hex): { yParity: 0 | 1; s: bigint } {
  const value = hexToBigint(toFixedHex(yParityAndS, 32, "yParityAndS"));
  return { yParity: value >> 255n === 1n ? 1 : 0, s: value & ((1n << 255n) - 1n) };
}

const SECP256K1_N_BYTES = bigintToBytes(SECP256K1_N, 32);
const SECP256K1_HALF_N_BYTES = bigintToBytes(SECP256K1_HALF_N, 32);
const ZERO_WORD = Buffer.alloc(32);

/** r of r ‖ yParityAndS as lowercase hex (error evidence). */
function rHex(signature: Buffer): Hex {
  return `0x${signature.toString("hex", 0, 32)}`;
}

/** A checked EIP-2098 signature: r ‖ s (s without the parity bit) and the y parity. */
interface CheckedNodeSignature {
  compact: Buffer;
  yParity: 0 | 1;
}

/**
 * Splits r ‖ yParityAndS (64 bytes) and refuses what ecrecover / OpenZeppelin's ECDSA would: r or s zero or ≥ n,
 * s > n/2. The comparisons are on big-endian bytes, which order like the integers.
 */
function checkedNodeSignature(signature: Buffer, rEvidence: Hex | undefined): CheckedNodeSignature {
  const compact = Buffer.from(signature);
  const yParity = compact[32]! >> 7 === 1 ? 1 : 0;
  compact[32] = compact[32]! & 0x7f;
  const rOutOfRange = compact.compare(ZERO_WORD, 0, 32, 0, 32) === 0 || compact.compare(SECP256K1_N_BYTES, 0, 32, 0, 32) >= 0;
  if (rOutOfRange || compact.compare(ZERO_WORD, 0, 32, 32, 64) === 0) {
    throw new ProtocolError("node signature r or s out of range", { r: rEvidence ?? rHex(signature), s: `0x${compact.toString("hex", 32, 64)}` });
  }
  if (compact.compare(SECP256K1_HALF_N_BYTES, 0, 32, 32, 64) > 0) {
    throw new ProtocolError("node signature is high-S", { s: `0x${compact.toString("hex", 32, 64)}` });
  }
  return { compact, yParity };
}

/** The memo (if any), else the active secp256k1 backend; successful recoveries are memoised. */
function recoverCheckedNodeSignature(
  digest: Buffer,
  signature: Buffer,
  checked: CheckedNodeSignature,
  rEvidence: Hex | undefined,
  memo: RecoveryMemo | undefined,
): Address {
  const entries = memo === undefined ? undefined : entriesOf(memo);
  const key = entries === undefined ? undefined : nodeAddressMemoKeyOf(digest, signature);
  if (key !== undefined) {
    const known = entries!.get(key);
    if (known !== undefined) return known;
  }
  let address: Address;
  try {
    // The backend validates r and s again, identically for libsecp256k1 and noble, and returns a curve point.
    address = addressOfUncompressedKey(recoverUncompressedPublicKey(digest, checked.compact, checked.yParity));
  } catch (cause) {
    throw new ProtocolError("node signature does not recover to a public key", { r: rEvidence ?? rHex(signature) }, { cause });
  }
  if (key !== undefined) entries!.set(key, address);
  return address;
}

/**
 * Recovers the node address that signed `att` in `entry`. Throws ProtocolError for what ecrecover would refuse
 * or OpenZeppelin's ECDSA rejects: r or s zero or ≥ n, high s, a point that does not recover. With a `memo`, it is
 * consulted after those checks and successful recoveries are stored in it; without one, every call recovers.
 */
export function recoverNodeAddress(att: TimeAttestation, entry: NodeEntry | Hex, memo?: RecoveryMemo): Address {
  const decoded = typeof entry === "string" ? decodeNodeEntry(entry) : entry;
  const r = toFixedHex(decoded.r, 32, "nodeEntry.r");
  const yParityAndS = toFixedHex(decoded.yParityAndS, 32, "yParityAndS");
  const signature = Buffer.from(`${r.slice(2)}${yParityAndS.slice(2)}`, "hex");
  // Errors quote r as the caller wrote it (the entry's own text).
  const checked = checkedNodeSignature(signature, decoded.r);
  let digest: Buffer;
  try {
    digest = timeAttestationDigestBuffer(att);
  } catch (cause) {
    throw new ProtocolError("node signature does not recover to a public key", { r: decoded.r }, { cause });
  }
  return recoverCheckedNodeSignature(digest, signature, checked, decoded.r, memo);
}

/**
 * recoverNodeAddress for a verifier holding bytes: `digest` is the 32-byte EIP-712 digest
 * (timeAttestationDigestBytes), `signature` the entry's r ‖ yParityAndS (its last 64 bytes). Same checks, same
 * errors, same use of `memo`, same address.
 */
export function recoverNodeAddressFromDigest(digest: Uint8Array, signature: Uint8Array, memo?: RecoveryMemo): Address {
  if (digest.length !== 32 || signature.length !== 64) {
    throw new ProtocolError("digest must be 32 bytes and r ‖ yParityAndS 64 bytes", { digestBytes: digest.length, signatureBytes: signature.length });
  }
  const signatureBytes = asBuffer(signature);
  return recoverCheckedNodeSignature(asBuffer(digest), signatureBytes, checkedNodeSignature(signatureBytes, undefined), undefined, memo);
}

export interface AssembleProofParameters {
  /** ns. */
  nanoMoment: bigint;
  /** 96 bytes from signHardware. */
  hardwareSignature: Hex;
  /** 80-byte entries (or decoded entries) in any order. */
  entries: readonly (Hex | NodeEntry)[];
  /** ns; the value every entry signed. */
  accuracy: number;
  /** Consulted and filled by the address recoveries (none by default: every entry is recovered). */
  recoveryMemo?: RecoveryMemo;
}

export type AssembleProofReturnType = TimeProof;

/**
 * Builds a TimeProof with the entries sorted by recovered node address ascending (the order verification
 * demands, docs/protocol.md §5.3). Throws ProtocolError when an entry does not recover or two entries share a node,
 * because such a proof could never verify.
 */
export function assembleProof(parameters: AssembleProofParameters): AssembleProofReturnType {
  const base = {
    nanoMoment: parameters.nanoMoment,
    hardwareSignature: toFixedHex(parameters.hardwareSignature, 96, "hardwareSignature"),
    accuracy: parameters.accuracy,
  };
  const signed = parameters.entries.map((raw) => {
    const entry = typeof raw === "string" ? decodeNodeEntry(raw) : raw;
    return { entry, address: recoverNodeAddress(timeAttestationForProof(base, entry.nodeTimestampNs), entry, parameters.recoveryMemo) };
  });
  return { ...base, nodeSignature: sortedNodeSignature(signed) };
}

/**
 * Orders entries by node address ascending and concatenates them. Throws when there is no entry or two
 * entries share a node, because such a proof could never verify.
 */
function sortedNodeSignature(signed: readonly { entry: NodeEntry; address: Address }[]): Hex {
  if (signed.length === 0) throw new ProtocolError("a proof needs at least one node entry", { entries: 0 });
  const ordered = signed.map((item, index) => ({ ...item, index, order: BigInt(item.address) }));
  ordered.sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
  for (let i = 1; i < ordered.length; i += 1) {
    if (ordered[i]!.order === ordered[i - 1]!.order) {
      throw new ProtocolError("two node entries come from the same node", {
        node: ordered[i]!.address,
        entryIndexes: [ordered[i - 1]!.index, ordered[i]!.index],
      });
    }
  }
  return concatHexStrings(ordered.map(({ entry }) => encodeNodeEntry(entry)));
}

export interface AttestParameters {
  /** The card's signing key. */
  card: CardSigningKey;
  /** Node private keys (32-byte hex or NodeKey), one entry each. */
  nodes: readonly NodeKeyInput[];
  /** The card's timestamp, ns. */
  nanoMoment: bigint;
  /** ns, signed by every node. */
  accuracy: number;
  /** Each node's own reading, ns: one value for all nodes, or one per node (same order as `nodes`). */
  nodeTimestampNs: bigint | readonly bigint[];
  /** Seeded with the entries of NodeKey signers (signNodeEntry): verifying the proof through it costs no ecrecover. */
  recoveryMemo?: RecoveryMemo;
}

/**
 * Signs a complete proof: the card signs nanoMoment, every node signs the attestation, entries are sorted.
 * What a single attesting node with co-signers does; also the one-liner tests use.
 */
export function attest(parameters: AttestParameters): TimeProof {
  const { nodes, nodeTimestampNs } = parameters;
  if (typeof nodeTimestampNs !== "bigint" && nodeTimestampNs.length !== nodes.length) {
    throw new ProtocolError("nodeTimestampNs needs one value per node", {
      nodes: nodes.length,
      timestamps: nodeTimestampNs.length,
    });
  }
  const hardwareSignature = signHardware(parameters.card, parameters.nanoMoment);
  const base = { nanoMoment: parameters.nanoMoment, hardwareSignature, accuracy: parameters.accuracy };
  // The signers are known here, so entries are ordered by their addresses without an ecrecover each.
  const signed = nodes.map((nodeKey, index) => {
    const timestampNs = typeof nodeTimestampNs === "bigint" ? nodeTimestampNs : nodeTimestampNs[index]!;
    const entry = decodeNodeEntry(signNodeEntry(nodeKey, timeAttestationForProof(base, timestampNs), parameters.recoveryMemo));
    const address = typeof nodeKey === "string" ? nodeAddressFromPrivateKey(nodeKey) : nodeKey.address;
    return { entry, address };
  });
  return { ...base, nodeSignature: sortedNodeSignature(signed) };
}
