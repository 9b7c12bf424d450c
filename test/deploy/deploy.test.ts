/**
 * deploy/ (the deploy library): `deployAttestedTime` deploys and configures the oracle, the scheduler, the bridge and the
 * example vault, and hands the roles over; a proof signed with the registered development keys then verifies on-chain.
 */
import hre from "hardhat";
import { expect } from "chai";
import { loadFixture, time } from "@nomicfoundation/hardhat-network-helpers";
import { getAddress, type Address, type Hex } from "viem";
import {
  attest,
  cardIdFromPublicKey,
  DEV_CARD_ACCURACY_NS,
  NS_PER_SECOND,
} from "../../protocol";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS } from "../../protocol/devkeys";
import { deployAttestedTime, devRegistrations } from "../../deploy";
import { expectRevert } from "../contracts/fixtures";
import { timeOracleAbi } from "../../abi";

async function deployFixture() {
  // A deployer other than the default account: every transaction must come from it.
  const [, admin, registrar, guardian, , deployer] = await hre.viem.getWalletClients();
  const registrations = devRegistrations();
  const deployment = await deployAttestedTime(hre, {
    deployer: deployer!,
    admin: admin!.account.address,
    registrars: [registrar!.account.address],
    guardians: [guardian!.account.address],
    ...registrations,
    settings: { maxAttestationAgeNs: 120n * NS_PER_SECOND, nodeQuorum: 2n },
  });
  const oracle = await hre.viem.getContractAt("TimeOracle", deployment.oracle);
  return { deployment, oracle, registrations, deployer: deployer!, admin: admin!, registrar: registrar!, guardian: guardian! };
}

