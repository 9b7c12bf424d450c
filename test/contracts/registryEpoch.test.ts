/**
 * Watermarks do not outlive a compromised key (issue: "watermarks outlive revocation"). A compromised card with
 * a node quorum gets a proof dated `maxFutureDrift` ahead accepted; a consumer's per-key watermark and the
 * bridge's latest time then stand ahead of real time. Revoking the card starts a new registry epoch (the chain
 * clock of the revocation); both clamp what was set before it to the epoch, so honest proofs made after the
 * revocation pass at once, while a proof consumed before it still cannot be replayed.
 */
import hre from "hardhat";
import { expect } from "chai";
import { parseEventLogs, type Abi, type Hex } from "viem";
import { createDevIdentity, crossChainTimeForProof, NS_PER_SECOND, p256PublicKeyCoordinates } from "../../protocol";
import { deployOracleFixture, expectRevert, FIXTURE_NOW_NS, FIXTURE_NOW_SECONDS, FOREVER_NS, loadFixture, testScalar } from "./fixtures";

const KEY = `0x${"11".repeat(32)}` as const;
const OTHER_KEY = `0x${"22".repeat(32)}` as const;
/** Within the default maxFutureDrift (15 s) of the pinned chain clock. */
const AHEAD_NS = FIXTURE_NOW_NS + 10n * NS_PER_SECOND;
const ZERO_ID = `0x${"00".repeat(32)}` as Hex;
/** The epoch a removal at the pinned chain clock starts: the last ns of that second. */
const SECOND_END_NS = FIXTURE_NOW_NS + NS_PER_SECOND - 1n;

async function deployEpochFixture() {
  const base = await deployOracleFixture();
  const compromised = await createDevIdentity({ cardPrivateKey: testScalar("compromised card") });
  const { x, y } = p256PublicKeyCoordinates(compromised.cardPublicKey);
  await base.asRegistrar.write.registerCard([x, y, 0n, FOREVER_NS]);
  const consumer = await hre.viem.deployContract("ConsumerHarness", [base.oracle.address]);
  await consumer.write.setChainNowNs([FIXTURE_NOW_NS]);
  const bridge = await hre.viem.deployContract("TimeBridge", [base.oracle.address]);
  const chainId = BigInt(await base.publicClient.getChainId());

  /** Moves the oracle's and the consumer's clocks to FIXTURE_NOW + `seconds`. */
  async function advanceSeconds(seconds: bigint): Promise<void> {
    await base.oracle.write.setNow([FIXTURE_NOW_SECONDS + seconds]);
    await consumer.write.setChainNowNs([FIXTURE_NOW_NS + seconds * NS_PER_SECOND]);
  }

  /** Revokes the compromised card as the guardian; returns the epoch the RegistryEpochStarted event reports. */
  async function revokeCompromised(): Promise<bigint> {
    const hash = await base.asGuardian.write.revokeCard([compromised.cardId]);
    const receipt = await base.publicClient.waitForTransactionReceipt({ hash });
    const [started] = parseEventLogs({ abi: base.oracle.abi as Abi, logs: receipt.logs, eventName: "RegistryEpochStarted" });
    return (started as unknown as { args: { epoch: bigint } }).args.epoch;
  }

  const aheadProof = base.proofAt(AHEAD_NS, { card: compromised.cardKey });
  return { ...base, compromised, consumer, bridge, chainId, aheadProof, advanceSeconds, revokeCompromised };
}

