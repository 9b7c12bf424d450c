/**
 * The one place that loads @peculiar/x509. Its DI container (tsyringe) needs the Reflect polyfill loaded
 * first, and it must use Node's WebCrypto. Every module that needs X.509 imports `x509` from here.
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { webcrypto } from "node:crypto";

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

/** WebCrypto ECDSA P-256 with SHA-256: the only certificate signature algorithm the protocol allows (§2). */
export const ECDSA_P256_SHA256 = { name: "ECDSA", hash: "SHA-256", namedCurve: "P-256" } as const;

export { x509 };
