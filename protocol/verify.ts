/**
 * Off-chain verification of a TimeProof with exactly the rules of docs/protocol.md §6, in the same order as the
 * contract, so a proof fails here for the same reason it fails on-chain. `verifyTimeProof` never throws on
 * malformed proof input: every failure is a `{ valid: false, reason, detail }` value.
 *
 * No hidden state: the caches that make repeated verification cheap (a RecoveryMemo for node-address recovery, a
 * P256KeyCache for parsed card keys) are objects the caller creates and passes in the context (createVerifyContext
 * makes its own unless told otherwise); this module keeps none, and a context without them gives the same verdicts.
 */
import { verify as cryptoVerify } from "node:crypto";
import { p256 } from "@noble/curves/nist.js";
import { getAddress } from "viem";
import {
  DEFAULT_MAX_ACCEPTABLE_DRIFT_NS,
  DEFAULT_MAX_ATTESTATION_AGE_NS,
  DEFAULT_MAX_FUTURE_DRIFT_NS,
  DEFAULT_NODE_QUORUM,
  HARDWARE_SIGNATURE_LENGTH,
  MAX_NODE_ENTRIES,
  NODE_ENTRY_LENGTH,
  P256_HALF_N,
  P256_N,
  UINT128_MAX,
} from "./constants";
import { AtsError, ProtocolError } from "./errors";
import { bigintToBytes, bytesToHexString, hexByteLength, hexToByteArray, readUint128 } from "./bytes";
import {
  decodeNodeEntries,
  hardwareSignatureHashBytes,
  hwMessageBytes,
  timeAttestationDigestBytes,
  timeAttestationForProof,
  type TimeAttestationBytes,
} from "./codec";
import type { KeyObject, VerifyKeyObjectInput } from "node:crypto";
import { p256PublicKeyObject, p256PublicKeyToUncompressed } from "./keys";
import { BoundedLru } from "./lru";
import { createRecoveryMemo, recoverNodeAddress, recoverNodeAddressFromDigest, type RecoveryMemo } from "./sign";
import type { Address, CardRecord, Hex, TimeProof } from "./types";

// ---------------------------------------------------------------- P-256 (card signatures)

const HEX_32_BYTES = /^0x[0-9a-fA-F]{64}$/;

/** Card public keys a P256KeyCache keeps unless createP256KeyCache is told otherwise (a verifier sees few cards). */
export const DEFAULT_P256_KEY_CACHE_MAX_ENTRIES = 256;

/** A card public key parsed once: SEC1 bytes, the node:crypto KeyObject and the verify options built on it. */
export interface ParsedP256PublicKey {
  readonly uncompressed: Uint8Array;
  readonly keyObject: KeyObject;
  /** node:crypto verify options for this key (one object per key, not per call). */
  readonly verifyKey: VerifyKeyObjectInput;
}

export interface CreateP256KeyCacheParameters {
  /** At most this many keys are kept (least recently used evicted first). Default DEFAULT_P256_KEY_CACHE_MAX_ENTRIES. */
  maxEntries?: number;
}

/**
 * Parsed card public keys (lowercase hex of the key as given → ParsedP256PublicKey), a bounded LRU owned by
 * whoever creates it (createP256KeyCache) and passed to verifyP256Signature / verifyP256 or, through
 * VerifyTimeProofContext.p256KeyCache, to verifyTimeProof. Parsing and validating the point costs more than the
 * OpenSSL verification itself and a verifier checks many proofs of the same few cards, so the parsed form is worth
 * keeping; protocol/ keeps no such cache of its own (a call without one parses the key) and two caches never
 * share entries. Keys that fail to parse are never stored. The cached value is a pure function of the key, so a
 * cache can only change speed, not a verdict.
 */
export class P256KeyCache {
  readonly #entries: BoundedLru<string, ParsedP256PublicKey>;

  constructor(parameters: CreateP256KeyCacheParameters = {}) {
    this.#entries = new BoundedLru(parameters.maxEntries ?? DEFAULT_P256_KEY_CACHE_MAX_ENTRIES, "P-256 key cache");
  }

