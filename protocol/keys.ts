/**
 * Key conversions between node:crypto KeyObjects, raw scalars and SEC1 public keys. Curve arithmetic comes
 * from @noble/curves (audited) or node:crypto (OpenSSL); nothing here hand-rolls curve math.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { p256 } from "@noble/curves/nist.js";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { ProtocolError } from "./errors";
import { UNCOMPRESSED_PUBLIC_KEY_LENGTH } from "./constants";
import { keccak256Bytes } from "./keccak";
import { bigintToFixedHex, bytesToHexString, hexToByteArray, toFixedHex, toHexStrict, sliceHexBytes } from "./bytes";
import type { Address, Hex } from "./types";

/** Affine coordinates of a P-256 public key. */
export interface P256Coordinates {
  x: Hex | bigint;
  y: Hex | bigint;
}

/** Anything that names a P-256 public key. */
export type P256PublicKeyInput = Hex | Uint8Array | P256Coordinates | KeyObject;

function coordinateToHex(value: Hex | bigint, field: string): Hex {
  return typeof value === "bigint" ? bigintToFixedHex(value, 32) : toFixedHex(value, 32, field);
}

function isKeyObject(value: unknown): value is KeyObject {
  return typeof value === "object" && value !== null && "asymmetricKeyType" in value && "export" in value;
}

/**
 * Returns the uncompressed SEC1 encoding (0x04 ‖ X ‖ Y, 65 bytes, lowercase hex) of a P-256 public key after
 * checking that the point lies on the curve. Accepts a private KeyObject too (its public half is used).
 */
export function p256PublicKeyToUncompressed(input: P256PublicKeyInput): Hex {
  let candidate: Hex;
  if (isKeyObject(input)) {
    const publicKey = input.type === "public" ? input : createPublicKey(input);
    const jwk = publicKey.export({ format: "jwk" });
    if (jwk.crv !== "P-256" || jwk.x === undefined || jwk.y === undefined) {
      throw new ProtocolError("key is not a P-256 key", { curve: String(jwk.crv) });
    }
    candidate = `0x04${Buffer.from(jwk.x, "base64url").toString("hex")}${Buffer.from(jwk.y, "base64url").toString("hex")}`;
  } else if (input instanceof Uint8Array) {
    candidate = bytesToHexString(input);
  } else if (typeof input === "string") {
    candidate = toHexStrict(input, "publicKey");
  } else {
    candidate = `0x04${coordinateToHex(input.x, "publicKey.x").slice(2)}${coordinateToHex(input.y, "publicKey.y").slice(2)}`;
  }
  const uncompressed = toFixedHex(candidate, UNCOMPRESSED_PUBLIC_KEY_LENGTH, "publicKey");
  try {
    p256.Point.fromBytes(hexToByteArray(uncompressed)).assertValidity();
  } catch (cause) {
    throw new ProtocolError("publicKey is not an uncompressed point on P-256", { publicKey: uncompressed }, { cause });
  }
  return uncompressed;
}

/** Splits a validated uncompressed key into its 32-byte coordinates (the form the P256 precompile takes). */
export function p256PublicKeyCoordinates(input: P256PublicKeyInput): { x: Hex; y: Hex } {
  const key = p256PublicKeyToUncompressed(input);
  return { x: sliceHexBytes(key, 1, 33), y: sliceHexBytes(key, 33, 65) };
}

/** The JWK of a P-256 key from its hex coordinates (and scalar, for a private key): node:crypto imports JWKs. */
function p256Jwk(x: Hex, y: Hex, d?: Hex): { kty: "EC"; crv: "P-256"; x: string; y: string; d?: string } {
  const base64url = (value: Hex): string => Buffer.from(value.slice(2), "hex").toString("base64url");
  return { kty: "EC", crv: "P-256", x: base64url(x), y: base64url(y), ...(d === undefined ? {} : { d: base64url(d) }) };
}

/** A node:crypto public KeyObject for an uncompressed P-256 key. */
export function p256PublicKeyObject(input: P256PublicKeyInput): KeyObject {
  const { x, y } = p256PublicKeyCoordinates(input);
  return createPublicKey({ key: p256Jwk(x, y), format: "jwk" });
}

