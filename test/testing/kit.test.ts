/**
 * testing/index.ts (createTimeTestKit) as a dApp test would use it: inside loadFixture, proofs for any moment,
 * time travel, every usual bad proof refused by the oracle, TimeConsumers (the two examples) tested with it, what a
 * real network's proof gets from each, its default accuracy pinned to the mesh's measured one, and a refusal to
 * run anywhere but a local chain.
 */
import hre from "hardhat";
import { expect } from "chai";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseEther } from "viem";
import type { HardhatRuntimeEnvironment } from "hardhat/types";
import { LOCAL_MESH_ACCURACY_NS, NS_PER_SECOND } from "../../protocol/constants";
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

  it("signs, by default, the accuracy the local mesh signs, and a consumer built for a software mesh accepts it", async () => {
    const { kit } = await loadFixture(kitFixture);
    expect((await kit.proofNow()).accuracy).to.equal(LOCAL_MESH_ACCURACY_NS);
    const checkpoint = await hre.viem.deployContract("AttestedCheckpoint", [kit.oracle]);
    await checkpoint.write.checkpoint([`0x${"ab".repeat(32)}`, await kit.proofNow()]);
    const [event] = await checkpoint.getEvents.Checkpointed();
    expect((event!.args as { accuracy?: number }).accuracy).to.equal(LOCAL_MESH_ACCURACY_NS);
  });

  it("does not hide reality: the sample vault (hardware tier) refuses the kit's default proof with `Insufficient accuracy`", async () => {
    const { kit } = await loadFixture(kitFixture);
    const vault = await hre.viem.deployContract("TimeLockedVault", [kit.oracle]);
    await vault.write.deposit([0n], { value: parseEther("1") });
    const refused = await vault.simulate.withdraw([0n, await kit.proofNow()]).catch((error: Error) => error);
    expect(String((refused as Error).message)).to.include("Insufficient accuracy");
  });

  it("tests a TimeConsumer end to end: the vault refuses a withdrawal before its moment and releases it after (100 ns proofs)", async () => {
    const { kit } = await loadFixture(kitFixture);
    const vault = await hre.viem.deployContract("TimeLockedVault", [kit.oracle]);
    const unlockAt = (await kit.chainNowNs()) + 86_400n * NS_PER_SECOND;
    await vault.write.deposit([unlockAt], { value: parseEther("1") });
    const early = await vault.write.withdraw([0n, await kit.proofNow({ accuracyNs: 100 })]).catch((error: Error) => error);
    expect(String((early as Error).message)).to.include("TimeConsumerTooEarly");
    await kit.increaseTo(unlockAt);
    await vault.write.withdraw([0n, kit.proofAt(unlockAt, { accuracyNs: 100 })]);
    expect(((await vault.read.getLock([0n])) as { amount: bigint }).amount).to.equal(0n);
  });

  it("explainForConsumer says what a real network's proof gets: accepted, or refused with the reason and the tier needed", async () => {
    const { kit } = await loadFixture(kitFixture);
    const vault = await hre.viem.deployContract("TimeLockedVault", [kit.oracle]);
    const checkpoint = await hre.viem.deployContract("AttestedCheckpoint", [kit.oracle]);
    const refused = await kit.explainForConsumer(vault.address);
    expect(refused).to.include({ accepted: false, refusal: "Insufficient accuracy", maxAccuracyNs: 100, accuracyNs: LOCAL_MESH_ACCURACY_NS });
    expect(refused.tierNeeded?.name).to.equal("HARDWARE_TIMESTAMPED_NS");
    expect(refused.explanation).to.equal(
      `refused with "Insufficient accuracy": the proof's signed bound is ${LOCAL_MESH_ACCURACY_NS.toLocaleString("en-US")} ns and the contract accepts at most 100 ns; this contract needs a hardware-timestamped network (PTP-capable NICs, a GPS/PPS-disciplined time card), tier AccuracyTiers.HARDWARE_TIMESTAMPED_NS (100 ns)`,
    );
    const accepted = await kit.explainForConsumer(checkpoint.address);
    expect(accepted).to.include({ accepted: true, refusal: null, maxAccuracyNs: 10_000_000 });
    expect(accepted.tierNeeded?.name).to.equal("SOFTWARE_MESH_NS");
    const expired = await kit.explainForConsumer(checkpoint.address, await kit.invalidProof("expired"));
    expect(expired).to.include({ accepted: false, refusal: "Invalid time proof" });
    expect(expired.oracle.reason).to.equal("too-old");
  });

  it("pins its default accuracy to the mesh's signed p99 that bench:mesh reports in docs/benchmarks.md (rounded up to 10 µs)", () => {
    // The signed-accuracy row of the mesh table in docs/benchmarks.md.
    const benchmarks = readFileSync(join(__dirname, "..", "..", "docs", "benchmarks.md"), "utf8");
    const row = /\| signed accuracy \(§7\.2\) of those proofs \| p50 [^|]*, p99 ([\d.]+)(?:–([\d.]+))? µs/.exec(benchmarks);
    expect(row, "the bench:mesh signed-accuracy row of docs/benchmarks.md").to.not.equal(null);
    const p99Us = Number(row![2] ?? row![1]);
    expect(LOCAL_MESH_ACCURACY_NS).to.equal(Math.ceil(p99Us / 10) * 10 * 1_000);
  });

  it("refuses to run on anything but a local Hardhat chain", async () => {
    const mainnet = { network: { name: "mainnet" }, viem: { getPublicClient: async () => ({ getChainId: async () => 1 }) } } as unknown as HardhatRuntimeEnvironment;
    const error = await createTimeTestKit(mainnet).catch((e: unknown) => e);
    expect((error as Error).message).to.equal("createTimeTestKit runs on a local Hardhat chain only (chain id 31337); this is mainnet, chain id 1");
  });
});
