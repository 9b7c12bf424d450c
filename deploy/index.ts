/**
 * Deploys and configures Attested Time on one chain: the oracle (roles, settings, cards, nodes), then next to it
 * and wired to it (each holds the oracle's address, immutably) the scheduler (TimeScheduler), the bridge and the
 * example consumers (TimeLockedVault, AttestedCheckpoint).
 *
 * A library: `deployAttestedTime(hre, options)`, used by the test kit (testing/), the deploy script
 * (scripts/deploy.ts), the local network (scripts/network.ts) and the tests. It deploys the bytecode of
 * abi/index.ts (generated from the artifacts, and checked against them by test/abi.test.ts), not the caller's
 * Hardhat artifacts: in a dApp's project, where the package is installed, our contracts are not compiled. It ships
 * in the package (dist/deploy/), so it imports only abi/ and protocol/.
 */
import type { HardhatRuntimeEnvironment } from "hardhat/types";
// Types only: hre.viem, added by the user's Hardhat viem plugin (hardhat-toolbox-viem loads it); nothing at run time.
import type {} from "@nomicfoundation/hardhat-viem";
import { getAddress, getContract, parseEventLogs, type Account, type Address, type Chain, type Hash, type Hex, type PublicClient, type Transport, type WalletClient } from "viem";
import { attestedCheckpointAbi, attestedCheckpointBytecode, timeBridgeAbi, timeBridgeBytecode, timeLockedVaultAbi, timeLockedVaultBytecode, timeOracleAbi, timeOracleBytecode, timeSchedulerAbi, timeSchedulerBytecode } from "../abi";
import { nodeAddressFromPrivateKey, p256PrivateKeyObject, p256PublicKeyCoordinates, p256PublicKeyToUncompressed } from "../protocol";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS } from "../protocol/devkeys";

/** No expiry: the largest uint64 (validity windows are inclusive, ns). */
export const NO_EXPIRY_NS = (1n << 64n) - 1n;

/** The scheduler's request type lives with the other on-chain structs (protocol/types.ts). */
export type { ScheduledCall } from "../protocol/types";

/** A time card to register: its P-256 public key (uncompressed 0x04‖X‖Y, 65 bytes) and validity window (ns). */
export interface CardRegistration {
  publicKey: Hex;
  validFromNs?: bigint;
  validUntilNs?: bigint;
}

/** An attesting node to register, by address, with its validity window (ns). */
export interface NodeRegistration {
  address: Address;
  validFromNs?: bigint;
  validUntilNs?: bigint;
}

/** Oracle settings to change from the contract's defaults (60 s, 15 s, 1,000 ns, quorum 1). */
export interface OracleSettings {
  maxAttestationAgeNs?: bigint;
  maxFutureDriftNs?: bigint;
  maxAcceptableDriftNs?: bigint;
  /** At most the nodes registered here whose windows are open now: the oracle refuses a higher quorum. */
  nodeQuorum?: bigint;
}

export interface DeployAttestedTimeOptions {
  /** Sends every transaction (default: the first wallet client of the network). */
  deployer?: WalletClient<Transport, Chain, Account>;
  /**
   * Reads and waits for receipts (default: the Hardhat network's). With `deployer`, deploys to another chain, such
   * as a Hardhat node process (scripts/network.ts).
   */
  publicClient?: PublicClient<Transport, Chain>;
  /**
   * Is to hold DEFAULT_ADMIN_ROLE (default: the deployer). When different, the deployer begins the oracle's
   * two-step transfer (`beginDefaultAdminTransfer`): `admin` accepts it with `acceptDefaultAdminTransfer()` once
   * `defaultAdminDelay()` (2 days) has passed, and the deployer's admin role ends then.
   */
  admin?: Address;
  /** Hold REGISTRAR_ROLE at the end (default: [deployer]). */
  registrars?: readonly Address[];
  /** Hold GUARDIAN_ROLE (may only revoke cards and deactivate nodes; default: none). */
  guardians?: readonly Address[];
  cards?: readonly CardRegistration[];
  nodes?: readonly NodeRegistration[];
  settings?: OracleSettings;
  /**
   * "TimeOracleHarness" (test-only, pinnable clock; from the caller's Hardhat artifacts, so only in this
   * repository) for tests; default "TimeOracle" (from abi/index.ts).
   */
  oracleContract?: "TimeOracle" | "TimeOracleHarness";
  /** Deploy the scheduler, TimeScheduler, on the oracle (default true). */
  scheduler?: boolean;
  /** Deploy the bridge (default true). */
  bridge?: boolean;
  /**
   * Deploy the example consumers (default true): TimeLockedVault (the sample: hardware-timestamped networks only,
   * 100 ns) and AttestedCheckpoint (a mesh of software clocks, 10 ms).
   */
  example?: boolean;
  /** Progress lines (default: silent). */
  log?: (message: string) => void;
}