describe("deploy/ deployAttestedTime", () => {
  it("deploys the oracle, then the scheduler, the bridge and the two example consumers, each wired to the oracle", async () => {
    const { deployment, deployer } = await loadFixture(deployFixture);
    const scheduler = await hre.viem.getContractAt("TimeScheduler", deployment.scheduler!);
    const bridge = await hre.viem.getContractAt("TimeBridge", deployment.bridge!);
    const vault = await hre.viem.getContractAt("TimeLockedVault", deployment.vault!);
    const checkpoint = await hre.viem.getContractAt("AttestedCheckpoint", deployment.checkpoint!);
    expect(getAddress((await scheduler.read.timeOracle()) as Address)).to.equal(deployment.oracle);
    expect(new Set([deployment.oracle, deployment.scheduler, deployment.bridge, deployment.vault, deployment.checkpoint]).size).to.equal(5);
    expect(getAddress((await bridge.read.timeOracle()) as Address)).to.equal(deployment.oracle);
    expect(getAddress((await vault.read.timeOracle()) as Address)).to.equal(deployment.oracle);
    expect(getAddress((await checkpoint.read.timeOracle()) as Address)).to.equal(deployment.oracle);
    // The sample vault accepts only hardware-timestamped networks; the checkpoint a software mesh.
    expect(await vault.read.maxAccuracyNs()).to.equal(100);
    expect(await checkpoint.read.maxAccuracyNs()).to.equal(10_000_000);
    expect(deployment.chainId).to.equal(31337);
    expect(deployment.deployer).to.equal(getAddress(deployer.account.address));
    expect(deployment.oracleContract).to.equal("TimeOracle");
  });

  it("registers the cards and nodes and applies the settings", async () => {
    const { deployment, oracle, registrations } = await loadFixture(deployFixture);
    const cardId = cardIdFromPublicKey(registrations.cards[0]!.publicKey);
    expect(deployment.cardIds).to.deep.equal([cardId]);
    expect(((await oracle.read.getCard([cardId])) as { status: number }).status).to.equal(1); // Active
    for (const node of registrations.nodes) {
      expect(((await oracle.read.getNode([node.address])) as { status: number }).status).to.equal(1); // Active
    }
    expect(await oracle.read.maxAttestationAge()).to.equal(120n * NS_PER_SECOND);
    expect(await oracle.read.nodeQuorum()).to.equal(2n);
    expect(await oracle.read.maxFutureDrift()).to.equal(15n * NS_PER_SECOND); // default kept
  });

  it("hands the roles over: registrar and guardian at once, the admin role in two steps after the delay; then the deployer holds none", async () => {
    const { oracle, deployment, deployer, admin, registrar, guardian } = await loadFixture(deployFixture);
    const adminRole = (await oracle.read.DEFAULT_ADMIN_ROLE()) as Hex;
    const registrarRole = (await oracle.read.REGISTRAR_ROLE()) as Hex;
    const guardianRole = (await oracle.read.GUARDIAN_ROLE()) as Hex;
    expect(await oracle.read.hasRole([registrarRole, registrar.account.address])).to.equal(true);
    expect(await oracle.read.hasRole([guardianRole, guardian.account.address])).to.equal(true);
    // Until the new admin accepts, the deployer administers: a mistyped admin address never gets the registry.
    expect(deployment.admin).to.equal(getAddress(deployer.account.address));
    expect(deployment.pendingAdmin?.address).to.equal(getAddress(admin.account.address));
    expect(await oracle.read.hasRole([adminRole, deployer.account.address])).to.equal(true);
    const asAdmin = await hre.viem.getContractAt("TimeOracle", oracle.address, { client: { wallet: admin } });
    const publicClient = await hre.viem.getPublicClient();
    const accept = { address: oracle.address, abi: timeOracleAbi, functionName: "acceptDefaultAdminTransfer", account: admin.account } as const;
    await expectRevert(publicClient.simulateContract(accept), "AccessControlEnforcedDefaultAdminDelay", [Number(deployment.pendingAdmin!.acceptableAfterS)]);
    await time.increaseTo(deployment.pendingAdmin!.acceptableAfterS + 1n);
    await asAdmin.write.acceptDefaultAdminTransfer();
    expect(await oracle.read.hasRole([adminRole, admin.account.address])).to.equal(true);
    for (const role of [adminRole, registrarRole, guardianRole]) {
      expect(await oracle.read.hasRole([role, deployer.account.address])).to.equal(false);
    }
  });

  it("refuses to grant or renounce the admin role in one step (AccessControlDefaultAdminRules)", async () => {
    const { oracle, deployment, deployer, guardian } = await loadFixture(deployFixture);
    const adminRole = (await oracle.read.DEFAULT_ADMIN_ROLE()) as Hex;
    const publicClient = await hre.viem.getPublicClient();
    const asDeployer = { address: oracle.address, abi: timeOracleAbi, account: deployer.account } as const;
    await expectRevert(publicClient.simulateContract({ ...asDeployer, functionName: "grantRole", args: [adminRole, guardian.account.address] }), "AccessControlEnforcedDefaultAdminRules", []);
    await expectRevert(publicClient.simulateContract({ ...asDeployer, functionName: "renounceRole", args: [adminRole, deployer.account.address] }), "AccessControlEnforcedDefaultAdminDelay", [Number(deployment.pendingAdmin!.acceptableAfterS)]);
    expect(await oracle.read.defaultAdminDelay()).to.equal(2 * 86_400);
  });

  it("the deployed oracle accepts a proof signed by the registered development card and two nodes", async () => {
    const { oracle, deployment } = await loadFixture(deployFixture);
    const publicClient = await hre.viem.getPublicClient();
    const block = await publicClient.getBlock();
    const nanoMoment = block.timestamp * NS_PER_SECOND - 2n * NS_PER_SECOND;
    const proof = attest({
      card: DEV_CARD_PRIVATE_KEY,
      nodes: [DEV_NODE_PRIVATE_KEYS[0], DEV_NODE_PRIVATE_KEYS[1]],
      nanoMoment,
      accuracy: DEV_CARD_ACCURACY_NS,
      nodeTimestampNs: nanoMoment + 11n,
    });
    expect(await oracle.read.verifyTimeProof([proof])).to.equal(true);
    // Quorum 2: one node is not enough.
    const single = attest({
      card: DEV_CARD_PRIVATE_KEY,
      nodes: [DEV_NODE_PRIVATE_KEYS[0]],
      nanoMoment,
      accuracy: DEV_CARD_ACCURACY_NS,
      nodeTimestampNs: nanoMoment + 11n,
    });
    expect(await oracle.read.verifyTimeProof([single])).to.equal(false);
    expect(deployment.nodes).to.have.length(3);
  });

  it("can skip the scheduler, the bridge and the example", async () => {
    const deployment = await deployAttestedTime(hre, { scheduler: false, bridge: false, example: false });
    expect(deployment.scheduler).to.equal(undefined);
    expect(deployment.bridge).to.equal(undefined);
    expect(deployment.vault).to.equal(undefined);
    expect(deployment.registrars).to.deep.equal([deployment.deployer]);
    expect(deployment.admin).to.equal(deployment.deployer);
  });
});
