/**
 * secp256k1 ECDSA over a 32-byte digest, the node-signature primitive (docs/protocol.md §4): sign (RFC 6979
 * deterministic nonce, low-S) and public-key recovery. Two interchangeable backends:
 *
 * - "libsecp256k1": Bitcoin Core's C library through the `secp256k1` npm package (v5, N-API prebuilds, no
 *   compiler needed), an order of magnitude faster to sign and recover than pure JS (docs/benchmarks.md);
 * - "noble": @noble/curves (audited pure JS), the fallback when the native addon does not load, and in a worker
 *   thread that was given no native-call gate (protocol/nativeAddon.ts says why).
 *
 * Both are deterministic (RFC 6979, no extra entropy) and normalise s to the low half, so they produce the same
 * bytes for the same inputs; the golden vectors (test/vectors/protocol-v1.json) and a differential test pin it.
 *
 * Detail: docs/protocol.md §4.
 */
import { randomBytes } from "node:crypto";
import { secp256k1 as nobleSecp256k1 } from "@noble/curves/secp256k1.js";
import { SECP256K1_HALF_N, SECP256K1_N, UNCOMPRESSED_PUBLIC_KEY_LENGTH } from "./constants";
import { bigintToBytes } from "./bytes";
import { ProtocolError } from "./errors";
import { loadNativeAddon } from "./nativeAddon";

/*
 * The native module is loaded from `secp256k1/bindings` on purpose: the package's main entry silently falls back
 * to a slow pure-JS `elliptic` implementation when the addon does not load, whereas `bindings` throws, so
 * SECP256K1_BACKEND says truthfully which code signs. Before it is used, the addon must reproduce a known answer
 * (a signature and a recovery computed with noble); otherwise noble is used.
 *
 * Every input is validated HERE, in front of either backend, so that both refuse exactly the same inputs:
 * digest 32 bytes, r and s in [1, n − 1], s ≤ n/2 (high-S refused), recovery id 0 or 1 only.
 */
/** Which implementation computes secp256k1 signatures and recoveries. */
export type Secp256k1Backend = "libsecp256k1" | "noble";

/** A low-S signature with its recovery id. */
export interface RecoverableSignature {
  /** r ‖ s, 64 bytes. */
  readonly compact: Uint8Array;
  /** In [1, n − 1]. */
  readonly r: bigint;
  /** In [1, n/2] (low-S). */
  readonly s: bigint;
  /** 0–3 as the curve produced it (2/3 mean r ≥ n − p, probability ~2^-128; EIP-2098 cannot carry them). */
  readonly recovery: number;
}

/** One backend; callers normally use the module-level signDigest / recoverUncompressedPublicKey. */
export interface Secp256k1Implementation {
  readonly backend: Secp256k1Backend;
  /** Signs a 32-byte digest (no hashing) with a 32-byte private scalar; low-S, deterministic (RFC 6979). */
  signDigest(digest: Uint8Array, privateKey: Uint8Array): RecoverableSignature;
  /**
   * The 65-byte uncompressed public key (0x04 ‖ X ‖ Y) that produced the 64-byte r ‖ s over `digest`.
   * Throws ProtocolError for r or s out of range, high s, a recovery id other than 0/1, or no such key.
   */
  recoverUncompressedPublicKey(digest: Uint8Array, signature: Uint8Array, recovery: number): Uint8Array;
}

/** The part of secp256k1@5's API (lib/index.js over the N-API addon) used here; the package has no types. */
interface NativeSecp256k1Module {
  contextRandomize(seed: Uint8Array | null): void;
  ecdsaSign(msg32: Uint8Array, seckey: Uint8Array): { signature: Uint8Array; recid: number };
  ecdsaRecover(signature: Uint8Array, recid: number, msg32: Uint8Array, compressed: boolean): Uint8Array;
}

