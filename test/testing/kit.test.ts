/**
 * testing/index.ts (createTimeTestKit) as a dApp test would use it: inside loadFixture, proofs for any moment,
 * time travel, every usual bad proof refused by the oracle, a TimeConsumer (the example vault) tested with it, and
 * a refusal to run anywhere but a local chain.
 */
import hre from "hardhat";
import { expect } from "chai";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { parseEther } from "viem";
import type { HardhatRuntimeEnvironment } from "hardhat/types";
import { NS_PER_SECOND } from "../../protocol/constants";
import { createTimeTestKit, INVALID_PROOF_KINDS } from "../../testing";

async function kitFixture() {
  const kit = await createTimeTestKit(hre, { nodeQuorum: 2 });
  const oracle = await hre.viem.getContractAt("TimeOracle", kit.oracle);
  return { kit, oracle };
}

describe("testing: createTimeTestKit", () => {
  it("deploys an oracle that accepts the kit's proofs of the chain's clock and of moments made fresh by increaseTo", async () => {
    const { kit, oracle } = await loadFixture(kitFixture);
    expect(await oracle.read.verifyTimeProof([await kit.proofNow()])).to.equal(true);
    expect(await oracle.read.verifyTimeProof([kit.proofAt((await kit.chainNowNs()) - 5n * NS_PER_SECOND)])).to.equal(true);
    const later = (await kit.chainNowNs()) + 3_600n * NS_PER_SECOND + 123n;
    expect(await oracle.read.verifyTimeProof([kit.proofAt(later)])).to.equal(false); // in the future for now
    await kit.increaseTo(later);
    expect(await oracle.read.verifyTimeProof([kit.proofAt(later)])).to.equal(true);
    expect(await oracle.read.verifyTimeProof([kit.proofAt(later, { nodes: 3, accuracyNs: 80 })])).to.equal(true);
  });

  it("gives every usual bad proof, and the oracle refuses each", async () => {
    const { kit, oracle } = await loadFixture(kitFixture);
    for (const kind of INVALID_PROOF_KINDS) {
      expect(await oracle.read.verifyTimeProof([await kit.invalidProof(kind)]), kind).to.equal(false);
    }
  });

  it("tests a TimeConsumer end to end: the vault refuses a withdrawal before its moment and releases it after", async () => {
    const { kit } = await loadFixture(kitFixture);
    const vault = await hre.viem.deployContract("TimeLockedVault", [kit.oracle]);
    const unlockAt = (await kit.chainNowNs()) + 86_400n * NS_PER_SECOND;
    await vault.write.deposit([unlockAt], { value: parseEther("1") });
    const early = await vault.write.withdraw([0n, await kit.proofNow()]).catch((error: Error) => error);
    expect(String((early as Error).message)).to.include("TimeConsumerTooEarly");
    await kit.increaseTo(unlockAt);
    await vault.write.withdraw([0n, kit.proofAt(unlockAt)]);
    expect(((await vault.read.getLock([0n])) as { amount: bigint }).amount).to.equal(0n);
  });

  it("refuses to run on anything but a local Hardhat chain", async () => {
    const mainnet = { network: { name: "mainnet" }, viem: { getPublicClient: async () => ({ getChainId: async () => 1 }) } } as unknown as HardhatRuntimeEnvironment;
    const error = await createTimeTestKit(mainnet).catch((e: unknown) => e);
    expect((error as Error).message).to.equal("createTimeTestKit runs on a local Hardhat chain only (chain id 31337); this is mainnet, chain id 1");
  });
});