  /** The bound on size. */
  get maxEntries(): number {
    return this.#entries.maxEntries;
  }

  /** The number of keys held (tests, metrics). */
  get size(): number {
    return this.#entries.size;
  }

  /** The parsed key, from the cache or parsed and stored now. Throws ProtocolError when it is no P-256 point. */
  get(publicKey: Hex | Uint8Array): ParsedP256PublicKey {
    const cacheKey = (typeof publicKey === "string" ? publicKey : bytesToHexString(publicKey)).toLowerCase();
    const cached = this.#entries.get(cacheKey);
    if (cached !== undefined) return cached;
    const parsed = parseP256PublicKey(publicKey);
    this.#entries.set(cacheKey, parsed);
    return parsed;
  }

  clear(): void {
    this.#entries.clear();
  }
}

/** A new, empty P256KeyCache (bounded LRU, DEFAULT_P256_KEY_CACHE_MAX_ENTRIES unless `maxEntries` says otherwise). */
export function createP256KeyCache(parameters: CreateP256KeyCacheParameters = {}): P256KeyCache {
  return new P256KeyCache(parameters);
}

/** The card key as SEC1 bytes and as a node:crypto KeyObject, uncached. Throws when it is no P-256 point. */
function parseP256PublicKey(publicKey: Hex | Uint8Array): ParsedP256PublicKey {
  const uncompressed = hexToByteArray(p256PublicKeyToUncompressed(publicKey));
  const keyObject = p256PublicKeyObject(uncompressed);
  return { uncompressed, keyObject, verifyKey: { key: keyObject, dsaEncoding: "ieee-p1363" } };
}

/** What a P-256 signature covers: the message (hashed here with SHA-256) or its SHA-256 digest. */
export type P256SignedInput = { message: Uint8Array | Hex } | { digest: Hex };

const P256_N_BYTES = bigintToBytes(P256_N, 32);
const P256_HALF_N_BYTES = bigintToBytes(P256_HALF_N, 32);
const ZERO_WORD = Buffer.alloc(32);

/** r ‖ s (64 bytes) with r, s in [1, n) and s ≤ n/2, compared as big-endian bytes (which order like the integers). */
function p256SignatureInRange(signature: Buffer): boolean {
  return (
    signature.compare(ZERO_WORD, 0, 32, 0, 32) !== 0 &&
    signature.compare(P256_N_BYTES, 0, 32, 0, 32) < 0 &&
    signature.compare(ZERO_WORD, 0, 32, 32, 64) !== 0 &&
    signature.compare(P256_HALF_N_BYTES, 0, 32, 32, 64) <= 0
  );
}

/** verifyP256Signature over bytes: `signature` is r ‖ s (64 bytes). Never throws. */
function verifyP256SignatureBytes(
  input: { message: Uint8Array } | { digest: Uint8Array },
  signature: Buffer,
  publicKey: Hex | Uint8Array,
  keyCache: P256KeyCache | undefined,
): boolean {
  try {
    if (!p256SignatureInRange(signature)) return false;
    const key = keyCache === undefined ? parseP256PublicKey(publicKey) : keyCache.get(publicKey);
    if ("digest" in input) {
      return p256.verify(signature, input.digest, key.uncompressed, { prehash: false, lowS: true, format: "compact" });
    }
    // OpenSSL through node:crypto is an order of magnitude faster than pure-JS curve math for a full message;
    // noble handles the prehashed case, which node:crypto cannot express for ECDSA. Both run under Wycheproof.
    return cryptoVerify("sha256", input.message, key.verifyKey, signature);
  } catch {
    return false;
  }
}

/**
 * ECDSA P-256 verification with the protocol's rule set: r and s in [1, n), s ≤ n/2 (low-S mandatory),
 * public key an uncompressed point on the curve. Returns false (never throws) for anything malformed. `keyCache`
 * (optional) keeps the parsed key for the next call.
 */
