/**
 * TLS on every transport (tlsCertFile / tlsKeyFile): HTTPS and WSS on the REST port, gRPC over TLS, the same
 * proof from all three, the client library with a private CA, and the start errors a bad pair of files gives.
 * The certificates are throwaway: a dev CA (protocol/devca.ts) and a leaf for localhost / 127.0.0.1 issued here.
 */
import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import pino from "pino";
import { createDevManufacturerCa, toWebPublicKey, toWebSigningKey, type DevManufacturerCa } from "../../../protocol/devca";
import { UnavailableError, ValidationError } from "../../../protocol/errors";
import { parseJsonLossless, proofFromJson } from "../../../protocol/json";
import type { ProofJson } from "../../../protocol/types";
import { createVerifyContext, verifyTimeProof } from "../../../protocol/verify";
import { ECDSA_P256_SHA256, x509 } from "../../../protocol/x509";
import { loadConfig, redactedConfig } from "../../../node/config";
import { loadTlsMaterial } from "../../../node/api/tls";
import { createTimeClient } from "../../../client";
import { startNode } from "../../../node/server";
import { grpcCurrentProof, startTestNode, streamedProof, type TestNode } from "./helpers";

const DAY_MS = 86_400_000;

/** A TLS server certificate for localhost and 127.0.0.1, issued by `ca`; the key as PKCS#8 PEM. */
async function issueServerCertificate(ca: DevManufacturerCa): Promise<{ certPem: string; keyPem: string }> {
  const serverKey = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
  const caCertificate = new x509.X509Certificate(ca.certificatePem);
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: "0a01",
    subject: "CN=localhost",
    issuer: caCertificate.subject,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + DAY_MS),
    signingAlgorithm: ECDSA_P256_SHA256,
    publicKey: await toWebPublicKey(serverKey),
    signingKey: await toWebSigningKey(ca.privateKey),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        { type: "dns", value: "localhost" },
        { type: "ip", value: "127.0.0.1" },
      ]),
    ],
  });
  return { certPem: certificate.toString("pem"), keyPem: serverKey.export({ format: "pem", type: "pkcs8" }).toString() };
}

/** GET over node:https trusting `ca` (the global fetch takes no CA). */
function httpsGet(url: string, ca: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    httpsRequest(url, { ca }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    })
      .on("error", reject)
      .end();
  });
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

