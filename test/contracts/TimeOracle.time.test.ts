/**
 * submitTimeProof / getCurrentTime / getTimeNoOlderThan and the real chain clock (TimeOracle without the harness).
 * Scheduling is TimeScheduler's own deployment (TimeScheduler.test.ts).
 */
import { expect } from "chai";
import hre from "hardhat";
import { time } from "@nomicfoundation/hardhat-network-helpers";
import { getAddress, parseEventLogs } from "viem";
import { DEFAULT_MAX_ATTESTATION_AGE_NS, DEFAULT_MAX_FUTURE_DRIFT_NS, NS_PER_SECOND, attest, p256PublicKeyCoordinates } from "../../protocol";
import { FIXTURE_NOW_NS, FOREVER_NS, deployOracleFixture, expectRevert, loadFixture, type OracleFixture } from "./fixtures";

describe("TimeOracle time store", () => {
  let f: OracleFixture;
  beforeEach(async () => {
    f = await loadFixture(deployOracleFixture);
  });

  it("has no time before the first submission", async () => {
    await expectRevert(f.oracle.read.getCurrentTime(), "TimeOracleNoTime", []);
    await expectRevert(f.oracle.read.getTimeNoOlderThan([DEFAULT_MAX_ATTESTATION_AGE_NS]), "TimeOracleNoTime", []);
  });

  it("stores a verified proof, emits TimeProofSubmitted and returns it unchanged", async () => {
    const proof = f.freshProof({ nodes: f.nodeKeys });
    const hash = await f.asStranger.write.submitTimeProof([proof]);
    const receipt = await f.publicClient.waitForTransactionReceipt({ hash });
    const [event] = parseEventLogs({ abi: f.oracle.abi, logs: receipt.logs, eventName: "TimeProofSubmitted" }) as unknown as {
      args: Record<string, unknown>;
    }[];
    expect(event?.args).to.deep.equal({
      nanoMoment: proof.nanoMoment,
      cardId: f.dev.cardId,
      accuracy: proof.accuracy,
      submitter: getAddress(f.accounts.stranger.account.address),
    });
    expect(await f.oracle.read.getCurrentTime()).to.deep.equal(proof);
  });

  it("refuses an invalid proof with its nanoMoment", async () => {
    const proof = f.freshProof({ nodes: [f.strangerNode] });
    await expectRevert(f.oracle.write.submitTimeProof([proof]), "TimeOracleInvalidTimeProof", [proof.nanoMoment]);
  });

  it("refuses a proof that is not newer than the stored one (same or older), then accepts a newer one", async () => {
    const first = f.proofAt(FIXTURE_NOW_NS - 2n * NS_PER_SECOND);
    await f.oracle.write.submitTimeProof([first]);
    await expectRevert(f.oracle.write.submitTimeProof([first]), "TimeOracleTimeProofNotNewer", [first.nanoMoment, first.nanoMoment]);
    const older = f.proofAt(first.nanoMoment - 1n);
    await expectRevert(f.oracle.write.submitTimeProof([older]), "TimeOracleTimeProofNotNewer", [older.nanoMoment, first.nanoMoment]);
    const newer = f.proofAt(first.nanoMoment + 1n, { nodes: f.nodeKeys.slice(1) });
    await f.oracle.write.submitTimeProof([newer]);
    expect(await f.oracle.read.getCurrentTime()).to.deep.equal(newer);
  });

  it("getTimeNoOlderThan returns the proof within the bound (inclusive) and refuses it beyond", async () => {
    const proof = f.proofAt(FIXTURE_NOW_NS - 10n * NS_PER_SECOND);
    await f.oracle.write.submitTimeProof([proof]);
    expect(await f.oracle.read.getTimeNoOlderThan([10n * NS_PER_SECOND])).to.deep.equal(proof);
    await expectRevert(f.oracle.read.getTimeNoOlderThan([10n * NS_PER_SECOND - 1n]), "TimeOracleTimeTooOld", [
      proof.nanoMoment,
      10n * NS_PER_SECOND - 1n,
      FIXTURE_NOW_NS,
    ]);
    // A proof ahead of the chain clock has age 0.
    const ahead = f.proofAt(FIXTURE_NOW_NS + DEFAULT_MAX_FUTURE_DRIFT_NS);
    await f.oracle.write.submitTimeProof([ahead]);
    expect(await f.oracle.read.getTimeNoOlderThan([0n])).to.deep.equal(ahead);
  });

  it("discards the stored proof when a card is revoked, so nobody keeps reading time from a removed key", async () => {
    // Dated as far ahead as allowed: without the clearing it would also keep honest proofs out until then.
    const ahead = f.proofAt(FIXTURE_NOW_NS + DEFAULT_MAX_FUTURE_DRIFT_NS);
    await f.oracle.write.submitTimeProof([ahead]);
    const hash = await f.asGuardian.write.revokeCard([f.dev.cardId]);
    const receipt = await f.publicClient.waitForTransactionReceipt({ hash });
    const cleared = parseEventLogs({ abi: f.oracle.abi, logs: receipt.logs, eventName: "TimeProofCleared" }) as unknown as {
      args: { nanoMoment: bigint };
    }[];
    expect(cleared.map((event) => event.args.nanoMoment)).to.deep.equal([ahead.nanoMoment]);
    await expectRevert(f.oracle.read.getCurrentTime(), "TimeOracleNoTime", []);
  });

  it("discards the stored proof when a node is deactivated, and accepts an honest older-dated proof after it", async () => {
    const ahead = f.proofAt(FIXTURE_NOW_NS + DEFAULT_MAX_FUTURE_DRIFT_NS, { nodes: [f.nodeKeys[0]!] });
    await f.oracle.write.submitTimeProof([ahead]);
    await f.asGuardian.write.deactivateNode([f.nodeKeys[0]!.address]);
    await expectRevert(f.oracle.read.getCurrentTime(), "TimeOracleNoTime", []);
    const honest = f.proofAt(FIXTURE_NOW_NS, { nodes: [f.nodeKeys[1]!] });
    await f.oracle.write.submitTimeProof([honest]);
    expect(await f.oracle.read.getCurrentTime()).to.deep.equal(honest);
  });
});