export function verifyP256Signature(input: P256SignedInput, r: Hex, s: Hex, publicKey: Hex | Uint8Array, keyCache?: P256KeyCache): boolean {
  try {
    if (!HEX_32_BYTES.test(r) || !HEX_32_BYTES.test(s)) return false;
    if ("digest" in input && !HEX_32_BYTES.test(input.digest)) return false;
    const signature = Buffer.from(`${r.slice(2)}${s.slice(2)}`, "hex");
    if ("digest" in input) return verifyP256SignatureBytes({ digest: hexToByteArray(input.digest) }, signature, publicKey, keyCache);
    const message = typeof input.message === "string" ? hexToByteArray(input.message) : input.message;
    return verifyP256SignatureBytes({ message }, signature, publicKey, keyCache);
  } catch {
    return false;
  }
}

/** verifyP256Signature over a SHA-256 digest: the check the P-256 precompile makes (plus low-S). */
export function verifyP256(digest: Hex, r: Hex, s: Hex, publicKey: Hex | Uint8Array, keyCache?: P256KeyCache): boolean {
  return verifyP256Signature({ digest }, r, s, publicKey, keyCache);
}

// ---------------------------------------------------------------- TimeProof

/** Why a proof was refused, in the order of docs/protocol.md §6.2 (first failing rule wins). */
export type VerifyFailureReason =
  | "malformed-proof" // not a TimeProof shape at all (off-chain only: the ABI guarantees the shape on-chain)
  | "hardware-signature-length"
  | "unknown-card"
  | "revoked-card"
  | "card-not-valid-now"
  | "high-s"
  | "bad-hardware-signature"
  | "node-signature-length"
  | "bad-node-signature" // an entry that does not recover (r/s out of range, high-S); on-chain: ecrecover fails
  | "unknown-node"
  | "nodes-not-ascending"
  | "quorum-not-met"
  | "too-old"
  | "too-far-in-future"
  | "accuracy-too-low";

export const VERIFY_FAILURE_REASONS: readonly VerifyFailureReason[] = [
  "malformed-proof",
  "hardware-signature-length",
  "unknown-card",
  "revoked-card",
  "card-not-valid-now",
  "high-s",
  "bad-hardware-signature",
  "node-signature-length",
  "bad-node-signature",
  "unknown-node",
  "nodes-not-ascending",
  "quorum-not-met",
  "too-old",
  "too-far-in-future",
  "accuracy-too-low",
];

export interface VerifyTimeProofContext {
  /** The registered card for `cardId`, or undefined when unknown. */
  resolveCard(cardId: Hex): CardRecord | undefined;
  /** Whether `address` is a registered node active at `nowNs`. */
  isActiveNode(address: Address, nowNs: bigint): boolean;
  /** Minimum number of distinct nodes (≥ 1). */
  nodeQuorum: number;
  /** The verifier's clock, ns (on-chain: block.timestamp * 1e9). */
  nowNs: bigint;
  /** A proof older than this (nowNs − nanoMoment) is refused, ns. */
  maxAttestationAgeNs: bigint;
  /** A proof further ahead than this (nanoMoment − nowNs) is refused, ns. A separate bound: never abs(). */
  maxFutureDriftNs: bigint;
  /** A proof with accuracy above this is refused, ns. */
  maxAcceptableDriftNs: bigint;
  /**
   * Node-address recoveries are looked up and stored here (optional: without it every entry is recovered). The
   * caller owns it; a node shares one with its signer, which seeds it (signNodeEntry, RecoveryMemo.remember).
   */
  recoveryMemo?: RecoveryMemo;
  /** Parsed card keys are looked up and stored here (optional: without it the card key is parsed on every call). */
  p256KeyCache?: P256KeyCache;
}

export type VerifyTimeProofReturnType =
  | { valid: true; cardId: Hex; nodes: Address[] }
  | { valid: false; reason: VerifyFailureReason; detail: string };

type Failure = Extract<VerifyTimeProofReturnType, { valid: false }>;

function fail(reason: VerifyFailureReason, detail: string): Failure {
  return { valid: false, reason, detail };
}

function isHexString(value: unknown): value is Hex {
  return typeof value === "string" && /^0x(?:[0-9a-fA-F]{2})*$/.test(value);
}

