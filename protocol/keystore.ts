/**
 * Saving and loading a key directory (the dev CA's certificate, the card key and certificate chain, the node key).
 *
 * Layout (all files mode 0600, directory 0700):
 *   ca.pem        manufacturer CA certificate (optional: only when the CA was created locally), the trusted root
 *   card.key.pem  card P-256 private key, PKCS#8
 *   card.pem      card certificate chain, leaf first
 *   node.json     node key: Ethereum V3 keystore (scrypt + aes-128-ctr) when a password is given, else the
 *                 plain dev form { "version": "ats-node-key/1", "address", "privateKey" }
 *
 * The CA's private key is never written here: a node needs the CA only as a trusted root (its certificate), and a
 * key folder that held the CA key would let whoever reads it certify cards. An old folder's ca.key.pem is ignored.
 *
 * Detail: docs/protocol.md §2.
 */
import { createCipheriv, createDecipheriv, randomBytes, randomUUID, scryptSync, timingSafeEqual, type KeyObject } from "node:crypto";
import { chmod, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { getAddress, keccak256 } from "viem";
import { AuthError, NotFoundError, ValidationError } from "./errors";
import { cardIdFromPublicKey } from "./codec";
import { privateKeyFromPem } from "./devca";
import { NodeKey, p256PublicKeyToUncompressed } from "./keys";
import { bytesToHexString } from "./bytes";
import type { Address, Hex } from "./types";

/*
 * Private keys exist only in those files and in KeyObject / NodeKey values, which never print their material.
 * Loading refuses key files readable by group or others, as ssh does, so a leaked permission is noticed.
 */
export const KEY_FILES = {
  caCertificate: "ca.pem",
  cardKey: "card.key.pem",
  cardChain: "card.pem",
  nodeKeystore: "node.json",
} as const;

const FILE_MODE = 0o600;
const DIR_MODE = 0o700;

/** What a key directory holds. `DevIdentity` satisfies it. */
export interface KeyMaterial {
  /** The manufacturer CA; only its certificate is saved (a DevManufacturerCa fits: its private key is not saved). */
  ca?: { certificatePem: string };
  cardKey: KeyObject;
  /** PEM certificates, card first. */
  certificateChainPem: string[];
  nodeKey: NodeKey;
}

/** The public part, safe to print and to serve. */
export interface KeyDirSummary {
  cardId: Hex;
  /** Uncompressed P-256 public key, 65 bytes. */
  cardPublicKey: Hex;
  nodeAddress: Address;
  certificateChainPem: string[];
}

export interface KeystoreOptions {
  /** Encrypts node.json as an Ethereum V3 keystore. Without it the node key is stored in the clear (dev). */
  password?: string;
  /** scrypt cost for new keystores (default 2^15: interactive-grade; geth's "standard" is 2^18). */
  scryptN?: number;
}

export function summarizeKeyMaterial(material: KeyMaterial): KeyDirSummary {
  return {
    cardId: cardIdFromPublicKey(material.cardKey),
    cardPublicKey: p256PublicKeyToUncompressed(material.cardKey),
    nodeAddress: material.nodeKey.address,
    certificateChainPem: [...material.certificateChainPem],
  };
}

// ---------------------------------------------------------------- node keystore (JSON)

interface V3Keystore {
  version: 3;
  id: string;
  address: string;
  crypto: {
    cipher: "aes-128-ctr";
    cipherparams: { iv: string };
    ciphertext: string;
    kdf: "scrypt";
    kdfparams: { dklen: 32; n: number; p: number; r: number; salt: string };
    mac: string;
  };
}

interface PlainKeystore {
  version: "ats-node-key/1";
  address: Address;
  privateKey: Hex;
}

function scryptKey(password: string, salt: Buffer, n: number, r: number, p: number): Buffer {
  // maxmem must cover 128·N·r bytes, or node refuses large N.
  return scryptSync(password.normalize("NFKC"), salt, 32, { N: n, r, p, maxmem: 256 * n * r + 1024 * 1024 });
}

function keystoreMac(derivedKey: Buffer, ciphertext: Buffer): Buffer {
  return Buffer.from(keccak256(bytesToHexString(Buffer.concat([derivedKey.subarray(16, 32), ciphertext]))).slice(2), "hex");
}

/** Serialises a node key (V3-encrypted with a password, plain otherwise). */
export function encodeNodeKeystore(nodeKey: NodeKey, options: KeystoreOptions = {}): string {
  const secret = Buffer.from(nodeKey.exportPrivateKey().slice(2), "hex");
  if (options.password === undefined) {
    const plain: PlainKeystore = { version: "ats-node-key/1", address: nodeKey.address, privateKey: bytesToHexString(secret) };
    return `${JSON.stringify(plain, null, 2)}\n`;
  }
  const n = options.scryptN ?? 1 << 15;
  const salt = randomBytes(32);
  const iv = randomBytes(16);
  const derivedKey = scryptKey(options.password, salt, n, 8, 1);
  const cipher = createCipheriv("aes-128-ctr", derivedKey.subarray(0, 16), iv);
  const ciphertext = Buffer.concat([cipher.update(secret), cipher.final()]);
  const keystore: V3Keystore = {
    version: 3,
    id: randomUUID(),
    address: nodeKey.address.slice(2).toLowerCase(),
    crypto: {
      cipher: "aes-128-ctr",
      cipherparams: { iv: iv.toString("hex") },
      ciphertext: ciphertext.toString("hex"),
      kdf: "scrypt",
      kdfparams: { dklen: 32, n, p: 1, r: 8, salt: salt.toString("hex") },
      mac: keystoreMac(derivedKey, ciphertext).toString("hex"),
    },
  };
  return `${JSON.stringify(keystore, null, 2)}\n`;
}

function field(record: Record<string, unknown>, name: string, path: string): unknown {
  if (!(name in record)) throw new ValidationError(`${path}.${name}`, "is missing", {});
  return record[name];
}

function stringField(record: Record<string, unknown>, name: string, path: string): string {
  const value = field(record, name, path);
  if (typeof value !== "string") throw new ValidationError(`${path}.${name}`, "must be a string", { got: typeof value });
  return value;
}

function objectField(record: Record<string, unknown>, name: string, path: string): Record<string, unknown> {
  const value = field(record, name, path);
  if (typeof value !== "object" || value === null) throw new ValidationError(`${path}.${name}`, "must be an object", {});
  return value as Record<string, unknown>;
}

function numberField(record: Record<string, unknown>, name: string, path: string): number {
  const value = field(record, name, path);
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) {
    throw new ValidationError(`${path}.${name}`, "must be a positive integer", { got: String(value) });
  }
  return value;
}