function expectTlsError(run: () => unknown, field: string, text: string): ValidationError {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected ${field} to be refused`).to.be.instanceOf(ValidationError);
  const error = caught as ValidationError;
  expect(error.field).to.equal(field);
  expect(error.message).to.contain(text);
  return error;
}

describe("node/api TLS", function () {
  let dir: string;
  let ca: DevManufacturerCa;
  let certFile: string;
  let keyFile: string;
  let keyPem: string;
  let t: TestNode;

  before(async function () {
    dir = mkdtempSync(join(tmpdir(), "ats-nodeapi-tls-"));
    ca = await createDevManufacturerCa({ name: "ATS TLS test CA" });
    const server = await issueServerCertificate(ca);
    keyPem = server.keyPem;
    certFile = join(dir, "server.crt");
    keyFile = join(dir, "server.key");
    writeFileSync(certFile, server.certPem);
    writeFileSync(keyFile, server.keyPem, { mode: 0o600 });
    // A 60 s tick and no on-demand refresh: every transport reads the same cached attestation.
    t = await startTestNode({ overrides: { tlsCertFile: certFile, tlsKeyFile: keyFile, tickIntervalNs: "60000000000", refreshAfterNs: "0" } });
  });
  after(async function () {
    await t?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("reports https://, wss:// and tls: true, and refuses plaintext HTTP and insecure gRPC on the TLS ports", async function () {
    const { endpoints } = t.node;
    expect(endpoints.rest).to.match(/^https:\/\/127\.0\.0\.1:[1-9][0-9]*$/);
    expect(endpoints.ws).to.match(/^wss:\/\/127\.0\.0\.1:[1-9][0-9]*\/v1\/stream$/);
    expect(endpoints.grpc).to.match(/^127\.0\.0\.1:[1-9][0-9]*$/);
    expect(endpoints.tls).to.equal(true);

    expect(await rejection(fetch(`${endpoints.rest.replace(/^https/, "http")}/time/current`))).to.be.instanceOf(Error);
    // The system roots do not know the test CA.
    expect(await rejection(fetch(`${endpoints.rest}/time/current`))).to.be.instanceOf(Error);
    const insecure = (await rejection(grpcCurrentProof(endpoints.grpc, grpc.credentials.createInsecure()))) as grpc.ServiceError;
    expect(insecure.code).to.be.oneOf([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]);
  });

  it("serves the same proof over HTTPS, WSS and gRPC over TLS, and it verifies off-chain", async function () {
    const { endpoints } = t.node;
    const response = await httpsGet(`${endpoints.rest}/time/current`, ca.certificatePem);
    expect(response.status).to.equal(200);
    const rest = parseJsonLossless(response.text) as ProofJson;
    const ws = await streamedProof(endpoints.ws, { ca: ca.certificatePem });
    const rpc = await grpcCurrentProof(endpoints.grpc, grpc.credentials.createSsl(Buffer.from(ca.certificatePem)));
    expect(ws).to.deep.equal(rest);
    expect(rpc).to.deep.equal(rest);

    const context = createVerifyContext({
      cards: { [t.identity.cardId]: { publicKey: t.identity.cardPublicKey, revoked: false } },
      nodes: [t.identity.nodeAddress],
      nowNs: BigInt(Date.now()) * 1_000_000n,
    });
    for (const json of [rest, ws, rpc]) expect(verifyTimeProof(proofFromJson(json).proof, context)).to.deep.include({ valid: true });
  });

  it("the client library reaches REST, WebSocket and gRPC of a TLS node with a private CA", async function () {
    const { endpoints } = t.node;
    const client = createTimeClient({ endpoint: endpoints.rest, grpcEndpoint: endpoints.grpc, tls: { ca: ca.certificatePem }, retries: 0 });
    const updates: bigint[] = [];
    try {
      const fetched = await client.getCurrentTime();
      expect(fetched.cardId).to.equal(t.identity.cardId);
      expect(await client.verify(fetched.proof)).to.deep.equal({ valid: true, reason: null });
      expect((await client.info())["nodeId"]).to.equal(t.identity.nodeAddress);
      const viaGrpc = await client.grpc.getCurrentTime();
      expect(viaGrpc.json).to.deep.equal(fetched.json);
      const stream = await client.stream({ intervalNs: 1_000_000n, onUpdate: (update) => updates.push(update.nanoMoment) });
      while (updates.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      stream.close();
      expect(updates[0]).to.equal(fetched.proof.nanoMoment);
    } finally {
      client.close();
    }

    // Without the CA, the node's certificate is not trusted: a network failure, not an answer.
    const untrusting = createTimeClient({ endpoint: endpoints.rest, grpcEndpoint: endpoints.grpc, retries: 0 });
    try {
      expect(await rejection(untrusting.getCurrentTime())).to.be.instanceOf(UnavailableError);
      expect(await rejection(untrusting.grpc.getCurrentTime())).to.be.instanceOf(UnavailableError);
      expect(await rejection(untrusting.stream({ intervalNs: 1_000_000n, onUpdate: () => undefined }))).to.be.instanceOf(UnavailableError);
    } finally {
      untrusting.close();
    }
  });

  it("never shows the private key: not in the redacted config, the loaded material, nor the start log", async function () {
    const keyBody = keyPem.split("\n")[1] ?? "";
    expect(keyBody.length).to.be.greaterThan(20);
    const redacted = JSON.stringify(redactedConfig(t.config));
    expect(redacted).to.contain(keyFile);
    expect(redacted).not.to.contain(keyBody);
    const material = loadTlsMaterial(t.config);
    expect(material).not.to.equal(null);
    expect(JSON.stringify(material)).not.to.contain("PRIVATE KEY");
    expect(inspect(material, { depth: 5, showHidden: true })).not.to.contain("PRIVATE KEY");

    const lines: string[] = [];
    const logger = pino({ level: "trace" }, { write: (line: string) => lines.push(line) });
    const second = await startNode({ config: t.config, logger, service: t.service });
    await second.close();
    const log = lines.join("");
    expect(log).to.contain('"tls":true');
    expect(log).to.contain("CN=localhost");
    expect(log).not.to.contain("PRIVATE KEY");
    expect(log).not.to.contain(keyBody);
  });

  it("refuses to start with only one of the two files, an unreadable file, or a key that is not the certificate's", async function () {
    expectTlsError(() => loadConfig({ env: { ATS_TLS_CERT_FILE: certFile } }), "config.tlsKeyFile", "must be set when tlsCertFile is");
    expectTlsError(() => loadConfig({ env: {}, overrides: { tlsKeyFile: keyFile } }), "config.tlsCertFile", "must be set when tlsKeyFile is");
    // Neither: plaintext, exactly as before.
    const plain = loadConfig({ env: {} });
    expect([plain.tlsCertFile, plain.tlsKeyFile]).to.deep.equal(["", ""]);
    expect(loadTlsMaterial(plain)).to.equal(null);

    const missing = join(dir, "missing.crt");
    expectTlsError(() => loadTlsMaterial({ tlsCertFile: missing, tlsKeyFile: keyFile }), "config.tlsCertFile", `${missing} cannot be read (ENOENT)`);
    expectTlsError(() => loadTlsMaterial({ tlsCertFile: certFile, tlsKeyFile: missing }), "config.tlsKeyFile", `${missing} cannot be read (ENOENT)`);
    expectTlsError(() => loadTlsMaterial({ tlsCertFile: keyFile, tlsKeyFile: keyFile }), "config.tlsCertFile", "holds no PEM certificate");
    const notAKey = expectTlsError(() => loadTlsMaterial({ tlsCertFile: certFile, tlsKeyFile: certFile }), "config.tlsKeyFile", "is not an unencrypted PEM private key");
    expect(notAKey.message).to.contain(certFile);

    const otherKeyFile = join(dir, "other.key");
    writeFileSync(otherKeyFile, generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "pem", type: "pkcs8" }));
    const mismatch = expectTlsError(
      () => loadTlsMaterial({ tlsCertFile: certFile, tlsKeyFile: otherKeyFile }),
      "config.tlsKeyFile",
      `${otherKeyFile} does not hold the private key of the certificate in ${certFile}`,
    );
    expect(mismatch.message).not.to.contain("PRIVATE KEY");

    // startNode checks the files before it listens.
    const refused = await rejection(startTestNode({ overrides: { tlsCertFile: certFile, tlsKeyFile: otherKeyFile } }));
    expect(refused).to.be.instanceOf(ValidationError);
    expect((refused as ValidationError).field).to.equal("config.tlsKeyFile");
  });
});