function shapeProblem(proof: unknown): string | undefined {
  if (typeof proof !== "object" || proof === null) return "proof is not an object";
  const candidate = proof as Record<string, unknown>;
  const { nanoMoment, accuracy, hardwareSignature, nodeSignature } = candidate;
  if (typeof nanoMoment !== "bigint" || nanoMoment < 0n || nanoMoment > UINT128_MAX) return "nanoMoment is not a uint128";
  if (typeof accuracy !== "number" || !Number.isInteger(accuracy) || accuracy < 0 || accuracy > 0xffff_ffff) {
    return "accuracy is not a uint32";
  }
  if (!isHexString(hardwareSignature)) return "hardwareSignature is not hex";
  if (!isHexString(nodeSignature)) return "nodeSignature is not hex";
  return undefined;
}

function errorText(error: unknown): string {
  return error instanceof AtsError ? `${error.message} ${JSON.stringify(error.details)}` : String(error);
}

/** A proof's hardware signature that passed rule 1. */
interface CheckedHardware {
  /** Lowercase hex. */
  cardId: Hex;
  /** cardId (32) ‖ r (32) ‖ s (32). */
  bytes: Buffer;
}

/** Rule 1: the card and its P-256 signature. */
function checkHardware(proof: TimeProof, nowNs: bigint, ctx: VerifyTimeProofContext): Failure | CheckedHardware {
  const length = hexByteLength(proof.hardwareSignature);
  if (length !== HARDWARE_SIGNATURE_LENGTH) {
    return fail("hardware-signature-length", `hardwareSignature is ${length} bytes, expected ${HARDWARE_SIGNATURE_LENGTH}`);
  }
  // The shape check proved even-length hex, so the hex is decoded once, here, and never re-validated.
  const bytes = Buffer.from(proof.hardwareSignature.slice(2), "hex");
  const cardId: Hex = `0x${bytes.toString("hex", 0, 32)}`;
  const card = ctx.resolveCard(cardId);
  if (card === undefined) return fail("unknown-card", `card ${cardId} is not registered`);
  if (card.revoked) return fail("revoked-card", `card ${cardId} is revoked`);
  if (card.validFromNs !== undefined && nowNs < card.validFromNs) {
    return fail("card-not-valid-now", `card ${cardId} is valid from ${card.validFromNs} ns, now is ${nowNs} ns`);
  }
  if (card.validUntilNs !== undefined && nowNs > card.validUntilNs) {
    return fail("card-not-valid-now", `card ${cardId} was valid until ${card.validUntilNs} ns, now is ${nowNs} ns`);
  }
  if (bytes.compare(P256_HALF_N_BYTES, 0, 32, 64, 96) > 0) {
    return fail("high-s", `hardware signature s 0x${bytes.toString("hex", 64, 96)} is above n/2`);
  }
  const message = hwMessageBytes(bytes.subarray(0, 32), proof.nanoMoment);
  if (!verifyP256SignatureBytes({ message }, bytes.subarray(32, 96), card.publicKey, ctx.p256KeyCache)) {
    return fail("bad-hardware-signature", `P-256 signature does not verify for card ${cardId} at ${proof.nanoMoment} ns`);
  }
  return { cardId, bytes };
}