describe("the registry epoch: watermarks set before a key lost trust are clamped to it", () => {
  it("starts at 0 and moves to the end of the chain clock's second of each revocation, deactivation or narrowed window, strictly increasing", async () => {
    const f = await loadFixture(deployEpochFixture);
    expect(await f.oracle.read.registryEpoch()).to.equal(0n);
    // Registering a new key, or loosening a setting, takes trust from nobody.
    await f.asRegistrar.write.registerNode([f.strangerNode.address, 0n, FOREVER_NS]);
    await f.oracle.write.setMaxAttestationAge([120n * NS_PER_SECOND]);
    expect(await f.oracle.read.registryEpoch()).to.equal(0n);
    expect(await f.revokeCompromised()).to.equal(SECOND_END_NS);
    expect(await f.oracle.read.registryEpoch()).to.equal(SECOND_END_NS);
    // Same chain clock (pinned): the next removal is still a new epoch.
    await f.asGuardian.write.deactivateNode([f.strangerNode.address]);
    expect(await f.oracle.read.registryEpoch()).to.equal(SECOND_END_NS + 1n);
    await f.advanceSeconds(3n);
    // A narrowed window takes trust away; widening it again, or re-registering the same window, takes none.
    await f.asRegistrar.write.registerNode([f.nodeKeys[1]!.address, 0n, FOREVER_NS - 1n]);
    expect(await f.oracle.read.registryEpoch()).to.equal(SECOND_END_NS + 3n * NS_PER_SECOND);
    await f.advanceSeconds(5n);
    await f.asRegistrar.write.registerNode([f.nodeKeys[1]!.address, 0n, FOREVER_NS]);
    await f.asRegistrar.write.registerCard([f.cardKey.x, f.cardKey.y, 0n, FOREVER_NS]);
    expect(await f.oracle.read.registryEpoch()).to.equal(SECOND_END_NS + 3n * NS_PER_SECOND);
    // Verification still reads the snapshot it shares a slot with.
    expect(await f.oracle.read.verifyTimeProof([f.proofAt(FIXTURE_NOW_NS + NS_PER_SECOND)])).to.equal(true);
  });

  it("a consumer's key, locked ahead by a compromised card, takes honest proofs right after the revocation", async () => {
    const f = await loadFixture(deployEpochFixture);
    const honestBefore = f.proofAt(FIXTURE_NOW_NS - 5n * NS_PER_SECOND);
    await f.consumer.write.consume([honestBefore, OTHER_KEY]);
    await f.consumer.write.consume([f.aheadProof, KEY]);
    expect(await f.consumer.read.lastConsumedNanoMoment([KEY])).to.equal(AHEAD_NS);
    const honestNow = f.proofAt(FIXTURE_NOW_NS - NS_PER_SECOND);
    await expectRevert(f.consumer.simulate.consume([honestNow, KEY]), "TimeConsumerProofNotNewer", [KEY, honestNow.nanoMoment, AHEAD_NS]);

    const epoch = await f.revokeCompromised();
    expect(await f.consumer.read.lastConsumedNanoMoment([KEY])).to.equal(epoch);
    // A proof consumed before the revocation, at or before its chain clock, still cannot be replayed.
    expect(await f.consumer.read.lastConsumedNanoMoment([OTHER_KEY])).to.equal(honestBefore.nanoMoment);
    await expectRevert(f.consumer.simulate.consume([honestBefore, OTHER_KEY]), "TimeConsumerProofNotNewer", [OTHER_KEY, honestBefore.nanoMoment, honestBefore.nanoMoment]);
    // Nor can a proof of a moment before the revocation act for the unlocked key.
    await expectRevert(f.consumer.simulate.consume([honestNow, KEY]), "TimeConsumerProofNotNewer", [KEY, honestNow.nanoMoment, epoch]);

    // Two seconds later an honest proof made after the revocation acts, and becomes the key's watermark.
    await f.advanceSeconds(2n);
    const honestAfter = f.proofAt(FIXTURE_NOW_NS + NS_PER_SECOND);
    await f.consumer.write.consume([honestAfter, KEY]);
    expect(await f.consumer.read.lastConsumedNanoMoment([KEY])).to.equal(honestAfter.nanoMoment);
    await expectRevert(f.consumer.simulate.consume([honestAfter, KEY]), "TimeConsumerProofNotNewer", [KEY, honestAfter.nanoMoment, honestAfter.nanoMoment]);
  });

  it("the bridge's latest time, set ahead by a compromised card, is clamped and no longer reported as delivered", async () => {
    const f = await loadFixture(deployEpochFixture);
    const aheadMessage = crossChainTimeForProof(f.aheadProof, f.chainId);
    const hash = await f.bridge.write.receiveTime([aheadMessage]);
    const { blockNumber } = await f.publicClient.waitForTransactionReceipt({ hash });
    const aheadId = await f.bridge.read.messageIdOf([aheadMessage]);
    expect(await f.bridge.read.latestDelivery()).to.deep.equal([aheadId, AHEAD_NS, blockNumber]);
    const honestNow = crossChainTimeForProof(f.proofAt(FIXTURE_NOW_NS - NS_PER_SECOND), f.chainId);
    await expectRevert(f.bridge.simulate.receiveTime([honestNow]), "TimeBridgeNotNewer", [honestNow.networkTime, AHEAD_NS]);

    const epoch = await f.revokeCompromised();
    expect(await f.bridge.read.latestDelivery()).to.deep.equal([ZERO_ID, epoch, 0n]);
    await expectRevert(f.bridge.simulate.receiveTime([honestNow]), "TimeBridgeNotNewer", [honestNow.networkTime, epoch]);
    // The delivered message stays delivered (its id cannot be delivered again).
    expect(await f.bridge.read.deliveredBlock([aheadId])).to.equal(blockNumber);

    await f.advanceSeconds(2n);
    const honestAfter = crossChainTimeForProof(f.proofAt(FIXTURE_NOW_NS + NS_PER_SECOND), f.chainId);
    const afterHash = await f.bridge.write.receiveTime([honestAfter]);
    const after = await f.publicClient.waitForTransactionReceipt({ hash: afterHash });
    expect(await f.bridge.read.latestDelivery()).to.deep.equal([await f.bridge.read.messageIdOf([honestAfter]), honestAfter.networkTime, after.blockNumber]);
  });
});
