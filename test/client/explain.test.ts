/**
 * client/explain.ts (explainTimeProof) against a deployed oracle on the in-process Hardhat chain: a valid proof,
 * and each usual bad one named with its evidence, agreeing with the oracle's own verdict; a proof whose accuracy
 * was altered after signing is reported as altered, not as a mere unknown node.
 */
import hre from "hardhat";
import { expect } from "chai";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import type { PublicClient } from "viem";
import { explainTimeProof } from "../../client/explain";
import { DEV_CARD_ACCURACY_NS, NS_PER_SECOND } from "../../protocol/constants";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS, DEV_OTHER_CARD_PRIVATE_KEY } from "../../protocol/devkeys";
import { attest } from "../../protocol/sign";
import { deployAttestedTime, devRegistrations } from "../../deploy";

async function fixture() {
  const deployment = await deployAttestedTime(hre, { ...devRegistrations(), settings: { nodeQuorum: 2n }, scheduler: false, bridge: false, example: false });
  const publicClient = (await hre.viem.getPublicClient()) as unknown as PublicClient;
  const nowNs = (await publicClient.getBlock()).timestamp * NS_PER_SECOND;
  return { deployment, publicClient, nowNs };
}

function proofAt(nanoMoment: bigint, options: { card?: `0x${string}`; nodes?: readonly `0x${string}`[]; accuracy?: number } = {}) {
  return attest({
    card: options.card ?? DEV_CARD_PRIVATE_KEY,
    nodes: options.nodes ?? [DEV_NODE_PRIVATE_KEYS[0], DEV_NODE_PRIVATE_KEYS[1]],
    nanoMoment,
    accuracy: options.accuracy ?? DEV_CARD_ACCURACY_NS,
    nodeTimestampNs: nanoMoment + 5n,
  });
}

describe("client/explain: explainTimeProof", () => {
  it("says valid, with the evidence, for a proof the oracle accepts", async () => {
    const { deployment, publicClient, nowNs } = await loadFixture(fixture);
    const explained = await explainTimeProof(publicClient, deployment.oracle, proofAt(nowNs - NS_PER_SECOND));
    expect(explained).to.include({ valid: true, reason: null, onChainValid: true, hint: null });
    expect(explained.evidence).to.include({ nodeQuorum: 2, cardStatus: "Active", registeredNodes: 3, accuracyNs: DEV_CARD_ACCURACY_NS });
    expect(explained.evidence.entries.map((entry) => entry.registered)).to.deep.equal([true, true]);
  });

  it("names each usual failure with its evidence, and agrees with the oracle every time", async () => {
    const { deployment, publicClient, nowNs } = await loadFixture(fixture);
    const cases = [
      { proof: proofAt(nowNs - 120n * NS_PER_SECOND), reason: "too-old" },
      { proof: proofAt(nowNs + 60n * NS_PER_SECOND), reason: "too-far-in-future" },
      { proof: proofAt(nowNs, { nodes: [DEV_NODE_PRIVATE_KEYS[0]] }), reason: "quorum-not-met" },
      { proof: proofAt(nowNs, { card: DEV_OTHER_CARD_PRIVATE_KEY }), reason: "unknown-card" },
      { proof: proofAt(nowNs, { accuracy: 10_000_000 }), reason: "accuracy-too-low" },
    ] as const;
    for (const { proof, reason } of cases) {
      const explained = await explainTimeProof(publicClient, deployment.oracle, proof);
      expect(explained, reason).to.include({ valid: false, reason, onChainValid: false });
      expect(explained.detail, reason).to.be.a("string").and.not.equal("");
    }
    const old = await explainTimeProof(publicClient, deployment.oracle, proofAt(nowNs - 120n * NS_PER_SECOND));
    expect(old.evidence.ageNs >= 120n * NS_PER_SECOND).to.equal(true);
    expect(old.hint).to.match(/^the proof is \d+ ns old at the chain's clock; fetch a fresh one \(at most 60000000000 ns\)$/);
  });

  it("reports a proof whose accuracy was altered after signing as altered, not as a mere unknown node", async () => {
    const { deployment, publicClient, nowNs } = await loadFixture(fixture);
    const proof = proofAt(nowNs - NS_PER_SECOND);
    const altered = { ...proof, accuracy: proof.accuracy - 1 };
    const explained = await explainTimeProof(publicClient, deployment.oracle, altered);
    expect(explained).to.include({ valid: false, reason: "unknown-node", onChainValid: false });
    expect(explained.evidence.entries.every((entry) => entry.recovered !== null && !entry.registered)).to.equal(true);
    expect(explained.hint).to.match(/was altered after signing/);
  });
});
