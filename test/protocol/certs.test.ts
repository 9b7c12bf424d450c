import { expect } from "chai";
import { createPublicKey, webcrypto, type KeyObject } from "node:crypto";
import { x509 } from "../../protocol/x509";
import {
  createDevIdentity,
  createDevManufacturerCa,
  generateCardKey,
  issueCardCertificate,
  verifyCardCertificateChain,
  type DevIdentity,
} from "../../protocol";

const P256 = { name: "ECDSA", namedCurve: "P-256" } as const;

async function webKeys(key: KeyObject): Promise<{ privateKey: CryptoKey; publicKey: CryptoKey }> {
  const privateKey = await webcrypto.subtle.importKey("pkcs8", key.export({ format: "der", type: "pkcs8" }), P256, false, ["sign"]);
  const publicDer = createPublicKey(key).export({ format: "der", type: "spki" });
  const publicKey = await webcrypto.subtle.importKey("spki", publicDer, P256, true, ["verify"]);
  return { privateKey: privateKey as CryptoKey, publicKey: publicKey as CryptoKey };
}

/** Issues a certificate with full control (algorithm, CA flag), for the negative cases devca never produces. */
async function issue(options: {
  subject: string;
  issuer: { name: string; key: KeyObject };
  subjectKey: KeyObject;
  ca: boolean;
  hash?: "SHA-256" | "SHA-384";
}): Promise<string> {
  const issuerKeys = await webKeys(options.issuer.key);
  const subjectKeys = await webKeys(options.subjectKey);
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.create({
    subject: options.subject,
    issuer: options.issuer.name,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 86_400_000),
    signingAlgorithm: { name: "ECDSA", hash: options.hash ?? "SHA-256" },
    publicKey: subjectKeys.publicKey,
    signingKey: issuerKeys.privateKey,
    extensions: [new x509.BasicConstraintsExtension(options.ca, undefined, true)],
  });
  return certificate.toString("pem");
}

describe("certs: card certificate chains", () => {
  let dev: DevIdentity;
  const nowMs = Date.now();

  before(async () => {
    dev = await createDevIdentity();
  });

  it("accepts a card chain to a trusted root and returns cardId = SHA-256(uncompressed key)", async () => {
    const result = await verifyCardCertificateChain({
      chainPem: dev.certificateChainPem,
      trustedRootsPem: [dev.ca.certificatePem],
      nowMs,
      cardId: dev.cardId,
    });
    expect(result).to.include({ valid: true, cardId: dev.cardId, publicKey: dev.cardPublicKey });
  });

  it("accepts the chain without the root certificate appended", async () => {
    const result = await verifyCardCertificateChain({ chainPem: [dev.certificateChainPem[0]!], trustedRootsPem: [dev.ca.certificatePem], nowMs });
    expect(result.valid).to.equal(true);
  });

  it("rejects a chain to a root that is not trusted (wrong root), even with the same name", async () => {
    const impostor = await createDevManufacturerCa(); // same subject name, different key
    const result = await verifyCardCertificateChain({ chainPem: dev.certificateChainPem, trustedRootsPem: [impostor.certificatePem], nowMs });
    expect(result).to.include({ valid: false, reason: "untrusted-root" });
    const other = await createDevManufacturerCa({ name: "Other Manufacturer" });
    const byName = await verifyCardCertificateChain({ chainPem: [dev.certificateChainPem[0]!], trustedRootsPem: [other.certificatePem], nowMs });
    expect(byName).to.include({ valid: false, reason: "untrusted-root" });
  });

  it("rejects an expired card certificate and one not yet valid", async () => {
    const cardKey = generateCardKey();
    const expired = await issueCardCertificate(dev.ca, cardKey, { notBefore: new Date(nowMs - 10 * 86_400_000), notAfter: new Date(nowMs - 86_400_000) });
    const future = await issueCardCertificate(dev.ca, cardKey, { notBefore: new Date(nowMs + 86_400_000), notAfter: new Date(nowMs + 10 * 86_400_000) });
    const roots = [dev.ca.certificatePem];
    expect(await verifyCardCertificateChain({ chainPem: [expired], trustedRootsPem: roots, nowMs })).to.include({ valid: false, reason: "expired" });
    expect(await verifyCardCertificateChain({ chainPem: [future], trustedRootsPem: roots, nowMs })).to.include({ valid: false, reason: "not-yet-valid" });
  });

  it("rejects an expired root", async () => {
    const ca = await createDevManufacturerCa({ notBefore: new Date(nowMs - 10 * 86_400_000), notAfter: new Date(nowMs - 86_400_000) });
    const card = await issueCardCertificate(ca, generateCardKey());
    const result = await verifyCardCertificateChain({ chainPem: [card], trustedRootsPem: [ca.certificatePem], nowMs });
    expect(result).to.include({ valid: false, reason: "expired" });
  });

  it("rejects a chain whose key does not hash to the claimed cardId", async () => {
    const result = await verifyCardCertificateChain({
      chainPem: dev.certificateChainPem,
      trustedRootsPem: [dev.ca.certificatePem],
      nowMs,
      cardId: `0x${"00".repeat(32)}`,
    });
    expect(result).to.include({ valid: false, reason: "card-id-mismatch" });
  });

  it("accepts a chain through an intermediate CA and rejects one whose issuer is not a CA", async () => {
    const root = new x509.X509Certificate(dev.ca.certificatePem).subject;
    const intermediateKey = generateCardKey();
    const intermediate = await issue({ subject: "CN=ATS Dev Intermediate", issuer: { name: root, key: dev.ca.privateKey }, subjectKey: intermediateKey, ca: true });
    const cardKey = generateCardKey();
    const card = await issue({ subject: "CN=card", issuer: { name: "CN=ATS Dev Intermediate", key: intermediateKey }, subjectKey: cardKey, ca: false });
    const ok = await verifyCardCertificateChain({ chainPem: [card, intermediate, dev.ca.certificatePem], trustedRootsPem: [dev.ca.certificatePem], nowMs });
    expect(ok.valid, JSON.stringify(ok)).to.equal(true);

    const notCa = await issue({ subject: "CN=Not A CA", issuer: { name: root, key: dev.ca.privateKey }, subjectKey: intermediateKey, ca: false });
    const leaf = await issue({ subject: "CN=card", issuer: { name: "CN=Not A CA", key: intermediateKey }, subjectKey: cardKey, ca: false });
    const bad = await verifyCardCertificateChain({ chainPem: [leaf, notCa], trustedRootsPem: [dev.ca.certificatePem], nowMs });
    expect(bad).to.include({ valid: false, reason: "issuer-not-ca" });
  });

  it("rejects a card certificate signed with ECDSA-with-SHA384", async () => {
    const root = new x509.X509Certificate(dev.ca.certificatePem).subject;
    const card = await issue({ subject: "CN=card", issuer: { name: root, key: dev.ca.privateKey }, subjectKey: generateCardKey(), ca: false, hash: "SHA-384" });
    const result = await verifyCardCertificateChain({ chainPem: [card], trustedRootsPem: [dev.ca.certificatePem], nowMs });
    expect(result).to.include({ valid: false, reason: "wrong-signature-algorithm" });
  });

  it("rejects garbage and empty chains without throwing", async () => {
    const roots = [dev.ca.certificatePem];
    expect(await verifyCardCertificateChain({ chainPem: ["not a pem"], trustedRootsPem: roots, nowMs })).to.include({ valid: false, reason: "malformed-certificate" });
    expect(await verifyCardCertificateChain({ chainPem: [], trustedRootsPem: roots, nowMs })).to.include({ valid: false, reason: "empty-chain" });
  });
});
