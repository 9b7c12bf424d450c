/**
 * The node's keys from where the settings say they are (cardKeySource, nodeKeySource): the key directory
 * (protocol/keystore.ts) or a PKCS#11 token (pkcs11.ts, tokenKeys.ts). The card's certificate chain is always
 * keyDir/card.pem: public data, which a token does not need to hold; its leaf must certify the card key in use.
 */
import { X509Certificate, type KeyObject } from "node:crypto";
import { ValidationError } from "../../protocol/errors";
import { privateKeyFromPem } from "../../protocol/devca";
import { decodeNodeKeystore, KEY_FILES, loadKeyDir, readKeyFile, splitPemCertificates } from "../../protocol/keystore";
import { p256PublicKeyToUncompressed, type NodeKey } from "../../protocol/keys";
import type { Hex } from "../../protocol/types";
import type { NodeConfig } from "../config";
import { readTokenPin, sharedToken, type Pkcs11Token, type Pkcs11TokenSettings } from "./pkcs11";
import { tokenCardKey, tokenNodeKey, type CardKey } from "./tokenKeys";

/** The settings this module reads. */
export type KeySourceSettings = Pick<
  NodeConfig,
  | "keyDir"
  | "keystorePassword"
  | "cardKeySource"
  | "nodeKeySource"
  | "pkcs11Module"
  | "pkcs11SlotId"
  | "pkcs11TokenLabel"
  | "pkcs11CardKeyLabel"
  | "pkcs11NodeKeyLabel"
  | "pkcs11PinEnv"
  | "pkcs11PinFile"
>;

export interface NodeKeys {
  /** A key file's KeyObject, or the token's signer. */
  cardKey: KeyObject | CardKey;
  /** Leaf (the card certificate) first. */
  certificateChainPem: string[];
  nodeKey: NodeKey;
}

/** Where the token is and its PIN, from the settings (the PIN from its file or variable: readTokenPin). */
export function tokenSettingsOf(config: KeySourceSettings, env: NodeJS.ProcessEnv): Pkcs11TokenSettings {
  return {
    modulePath: config.pkcs11Module,
    slotId: config.pkcs11SlotId === -1 ? null : config.pkcs11SlotId,
    tokenLabel: config.pkcs11TokenLabel,
    pin: readTokenPin({ pinFile: config.pkcs11PinFile, pinEnv: config.pkcs11PinEnv, env }),
  };
}

/** The uncompressed P-256 key a PEM certificate certifies. */
function certifiedPublicKey(pem: string): Hex {
  return p256PublicKeyToUncompressed(new X509Certificate(pem).publicKey);
}

/** Loads the card key, its chain and the node key; a token is opened (and shared: pkcs11.ts sharedToken) when used. */
export async function loadNodeKeys(config: KeySourceSettings, env: NodeJS.ProcessEnv = process.env): Promise<NodeKeys> {
  const keystoreOptions = config.keystorePassword === "" ? {} : { password: config.keystorePassword };
  if (config.cardKeySource === "file" && config.nodeKeySource === "file") return loadKeyDir(config.keyDir, keystoreOptions);
  const dir = config.keyDir;
  let token: Pkcs11Token | undefined;
  const openToken = (): Pkcs11Token => (token ??= sharedToken(tokenSettingsOf(config, env)));
  const certificateChainPem = splitPemCertificates((await readKeyFile(dir, KEY_FILES.cardChain, true))!);
  if (certificateChainPem.length === 0) throw new ValidationError(KEY_FILES.cardChain, "holds no certificate", { dir });
  let cardKey: KeyObject | CardKey;
  let cardPublicKey: Hex;
  if (config.cardKeySource === "pkcs11") {
    const tokenKey = openToken();
    cardKey = tokenCardKey(tokenKey, tokenKey.keyPair(config.pkcs11CardKeyLabel, "P-256"));
    cardPublicKey = cardKey.publicKey;
  } else {
    cardKey = privateKeyFromPem((await readKeyFile(dir, KEY_FILES.cardKey, true))!);
    cardPublicKey = p256PublicKeyToUncompressed(cardKey);
  }
  const certified = certifiedPublicKey(certificateChainPem[0]!);
  if (certified !== cardPublicKey) {
    throw new ValidationError(KEY_FILES.cardChain, "does not certify the card key in use (its leaf holds another public key)", {
      dir,
      cardKeySource: config.cardKeySource,
      certifiedPublicKey: certified,
      cardPublicKey,
    });
  }
  let nodeKey: NodeKey;
  if (config.nodeKeySource === "pkcs11") {
    const tokenKey = openToken();
    nodeKey = tokenNodeKey(tokenKey, tokenKey.keyPair(config.pkcs11NodeKeyLabel, "secp256k1"));
  } else {
    nodeKey = decodeNodeKeystore((await readKeyFile(dir, KEY_FILES.nodeKeystore, true))!, keystoreOptions);
  }
  return { cardKey, certificateChainPem, nodeKey };
}