/** Rule 2: node entries recover to active nodes, strictly ascending, at least nodeQuorum of them. */
function checkNodes(proof: TimeProof, hardware: CheckedHardware, ctx: VerifyTimeProofContext): Failure | Address[] {
  const length = hexByteLength(proof.nodeSignature);
  if (length === 0 || length % NODE_ENTRY_LENGTH !== 0) {
    return fail("node-signature-length", `nodeSignature is ${length} bytes, expected a non-empty multiple of ${NODE_ENTRY_LENGTH}`);
  }
  if (length / NODE_ENTRY_LENGTH > MAX_NODE_ENTRIES) {
    return fail("node-signature-length", `nodeSignature has ${length / NODE_ENTRY_LENGTH} entries, at most ${MAX_NODE_ENTRIES}`);
  }
  const entries = Buffer.from(proof.nodeSignature.slice(2), "hex");
  // What every entry signs, but its own nodeTimestamp (timeAttestationForProof, held as bytes).
  const attestation: TimeAttestationBytes = {
    cardId: hardware.bytes.subarray(0, 32),
    nanoMoment: proof.nanoMoment,
    accuracy: proof.accuracy,
    hardwareSignatureHash: hardwareSignatureHashBytes(hardware.bytes.subarray(32, 96)),
    nodeTimestamp: 0n,
  };
  const addresses: Address[] = [];
  let previous = -1n;
  for (let index = 0; index * NODE_ENTRY_LENGTH < length; index += 1) {
    const offset = index * NODE_ENTRY_LENGTH;
    let address: Address;
    try {
      // nodeTimestamp (16) ‖ r (32) ‖ yParityAndS (32)
      attestation.nodeTimestamp = readUint128(entries, offset);
      address = recoverNodeAddressFromDigest(timeAttestationDigestBytes(attestation), entries.subarray(offset + 16, offset + NODE_ENTRY_LENGTH), ctx.recoveryMemo);
    } catch (error) {
      return fail("bad-node-signature", `entry ${index}: ${errorText(error)}`);
    }
    if (!ctx.isActiveNode(address, ctx.nowNs)) return fail("unknown-node", `entry ${index}: ${address} is not an active node`);
    const order = BigInt(address);
    if (order <= previous) {
      return fail("nodes-not-ascending", `entry ${index}: ${address} is not above ${getAddress(addresses[index - 1]!)}`);
    }
    previous = order;
    addresses.push(address);
  }
  if (addresses.length < ctx.nodeQuorum) {
    return fail("quorum-not-met", `${addresses.length} distinct nodes signed, quorum is ${ctx.nodeQuorum}`);
  }
  return addresses;
}

/** Rules 3 and 4: two separate freshness bounds (never abs()), then accuracy. */
function checkFreshnessAndAccuracy(proof: TimeProof, ctx: VerifyTimeProofContext): Failure | undefined {
  const { nanoMoment } = proof;
  if (ctx.nowNs > nanoMoment && ctx.nowNs - nanoMoment > ctx.maxAttestationAgeNs) {
    return fail("too-old", `proof is ${ctx.nowNs - nanoMoment} ns old, max ${ctx.maxAttestationAgeNs} ns`);
  }
  if (nanoMoment > ctx.nowNs && nanoMoment - ctx.nowNs > ctx.maxFutureDriftNs) {
    return fail("too-far-in-future", `proof is ${nanoMoment - ctx.nowNs} ns ahead, max ${ctx.maxFutureDriftNs} ns`);
  }
  if (BigInt(proof.accuracy) > ctx.maxAcceptableDriftNs) {
    return fail("accuracy-too-low", `accuracy ${proof.accuracy} ns is above ${ctx.maxAcceptableDriftNs} ns`);
  }
  return undefined;
}

/**
 * Verifies a proof per docs/protocol.md §6. Malformed input yields `{ valid: false }`; exceptions thrown by the
 * context callbacks (a broken registry) are not proof problems and propagate.
 */
export function verifyTimeProof(proof: TimeProof, ctx: VerifyTimeProofContext): VerifyTimeProofReturnType {
  const problem = shapeProblem(proof);
  if (problem !== undefined) return fail("malformed-proof", problem);
  try {
    return checkProof(proof, ctx);
  } catch (error) {
    // The shape check above makes the decoders total; this is the safety net that keeps the "never throws on
    // malformed input" promise if a decoder ever becomes stricter. Only codec errors are absorbed.
    if (error instanceof ProtocolError) return fail("malformed-proof", errorText(error));
    throw error;
  }
}

function checkProof(proof: TimeProof, ctx: VerifyTimeProofContext): VerifyTimeProofReturnType {
  const hardware = checkHardware(proof, ctx.nowNs, ctx);
  if ("valid" in hardware) return hardware;
  const nodes = checkNodes(proof, hardware, ctx);
  if (!Array.isArray(nodes)) return nodes;
  const late = checkFreshnessAndAccuracy(proof, ctx);
  if (late !== undefined) return late;
  return { valid: true, cardId: hardware.cardId, nodes };
}