/** What was deployed, as plain data (JSON-serialisable once bigints are strings). */
export interface AttestedTimeDeployment {
  chainId: number;
  deployer: Address;
  oracle: Address;
  oracleContract: "TimeOracle" | "TimeOracleHarness";
  /** TimeScheduler, its own deployment holding the oracle's address (scheduleCall / executeCall go here). */
  scheduler: Address | undefined;
  bridge: Address | undefined;
  vault: Address | undefined;
  checkpoint: Address | undefined;
  /** Card ids (sha256 of the uncompressed key), in registration order. */
  cardIds: Hex[];
  nodes: Address[];
  /** Holds DEFAULT_ADMIN_ROLE now. */
  admin: Address;
  /** The admin the transfer was begun for, and when (unix seconds) it may accept; undefined without a transfer. */
  pendingAdmin: { address: Address; acceptableAfterS: bigint } | undefined;
  registrars: Address[];
  guardians: Address[];
  /** Block of the oracle's deployment (where event scans start). */
  deploymentBlock: bigint;
}

/**
 * Deploys the oracle, registers the cards and nodes, applies the settings and hands the roles over; then
 * (optionally) deploys the scheduler, the bridge and the example vault, each wired to the oracle by its
 * constructor. Every transaction is awaited and checked.
 */
