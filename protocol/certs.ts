/**
 * Card certificate chains (docs/protocol.md §2): the card's X.509 v3 certificate, issued (possibly through
 * intermediates) by a trusted manufacturer root, every link ECDSA-with-SHA256, every certificate valid at the
 * given time, and SHA-256(uncompressed card key) == cardId. Contracts do not parse X.509: an administrator
 * runs this check off-chain before registering a card key.
 */
import { createPublicKey } from "node:crypto";
import { ECDSA_P256_SHA256, x509 } from "./x509";
import { cardIdFromPublicKey } from "./codec";
import { p256PublicKeyToUncompressed } from "./keys";
import type { Hex } from "./types";

export type CertificateChainFailureReason =
  | "malformed-certificate"
  | "empty-chain"
  | "wrong-signature-algorithm"
  | "wrong-key-algorithm"
  | "not-yet-valid"
  | "expired"
  | "issuer-not-ca"
  | "bad-signature"
  | "untrusted-root"
  | "card-id-mismatch";

export interface VerifyCardCertificateChainParameters {
  /** PEM certificates, card (leaf) first, then intermediates; the root may be included or omitted. */
  chainPem: readonly string[];
  /** PEM certificates of the trusted manufacturer roots. */
  trustedRootsPem: readonly string[];
  /** The moment of the check, ms since the Unix epoch (X.509 validity has 1-second resolution). */
  nowMs: number;
  /** When given, the card key must hash to this cardId. */
  cardId?: Hex;
}

export type VerifyCardCertificateChainReturnType =
  | { valid: true; cardId: Hex; publicKey: Hex; subject: string; issuer: string }
  | { valid: false; reason: CertificateChainFailureReason; detail: string };

type Failure = Extract<VerifyCardCertificateChainReturnType, { valid: false }>;

function fail(reason: CertificateChainFailureReason, detail: string): Failure {
  return { valid: false, reason, detail };
}

function parseAll(pems: readonly string[], what: string): x509.X509Certificate[] | Failure {
  const certificates: x509.X509Certificate[] = [];
  for (const [index, pem] of pems.entries()) {
    try {
      certificates.push(new x509.X509Certificate(pem));
    } catch (error) {
      return fail("malformed-certificate", `${what}[${index}] does not parse: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return certificates;
}

/** ECDSA-with-SHA256 signature and a P-256 key: the only algorithms allowed in a card chain. */
function checkAlgorithms(certificate: x509.X509Certificate): Failure | undefined {
  // The library types this as WebCrypto's HashedAlgorithm, which needs the DOM lib; the runtime shape is this.
  const signature = certificate.signatureAlgorithm as unknown as { name: string; hash: string | { name: string } };
  const hashName = typeof signature.hash === "string" ? signature.hash : signature.hash.name;
  if (signature.name !== ECDSA_P256_SHA256.name || hashName !== ECDSA_P256_SHA256.hash) {
    return fail("wrong-signature-algorithm", `${certificate.subject}: ${signature.name} with ${hashName}, expected ECDSA with SHA-256`);
  }
  const key = certificate.publicKey.algorithm as { name: string; namedCurve?: string };
  if (key.name !== "ECDSA" || key.namedCurve !== ECDSA_P256_SHA256.namedCurve) {
    return fail("wrong-key-algorithm", `${certificate.subject}: key ${key.name} ${key.namedCurve ?? ""}, expected EC P-256`);
  }
  return undefined;
}

function checkValidity(certificate: x509.X509Certificate, nowMs: number): Failure | undefined {
  if (nowMs < certificate.notBefore.getTime()) {
    return fail("not-yet-valid", `${certificate.subject}: valid from ${certificate.notBefore.toISOString()}, now ${new Date(nowMs).toISOString()}`);
  }
  if (nowMs > certificate.notAfter.getTime()) {
    return fail("expired", `${certificate.subject}: expired ${certificate.notAfter.toISOString()}, now ${new Date(nowMs).toISOString()}`);
  }
  return undefined;
}

function isCa(certificate: x509.X509Certificate): boolean {
  const constraints = certificate.getExtension(x509.BasicConstraintsExtension);
  return constraints?.ca === true;
}

async function checkLink(child: x509.X509Certificate, issuer: x509.X509Certificate): Promise<Failure | undefined> {
  if (child.issuer !== issuer.subject) {
    return fail("bad-signature", `${child.subject} names issuer ${child.issuer}, next certificate is ${issuer.subject}`);
  }
  if (!isCa(issuer)) return fail("issuer-not-ca", `${issuer.subject} is not a CA (basicConstraints cA is not true)`);
  const verified = await child.verify({ publicKey: issuer.publicKey, signatureOnly: true });
  return verified ? undefined : fail("bad-signature", `${child.subject}: signature does not verify with ${issuer.subject}'s key`);
}

function sameCertificate(a: x509.X509Certificate, b: x509.X509Certificate): boolean {
  return Buffer.from(a.rawData).equals(Buffer.from(b.rawData));
}

function leafKey(leaf: x509.X509Certificate): Hex {
  const spki = createPublicKey({ key: Buffer.from(leaf.publicKey.rawData), format: "der", type: "spki" });
  return p256PublicKeyToUncompressed(spki);
}

/**
 * Checks a card's chain up to a trusted root. Never throws for bad certificates: every problem is a
 * `{ valid: false, reason, detail }`.
 */
export async function verifyCardCertificateChain(
  parameters: VerifyCardCertificateChainParameters,
): Promise<VerifyCardCertificateChainReturnType> {
  const chain = parseAll(parameters.chainPem, "chainPem");
  if (!Array.isArray(chain)) return chain;
  const roots = parseAll(parameters.trustedRootsPem, "trustedRootsPem");
  if (!Array.isArray(roots)) return roots;
  if (chain.length === 0) return fail("empty-chain", "chainPem holds no certificate");

  // Drop a trailing copy of a trusted root: the anchor is the trusted list, not what the card presents.
  const presented = chain.filter((certificate, index) => index === 0 || !roots.some((root) => sameCertificate(root, certificate)));
  for (const certificate of presented) {
    const problem = checkAlgorithms(certificate) ?? checkValidity(certificate, parameters.nowMs);
    if (problem) return problem;
  }
  for (let index = 0; index + 1 < presented.length; index += 1) {
    const problem = await checkLink(presented[index]!, presented[index + 1]!);
    if (problem) return problem;
  }
  const top = presented[presented.length - 1]!;
  const anchor = roots.find((root) => root.subject === top.issuer && !sameCertificate(root, top));
  if (anchor === undefined) return fail("untrusted-root", `no trusted root named ${top.issuer}`);
  const anchorProblem = checkAlgorithms(anchor) ?? checkValidity(anchor, parameters.nowMs) ?? (await checkLink(top, anchor));
  if (anchorProblem) return anchorProblem.reason === "bad-signature" ? fail("untrusted-root", anchorProblem.detail) : anchorProblem;

  const leaf = presented[0]!;
  const publicKey = leafKey(leaf);
  const cardId = cardIdFromPublicKey(publicKey);
  if (parameters.cardId !== undefined && parameters.cardId.toLowerCase() !== cardId) {
    return fail("card-id-mismatch", `certificate key hashes to ${cardId}, expected ${parameters.cardId}`);
  }
  return { valid: true, cardId, publicKey, subject: leaf.subject, issuer: leaf.issuer };
}
