/**
 * The stored proof never outlives the rules it passed (issue: "stale stored proof"): a setting that tightens, or
 * a changed validity window, discards it (TimeProofCleared), so getCurrentTime / getTimeNoOlderThan and the
 * bridge's sendTime never serve a proof verifyTimeProof now rejects. Loosening keeps it.
 */
import { expect } from "chai";
import { parseEventLogs, type Hash } from "viem";
import { NS_PER_SECOND } from "../../protocol";
import { deployOracleFixture, expectRevert, FIXTURE_NOW_NS, loadFixture, type OracleFixture } from "./fixtures";
import { p256PublicKeyCoordinates } from "../../protocol";

async function withStoredProof(): Promise<OracleFixture> {
  const f = await deployOracleFixture();
  await f.oracle.write.submitTimeProof([f.freshProof()]);
  return f;
}

async function cleared(f: OracleFixture, hash: Hash): Promise<boolean> {
  const receipt = await f.publicClient.waitForTransactionReceipt({ hash });
  return parseEventLogs({ abi: f.oracle.abi, logs: receipt.logs, eventName: "TimeProofCleared" }).length === 1;
}

describe("TimeOracle: the stored proof never outlives the rules it passed", () => {
  it("raising the quorum discards it (it carries one node entry); lowering keeps the new one", async () => {
    const f = await loadFixture(withStoredProof);
    expect(await cleared(f, await f.oracle.write.setNodeQuorum([2n]))).to.equal(true);
    await expectRevert(f.oracle.read.getCurrentTime(), "TimeOracleNoTime", []);
    expect(await f.oracle.read.verifyTimeProof([f.freshProof()])).to.equal(false);
    await f.oracle.write.setNodeQuorum([1n]);
    await f.oracle.write.submitTimeProof([f.freshProof()]);
    expect(await cleared(f, await f.oracle.write.setNodeQuorum([1n]))).to.equal(false); // unchanged: kept
    expect(((await f.oracle.read.getCurrentTime()) as { accuracy: number }).accuracy).to.equal(50);
  });

  it("lowering maxAcceptableDrift or maxFutureDrift discards it; raising them keeps it", async () => {
    const f = await loadFixture(withStoredProof);
    expect(await cleared(f, await f.oracle.write.setMaxAcceptableDrift([2_000n]))).to.equal(false);
    expect(await cleared(f, await f.oracle.write.setMaxFutureDrift([20n * NS_PER_SECOND]))).to.equal(false);
    expect(await f.oracle.read.getCurrentTime()).to.include({ accuracy: 50 });
    expect(await cleared(f, await f.oracle.write.setMaxAcceptableDrift([40n]))).to.equal(true); // below the proof's 50 ns
    await expectRevert(f.oracle.read.getTimeNoOlderThan([60n * NS_PER_SECOND]), "TimeOracleNoTime", []);
    await f.oracle.write.setMaxAcceptableDrift([1_000n]);
    await f.oracle.write.submitTimeProof([f.proofAt(FIXTURE_NOW_NS - NS_PER_SECOND + 1n)]);
    expect(await cleared(f, await f.oracle.write.setMaxFutureDrift([NS_PER_SECOND]))).to.equal(true);
  });

  it("a changed validity window of a registered card or node discards it; registering a new key does not", async () => {
    const f = await loadFixture(withStoredProof);
    const { x, y } = p256PublicKeyCoordinates(f.dev.cardPublicKey);
    const window = (await f.oracle.read.getCard([f.dev.cardId])) as { validFromNs: bigint; validUntilNs: bigint };
    // The same window again: nothing changes, nothing is discarded.
    expect(await cleared(f, await f.asRegistrar.write.registerCard([x, y, window.validFromNs, window.validUntilNs]))).to.equal(false);
    // A window ending before the stored proof's moment: discarded.
    expect(await cleared(f, await f.asRegistrar.write.registerCard([x, y, 0n, FIXTURE_NOW_NS - 2n * NS_PER_SECOND]))).to.equal(true);
    await expectRevert(f.oracle.read.getCurrentTime(), "TimeOracleNoTime", []);
    await f.asRegistrar.write.registerCard([x, y, window.validFromNs, window.validUntilNs]);
    await f.oracle.write.submitTimeProof([f.freshProof()]);
    expect(await cleared(f, await f.asRegistrar.write.registerNode([f.strangerNode.address, 0n, 1n << 63n]))).to.equal(false); // a new node
    expect(await cleared(f, await f.asRegistrar.write.registerNode([f.dev.nodeAddress, 0n, FIXTURE_NOW_NS - 2n * NS_PER_SECOND]))).to.equal(true);
  });
});