function decryptV3(keystore: Record<string, unknown>, password: string): Hex {
  const cryptoSection = objectField(keystore, "crypto", "node.json");
  const kdfParams = objectField(cryptoSection, "kdfparams", "node.json.crypto");
  if (stringField(cryptoSection, "kdf", "node.json.crypto") !== "scrypt" || stringField(cryptoSection, "cipher", "node.json.crypto") !== "aes-128-ctr") {
    throw new ValidationError("node.json.crypto", "only scrypt + aes-128-ctr keystores are supported", {});
  }
  const salt = Buffer.from(stringField(kdfParams, "salt", "node.json.crypto.kdfparams"), "hex");
  const n = numberField(kdfParams, "n", "node.json.crypto.kdfparams");
  const r = numberField(kdfParams, "r", "node.json.crypto.kdfparams");
  const p = numberField(kdfParams, "p", "node.json.crypto.kdfparams");
  const ciphertext = Buffer.from(stringField(cryptoSection, "ciphertext", "node.json.crypto"), "hex");
  const iv = Buffer.from(stringField(objectField(cryptoSection, "cipherparams", "node.json.crypto"), "iv", "node.json.crypto.cipherparams"), "hex");
  const mac = Buffer.from(stringField(cryptoSection, "mac", "node.json.crypto"), "hex");
  const derivedKey = scryptKey(password, salt, n, r, p);
  const expected = keystoreMac(derivedKey, ciphertext);
  if (mac.length !== expected.length || !timingSafeEqual(mac, expected)) {
    throw new AuthError("node keystore password is wrong (MAC mismatch)", { file: KEY_FILES.nodeKeystore });
  }
  const decipher = createDecipheriv("aes-128-ctr", derivedKey.subarray(0, 16), iv);
  return bytesToHexString(Buffer.concat([decipher.update(ciphertext), decipher.final()]));
}

