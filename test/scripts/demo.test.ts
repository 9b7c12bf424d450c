/**
 * scripts/demo.ts (`npm start`): the whole demo runs on the in-process chain, silently, and every step reports
 * what the README promises — a proof valid off-chain and on-chain, a live node's REST proof verified on-chain
 * unchanged, a scheduled call refused early and executed on time, the vault refused then withdrawn, a bridge
 * message delivered once and its replay refused.
 */
import hre from "hardhat";
import { expect } from "chai";
import { reset, time } from "@nomicfoundation/hardhat-network-helpers";
import { getAddress } from "viem";
import { DEV_CARD_ACCURACY_NS, proofToJson } from "../../protocol";
import { runDemo, type DemoResult } from "../../scripts/demo";

describe("scripts/demo.ts runDemo", () => {
  let result: DemoResult;
  const lines: string[] = [];

  before(async () => {
    // A fresh chain: earlier test files may have moved the shared in-process chain's clock far from the wall
    // clock, which the live node's card reads.
    await reset();
    result = await runDemo({ hre, log: (line) => lines.push(line) });
  });

  // Leave a fresh chain (the demo moved its clock an hour ahead) for the files that run after this one.
  after(() => reset());

  it("deploys the oracle, scheduler, bridge and vault with the dev card whose certificate chain checked out", () => {
    expect(result.identity.certificateChainValid).to.equal(true);
    expect(result.deployment.cardIds).to.deep.equal([result.identity.cardId]);
    expect(result.deployment.nodes).to.deep.equal([result.identity.nodeAddress]);
    expect(result.deployment.scheduler).to.match(/^0x[0-9a-fA-F]{40}$/);
    expect(result.deployment.bridge).to.match(/^0x[0-9a-fA-F]{40}$/);
    expect(result.deployment.vault).to.match(/^0x[0-9a-fA-F]{40}$/);
  });

  it("signs a proof that is valid off-chain and on-chain, submits it and reads it back", () => {
    expect(result.proof.offChain).to.deep.equal({ valid: true, reason: null });
    expect(result.proof.validOnChain).to.equal(true);
    expect(result.proof.accuracyNs).to.equal(DEV_CARD_ACCURACY_NS);
    expect(result.proof.submit.gasUsed > 0n).to.equal(true);
    expect(result.proof.currentTimeMatches).to.equal(true);
  });

  it("refuses the proof with a relayer-lowered accuracy both off-chain and on-chain", () => {
    expect(result.proof.tampered.offChainReason).to.be.a("string");
    expect(result.proof.tampered.validOnChain).to.equal(false);
  });

  it("verifies on-chain, unchanged, a proof fetched over REST from a live node it started, then closes it", () => {
    const { node } = result;
    expect(node.restEndpoint).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(node.certificateChainValid).to.equal(true);
    expect(node.validOffChain).to.equal(true);
    expect(node.validOnChain).to.equal(true);
    // The struct that went on-chain is exactly the JSON the node served.
    expect(proofToJson(node.proof, node.cardId, node.json.proof.gps)).to.deep.equal(node.json);
    expect(node.json.proof.hardwareId).to.equal(node.cardId);
    expect(getAddress(node.nodeAddress)).to.not.equal(result.identity.nodeAddress);
    expect(node.tempDirRemoved).to.equal(true);
  });

  it("refuses the scheduled call before its moment, then executes it and pays the bounty", () => {
    const call = result.scheduledCall;
    expect(call.early.errorName).to.equal("SchedulerTooEarly");
    const [executeAt, earlyMoment] = call.early.args as [bigint, bigint];
    expect(executeAt).to.equal(call.executeAtNs);
    expect(earlyMoment < call.executeAtNs).to.equal(true);
    expect(call.executedWith >= call.executeAtNs).to.equal(true);
    expect(call.status).to.equal("Executed");
    expect(call.bountyPaidWei).to.equal(call.bountyWei);
    expect(BigInt(call.calleeReturn)).to.equal(14n); // ping(7) returns 7 * 2
  });

  it("refuses the vault withdrawal before the unlock moment and releases it after", () => {
    const { vault } = result;
    expect(vault.early.errorName).to.equal("TimeConsumerTooEarly");
    const [earlyMoment, notBefore] = vault.early.args as [bigint, bigint];
    expect(notBefore).to.equal(vault.unlockAtNs);
    expect(earlyMoment < vault.unlockAtNs).to.equal(true);
    expect(vault.withdrawnWith >= vault.unlockAtNs).to.equal(true);
    expect(vault.withdrawn).to.equal(true);
  });

  it("runs a 4-node mesh whose co-signed proof verifies on-chain with nodeQuorum 3, and fails exactly with two nodes down", () => {
    const { mesh } = result;
    expect(mesh.nodes).to.equal(4);
    expect(mesh.threshold).to.equal(3);
    expect(mesh.responders).to.be.at.least(3);
    expect(mesh.convergenceState).to.be.oneOf(["Converged", "Converging"]); // Converging only on a very busy host
    expect(mesh.validOnChainWithQuorum3).to.equal(true);
    expect(mesh.errorWithTwoDown).to.equal("Insufficient node responses");
  });

  it("delivers the bridge message once, with targetBlock set, and refuses its replay", () => {
    const { bridge } = result;
    expect(bridge.delivered).to.equal(true);
    expect(bridge.targetBlock).to.equal(bridge.receive.blockNumber);
    expect(bridge.replay.errorName).to.equal("TimeBridgeAlreadyDelivered");
    expect(bridge.replay.args).to.deep.equal([bridge.messageId, bridge.targetBlock]);
  });

  it("prints one numbered heading per step and a summary with every check ok", () => {
    for (const step of ["1.", "2.", "3.", "4.", "5.", "6.", "7."]) {
      expect(lines.some((line) => line.startsWith(step)), `heading ${step}`).to.equal(true);
    }
    const summary = lines.slice(lines.findIndex((line) => line.startsWith("Summary")) + 1);
    expect(summary).to.have.length(7);
    for (const line of summary) expect(line.trim().startsWith("ok"), line).to.equal(true);
    expect(Object.values(result.checks).every((ok) => ok)).to.equal(true);
  });
});

describe("scripts/demo.ts runDemo on a chain whose clock runs far ahead", () => {
  before(() => reset());
  after(() => reset());

  it("stops before starting the node, naming the problem, when a fresh node proof would already be too old", async () => {
    await time.increase(120);
    let failure: unknown;
    try {
      await runDemo({ hre, log: () => undefined });
    } catch (error) {
      failure = error;
    }
    expect(failure).to.be.instanceOf(Error);
    expect((failure as Error).message).to.contain("ahead of the wall clock").and.to.contain("fresh chain");
  });
});
