/**
 * TLS material of the node's servers (REST/WebSocket over HTTPS/WSS, gRPC over TLS), read and checked once at
 * start from the tlsCertFile and tlsKeyFile settings.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { ValidationError } from "../../protocol/errors";
import { checkTlsPair, SETTINGS, type NodeConfig } from "../config";

/**
 * The certificate chain and private key of the node's servers, read and checked once at start. The key lives in a
 * private field: neither JSON.stringify, util.inspect nor a pino log line of this object shows it.
 */
export class TlsMaterial {
  /** PEM certificate chain as read from tlsCertFile (leaf first). */
  readonly certificateChainPem: Buffer;
  /** Subject and end of validity of the leaf certificate (for the start log). */
  readonly subject: string;
  readonly validTo: string;
  readonly #privateKeyPem: Buffer;

  constructor(certificateChainPem: Buffer, privateKeyPem: Buffer, leaf: X509Certificate) {
    this.certificateChainPem = certificateChainPem;
    this.#privateKeyPem = privateKeyPem;
    this.subject = leaf.subject;
    this.validTo = leaf.validTo;
  }

  /** The PEM private key, for server credentials only. */
  privateKeyPem(): Buffer {
    return this.#privateKeyPem;
  }
}

function tlsError(name: "tlsCertFile" | "tlsKeyFile", path: string, message: string, cause?: unknown): ValidationError {
  return new ValidationError(`config.${name}`, `${path} ${message} [env ${SETTINGS[name].env}]`, { setting: name, file: path }, cause === undefined ? {} : { cause });
}

function readTlsFile(name: "tlsCertFile" | "tlsKeyFile", path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    throw tlsError(name, path, `cannot be read${code === undefined ? "" : ` (${code})`}`, cause);
  }
}

/**
 * Reads tlsCertFile and tlsKeyFile when set (null when both are empty: plaintext): the certificate must parse as
 * PEM X.509, the key as an unencrypted PEM private key, and the key must be the certificate's. Every error is a
 * ValidationError naming the setting and the file; none carries key material.
 */
export function loadTlsMaterial(config: Pick<NodeConfig, "tlsCertFile" | "tlsKeyFile">): TlsMaterial | null {
  checkTlsPair(config);
  if (config.tlsCertFile === "") return null;
  const certificateChainPem = readTlsFile("tlsCertFile", config.tlsCertFile);
  if (!certificateChainPem.includes("-----BEGIN CERTIFICATE-----")) throw tlsError("tlsCertFile", config.tlsCertFile, "holds no PEM certificate");
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(certificateChainPem); // the first certificate of the chain
  } catch (cause) {
    throw tlsError("tlsCertFile", config.tlsCertFile, "is not a valid PEM X.509 certificate", cause);
  }
  const privateKeyPem = readTlsFile("tlsKeyFile", config.tlsKeyFile);
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: privateKeyPem, format: "pem" });
  } catch (cause) {
    // Only the error code: an OpenSSL message about a key file is not worth the risk of echoing any of it.
    const code = (cause as NodeJS.ErrnoException).code;
    throw tlsError("tlsKeyFile", config.tlsKeyFile, `is not an unencrypted PEM private key${code === undefined ? "" : ` (${code})`}`);
  }
  let matches = false;
  try {
    matches = leaf.checkPrivateKey(key);
  } catch {
    matches = false;
  }
  if (!matches) throw tlsError("tlsKeyFile", config.tlsKeyFile, `does not hold the private key of the certificate in ${config.tlsCertFile}`);
  return new TlsMaterial(certificateChainPem, privateKeyPem, leaf);
}
