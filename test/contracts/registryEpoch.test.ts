/**
 * Watermarks across registry epochs (docs/protocol.md §14.17). Every time a key loses trust (a card revoked, a node
 * deactivated or given an end date) the oracle starts a new registry epoch. A consumer's per-key watermark and the
 * bridge's latest time set in an earlier epoch then read as at most `chain clock + maxFutureDrift`, the latest moment
 * the oracle accepts now:
 * - no replay: a proof consumed (a moment delivered) before the change lies at or below the watermark and can only
 *   pass the oracle at or below that bound, so it stays refused, whatever the change was (issue 25.5: clamping to
 *   the epoch itself let a proof dated ahead of its block be consumed twice after a routine change);
 * - a watermark a revoked key dated ahead blocks honest proofs until real time passes it: at most the
 *   maxFutureDrift of its block. Lowering maxFutureDrift does not shorten that (it lowers what the oracle accepts
 *   by as much); it only lowers what the views report.
 * Both clocks of the consumer and the bridge are pinned to the oracle harness's, as production reads one clock.
 */
import hre from "hardhat";
import { expect } from "chai";
import { pad, parseEventLogs, toHex, type Hex } from "viem";
import { createDevIdentity, crossChainTimeForProof, NS_PER_SECOND, p256PublicKeyCoordinates, type TimeProof } from "../../protocol";
import { deployOracleFixture, expectRevert, FIXTURE_NOW_NS, FIXTURE_NOW_SECONDS, FOREVER_NS, loadFixture, testScalar } from "./fixtures";

const KEY = `0x${"11".repeat(32)}` as const;
const OTHER_KEY = `0x${"22".repeat(32)}` as const;
/** Within the default maxFutureDrift (15 s) of the pinned chain clock. */
const AHEAD_NS = FIXTURE_NOW_NS + 10n * NS_PER_SECOND;
const ZERO_ID = `0x${"00".repeat(32)}` as Hex;
/** The epoch a removal at the pinned chain clock starts: the last ns of that second. */
const SECOND_END_NS = FIXTURE_NOW_NS + NS_PER_SECOND - 1n;
/** The oracle's default maxFutureDrift (TimeOracle.DEFAULT_MAX_FUTURE_DRIFT_NS), checked against it below. */
const MAX_FUTURE_DRIFT_NS = 15n * NS_PER_SECOND;
/**
 * How far ahead of the chain clock the swept proofs are dated: both ends of [0, maxFutureDrift], a nanosecond, and
 * each side of the one-second mark, where the old clamp (to the end of the removal's second) started letting
 * proofs through again.
 */
const AHEAD_SWEEP_NS = [0n, 1n, NS_PER_SECOND / 2n, NS_PER_SECOND, NS_PER_SECOND + 1n, MAX_FUTURE_DRIFT_NS / 2n, MAX_FUTURE_DRIFT_NS] as const;

function sweepKey(index: number): Hex {
  return pad(toHex(index + 1), { size: 32 });
}

async function deployEpochFixture() {
  const base = await deployOracleFixture();
  const compromised = await createDevIdentity({ cardPrivateKey: testScalar("compromised card") });
  const { x, y } = p256PublicKeyCoordinates(compromised.cardPublicKey);
  await base.asRegistrar.write.registerCard([x, y, 0n, FOREVER_NS]);
  const consumer = await hre.viem.deployContract("ConsumerHarness", [base.oracle.address, 100]);
  await consumer.write.setChainNowNs([FIXTURE_NOW_NS]);
  const chainId = BigInt(await base.publicClient.getChainId());

  /** A BridgeHarness on the oracle, its clock pinned to the fixture's (the oracle's until a test advances it). */
  async function deployBridge() {
    const deployed = await hre.viem.deployContract("BridgeHarness", [base.oracle.address]);
    await deployed.write.setNow([FIXTURE_NOW_SECONDS]);
    return deployed;
  }
  const bridge = await deployBridge();
  type Bridge = typeof bridge;

  /**
   * Moves the oracle's, the consumer's, the fixture bridge's and `moreBridges`' clocks to FIXTURE_NOW + `seconds`.
   * (No state in this closure: loadFixture reverts the chain between tests, not JavaScript variables.)
   */
  async function advanceSeconds(seconds: bigint, moreBridges: readonly Bridge[] = []): Promise<void> {
    const nowSeconds = FIXTURE_NOW_SECONDS + seconds;
    await base.oracle.write.setNow([nowSeconds]);
    await consumer.write.setChainNowNs([nowSeconds * NS_PER_SECOND]);
    for (const each of [bridge, ...moreBridges]) await each.write.setNow([nowSeconds]);
  }

  /** Revokes the compromised card as the guardian; returns the epoch the RegistryEpochStarted event reports. */
  async function revokeCompromised(): Promise<bigint> {
    const hash = await base.asGuardian.write.revokeCard([compromised.cardId]);
    const receipt = await base.publicClient.waitForTransactionReceipt({ hash });
    const [started] = parseEventLogs({ abi: base.oracle.abi, logs: receipt.logs, eventName: "RegistryEpochStarted" });
    return (started as unknown as { args: { epoch: bigint } }).args.epoch;
  }

  /**
   * Routine registry changes that take trust from a node no proof here is signed by (nodeKeys[2]): each starts a
   * new epoch though nothing was compromised.
   */
  const unrelated = base.nodeKeys[2]!.address;
  const routineChanges = {
    "an unrelated node is given an end date": () => base.asRegistrar.write.registerNode([unrelated, 0n, FIXTURE_NOW_NS + 30n * 86_400n * NS_PER_SECOND]),
    "an unrelated node is deactivated": () => base.asGuardian.write.deactivateNode([unrelated]),
  } as const;

  const aheadProof = base.proofAt(AHEAD_NS, { card: compromised.cardKey });
  return { ...base, compromised, consumer, bridge, deployBridge, chainId, aheadProof, advanceSeconds, revokeCompromised, routineChanges };
}

