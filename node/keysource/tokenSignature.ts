/**
 * What a PKCS#11 token returns, turned into what the protocol signs with (pure functions, no token needed: unit-tested
 * in test/node/keys/tokenSignature.test.ts):
 * - CKA_EC_POINT: PKCS#11 v2.40 says a DER OCTET STRING around the SEC1 point; some modules return the bare point;
 * - CKM_ECDSA: PKCS#11 says raw r ‖ s (each the order's size); a few modules return a DER ECDSA-Sig-Value instead;
 * - s in either half: a token has no reason to normalise, and the protocol refuses high-S (docs/protocol.md §3);
 * - no recovery id: secp256k1 signatures are published in EIP-2098 form (y parity in bit 255 of s), so the parity is
 *   found by trial: recover with each parity and keep the one that gives the token's public key. The recovery is
 *   protocol/secp256k1.ts's active backend (libsecp256k1, ~0.1 ms; @noble/curves when the addon is missing, ~1–3 ms):
 *   the same answer either way, and this runs on the serving thread once or twice per attestation.
 */
import { recoverUncompressedPublicKey, type Secp256k1Implementation } from "../../protocol/secp256k1";
import { P256_HALF_N, P256_N, SECP256K1_HALF_N, SECP256K1_N } from "../../protocol/constants";
import { ProtocolError } from "../../protocol/errors";

/** The two curves the protocol signs with: the card's and the node's. */
export type TokenCurve = "P-256" | "secp256k1";

/** CKA_EC_PARAMS of each curve: the DER of its named-curve OID (1.2.840.10045.3.1.7, 1.3.132.0.10). */
export const EC_PARAMS_DER: Readonly<Record<TokenCurve, Buffer>> = Object.freeze({
  "P-256": Buffer.from("06082a8648ce3d030107", "hex"),
  secp256k1: Buffer.from("06052b8104000a", "hex"),
});

const ORDER: Readonly<Record<TokenCurve, { n: bigint; halfN: bigint }>> = Object.freeze({
  "P-256": { n: P256_N, halfN: P256_HALF_N },
  secp256k1: { n: SECP256K1_N, halfN: SECP256K1_HALF_N },
});

/** Bytes of a field element and of a coordinate on both curves. */
const SCALAR_BYTES = 32;
/** 0x04 ‖ X ‖ Y. */
const UNCOMPRESSED_POINT_BYTES = 65;
/** A DER signature of two 33-byte INTEGERs is 72 bytes; anything longer is not an ECDSA signature on these curves. */
const MAX_DER_SIGNATURE_BYTES = 72;

function bytesToBigint(bytes: Uint8Array): bigint {
  return bytes.length === 0 ? 0n : BigInt(`0x${Buffer.from(bytes).toString("hex")}`);
}

function bigintTo32(value: bigint): Buffer {
  return Buffer.from(value.toString(16).padStart(SCALAR_BYTES * 2, "0"), "hex");
}

/** The 65-byte uncompressed point of a CKA_EC_POINT value (DER OCTET STRING or bare point). */
export function ecPointFromAttribute(value: Uint8Array): Buffer {
  const bytes = Buffer.from(value);
  if (bytes.length === UNCOMPRESSED_POINT_BYTES && bytes[0] === 0x04) return bytes;
  // 04 41 ‖ point: OCTET STRING, short-form length 65.
  if (bytes.length === UNCOMPRESSED_POINT_BYTES + 2 && bytes[0] === 0x04 && bytes[1] === UNCOMPRESSED_POINT_BYTES && bytes[2] === 0x04) {
    return bytes.subarray(2);
  }
  throw new ProtocolError("CKA_EC_POINT is neither an uncompressed point nor a DER OCTET STRING around one", {
    actualBytes: bytes.length,
    firstBytes: bytes.subarray(0, 3).toString("hex"),
  });
}

/** One DER INTEGER at `offset` of a signature: its value and where the next element starts. */
function readDerInteger(der: Buffer, offset: number): { value: bigint; next: number } {
  if (der[offset] !== 0x02) throw new ProtocolError("DER ECDSA signature: expected an INTEGER", { offset, tag: der[offset] ?? null });
  const length = der[offset + 1];
  if (length === undefined || length === 0 || length > SCALAR_BYTES + 1 || offset + 2 + length > der.length) {
    throw new ProtocolError("DER ECDSA signature: INTEGER length out of range", { offset, length: length ?? null });
  }
  return { value: bytesToBigint(der.subarray(offset + 2, offset + 2 + length)), next: offset + 2 + length };
}

