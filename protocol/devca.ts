/**
 * A development certificate authority: a manufacturer CA, card keys with X.509 v3 certificates issued by it,
 * and node keys. Production cards get their certificate from the real manufacturer; everything else in the
 * toolkit (node, tests, demo) uses these helpers so dev material is made one way.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, webcrypto, type KeyObject } from "node:crypto";
import { ECDSA_P256_SHA256, x509 } from "./x509";
import { cardIdFromPublicKey } from "./codec";
import { NodeKey, p256PrivateKeyObject, p256PublicKeyToUncompressed } from "./keys";
import type { Address, Hex } from "./types";

const DAY_MS = 86_400_000;

/** A fresh P-256 card key (node:crypto private KeyObject; its inspect/JSON output shows no key material). */
export function generateCardKey(): KeyObject {
  return generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
}

/** A fresh secp256k1 node key. */
export function generateNodeKey(): NodeKey {
  return NodeKey.generate();
}

export interface DevManufacturerCa {
  /** Self-signed root certificate, PEM. */
  certificatePem: string;
  /** The CA's P-256 private key. */
  privateKey: KeyObject;
}

export interface CertificateValidity {
  /** Defaults to one day before now (tolerates clock skew between machines). */
  notBefore?: Date;
  /** Defaults to ten years after now for the CA, five for cards. */
  notAfter?: Date;
}

/** A node:crypto P-256 private key as the WebCrypto signing key @peculiar/x509 signs certificates with. */
export async function toWebSigningKey(privateKey: KeyObject): Promise<CryptoKey> {
  const der = privateKey.export({ format: "der", type: "pkcs8" });
  return (await webcrypto.subtle.importKey("pkcs8", der, ECDSA_P256_SHA256, false, ["sign"])) as CryptoKey;
}

/** A node:crypto P-256 key (public, or the public half of a private one) as a WebCrypto public key. */
export async function toWebPublicKey(key: KeyObject): Promise<CryptoKey> {
  const der = (key.type === "public" ? key : createPublicKey(key)).export({ format: "der", type: "spki" });
  return (await webcrypto.subtle.importKey("spki", der, ECDSA_P256_SHA256, true, ["verify"])) as CryptoKey;
}

function serialNumber(): string {
  // Positive 64-bit serial (top bit cleared so DER does not read it as negative).
  const bytes = randomBytes(8);
  bytes[0] = bytes[0]! & 0x7f;
  return bytes.toString("hex");
}

/** Creates a self-signed manufacturer root CA (ECDSA P-256, SHA-256, CA:TRUE pathlen 0). */
export async function createDevManufacturerCa(
  options: CertificateValidity & { name?: string; privateKey?: KeyObject } = {},
): Promise<DevManufacturerCa> {
  const privateKey = options.privateKey ?? generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
  const keys = { privateKey: await toWebSigningKey(privateKey), publicKey: await toWebPublicKey(privateKey) };
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: `CN=${options.name ?? "ATS Dev Manufacturer CA"}, O=Attested Time Dev`,
    notBefore: options.notBefore ?? new Date(now - DAY_MS),
    notAfter: options.notAfter ?? new Date(now + 3650 * DAY_MS),
    signingAlgorithm: ECDSA_P256_SHA256,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certificatePem: certificate.toString("pem"), privateKey };
}

/** Issues the card's X.509 v3 certificate (SubjectPublicKeyInfo = the card key), signed by `ca`. Returns PEM. */
export async function issueCardCertificate(
  ca: DevManufacturerCa,
  cardKey: KeyObject,
  options: CertificateValidity & { serialNumber?: string } = {},
): Promise<string> {
  const caCertificate = new x509.X509Certificate(ca.certificatePem);
  const publicKey = await toWebPublicKey(cardKey);
  const cardId = cardIdFromPublicKey(cardKey);
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: options.serialNumber ?? serialNumber(),
    subject: `CN=ATS time card ${cardId.slice(2, 18)}, O=Attested Time Dev`,
    issuer: caCertificate.subject,
    notBefore: options.notBefore ?? new Date(now - DAY_MS),
    notAfter: options.notAfter ?? new Date(now + 1825 * DAY_MS),
    signingAlgorithm: ECDSA_P256_SHA256,
    publicKey,
    signingKey: await toWebSigningKey(ca.privateKey),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caCertificate.publicKey),
    ],
  });
  return certificate.toString("pem");
}

/** Everything a dev attesting node needs. Key-holding fields never print their key material. */
export interface DevIdentity {
  ca: DevManufacturerCa;
  cardKey: KeyObject;
  /** Uncompressed P-256 public key, 65 bytes. */
  cardPublicKey: Hex;
  cardId: Hex;
  /** [card certificate, CA certificate], PEM. */
  certificateChainPem: string[];
  nodeKey: NodeKey;
  nodeAddress: Address;
}

export interface CreateDevIdentityParameters {
  /** Fixed card scalar (tests, vectors); random when omitted. */
  cardPrivateKey?: Hex;
  /** Fixed node scalar; random when omitted. */
  nodePrivateKey?: Hex;
  /** Reuse an existing CA instead of creating one. */
  ca?: DevManufacturerCa;
}

/** Creates CA + card key + card certificate + node key in one call. */
export async function createDevIdentity(parameters: CreateDevIdentityParameters = {}): Promise<DevIdentity> {
  const ca = parameters.ca ?? (await createDevManufacturerCa());
  const cardKey = parameters.cardPrivateKey === undefined ? generateCardKey() : p256PrivateKeyObject(parameters.cardPrivateKey);
  const cardCertificatePem = await issueCardCertificate(ca, cardKey);
  const nodeKey = parameters.nodePrivateKey === undefined ? generateNodeKey() : NodeKey.fromPrivateKey(parameters.nodePrivateKey);
  return {
    ca,
    cardKey,
    cardPublicKey: p256PublicKeyToUncompressed(cardKey),
    cardId: cardIdFromPublicKey(cardKey),
    certificateChainPem: [cardCertificatePem, ca.certificatePem],
    nodeKey,
    nodeAddress: nodeKey.address,
  };
}

/** Parses a PEM private key (PKCS#8 or SEC1) into a KeyObject. */
export function privateKeyFromPem(pem: string): KeyObject {
  return createPrivateKey({ key: pem, format: "pem" });
}
