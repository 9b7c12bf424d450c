/**
 * `npx hardhat run scripts/deploy.ts [--network <name>]` deploys Attested Time to that network with the deploy
 * library (deploy/) and prints the addresses as JSON. What it registers comes from the environment:
 *   ATS_KEY_DIR (+ ATS_KEYSTORE_PASSWORD)   a key directory (protocol/keystore.ts): its card and node
 *   ATS_CARD_PUBLIC_KEYS, ATS_NODE_ADDRESSES comma-separated uncompressed P-256 keys (0x04‖X‖Y) / node addresses
 *   (neither, on a local chain 31337)        the fixed public development keys of protocol/devkeys.ts
 *   ATS_ADMIN, ATS_REGISTRARS, ATS_GUARDIANS who holds the roles at the end (default: the deployer is admin and
 *                                            registrar, no guardian); ATS_ADMIN gets a two-step transfer, which
 *                                            it accepts after 2 days
 * Private keys are never printed; only addresses, card ids and public keys.
 */
import { getAddress, type Hex } from "viem";
import { deployAttestedTime, devRegistrations, type CardRegistration, type DeployAttestedTimeOptions, type NodeRegistration } from "../deploy";
import { loadKeyDir } from "../protocol";

function listFromEnv(name: string): string[] {
  return (process.env[name] ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item.length > 0);
}

const LOCAL_CHAIN_IDS = new Set([31337, 1337]);

async function registrationsFromEnv(chainId: number): Promise<{ cards: CardRegistration[]; nodes: NodeRegistration[] }> {
  const keyDir = process.env.ATS_KEY_DIR;
  if (keyDir !== undefined && keyDir !== "") {
    const password = process.env.ATS_KEYSTORE_PASSWORD;
    const material = await loadKeyDir(keyDir, password === undefined ? {} : { password });
    return { cards: [{ publicKey: material.cardPublicKey }], nodes: [{ address: material.nodeAddress }] };
  }
  const cards = listFromEnv("ATS_CARD_PUBLIC_KEYS").map((publicKey) => ({ publicKey: publicKey as Hex }));
  const nodes = listFromEnv("ATS_NODE_ADDRESSES").map((address) => ({ address: getAddress(address) }));
  if (cards.length > 0 || nodes.length > 0) return { cards, nodes };
  if (!LOCAL_CHAIN_IDS.has(chainId)) {
    throw new Error(
      `chain ${chainId} is not a local chain: set ATS_KEY_DIR or ATS_CARD_PUBLIC_KEYS/ATS_NODE_ADDRESSES ` +
        "(the development keys are public and must not be registered there)",
    );
  }
  return devRegistrations();
}

async function main(): Promise<void> {
  // Loaded here, not at the top, so that importing this module from tests does not re-enter the Hardhat runtime.
  const hre = (await import("hardhat")).default;
  const publicClient = await hre.viem.getPublicClient();
  const chainId = await publicClient.getChainId();
  const { cards, nodes } = await registrationsFromEnv(chainId);
  const admin = process.env.ATS_ADMIN;
  const registrars = listFromEnv("ATS_REGISTRARS");
  const options: DeployAttestedTimeOptions = {
    cards,
    nodes,
    guardians: listFromEnv("ATS_GUARDIANS").map((address) => getAddress(address)),
    log: (message) => console.error(message),
  };
  if (admin !== undefined && admin !== "") options.admin = getAddress(admin);
  if (registrars.length > 0) options.registrars = registrars.map((address) => getAddress(address));
  const deployment = await deployAttestedTime(hre, options);
  console.log(JSON.stringify(deployment, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value), 2));
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