/**
 * The 64-byte r ‖ s of a CKM_ECDSA result: the raw form PKCS#11 specifies, or a DER SEQUENCE { r INTEGER, s INTEGER }
 * from a module that returns that (short-form lengths only: a signature on a 256-bit curve is at most 72 bytes).
 */
export function rawSignatureFromToken(signature: Uint8Array): Buffer {
  const bytes = Buffer.from(signature);
  if (bytes.length === 2 * SCALAR_BYTES) return bytes;
  if (bytes.length > MAX_DER_SIGNATURE_BYTES || bytes[0] !== 0x30 || bytes[1] !== bytes.length - 2) {
    throw new ProtocolError("token signature is neither 64 bytes r ‖ s nor a DER ECDSA signature", {
      actualBytes: bytes.length,
      firstBytes: bytes.subarray(0, 2).toString("hex"),
    });
  }
  const r = readDerInteger(bytes, 2);
  const s = readDerInteger(bytes, r.next);
  if (s.next !== bytes.length) throw new ProtocolError("DER ECDSA signature: bytes after s", { trailingBytes: bytes.length - s.next });
  if (r.value >= 1n << 256n || s.value >= 1n << 256n) throw new ProtocolError("DER ECDSA signature: r or s wider than 256 bits", {});
  return Buffer.concat([bigintTo32(r.value), bigintTo32(s.value)]);
}

/**
 * r ‖ s with s in the low half (s → n − s when s > n/2), after checking r and s are in [1, n − 1]: a token that
 * returned anything else is broken, and no normalisation would make its output a valid signature.
 */
export function toLowS(signature: Uint8Array, curve: TokenCurve): Buffer {
  if (signature.length !== 2 * SCALAR_BYTES) throw new ProtocolError("r ‖ s must be 64 bytes", { actualBytes: signature.length });
  const { n, halfN } = ORDER[curve];
  const r = bytesToBigint(signature.subarray(0, SCALAR_BYTES));
  const s = bytesToBigint(signature.subarray(SCALAR_BYTES));
  if (r === 0n || r >= n || s === 0n || s >= n) {
    // r and s are public (they are the signature): quoting them is evidence, not key material.
    throw new ProtocolError(`token ${curve} signature has r or s outside [1, n − 1]`, { r: `0x${bigintTo32(r).toString("hex")}`, s: `0x${bigintTo32(s).toString("hex")}` });
  }
  return Buffer.concat([bigintTo32(r), bigintTo32(s > halfN ? n - s : s)]);
}

/**
 * The recovery id (y parity, 0 or 1) of a low-S secp256k1 signature of `digest` by `publicKey` (65 bytes
 * uncompressed), found by recovering with each parity and comparing. Throws when neither recovers the key: the token
 * signed with another key than the one it reports, or something other than `digest`.
 */
export function recoveryIdByTrial(
  digest: Uint8Array,
  lowSSignature: Uint8Array,
  publicKey: Uint8Array,
  backend: Pick<Secp256k1Implementation, "recoverUncompressedPublicKey"> = { recoverUncompressedPublicKey },
): 0 | 1 {
  for (const recovery of [0, 1] as const) {
    let recovered: Uint8Array;
    try {
      recovered = backend.recoverUncompressedPublicKey(digest, lowSSignature, recovery);
    } catch {
      continue; // this parity has no point with x = r: the other one must
    }
    if (Buffer.from(recovered).equals(Buffer.from(publicKey))) return recovery;
  }
  throw new ProtocolError("token secp256k1 signature recovers to neither parity of the token's public key", {
    r: `0x${Buffer.from(lowSSignature.subarray(0, SCALAR_BYTES)).toString("hex")}`,
    publicKey: `0x${Buffer.from(publicKey).toString("hex")}`,
  });
}

/** EIP-2098 compact r ‖ yParityAndS of a low-S signature and its recovery id (s ≤ n/2 < 2^255 leaves bit 255 free). */
export function eip2098Compact(lowSSignature: Uint8Array, recovery: 0 | 1): Buffer {
  const compact = Buffer.from(lowSSignature);
  compact[SCALAR_BYTES] = compact[SCALAR_BYTES]! | (recovery << 7);
  return compact;
}