/**
 * The recovered node address of every entry, in proof order, through `memo` when given. Throws ProtocolError on
 * malformed entries.
 */
export function recoverNodeAddresses(proof: TimeProof, memo?: RecoveryMemo): Address[] {
  return decodeNodeEntries(proof.nodeSignature).map((entry) =>
    recoverNodeAddress(timeAttestationForProof(proof, entry.nodeTimestampNs), entry, memo),
  );
}

export interface StaticRegistryNode {
  address: Address;
  /** ns, inclusive. */
  validFromNs?: bigint;
  /** ns, inclusive. */
  validUntilNs?: bigint;
  active?: boolean;
}

export interface CreateVerifyContextParameters {
  /** Registered cards by cardId (any hex case). */
  cards: ReadonlyMap<Hex, CardRecord> | Readonly<Record<Hex, CardRecord>>;
  /** Registered nodes. */
  nodes: readonly (Address | StaticRegistryNode)[];
  nowNs: bigint;
  nodeQuorum?: number;
  maxAttestationAgeNs?: bigint;
  maxFutureDriftNs?: bigint;
  maxAcceptableDriftNs?: bigint;
  /**
   * The context's recovery memo: omitted = a new one (createRecoveryMemo(), owned by this context, so verifying
   * the same proof again through it costs no ecrecover); null = none; or one the caller shares between contexts.
   */
  recoveryMemo?: RecoveryMemo | null;
  /** The context's P-256 key cache: omitted = a new one (createP256KeyCache()); null = none; or a shared one. */
  p256KeyCache?: P256KeyCache | null;
}

/**
 * A context over in-memory registries, with the on-chain defaults for omitted settings and, unless told
 * otherwise, its own recovery memo and P-256 key cache (reuse the context to benefit from them).
 */
export function createVerifyContext(parameters: CreateVerifyContextParameters): VerifyTimeProofContext {
  const cards = new Map<string, CardRecord>();
  const entries = parameters.cards instanceof Map ? [...parameters.cards] : Object.entries(parameters.cards);
  for (const [cardId, record] of entries) cards.set(cardId.toLowerCase(), record);
  const nodes = new Map<string, StaticRegistryNode>();
  for (const node of parameters.nodes) {
    const record = typeof node === "string" ? { address: node } : node;
    nodes.set(record.address.toLowerCase(), record);
  }
  const context: VerifyTimeProofContext = {
    resolveCard: (cardId) => cards.get(cardId.toLowerCase()),
    isActiveNode: (address, nowNs) => {
      const node = nodes.get(address.toLowerCase());
      if (node === undefined || node.active === false) return false;
      if (node.validFromNs !== undefined && nowNs < node.validFromNs) return false;
      return node.validUntilNs === undefined || nowNs <= node.validUntilNs;
    },
    nowNs: parameters.nowNs,
    nodeQuorum: parameters.nodeQuorum ?? DEFAULT_NODE_QUORUM,
    maxAttestationAgeNs: parameters.maxAttestationAgeNs ?? DEFAULT_MAX_ATTESTATION_AGE_NS,
    maxFutureDriftNs: parameters.maxFutureDriftNs ?? DEFAULT_MAX_FUTURE_DRIFT_NS,
    maxAcceptableDriftNs: parameters.maxAcceptableDriftNs ?? DEFAULT_MAX_ACCEPTABLE_DRIFT_NS,
  };
  const recoveryMemo = parameters.recoveryMemo === undefined ? createRecoveryMemo() : parameters.recoveryMemo;
  if (recoveryMemo !== null) context.recoveryMemo = recoveryMemo;
  const p256KeyCache = parameters.p256KeyCache === undefined ? createP256KeyCache() : parameters.p256KeyCache;
  if (p256KeyCache !== null) context.p256KeyCache = p256KeyCache;
  return context;
}
