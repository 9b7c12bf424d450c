/**
 * TimeConsumer through ConsumerHarness (every guard behind an external function), against the real oracle with
 * the dev card and node (fixtures.ts).
 */
import hre from "hardhat";
import { expect } from "chai";
import type { Address } from "viem";
import { NS_PER_SECOND } from "../../protocol";
import { eventOf } from "./apps-helpers";
import { deployOracleFixture, expectRevert, FIXTURE_NOW_NS, loadFixture } from "./fixtures";

const T0 = FIXTURE_NOW_NS - 10n * NS_PER_SECOND; // fresh: the default maxAttestationAge is 60 s
const T1 = T0 + 1n;
const T2 = T0 + 2n;

async function deployConsumerFixture() {
  const base = await deployOracleFixture();
  const consumer = await hre.viem.deployContract("ConsumerHarness", [base.oracle.address]);
  const strict = await hre.viem.deployContract("ConsumerHarnessStrict", [base.oracle.address]);
  return { ...base, consumer, strict };
}

describe("TimeConsumer", () => {
  it("acts on a valid proof, records its moment and emits TimeConsumed", async () => {
    const { consumer, proofAt, publicClient, oracle } = await loadFixture(deployConsumerFixture);
    expect(((await consumer.read.timeOracle()) as Address).toLowerCase()).to.equal(oracle.address.toLowerCase());
    const hash = await consumer.write.consume([proofAt(T1)]);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    expect(eventOf(consumer.abi, receipt, "TimeConsumed")).to.deep.equal({ nanoMoment: T1, accuracy: 50 });
    expect(await consumer.read.lastConsumedNanoMoment()).to.equal(T1);
    expect(await consumer.read.actions()).to.equal(1n);
  });

  it("reverts with exactly `Invalid time proof` when the oracle rejects the proof", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    const forged = { ...proofAt(T1), nanoMoment: T1 + 1n }; // signatures no longer match the moment
    await expectRevert(consumer.simulate.consume([forged]), "Error", ["Invalid time proof"]);
    const stale = proofAt(FIXTURE_NOW_NS - 61n * NS_PER_SECOND);
    await expectRevert(consumer.simulate.consume([stale]), "Error", ["Invalid time proof"]);
    // Accuracy above the oracle's own bound (1,000 ns) fails verification first.
    await expectRevert(consumer.simulate.consume([proofAt(T1, { accuracy: 1_001 })]), "Error", [
      "Invalid time proof",
    ]);
    await expectRevert(consumer.read.verifiedTime([forged]), "Error", ["Invalid time proof"]);
  });

  it("reverts with exactly `Insufficient accuracy` when accuracy > 100 ns, and accepts 100 ns", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    expect(await consumer.read.maxAccuracyNs()).to.equal(100);
    await expectRevert(consumer.simulate.consume([proofAt(T1, { accuracy: 101 })]), "Error", [
      "Insufficient accuracy",
    ]);
    await expectRevert(consumer.read.verifiedTime([proofAt(T1, { accuracy: 101 })]), "Error", [
      "Insufficient accuracy",
    ]);
    await consumer.write.consume([proofAt(T1, { accuracy: 100 })]);
    expect(await consumer.read.lastConsumedNanoMoment()).to.equal(T1);
  });

  it("lets a variant demand a tighter accuracy by overriding _maxAccuracyNs", async () => {
    const { strict, proofAt } = await loadFixture(deployConsumerFixture);
    expect(await strict.read.maxAccuracyNs()).to.equal(10);
    await expectRevert(strict.simulate.consume([proofAt(T1, { accuracy: 11 })]), "Error", [
      "Insufficient accuracy",
    ]);
    await strict.write.consume([proofAt(T1, { accuracy: 10 })]);
    expect(await strict.read.lastConsumedNanoMoment()).to.equal(T1);
  });

  it("verifiedTime is a view returning the attested moment, without consuming", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    expect(await consumer.read.verifiedTime([proofAt(T1)])).to.equal(T1);
    expect(await consumer.read.lastConsumedNanoMoment()).to.equal(0n);
  });

  it("refuses a replay of the same proof and of an older, still fresh one", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    await consumer.write.consume([proofAt(T1)]);
    await expectRevert(consumer.simulate.consume([proofAt(T1)]), "TimeConsumerProofNotNewer", [T1, T1]);
    await expectRevert(consumer.simulate.consume([proofAt(T0)]), "TimeConsumerProofNotNewer", [T0, T1]);
    // The guards consume too: an older proof cannot pass onlyBefore after a newer one was used.
    await expectRevert(consumer.simulate.actBefore([proofAt(T0), T2]), "TimeConsumerProofNotNewer", [T0, T1]);
    await consumer.write.consume([proofAt(T2)]);
    expect(await consumer.read.lastConsumedNanoMoment()).to.equal(T2);
  });

  describe("time windows (half-open: after t means >= t, before t means < t)", () => {
    it("onlyAfter refuses a moment before notBefore and accepts notBefore itself", async () => {
      const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
      await expectRevert(consumer.simulate.actAfter([proofAt(T1), T2]), "TimeConsumerTooEarly", [T1, T2]);
      await consumer.write.actAfter([proofAt(T2), T2]);
      expect(await consumer.read.actions()).to.equal(1n);
    });

    it("onlyBefore refuses the deadline itself and accepts the moment before it", async () => {
      const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
      await expectRevert(consumer.simulate.actBefore([proofAt(T2), T2]), "TimeConsumerTooLate", [T2, T2]);
      await consumer.write.actBefore([proofAt(T1), T2]);
      expect(await consumer.read.actions()).to.equal(1n);
    });

    it("onlyWithin accepts [notBefore, deadline) only", async () => {
      const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
      await expectRevert(consumer.simulate.actWithin([proofAt(T0), T1, T2]), "TimeConsumerTooEarly", [T0, T1]);
      await expectRevert(consumer.simulate.actWithin([proofAt(T2), T1, T2]), "TimeConsumerTooLate", [T2, T2]);
      await consumer.write.actWithin([proofAt(T1), T1, T2]);
      expect(await consumer.read.actions()).to.equal(1n);
    });
  });

  it("refuses the zero address as oracle", async () => {
    await expectRevert(
      hre.viem.deployContract("ConsumerHarness", ["0x0000000000000000000000000000000000000000"]),
      "TimeConsumerZeroOracle",
      [],
    );
  });
});