function isNativeSecp256k1Module(value: unknown): value is NativeSecp256k1Module {
  if (typeof value !== "object" || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return (
    typeof candidate.contextRandomize === "function" &&
    typeof candidate.ecdsaSign === "function" &&
    typeof candidate.ecdsaRecover === "function"
  );
}

function bytesToBigint(bytes: Uint8Array): bigint {
  return BigInt(`0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")}`);
}

function checkLength(value: Uint8Array, length: number, field: string): void {
  if (!(value instanceof Uint8Array) || value.length !== length) {
    throw new ProtocolError(`${field} must be ${length} bytes`, {
      field,
      actualBytes: value instanceof Uint8Array ? value.length : null,
    });
  }
}

function checkSignInputs(digest: Uint8Array, privateKey: Uint8Array): void {
  checkLength(digest, 32, "digest");
  checkLength(privateKey, 32, "privateKey");
  const scalar = bytesToBigint(privateKey);
  // The scalar is secret: the error names the problem only.
  if (scalar === 0n || scalar >= SECP256K1_N) throw new ProtocolError("privateKey is not a valid secp256k1 scalar", {});
}

const N_BYTES = bigintToBytes(SECP256K1_N, 32);
const HALF_N_BYTES = bigintToBytes(SECP256K1_HALF_N, 32);
const ZERO_WORD = Buffer.alloc(32);

/** r, s ∈ [1, n − 1] and s ≤ n/2, compared as big-endian bytes (which order like the integers). */
function isLowSInRange(signature: Uint8Array): boolean {
  const bytes = Buffer.from(signature.buffer, signature.byteOffset, 64);
  return (
    bytes.compare(ZERO_WORD, 0, 32, 0, 32) !== 0 &&
    bytes.compare(N_BYTES, 0, 32, 0, 32) < 0 &&
    bytes.compare(ZERO_WORD, 0, 32, 32, 64) !== 0 &&
    bytes.compare(HALF_N_BYTES, 0, 32, 32, 64) <= 0
  );
}

/** Refuses what ecrecover / OpenZeppelin ECDSA would: r, s ∉ [1, n − 1], s > n/2, recovery ∉ {0, 1}. */
function checkRecoverInputs(digest: Uint8Array, signature: Uint8Array, recovery: number): void {
  checkLength(digest, 32, "digest");
  checkLength(signature, 64, "signature");
  if (recovery !== 0 && recovery !== 1) {
    throw new ProtocolError("secp256k1 recovery id must be 0 or 1", { recovery: String(recovery) });
  }
  if (isLowSInRange(signature)) return;
  // Refused: the integers only for the error's evidence.
  const r = bytesToBigint(signature.subarray(0, 32));
  const s = bytesToBigint(signature.subarray(32, 64));
  if (r === 0n || r >= SECP256K1_N || s === 0n || s >= SECP256K1_N) {
    throw new ProtocolError("secp256k1 signature r or s out of range", { r: r.toString(16), s: s.toString(16) });
  }
  if (s > SECP256K1_HALF_N) throw new ProtocolError("secp256k1 signature is high-S", { s: s.toString(16) });
}

/** Checks what a backend returned from signing: r, s in range, s low, recovery id 0–3. */
function checkedSignature(compact: Uint8Array, recovery: number): RecoverableSignature {
  const r = bytesToBigint(compact.subarray(0, 32));
  const s = bytesToBigint(compact.subarray(32, 64));
  if (compact.length !== 64 || r === 0n || r >= SECP256K1_N || s === 0n || s > SECP256K1_HALF_N) {
    throw new ProtocolError("secp256k1 backend returned a malformed or high-S signature", { bytes: compact.length });
  }
  if (!Number.isInteger(recovery) || recovery < 0 || recovery > 3) {
    throw new ProtocolError("secp256k1 backend returned a bad recovery id", { recovery: String(recovery) });
  }
  return { compact, r, s, recovery };
}

function recoveryFailed(cause: unknown): ProtocolError {
  return new ProtocolError("secp256k1 signature does not recover to a public key", {}, { cause });
}

function checkedPublicKey(publicKey: Uint8Array): Uint8Array {
  if (publicKey.length !== UNCOMPRESSED_PUBLIC_KEY_LENGTH || publicKey[0] !== 0x04) {
    throw recoveryFailed(new Error("secp256k1 backend returned a malformed public key"));
  }
  return publicKey;
}

/** @noble/curves: always available. */
export const NOBLE_SECP256K1: Secp256k1Implementation = Object.freeze({
  backend: "noble" as const,
  signDigest(digest: Uint8Array, privateKey: Uint8Array): RecoverableSignature {
    checkSignInputs(digest, privateKey);
    // "recovered" format: recovery ‖ r ‖ s.
    const recovered = nobleSecp256k1.sign(digest, privateKey, { prehash: false, lowS: true, format: "recovered" });
    return checkedSignature(recovered.slice(1, 65), recovered[0]!);
  },
  recoverUncompressedPublicKey(digest: Uint8Array, signature: Uint8Array, recovery: number): Uint8Array {
    checkRecoverInputs(digest, signature, recovery);
    let publicKey: Uint8Array;
    try {
      const parsed = new nobleSecp256k1.Signature(
        bytesToBigint(signature.subarray(0, 32)),
        bytesToBigint(signature.subarray(32, 64)),
        recovery,
      );
      publicKey = parsed.recoverPublicKey(digest).toBytes(false);
    } catch (cause) {
      throw recoveryFailed(cause);
    }
    return checkedPublicKey(publicKey);
  },
});

function nativeImplementation(native: NativeSecp256k1Module): Secp256k1Implementation {
  return Object.freeze({
    backend: "libsecp256k1" as const,
    signDigest(digest: Uint8Array, privateKey: Uint8Array): RecoverableSignature {
      checkSignInputs(digest, privateKey);
      // libsecp256k1's default nonce function is RFC 6979 (no extra data passed); its signatures are low-S.
      const { signature, recid } = native.ecdsaSign(digest, privateKey);
      return checkedSignature(signature, recid);
    },
    recoverUncompressedPublicKey(digest: Uint8Array, signature: Uint8Array, recovery: number): Uint8Array {
      checkRecoverInputs(digest, signature, recovery);
      let publicKey: Uint8Array;
      try {
        publicKey = native.ecdsaRecover(signature, recovery, digest, false);
      } catch (cause) {
        throw recoveryFailed(cause);
      }
      return checkedPublicKey(publicKey);
    },
  });
}

// Known answer (computed with @noble/curves): sha256("ATS/1 secp256k1 known answer: digest") signed with
// sha256("ATS/1 secp256k1 known answer: key").
const KNOWN_ANSWER = {
  digest: "c92960281bc6db74a431fffcfa7148481bb25b34ddde7f996788008692f19538",
  privateKey: "1b0e2c45ed067712b736cbdd1e4ba12131f15f3aba11c86d7d057bf1410f2a81",
  signature:
    "9369aaa447f99bf4e04edec820a7b101750bcf41884d9c73d6a057a0d76a0f6e75a248325c3a82662d598131b3fd67ba621167b41ab2b4cb36d86db249540ec2",
  recovery: 0,
  publicKey:
    "04fab26551edee257fb2ea57cfb189ef1450e8031b89a7f4ba585325ce28b89ea103f3a94427bad76b00c911ac3e9f918e8470d09df7108545020f781b7cf64ce9",
} as const;

/** Throws unless `implementation` reproduces the known answer (signature bytes, recovery id, recovered key). */
export function assertSecp256k1KnownAnswer(implementation: Secp256k1Implementation): void {
  const digest = Uint8Array.from(Buffer.from(KNOWN_ANSWER.digest, "hex"));
  const signed = implementation.signDigest(digest, Uint8Array.from(Buffer.from(KNOWN_ANSWER.privateKey, "hex")));
  const signature = Buffer.from(signed.compact).toString("hex");
  const publicKey = Buffer.from(implementation.recoverUncompressedPublicKey(digest, signed.compact, signed.recovery)).toString("hex");
  if (signature !== KNOWN_ANSWER.signature || signed.recovery !== KNOWN_ANSWER.recovery || publicKey !== KNOWN_ANSWER.publicKey) {
    throw new Error(`secp256k1 backend "${implementation.backend}" failed its known-answer test`);
  }
}

const NATIVE_LOAD = loadNativeAddon<Secp256k1Implementation>({
  load() {
    // `bindings` (not the package main): it throws when the addon does not load instead of falling back to JS.
    const modulePath = require.resolve("secp256k1/bindings");
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a native addon, loaded by path at run time
    const loaded: unknown = require(modulePath);
    if (!isNativeSecp256k1Module(loaded)) throw new Error("secp256k1/bindings does not export the expected functions");
    // Blinds libsecp256k1's signing context against side channels; signatures do not change (RFC 6979).
    loaded.contextRandomize(randomBytes(32));
    return { implementation: nativeImplementation(loaded), modulePath };
  },
  assertKnownAnswer: assertSecp256k1KnownAnswer,
});

/** libsecp256k1 when its addon loaded and passed the known-answer test; otherwise null. */
export const NATIVE_SECP256K1: Secp256k1Implementation | null = NATIVE_LOAD.implementation;

/** Absolute path of the native entry (`secp256k1/bindings.js`) when NATIVE_SECP256K1 is active. */
export const SECP256K1_NATIVE_MODULE_PATH: string | null = NATIVE_LOAD.modulePath;

/** Why the native backend is not active (load error or failed known answer); null when it is. */
export const SECP256K1_NATIVE_FAILURE: string | null = NATIVE_LOAD.failure;

const ACTIVE: Secp256k1Implementation = NATIVE_SECP256K1 ?? NOBLE_SECP256K1;

/** The backend signDigest and recoverUncompressedPublicKey use in this process. */
export const SECP256K1_BACKEND: Secp256k1Backend = ACTIVE.backend;

/** Signs a 32-byte digest with the active backend (low-S, RFC 6979). See Secp256k1Implementation. */
export function signDigest(digest: Uint8Array, privateKey: Uint8Array): RecoverableSignature {
  return ACTIVE.signDigest(digest, privateKey);
}

/** Recovers the 65-byte uncompressed public key with the active backend. See Secp256k1Implementation. */
export function recoverUncompressedPublicKey(digest: Uint8Array, signature: Uint8Array, recovery: number): Uint8Array {
  return ACTIVE.recoverUncompressedPublicKey(digest, signature, recovery);
}