/** A node:crypto private KeyObject from a raw 32-byte P-256 scalar (used for fixed dev/vector keys). */
export function p256PrivateKeyObject(privateKey: Hex): KeyObject {
  const scalar = toFixedHex(privateKey, 32, "privateKey");
  const publicKey = bytesToHexString(p256.getPublicKey(hexToByteArray(scalar), false));
  const { x, y } = p256PublicKeyCoordinates(publicKey);
  return createPrivateKey({ key: p256Jwk(x, y, scalar), format: "jwk" });
}

/** The raw 32-byte scalar of a P-256 private KeyObject. Handle with care: this is key material. */
export function p256PrivateScalar(key: KeyObject): Hex {
  if (key.type !== "private") throw new ProtocolError("expected a private key", { keyType: key.type });
  const jwk = key.export({ format: "jwk" });
  if (jwk.crv !== "P-256" || jwk.d === undefined) {
    throw new ProtocolError("key is not a P-256 private key", { curve: String(jwk.crv) });
  }
  return `0x${Buffer.from(jwk.d, "base64url").toString("hex").padStart(64, "0")}`;
}

/** Uncompressed secp256k1 public key → EIP-55 Ethereum address. */
export function secp256k1PublicKeyToAddress(publicKey: Uint8Array): Address {
  const point = secp256k1.Point.fromBytes(publicKey);
  return addressOfUncompressedKey(point.toBytes(false));
}

/**
 * The EIP-55 address of a 65-byte 0x04 ‖ X ‖ Y key WITHOUT checking that the point is on the curve: for keys a
 * secp256k1 backend has just produced (recovery), which are points by construction. Anything else goes
 * through secp256k1PublicKeyToAddress.
 */
export function addressOfUncompressedKey(publicKey: Uint8Array): Address {
  if (publicKey.length !== UNCOMPRESSED_PUBLIC_KEY_LENGTH || publicKey[0] !== 0x04) {
    throw new ProtocolError("public key is not 65 bytes 0x04 ‖ X ‖ Y", { actualBytes: publicKey.length });
  }
  return checksumAddressBytes(keccak256Bytes(publicKey.subarray(1)).subarray(12));
}

/** Checksummed forms of recent addresses: a verifier sees the same few nodes again and again (oldest out first). */
const CHECKSUMMED_ADDRESSES = new Map<string, Address>();
const CHECKSUMMED_ADDRESSES_CAPACITY = 1_024;

/**
 * EIP-55: the 20 address bytes as hex, each letter upper case where the matching nibble of keccak256(lowercase
 * hex text) is ≥ 8. The same string as viem's getAddress (tested against it).
 */
export function checksumAddressBytes(address: Uint8Array): Address {
  if (address.length !== 20) throw new ProtocolError("an address is 20 bytes", { actualBytes: address.length });
  const lowercase = Buffer.from(address.buffer, address.byteOffset, 20).toString("hex");
  const cached = CHECKSUMMED_ADDRESSES.get(lowercase);
  if (cached !== undefined) return cached;
  const checksummed = computeChecksum(lowercase);
  if (CHECKSUMMED_ADDRESSES.size >= CHECKSUMMED_ADDRESSES_CAPACITY) {
    CHECKSUMMED_ADDRESSES.delete(CHECKSUMMED_ADDRESSES.keys().next().value!);
  }
  CHECKSUMMED_ADDRESSES.set(lowercase, checksummed);
  return checksummed;
}

function computeChecksum(lowercase: string): Address {
  const text = Buffer.from(`0x${lowercase}`, "latin1");
  const hash = keccak256Bytes(text.subarray(2));
  for (let index = 0; index < 40; index += 1) {
    const nibble = index % 2 === 0 ? hash[index >> 1]! >> 4 : hash[index >> 1]! & 0x0f;
    // 0x61–0x66 are 'a'–'f'; minus 0x20 is 'A'–'F'. Digits have no case.
    const position = index + 2;
    if (nibble >= 8 && text[position]! >= 0x61) text[position] = text[position]! - 0x20;
  }
  return text.toString("latin1") as Address;
}

/** The Ethereum address of a node private key (32-byte hex). */
export function nodeAddressFromPrivateKey(privateKey: Hex): Address {
  const scalar = toFixedHex(privateKey, 32, "nodePrivateKey");
  try {
    return secp256k1PublicKeyToAddress(secp256k1.getPublicKey(hexToByteArray(scalar), false));
  } catch (cause) {
    // The scalar itself is secret: the error names the problem only.
    throw new ProtocolError("nodePrivateKey is not a valid secp256k1 scalar", {}, { cause });
  }
}