/** Parses node.json (either form) and checks that the stored address matches the key. */
export function decodeNodeKeystore(text: string, options: KeystoreOptions = {}): NodeKey {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (cause) {
    throw new ValidationError("node.json", "is not valid JSON", {}, { cause });
  }
  if (typeof parsed !== "object" || parsed === null) throw new ValidationError("node.json", "must be an object", {});
  const record = parsed as Record<string, unknown>;
  let privateKey: Hex;
  if (record.version === 3) {
    if (options.password === undefined) throw new AuthError("node keystore is encrypted: a password is required", { file: KEY_FILES.nodeKeystore });
    privateKey = decryptV3(record, options.password);
  } else if (record.version === "ats-node-key/1") {
    const value = stringField(record, "privateKey", "node.json");
    if (!/^0x[0-9a-fA-F]{64}$/.test(value)) throw new ValidationError("node.json.privateKey", "must be 32-byte hex", {});
    privateKey = value as Hex;
  } else {
    throw new ValidationError("node.json.version", "must be 3 (V3 keystore) or \"ats-node-key/1\"", { got: String(record.version) });
  }
  const nodeKey = NodeKey.fromPrivateKey(privateKey);
  const storedAddress = stringField(record, "address", "node.json");
  if (getAddress(storedAddress.startsWith("0x") ? storedAddress : `0x${storedAddress}`) !== nodeKey.address) {
    throw new ValidationError("node.json.address", "does not match the stored key", { stored: storedAddress, derived: nodeKey.address });
  }
  return nodeKey;
}

// ---------------------------------------------------------------- directory

async function writePrivateFile(path: string, contents: string): Promise<void> {
  await writeFile(path, contents, { mode: FILE_MODE });
  // `mode` applies only when the file is created; an existing file keeps its old bits otherwise.
  await chmod(path, FILE_MODE);
}

/** Splits concatenated PEM text into single certificates. */
export function splitPemCertificates(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((pem) => `${pem}\n`) ?? [];
}

/** Writes `material` to `dir` (created 0700 if missing). Returns the public summary. */
export async function saveKeyDir(dir: string, material: KeyMaterial, options: KeystoreOptions = {}): Promise<KeyDirSummary> {
  await mkdir(dir, { recursive: true, mode: DIR_MODE });
  if (material.ca !== undefined) await writePrivateFile(join(dir, KEY_FILES.caCertificate), material.ca.certificatePem);
  await writePrivateFile(join(dir, KEY_FILES.cardKey), material.cardKey.export({ format: "pem", type: "pkcs8" }).toString());
  await writePrivateFile(join(dir, KEY_FILES.cardChain), material.certificateChainPem.map((pem) => pem.trimEnd()).join("\n") + "\n");
  await writePrivateFile(join(dir, KEY_FILES.nodeKeystore), encodeNodeKeystore(material.nodeKey, options));
  return summarizeKeyMaterial(material);
}

/** One file of a key directory; key files (not ca.pem, card.pem) readable by group or others are refused. */
export async function readKeyFile(dir: string, name: string, required: boolean): Promise<string | undefined> {
  const path = join(dir, name);
  let mode: number;
  try {
    mode = (await stat(path)).mode;
  } catch (cause) {
    if (!required) return undefined;
    throw new NotFoundError(`key file ${name} is missing`, { dir, file: name }, { cause });
  }
  if (name !== KEY_FILES.caCertificate && name !== KEY_FILES.cardChain && (mode & 0o077) !== 0) {
    throw new AuthError(`key file ${name} is readable by group or others; chmod 600 it`, { file: name, mode: (mode & 0o777).toString(8) });
  }
  return readFile(path, "utf8");
}

export type LoadKeyDirReturnType = KeyMaterial & KeyDirSummary;

/** Reads a directory written by saveKeyDir. */
export async function loadKeyDir(dir: string, options: KeystoreOptions = {}): Promise<LoadKeyDirReturnType> {
  const caPem = await readKeyFile(dir, KEY_FILES.caCertificate, false);
  const cardKey = privateKeyFromPem((await readKeyFile(dir, KEY_FILES.cardKey, true))!);
  const certificateChainPem = splitPemCertificates((await readKeyFile(dir, KEY_FILES.cardChain, true))!);
  if (certificateChainPem.length === 0) throw new ValidationError(KEY_FILES.cardChain, "holds no certificate", { dir });
  const nodeKey = decodeNodeKeystore((await readKeyFile(dir, KEY_FILES.nodeKeystore, true))!, options);
  const material: KeyMaterial = { cardKey, certificateChainPem, nodeKey };
  if (caPem !== undefined) material.ca = { certificatePem: caPem };
  return { ...material, ...summarizeKeyMaterial(material) };
}
