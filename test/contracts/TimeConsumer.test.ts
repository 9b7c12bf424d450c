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
/** Action keys: the consumer's choice (an account, a lock: one only the party it protects can advance). */
const KEY = `0x${"11".repeat(32)}` as const;
const OTHER_KEY = `0x${"22".repeat(32)}` as const;
/** A deadline the chain clock (pinned to FIXTURE_NOW_NS, like the oracle's) has not reached. */
const LATER = FIXTURE_NOW_NS + 5n * NS_PER_SECOND;

async function deployConsumerFixture() {
  const base = await deployOracleFixture();
  // The hardware-timestamped tier (100 ns), so that the bound sits inside the fixture oracle's 1,000 ns.
  const consumer = await hre.viem.deployContract("ConsumerHarness", [base.oracle.address, 100]);
  const strict = await hre.viem.deployContract("ConsumerHarnessStrict", [base.oracle.address]);
  // The guards' chain clock, pinned where the oracle harness pins its own.
  await consumer.write.setChainNowNs([FIXTURE_NOW_NS]);
  await strict.write.setChainNowNs([FIXTURE_NOW_NS]);
  return { ...base, consumer, strict };
}

describe("TimeConsumer", () => {
  it("acts on a valid proof, records its moment and emits TimeConsumed", async () => {
    const { consumer, proofAt, publicClient, oracle } = await loadFixture(deployConsumerFixture);
    expect(((await consumer.read.timeOracle()) as Address).toLowerCase()).to.equal(oracle.address.toLowerCase());
    const hash = await consumer.write.consume([proofAt(T1), KEY]);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    expect(eventOf(consumer.abi, receipt, "TimeConsumed")).to.deep.equal({ actionKey: KEY, nanoMoment: T1, accuracy: 50 });
    expect(await consumer.read.lastConsumedNanoMoment([KEY])).to.equal(T1);
    expect(await consumer.read.actions()).to.equal(1n);
  });

  it("reverts with exactly `Invalid time proof` when the oracle rejects the proof", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    const forged = { ...proofAt(T1), nanoMoment: T1 + 1n }; // signatures no longer match the moment
    await expectRevert(consumer.simulate.consume([forged, KEY]), "Error", ["Invalid time proof"]);
    const stale = proofAt(FIXTURE_NOW_NS - 61n * NS_PER_SECOND);
    await expectRevert(consumer.simulate.consume([stale, KEY]), "Error", ["Invalid time proof"]);
    // Accuracy above the oracle's own bound (1,000 ns) fails verification first.
    await expectRevert(consumer.simulate.consume([proofAt(T1, { accuracy: 1_001 }), KEY]), "Error", [
      "Invalid time proof",
    ]);
    await expectRevert(consumer.read.verifiedTime([forged]), "Error", ["Invalid time proof"]);
  });

  it("reverts with exactly `Insufficient accuracy` when accuracy > the constructor's bound (100 ns here), and accepts 100 ns", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    expect(await consumer.read.maxAccuracyNs()).to.equal(100);
    await expectRevert(consumer.simulate.consume([proofAt(T1, { accuracy: 101 }), KEY]), "Error", [
      "Insufficient accuracy",
    ]);
    await expectRevert(consumer.read.verifiedTime([proofAt(T1, { accuracy: 101 })]), "Error", [
      "Insufficient accuracy",
    ]);
    await consumer.write.consume([proofAt(T1, { accuracy: 100 }), KEY]);
    expect(await consumer.read.lastConsumedNanoMoment([KEY])).to.equal(T1);
  });

  it("lets a variant demand a tighter accuracy by overriding _maxAccuracyNs", async () => {
    const { strict, proofAt } = await loadFixture(deployConsumerFixture);
    expect(await strict.read.maxAccuracyNs()).to.equal(10);
    await expectRevert(strict.simulate.consume([proofAt(T1, { accuracy: 11 }), KEY]), "Error", [
      "Insufficient accuracy",
    ]);
    await strict.write.consume([proofAt(T1, { accuracy: 10 }), KEY]);
    expect(await strict.read.lastConsumedNanoMoment([KEY])).to.equal(T1);
  });

  it("verifiedTime is a view returning the attested moment, without consuming", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    expect(await consumer.read.verifiedTime([proofAt(T1)])).to.equal(T1);
    expect(await consumer.read.lastConsumedNanoMoment([KEY])).to.equal(0n);
  });

  it("refuses a replay of the same proof and of an older, still fresh one, for the same action key", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    await consumer.write.consume([proofAt(T1), KEY]);
    await expectRevert(consumer.simulate.consume([proofAt(T1), KEY]), "TimeConsumerProofNotNewer", [KEY, T1, T1]);
    await expectRevert(consumer.simulate.consume([proofAt(T0), KEY]), "TimeConsumerProofNotNewer", [KEY, T0, T1]);
    // The guards consume too: an older proof cannot pass onlyBefore after a newer one was used.
    await expectRevert(consumer.simulate.actBefore([proofAt(T0), KEY, LATER]), "TimeConsumerProofNotNewer", [KEY, T0, T1]);
    await consumer.write.consume([proofAt(T2), KEY]);
    expect(await consumer.read.lastConsumedNanoMoment([KEY])).to.equal(T2);
  });

  it("one user cannot block another: a newer public proof consumed for one key leaves every other key open", async () => {
    const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
    // The front-runner takes a newer proof for its own key first …
    await consumer.write.consume([proofAt(T2), OTHER_KEY]);
    // … and the victim still acts with its (older, still fresh) proof for its own key.
    await consumer.write.consume([proofAt(T1), KEY]);
    expect(await consumer.read.lastConsumedNanoMoment([KEY])).to.equal(T1);
    expect(await consumer.read.lastConsumedNanoMoment([OTHER_KEY])).to.equal(T2);
    expect(await consumer.read.actions()).to.equal(2n);
  });

  describe("time windows (half-open: after t means >= t, before t means < t)", () => {
    it("onlyAfter refuses a moment before notBefore and accepts notBefore itself", async () => {
      const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
      await expectRevert(consumer.simulate.actAfter([proofAt(T1), KEY, T2]), "TimeConsumerTooEarly", [T1, T2]);
      await consumer.write.actAfter([proofAt(T2), KEY, T2]);
      expect(await consumer.read.actions()).to.equal(1n);
    });

    it("onlyBefore refuses the deadline itself and accepts the moment before it", async () => {
      const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
      const deadline = FIXTURE_NOW_NS + 2n * NS_PER_SECOND; // ahead of the chain clock
      await expectRevert(consumer.simulate.actBefore([proofAt(deadline), KEY, deadline]), "TimeConsumerTooLate", [deadline, deadline]);
      await consumer.write.actBefore([proofAt(deadline - 1n), KEY, deadline]);
      expect(await consumer.read.actions()).to.equal(1n);
    });

    it("onlyBefore also bounds the chain clock: a still-fresh proof of a moment before the deadline cannot act after it", async () => {
      const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
      const deadline = T1 + 1n; // 10 s ago by the chain clock; the proof of T1 is still fresh (60 s)
      await expectRevert(consumer.simulate.actBefore([proofAt(T1), KEY, deadline]), "TimeConsumerChainPastDeadline", [FIXTURE_NOW_NS, deadline]);
      await expectRevert(consumer.simulate.actWithin([proofAt(T1), KEY, T0, deadline]), "TimeConsumerChainPastDeadline", [FIXTURE_NOW_NS, deadline]);
      // The chain clock exactly at the deadline is too late as well (the window is half-open).
      await expectRevert(consumer.simulate.actBefore([proofAt(T1), KEY, FIXTURE_NOW_NS]), "TimeConsumerChainPastDeadline", [FIXTURE_NOW_NS, FIXTURE_NOW_NS]);
      await consumer.write.actBefore([proofAt(T1), KEY, FIXTURE_NOW_NS + 1n]);
      expect(await consumer.read.actions()).to.equal(1n);
    });

    it("onlyWithin accepts [notBefore, deadline) only", async () => {
      const { consumer, proofAt } = await loadFixture(deployConsumerFixture);
      await expectRevert(consumer.simulate.actWithin([proofAt(T0), KEY, T1, LATER]), "TimeConsumerTooEarly", [T0, T1]);
      await expectRevert(consumer.simulate.actWithin([proofAt(T2), KEY, T1, T2]), "TimeConsumerTooLate", [T2, T2]);
      await consumer.write.actWithin([proofAt(T1), KEY, T1, LATER]);
      expect(await consumer.read.actions()).to.equal(1n);
    });
  });

  it("refuses the zero address as oracle", async () => {
    await expectRevert(
      hre.viem.deployContract("ConsumerHarness", ["0x0000000000000000000000000000000000000000", 100]),
      "TimeConsumerZeroOracle",
      [],
    );
  });

  it("takes its accuracy bound from the constructor, with no default, and refuses a bound of 0 ns", async () => {
    const { oracle, proofAt } = await loadFixture(deployConsumerFixture);
    const loose = await hre.viem.deployContract("ConsumerHarness", [oracle.address, 1_000]);
    await loose.write.setChainNowNs([FIXTURE_NOW_NS]);
    expect(await loose.read.maxAccuracyNs()).to.equal(1_000);
    await loose.write.consume([proofAt(T1, { accuracy: 1_000 }), KEY]);
    expect(await loose.read.lastConsumedNanoMoment([KEY])).to.equal(T1);
    await expectRevert(hre.viem.deployContract("ConsumerHarness", [oracle.address, 0]), "TimeConsumerZeroMaxAccuracy", []);
  });
});
