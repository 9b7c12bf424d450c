/**
 * A SoftHSM2 token in a temporary folder for the system tests (SOFTHSM2_CONF names a config whose
 * directories.tokendir is private: the machine's tokens are never touched), provisioned by the built CLI's
 * `ats-node keys init <dir> --pkcs11`, and a node config that runs on its keys.
 */
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Address, Hex } from "viem";
import { SOFTHSM2_MODULE } from "../scripts/test-system";

export const run = promisify(execFile);
export const ATS_NODE_BIN = join(__dirname, "..", "bin", "ats-node.js");

export interface Provisioned {
  cardId: Hex;
  cardPublicKey: Hex;
  nodeAddress: Address;
  token: { cardKeyLabel: string; nodeKeyLabel: string };
}

export interface ProvisionedToken {
  provisioned: Provisioned;
  /** The node config file: token keys, 127.0.0.1, free ports, the trusted root keys init wrote. */
  configFile: string;
  /** The environment that names the token folder (SOFTHSM2_CONF). */
  env: NodeJS.ProcessEnv;
  softhsmConf: string;
}

/**
 * Initialises a token labelled `tokenLabel` with `userPin` in `dir`, has `keys init --pkcs11` generate the card and
 * node keys in it, and writes the node's config (`extraSettings` on top: a card driver, its bounds).
 */
export async function provisionToken(dir: string, tokenLabel: string, userPin: string, extraSettings: Record<string, unknown> = {}): Promise<ProvisionedToken> {
  const softhsmConf = join(dir, "softhsm2.conf");
  const keyDir = join(dir, "keys");
  const configFile = join(dir, "node.json");
  const env = { ...process.env, SOFTHSM2_CONF: softhsmConf };
  writeFileSync(softhsmConf, `directories.tokendir = ${join(dir, "tokens")}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  mkdirSync(join(dir, "tokens"), { mode: 0o700 });
  await run("softhsm2-util", ["--init-token", "--free", "--label", tokenLabel, "--pin", userPin, "--so-pin", "so-pin-not-used"], { env });
  writeFileSync(join(dir, "pin"), `${userPin}\n`, { mode: 0o600 });
  // The token settings first (what keys init reads), the trusted root once keys init has written it.
  const settings = {
    keyDir,
    dataDir: join(dir, "data"),
    host: "127.0.0.1",
    restPort: 0,
    grpcPort: 0,
    cardKeySource: "pkcs11",
    nodeKeySource: "pkcs11",
    pkcs11Module: SOFTHSM2_MODULE,
    pkcs11TokenLabel: tokenLabel,
    pkcs11PinFile: join(dir, "pin"),
    logLevel: "warn",
    ...extraSettings,
  };
  writeFileSync(configFile, JSON.stringify(settings));
  const { stdout } = await run(process.execPath, [ATS_NODE_BIN, "keys", "init", keyDir, "--pkcs11", "--config", configFile], { env });
  const provisioned = JSON.parse(stdout) as Provisioned;
  writeFileSync(configFile, JSON.stringify({ ...settings, trustedRootsPem: [join(keyDir, "ca.pem")] }));
  return { provisioned, configFile, env, softhsmConf };
}
