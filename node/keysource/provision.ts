/**
 * `ats-node keys init <dir> --pkcs11`: provisions a PKCS#11 token for a node. The token generates both keys (the
 * card's P-256 key and the node's secp256k1 key: sensitive, non-extractable, pkcs11.ts), and the key folder gets what
 * is public:
 *   card.csr.pem  the card key's PKCS#10 certificate request, signed BY THE TOKEN (proof that the token holds the key)
 *   card.pem      the card certificate chain: the leaf issued for that request by a fresh dev manufacturer CA, then
 *                 the CA, as `keys init` does for a key file (protocol/devca.ts): for the local network only
 *   ca.pem        the dev CA's certificate, the trusted root (its private key is discarded, as in `keys init`)
 * With a real manufacturer the operator sends card.csr.pem to it instead and puts the chain it returns in card.pem
 * (docs/operators.md "Keys in a PKCS#11 token"): the node checks at start that the leaf certifies the token's key.
 */
import { createHash, webcrypto } from "node:crypto";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ProtocolError } from "../../protocol/errors";
import { createDevManufacturerCa, issueCardCertificate, toWebPublicKey } from "../../protocol/devca";
import { KEY_FILES } from "../../protocol/keystore";
import { p256PublicKeyObject } from "../../protocol/keys";
import type { Address, Hex } from "../../protocol/types";
import { ECDSA_P256_SHA256, x509 } from "../../protocol/x509";
import type { KeySourceSettings } from "./load";
import { tokenSettingsOf } from "./load";
import { sharedToken, type Pkcs11Token, type TokenKeyPair } from "./pkcs11";
import { tokenCardKey, tokenNodeKey } from "./tokenKeys";
import { toLowS } from "./tokenSignature";

/** The certificate request beside card.pem. */
export const CARD_CSR_FILE = "card.csr.pem";

export interface ProvisionedToken {
  keyDir: string;
  cardId: Hex;
  cardPublicKey: Hex;
  nodeAddress: Address;
  token: { module: string; slotId: number; cardKeyLabel: string; nodeKeyLabel: string };
  files: string[];
  trustedRoot: string;
}

/**
 * A WebCrypto stand-in for @peculiar/x509 whose only private key is the token's card key: sign() hashes the
 * to-be-signed bytes with SHA-256 and has the token sign the digest (CKM_ECDSA), answering r ‖ s as WebCrypto does.
 * Public-key operations go to Node's WebCrypto.
 */
function tokenCrypto(token: Pkcs11Token, pair: TokenKeyPair): Crypto {
  const subtle = {
    exportKey: (format: "spki", key: CryptoKey) => webcrypto.subtle.exportKey(format, key as webcrypto.CryptoKey),
    sign: async (_algorithm: unknown, _key: unknown, data: ArrayBuffer | ArrayBufferView): Promise<ArrayBuffer> => {
      const bytes = data instanceof ArrayBuffer ? new Uint8Array(data) : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      const signature = toLowS(token.signDigest(pair, createHash("sha256").update(bytes).digest()), "P-256");
      return signature.buffer.slice(signature.byteOffset, signature.byteOffset + signature.byteLength) as ArrayBuffer;
    },
  };
  return { subtle, getRandomValues: webcrypto.getRandomValues.bind(webcrypto) } as unknown as Crypto;
}

/** The card key's PKCS#10 request, signed by the token; verified here before anything is issued for it. */
async function tokenCardCsr(token: Pkcs11Token, pair: TokenKeyPair, cardId: Hex): Promise<string> {
  const publicKey = await toWebPublicKey(p256PublicKeyObject(`0x${pair.publicKey.toString("hex")}`));
  // Only `algorithm` of the private key is read by the generator; signing goes to tokenCrypto.
  const privateKey = { algorithm: ECDSA_P256_SHA256, type: "private" } as unknown as CryptoKey;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create(
    {
      name: `CN=ATS time card ${cardId.slice(2, 18)}, O=Attested Time`,
      keys: { privateKey, publicKey },
      signingAlgorithm: ECDSA_P256_SHA256,
      extensions: [new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true)],
    },
    tokenCrypto(token, pair),
  );
  if (!(await csr.verify())) throw new ProtocolError("the token's certificate request does not verify with its card public key", { label: pair.label, cardId });
  return csr.toString("pem");
}

async function writePublicFile(path: string, contents: string): Promise<void> {
  await writeFile(path, contents, { mode: 0o600 });
  await chmod(path, 0o600); // an existing file keeps its old mode otherwise
}

/**
 * Generates the card and node keys in the token the settings name (labels pkcs11CardKeyLabel, pkcs11NodeKeyLabel;
 * refused when either label is taken), writes card.csr.pem, card.pem and ca.pem to `dir`, and returns the public
 * summary. The token stays open in the process (pkcs11.ts sharedToken): the caller closes it.
 */
export async function provisionToken(config: KeySourceSettings, env: NodeJS.ProcessEnv, dir: string): Promise<ProvisionedToken> {
  const token = sharedToken(tokenSettingsOf(config, env));
  for (const label of [config.pkcs11CardKeyLabel, config.pkcs11NodeKeyLabel]) {
    if (token.hasLabel(label)) throw new ProtocolError(`the token already holds a key labelled "${label}": choose another label or delete that key with the token's tool`, { slotId: token.slotId, label });
  }
  const cardPair = token.generateKeyPair(config.pkcs11CardKeyLabel, "P-256");
  const nodePair = token.generateKeyPair(config.pkcs11NodeKeyLabel, "secp256k1");
  const cardKey = tokenCardKey(token, cardPair); // self-tested: the token signs with the key it reports
  const nodeKey = tokenNodeKey(token, nodePair);
  // The request is built from the token's public key and verified against it (tokenCardCsr): the dev CA certifies
  // that key, as a manufacturer's CA would certify the key of a request it received.
  const csrPem = await tokenCardCsr(token, cardPair, cardKey.cardId);
  const ca = await createDevManufacturerCa();
  const certificatePem = await issueCardCertificate(ca, p256PublicKeyObject(cardKey.publicKey));
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await writePublicFile(join(dir, CARD_CSR_FILE), csrPem);
  await writePublicFile(join(dir, KEY_FILES.cardChain), `${certificatePem.trimEnd()}\n${ca.certificatePem.trimEnd()}\n`);
  await writePublicFile(join(dir, KEY_FILES.caCertificate), ca.certificatePem);
  return {
    keyDir: dir,
    cardId: cardKey.cardId,
    cardPublicKey: cardKey.publicKey,
    nodeAddress: nodeKey.address,
    token: { module: token.modulePath, slotId: token.slotId, cardKeyLabel: cardPair.label, nodeKeyLabel: nodePair.label },
    files: [CARD_CSR_FILE, KEY_FILES.cardChain, KEY_FILES.caCertificate],
    trustedRoot: join(dir, KEY_FILES.caCertificate),
  };
}