/** The same moment in another proof (another node co-signs): another bridge message id, the same time. */
function sameMomentOtherNode(f: Awaited<ReturnType<typeof deployEpochFixture>>, proof: TimeProof): TimeProof {
  return f.proofAt(proof.nanoMoment, { nodes: [f.nodeKeys[1]!] });
}

describe("the registry epoch: watermarks across a change of trust", () => {
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

  it("the sweep covers 0 … the oracle's maxFutureDrift", async () => {
    const f = await loadFixture(deployEpochFixture);
    expect(await f.oracle.read.maxFutureDrift()).to.equal(MAX_FUTURE_DRIFT_NS);
    expect(await f.oracle.read.verifyTimeProof([f.proofAt(FIXTURE_NOW_NS + MAX_FUTURE_DRIFT_NS)])).to.equal(true);
  });

  for (const change of ["an unrelated node is given an end date", "an unrelated node is deactivated"] as const) {
    it(`no replay on a consumer after a routine change (${change}): proofs dated 0 … maxFutureDrift ahead stay refused for their keys`, async () => {
      const f = await loadFixture(deployEpochFixture);
      const proofs = AHEAD_SWEEP_NS.map((ahead) => f.proofAt(FIXTURE_NOW_NS + ahead));
      for (const [index, proof] of proofs.entries()) await f.consumer.write.consume([proof, sweepKey(index)]);

      const epochBefore = await f.oracle.read.registryEpoch();
      await f.routineChanges[change]();
      expect(await f.oracle.read.registryEpoch()).to.not.equal(epochBefore);

      // At once, and 30 s later (every proof still fresh: maxAttestationAge is 60 s).
      for (const laterSeconds of [0n, 30n]) {
        await f.advanceSeconds(laterSeconds);
        for (const [index, proof] of proofs.entries()) {
          const key = sweepKey(index);
          const ahead = `${AHEAD_SWEEP_NS[index]} ns ahead, ${laterSeconds} s later`;
          expect(await f.oracle.read.verifyTimeProof([proof]), ahead).to.equal(true);
          await expectRevert(f.consumer.simulate.consume([proof, key]), "TimeConsumerProofNotNewer", [key, proof.nanoMoment, proof.nanoMoment]);
          // Nor the same moment in another proof.
          const other = sameMomentOtherNode(f, proof);
          await expectRevert(f.consumer.simulate.consume([other, key]), "TimeConsumerProofNotNewer", [key, proof.nanoMoment, proof.nanoMoment]);
          expect(await f.consumer.read.lastConsumedNanoMoment([key]), ahead).to.equal(proof.nanoMoment);
        }
      }
      // The next proof after a watermark acts, and the watermark is in the new epoch from then on.
      const next = f.proofAt(proofs.at(-1)!.nanoMoment + 1n);
      await f.consumer.write.consume([next, sweepKey(proofs.length - 1)]);
      expect(await f.consumer.read.lastConsumedNanoMoment([sweepKey(proofs.length - 1)])).to.equal(next.nanoMoment);
    });

    it(`no replay on the bridge after a routine change (${change}): a moment delivered 0 … maxFutureDrift ahead is never delivered again`, async () => {
      const f = await loadFixture(deployEpochFixture);
      const bridges = [];
      for (const ahead of AHEAD_SWEEP_NS) {
        const bridge = await f.deployBridge();
        const message = crossChainTimeForProof(f.proofAt(FIXTURE_NOW_NS + ahead), f.chainId);
        await bridge.write.receiveTime([message]);
        bridges.push({ bridge, message, ahead });
      }

      await f.routineChanges[change]();

      for (const laterSeconds of [0n, 30n]) {
        await f.advanceSeconds(laterSeconds, bridges.map(({ bridge }) => bridge));
        for (const { bridge, message, ahead } of bridges) {
          const label = `${ahead} ns ahead, ${laterSeconds} s later`;
          const messageId = await bridge.read.messageIdOf([message]);
          // The same moment in another message (another node co-signs: another id).
          const again = crossChainTimeForProof(sameMomentOtherNode(f, f.proofAt(message.networkTime)), f.chainId);
          expect(await bridge.read.messageIdOf([again]), label).to.not.equal(messageId);
          await expectRevert(bridge.simulate.receiveTime([again]), "TimeBridgeNotNewer", [message.networkTime, message.networkTime]);
          const deliveredIn = await bridge.read.deliveredBlock([messageId]);
          await expectRevert(bridge.simulate.receiveTime([message]), "TimeBridgeAlreadyDelivered", [messageId, deliveredIn]);
          // No longer vouched for, but the time a new message must exceed is still the delivered moment.
          expect(await bridge.read.latestDelivery(), label).to.deep.equal([ZERO_ID, message.networkTime, 0n]);
        }
      }
    });
  }

  it("a consumer's key locked ahead by a compromised card: no proof consumed before acts again after the revocation, and the key takes honest proofs once real time passes the lock", async () => {
    const f = await loadFixture(deployEpochFixture);
    const honestBefore = f.proofAt(FIXTURE_NOW_NS - 5n * NS_PER_SECOND);
    await f.consumer.write.consume([honestBefore, OTHER_KEY]);
    await f.consumer.write.consume([f.aheadProof, KEY]);
    expect(await f.consumer.read.lastConsumedNanoMoment([KEY])).to.equal(AHEAD_NS);
    const honestNow = f.proofAt(FIXTURE_NOW_NS - NS_PER_SECOND);
    await expectRevert(f.consumer.simulate.consume([honestNow, KEY]), "TimeConsumerProofNotNewer", [KEY, honestNow.nanoMoment, AHEAD_NS]);

    await f.revokeCompromised();
    // Within chain clock + maxFutureDrift: reported as it was.
    expect(await f.consumer.read.lastConsumedNanoMoment([KEY])).to.equal(AHEAD_NS);
    expect(await f.consumer.read.lastConsumedNanoMoment([OTHER_KEY])).to.equal(honestBefore.nanoMoment);
    await expectRevert(f.consumer.simulate.consume([honestBefore, OTHER_KEY]), "TimeConsumerProofNotNewer", [OTHER_KEY, honestBefore.nanoMoment, honestBefore.nanoMoment]);
    await expectRevert(f.consumer.simulate.consume([honestNow, KEY]), "TimeConsumerProofNotNewer", [KEY, honestNow.nanoMoment, AHEAD_NS]);

    // An honest proof (dated at the chain clock) is refused while the chain clock has not passed the lock, and
    // acts from the first second after it: 10 s here, at most maxFutureDrift (15 s) after the lock was consumed.
    for (const seconds of [1n, 9n, 10n]) {
      await f.advanceSeconds(seconds);
      const honest = f.proofAt(FIXTURE_NOW_NS + seconds * NS_PER_SECOND);
      await expectRevert(f.consumer.simulate.consume([honest, KEY]), "TimeConsumerProofNotNewer", [KEY, honest.nanoMoment, AHEAD_NS]);
    }
    await f.advanceSeconds(11n);
    const honestAfter = f.proofAt(FIXTURE_NOW_NS + 11n * NS_PER_SECOND);
    await f.consumer.write.consume([honestAfter, KEY]);
    expect(await f.consumer.read.lastConsumedNanoMoment([KEY])).to.equal(honestAfter.nanoMoment);
    await expectRevert(f.consumer.simulate.consume([honestAfter, KEY]), "TimeConsumerProofNotNewer", [KEY, honestAfter.nanoMoment, honestAfter.nanoMoment]);
  });

  it("a lock at the full maxFutureDrift ahead stops blocking within maxFutureDrift of its block, lowered maxFutureDrift or not; lowering it only lowers what lastConsumedNanoMoment reports", async () => {
    for (const lowerTo of [undefined, 0n, 5n * NS_PER_SECOND]) {
      const f = await loadFixture(deployEpochFixture);
      const lockNs = FIXTURE_NOW_NS + MAX_FUTURE_DRIFT_NS;
      await f.consumer.write.consume([f.proofAt(lockNs, { card: f.compromised.cardKey }), KEY]);
      await f.revokeCompromised();
      // The admin's reaction to the compromise, or none.
      if (lowerTo !== undefined) await f.oracle.write.setMaxFutureDrift([lowerTo]);
      const driftNs = lowerTo ?? MAX_FUTURE_DRIFT_NS;
      const label = `maxFutureDrift ${driftNs} ns`;

      for (const seconds of [1n, 14n, 15n]) {
        await f.advanceSeconds(seconds);
        const chainNs = FIXTURE_NOW_NS + seconds * NS_PER_SECOND;
        // Reported: the lock, or the latest moment the oracle accepts now when that is earlier.
        const reported = chainNs + driftNs < lockNs ? chainNs + driftNs : lockNs;
        expect(await f.consumer.read.lastConsumedNanoMoment([KEY]), `${label}, +${seconds} s`).to.equal(reported);
        // Every proof the oracle accepts now lies at or below the chain clock + maxFutureDrift: the latest one
        // (honest proofs are dated at the chain clock, earlier still) is refused while it is not past the lock.
        const latestAccepted = f.proofAt(chainNs + driftNs);
        expect(await f.oracle.read.verifyTimeProof([latestAccepted]), `${label}, +${seconds} s`).to.equal(true);
        if (chainNs + driftNs <= lockNs) {
          await expectRevert(f.consumer.simulate.consume([latestAccepted, KEY]), "TimeConsumerProofNotNewer", [KEY, latestAccepted.nanoMoment, reported]);
        }
        const honest = f.proofAt(chainNs);
        await expectRevert(f.consumer.simulate.consume([honest, KEY]), "TimeConsumerProofNotNewer", [KEY, honest.nanoMoment, reported]);
      }
      // One second past the lock, an honest proof acts.
      await f.advanceSeconds(16n);
      await f.consumer.write.consume([f.proofAt(lockNs + NS_PER_SECOND), KEY]);
      expect(await f.consumer.read.lastConsumedNanoMoment([KEY])).to.equal(lockNs + NS_PER_SECOND);
    }
  });

  it("the bridge's latest time, set ahead by a compromised card, is no longer reported as delivered, is never delivered again, and is passed once real time passes it", async () => {
    const f = await loadFixture(deployEpochFixture);
    const aheadMessage = crossChainTimeForProof(f.aheadProof, f.chainId);
    const hash = await f.bridge.write.receiveTime([aheadMessage]);
    const { blockNumber } = await f.publicClient.waitForTransactionReceipt({ hash });
    const aheadId = await f.bridge.read.messageIdOf([aheadMessage]);
    expect(await f.bridge.read.latestDelivery()).to.deep.equal([aheadId, AHEAD_NS, blockNumber]);
    const honestNow = crossChainTimeForProof(f.proofAt(FIXTURE_NOW_NS - NS_PER_SECOND), f.chainId);
    await expectRevert(f.bridge.simulate.receiveTime([honestNow]), "TimeBridgeNotNewer", [honestNow.networkTime, AHEAD_NS]);

    await f.revokeCompromised();
    expect(await f.bridge.read.latestDelivery()).to.deep.equal([ZERO_ID, AHEAD_NS, 0n]);
    await expectRevert(f.bridge.simulate.receiveTime([honestNow]), "TimeBridgeNotNewer", [honestNow.networkTime, AHEAD_NS]);
    // The delivered message stays delivered (its id cannot be delivered again).
    expect(await f.bridge.read.deliveredBlock([aheadId])).to.equal(blockNumber);

    // Lowering maxFutureDrift lowers what is reported (the latest moment the oracle accepts now), not the wait.
    await f.oracle.write.setMaxFutureDrift([0n]);
    await f.advanceSeconds(2n);
    expect(await f.bridge.read.latestDelivery()).to.deep.equal([ZERO_ID, FIXTURE_NOW_NS + 2n * NS_PER_SECOND, 0n]);
    const honestAtClock = crossChainTimeForProof(f.proofAt(FIXTURE_NOW_NS + 2n * NS_PER_SECOND), f.chainId);
    await expectRevert(f.bridge.simulate.receiveTime([honestAtClock]), "TimeBridgeNotNewer", [honestAtClock.networkTime, honestAtClock.networkTime]);

    await f.advanceSeconds(11n);
    const honestAfter = crossChainTimeForProof(f.proofAt(AHEAD_NS + NS_PER_SECOND), f.chainId);
    const afterHash = await f.bridge.write.receiveTime([honestAfter]);
    const after = await f.publicClient.waitForTransactionReceipt({ hash: afterHash });
    expect(await f.bridge.read.latestDelivery()).to.deep.equal([await f.bridge.read.messageIdOf([honestAfter]), honestAfter.networkTime, after.blockNumber]);
  });
});