/** The uncompressed secp256k1 public key (65 bytes, 0x04 ‖ X ‖ Y) of a node key. */
export function nodePublicKeyUncompressed(key: NodeKeyInput): Buffer {
  const external = typeof key === "string" ? undefined : NODE_KEY_SIGNER.get(key);
  if (external !== undefined) return Buffer.from(external.publicKey);
  return Buffer.from(secp256k1.getPublicKey(hexToByteArray(nodePrivateKeyHex(key)), false));
}

/**
 * A node key whose private half lives outside this process (a PKCS#11 token: node/keys/pkcs11.ts): its public key
 * and a function that signs a 32-byte digest. The signer owns the low-S rule and the recovery id: it returns the
 * EIP-2098 compact form r ‖ yParityAndS, exactly what signDigestCompact returns for an in-memory key.
 */
export interface ExternalNodeSigner {
  /** Uncompressed secp256k1 public key, 65 bytes. */
  readonly publicKey: Uint8Array;
  signDigestCompact(digest: Uint8Array): Uint8Array;
}

const NODE_KEY_SCALAR = new WeakMap<NodeKey, Hex>();
const NODE_KEY_SIGNER = new WeakMap<NodeKey, ExternalNodeSigner>();

/** The external signer of a NodeKey made by NodeKey.fromExternalSigner; undefined for an in-memory key. */
export function externalNodeSignerOf(key: NodeKeyInput): ExternalNodeSigner | undefined {
  return typeof key === "string" ? undefined : NODE_KEY_SIGNER.get(key);
}

/**
 * A node's secp256k1 private key that does not leak: JSON.stringify, util.inspect and template strings show
 * only the address. The scalar lives in a WeakMap, not on the object, so even a deep dump of the object
 * (structuredClone, Object.entries, a logger's serializer) cannot reach it.
 */
export class NodeKey {
  readonly address: Address;

  private constructor(key: Hex | ExternalNodeSigner) {
    if (typeof key === "string") {
      this.address = nodeAddressFromPrivateKey(key);
      NODE_KEY_SCALAR.set(this, toFixedHex(key, 32, "nodePrivateKey"));
    } else {
      this.address = secp256k1PublicKeyToAddress(key.publicKey);
      NODE_KEY_SIGNER.set(this, key);
    }
  }

  /** A key held by an external signer (a token): it signs through `signer`, and exportPrivateKey() refuses. */
  static fromExternalSigner(signer: ExternalNodeSigner): NodeKey {
    return new NodeKey(signer);
  }

  /** Whether this process holds the scalar (false: an external signer holds it, e.g. a PKCS#11 token). */
  get holdsPrivateKey(): boolean {
    return NODE_KEY_SCALAR.has(this);
  }

  /** Wraps a 32-byte hex scalar (validated on secp256k1). */
  static fromPrivateKey(privateKey: Hex): NodeKey {
    return new NodeKey(privateKey);
  }

  /** A fresh random key from the OS CSPRNG (via noble's randomSecretKey). */
  static generate(): NodeKey {
    return new NodeKey(bytesToHexString(secp256k1.utils.randomSecretKey()));
  }

  /** The raw scalar. Only for writing a keystore or signing; never log the result. */
  exportPrivateKey(): Hex {
    const scalar = NODE_KEY_SCALAR.get(this);
    if (scalar === undefined && NODE_KEY_SIGNER.has(this)) {
      throw new ProtocolError("NodeKey is held by an external signer (a token): its private key cannot be exported", { address: this.address });
    }
    if (scalar === undefined) throw new ProtocolError("NodeKey has no key material", { address: this.address });
    return scalar;
  }

  toJSON(): { address: Address } {
    return { address: this.address };
  }

  toString(): string {
    return `NodeKey(${this.address})`;
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }
}

/** A node key given either as raw hex or as a NodeKey. */
export type NodeKeyInput = Hex | NodeKey;

export function nodePrivateKeyHex(key: NodeKeyInput): Hex {
  return typeof key === "string" ? toFixedHex(key, 32, "nodePrivateKey") : key.exportPrivateKey();
}