export async function deployAttestedTime(
  hre: Pick<HardhatRuntimeEnvironment, "viem">,
  options: DeployAttestedTimeOptions = {},
): Promise<AttestedTimeDeployment> {
  const log = options.log ?? (() => undefined);
  const publicClient = options.publicClient ?? (await hre.viem.getPublicClient());
  const deployer = options.deployer ?? (await hre.viem.getWalletClients())[0];
  if (deployer === undefined) throw new Error("deployAttestedTime: the network has no accounts");
  const deployerAddress = getAddress(deployer.account.address);
  const client = { public: publicClient, wallet: deployer };
  const sender = { account: deployer.account, chain: deployer.chain };
  const chainId = await publicClient.getChainId();
  const oracleContract = options.oracleContract ?? "TimeOracle";

  async function confirm(hash: Hash, what: string) {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`deployAttestedTime: ${what} reverted (tx ${hash})`);
    return receipt;
  }

  /** Waits for the deployment of shipped bytecode (its constructor's args typed by the ABI); returns the address. */
  async function deployed(name: string, pending: Promise<Hash>): Promise<Address> {
    const hash = await pending;
    const receipt = await confirm(hash, `deploying ${name}`);
    if (receipt.contractAddress == null) throw new Error(`deployAttestedTime: deploying ${name} created no contract (tx ${hash})`);
    return getAddress(receipt.contractAddress);
  }

  // The deployer administers during configuration; the roles are handed over at the end.
  const oracleAddress =
    oracleContract === "TimeOracle"
      ? await deployed("TimeOracle", deployer.deployContract({ abi: timeOracleAbi, bytecode: timeOracleBytecode, args: [deployerAddress], ...sender }))
      : (await hre.viem.deployContract(oracleContract, [deployerAddress], { client })).address;
  const oracle = getContract({ address: oracleAddress, abi: timeOracleAbi, client });
  const deploymentBlock = await publicClient.getBlockNumber();
  log(`${oracleContract} deployed at ${oracle.address}`);
  const registrarRole = await oracle.read.REGISTRAR_ROLE();
  const guardianRole = await oracle.read.GUARDIAN_ROLE();

  const cards = options.cards ?? [];
  const nodes = options.nodes ?? [];
  if (cards.length > 0 || nodes.length > 0) {
    await confirm(await oracle.write.grantRole([registrarRole, deployerAddress]), "grantRole(REGISTRAR_ROLE, deployer)");
  }
  const cardIds: Hex[] = [];
  for (const card of cards) {
    const { x, y } = p256PublicKeyCoordinates(card.publicKey);
    const receipt = await confirm(
      await oracle.write.registerCard([x, y, card.validFromNs ?? 0n, card.validUntilNs ?? NO_EXPIRY_NS]),
      "registerCard",
    );
    const [registered] = parseEventLogs({ abi: timeOracleAbi, logs: receipt.logs, eventName: "CardRegistered" });
    if (registered === undefined) throw new Error(`deployAttestedTime: registerCard emitted no CardRegistered (tx ${receipt.transactionHash})`);
    const cardId = registered.args.cardId;
    cardIds.push(cardId);
    log(`card ${cardId} registered`);
  }
  for (const node of nodes) {
    await confirm(
      await oracle.write.registerNode([getAddress(node.address), node.validFromNs ?? 0n, node.validUntilNs ?? NO_EXPIRY_NS]),
      "registerNode",
    );
    log(`node ${getAddress(node.address)} registered`);
  }

  // Settings after the registrations: setNodeQuorum refuses a quorum above the nodes active now
  // (TimeOracleQuorumAboveActiveNodes), so the nodes must be registered first.
  const settings = options.settings ?? {};
  const setters = [
    ["setMaxAttestationAge", settings.maxAttestationAgeNs],
    ["setMaxFutureDrift", settings.maxFutureDriftNs],
    ["setMaxAcceptableDrift", settings.maxAcceptableDriftNs],
    ["setNodeQuorum", settings.nodeQuorum],
  ] as const;
  for (const [setter, value] of setters) {
    if (value === undefined) continue;
    await confirm(await oracle.write[setter]([value]), `${setter}(${value})`);
    log(`${setter}(${value})`);
  }

  // Roles: grant the final holders, then let the deployer renounce what it should not keep.
  const admin = getAddress(options.admin ?? deployerAddress);
  const registrars = (options.registrars ?? [deployerAddress]).map((address) => getAddress(address));
  const guardians = (options.guardians ?? []).map((address) => getAddress(address));
  for (const registrar of registrars) {
    if (!(await oracle.read.hasRole([registrarRole, registrar]))) {
      await confirm(await oracle.write.grantRole([registrarRole, registrar]), `grantRole(REGISTRAR_ROLE, ${registrar})`);
    }
  }
  for (const guardian of guardians) {
    await confirm(await oracle.write.grantRole([guardianRole, guardian]), `grantRole(GUARDIAN_ROLE, ${guardian})`);
  }
  if (!registrars.includes(deployerAddress) && (await oracle.read.hasRole([registrarRole, deployerAddress]))) {
    await confirm(await oracle.write.renounceRole([registrarRole, deployerAddress]), "renounceRole(REGISTRAR_ROLE)");
  }
  // DEFAULT_ADMIN_ROLE moves in two steps (AccessControlDefaultAdminRules): begun here, accepted by the new admin
  // after the delay. A mistyped address therefore never receives the registry, and the deployer keeps it meanwhile.
  let pendingAdmin: AttestedTimeDeployment["pendingAdmin"];
  if (admin !== deployerAddress) {
    await confirm(await oracle.write.beginDefaultAdminTransfer([admin]), `beginDefaultAdminTransfer(${admin})`);
    const [address, acceptableAfterS] = await oracle.read.pendingDefaultAdmin();
    pendingAdmin = { address: getAddress(address), acceptableAfterS: BigInt(acceptableAfterS) };
    log(`admin transfer to ${admin} begun: it calls acceptDefaultAdminTransfer() after ${new Date(Number(acceptableAfterS) * 1_000).toISOString()}`);
  }

  let scheduler: Address | undefined;
  if (options.scheduler ?? true) {
    scheduler = await deployed("TimeScheduler", deployer.deployContract({ abi: timeSchedulerAbi, bytecode: timeSchedulerBytecode, args: [oracle.address], ...sender }));
    log(`TimeScheduler deployed at ${scheduler}`);
  }
  let bridge: Address | undefined;
  if (options.bridge ?? true) {
    bridge = await deployed("TimeBridge", deployer.deployContract({ abi: timeBridgeAbi, bytecode: timeBridgeBytecode, args: [oracle.address], ...sender }));
    log(`TimeBridge deployed at ${bridge}`);
  }
  let vault: Address | undefined;
  let checkpoint: Address | undefined;
  if (options.example ?? true) {
    vault = await deployed("TimeLockedVault", deployer.deployContract({ abi: timeLockedVaultAbi, bytecode: timeLockedVaultBytecode, args: [oracle.address], ...sender }));
    log(`TimeLockedVault deployed at ${vault}`);
    checkpoint = await deployed("AttestedCheckpoint", deployer.deployContract({ abi: attestedCheckpointAbi, bytecode: attestedCheckpointBytecode, args: [oracle.address], ...sender }));
    log(`AttestedCheckpoint deployed at ${checkpoint}`);
  }

  return {
    chainId,
    deployer: deployerAddress,
    oracle: getAddress(oracle.address),
    oracleContract,
    scheduler: scheduler === undefined ? undefined : getAddress(scheduler),
    bridge: bridge === undefined ? undefined : getAddress(bridge),
    vault: vault === undefined ? undefined : getAddress(vault),
    checkpoint: checkpoint === undefined ? undefined : getAddress(checkpoint),
    cardIds,
    nodes: nodes.map((node) => getAddress(node.address)),
    admin: deployerAddress,
    pendingAdmin,
    registrars,
    guardians,
    deploymentBlock,
  };
}

/** The fixed development card and nodes (protocol/devkeys.ts): public knowledge, local chains only. */
export function devRegistrations(): { cards: CardRegistration[]; nodes: NodeRegistration[] } {
  return {
    cards: [{ publicKey: p256PublicKeyToUncompressed(p256PrivateKeyObject(DEV_CARD_PRIVATE_KEY)) }],
    nodes: DEV_NODE_PRIVATE_KEYS.map((key) => ({ address: nodeAddressFromPrivateKey(key) })),
  };
}