describe("TimeOracle on the real chain clock", () => {
  async function deployRealOracle() {
    const [admin] = await hre.viem.getWalletClients();
    const fixture = await deployOracleFixture();
    const oracle = await hre.viem.deployContract("TimeOracle", [admin!.account.address]);
    await oracle.write.grantRole([await oracle.read.REGISTRAR_ROLE(), admin!.account.address]);
    const { x, y } = p256PublicKeyCoordinates(fixture.dev.cardPublicKey);
    await oracle.write.registerCard([x, y, 0n, FOREVER_NS]);
    await oracle.write.registerNode([fixture.dev.nodeAddress, 0n, FOREVER_NS]);
    return { oracle, fixture };
  }

  it("measures freshness against block.timestamp × 1e9", async () => {
    const { oracle, fixture } = await loadFixture(deployRealOracle);
    const sign = (nanoMoment: bigint) =>
      attest({ card: fixture.dev.cardKey, nodes: [fixture.dev.nodeKey], nanoMoment, accuracy: 50, nodeTimestampNs: nanoMoment });
    const blockSeconds = BigInt(await time.latest()) + 100n;
    await time.increaseTo(blockSeconds);
    // Read at the mined block, so the call's block.timestamp is exactly `blockSeconds`.
    const blockNumber = await fixture.publicClient.getBlockNumber();
    const nowNs = blockSeconds * NS_PER_SECOND;
    const at = async (nanoMoment: bigint) => oracle.read.verifyTimeProof([sign(nanoMoment)], { blockNumber });
    expect(await at(nowNs - DEFAULT_MAX_ATTESTATION_AGE_NS)).to.equal(true);
    expect(await at(nowNs - DEFAULT_MAX_ATTESTATION_AGE_NS - 1n)).to.equal(false);
    expect(await at(nowNs + DEFAULT_MAX_FUTURE_DRIFT_NS)).to.equal(true);
    expect(await at(nowNs + DEFAULT_MAX_FUTURE_DRIFT_NS + 1n)).to.equal(false);
  });
});
