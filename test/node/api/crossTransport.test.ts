/**
 * One proof, three transports, two verifiers: the proof a client fetches over REST, WebSocket or gRPC is the same
 * cached attestation byte for byte, and it passes protocol/verify.ts and the oracle's verifyTimeProof unchanged.
 */
import { expect } from "chai";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { parseJsonLossless, proofFromJson } from "../../../protocol/json";
import { createVerifyContext, verifyTimeProof } from "../../../protocol/verify";
import type { ProofJson, TimeProof } from "../../../protocol/types";
import { deployOracleFixture } from "../../contracts/fixtures";
import { grpcCurrentProof, startTestNode, streamedProof, type TestNode } from "./helpers";

async function restProof(t: TestNode): Promise<ProofJson> {
  const response = await fetch(`${t.node.endpoints.rest}/time/current`);
  return parseJsonLossless(await response.text()) as ProofJson;
}

describe("node/api across transports", function () {
  it("serves the same proof bytes over REST, WebSocket and gRPC, verifiable off-chain and on-chain", async function () {
    const fixture = await loadFixture(deployOracleFixture);
    // The node runs the fixture's registered card and node keys.
    const t = await startTestNode({ identity: fixture.dev, overrides: { tickIntervalNs: "60000000000", refreshAfterNs: "0" } });
    try {
      // A 60 s tick and no on-demand refresh: every transport reads the same cached attestation.
      const [rest, ws, rpc] = [await restProof(t), await streamedProof(t.node.endpoints.ws), await grpcCurrentProof(t.node.endpoints.grpc)];
      expect(ws).to.deep.equal(rest);
      expect(rpc).to.deep.equal(rest);
      expect(JSON.stringify(rest)).to.equal(t.service.current().body);

      const proof: TimeProof = proofFromJson(rest).proof;
      const offChain = verifyTimeProof(
        proof,
        createVerifyContext({
          cards: { [fixture.dev.cardId]: { publicKey: fixture.dev.cardPublicKey, revoked: false } },
          nodes: [fixture.dev.nodeAddress],
          nowNs: BigInt(Date.now()) * 1_000_000n,
        }),
      );
      expect(offChain).to.deep.include({ valid: true });

      // The chain clock at the host's current second: the proof is fresh on-chain too.
      await fixture.oracle.write.setNow([BigInt(Math.floor(Date.now() / 1000))]);
      expect(await fixture.oracle.read.verifyTimeProof([proof])).to.equal(true);
      for (const json of [ws, rpc]) {
        expect(await fixture.oracle.read.verifyTimeProof([proofFromJson(json).proof])).to.equal(true);
      }
      // Tampering one byte makes the chain refuse it.
      const flipped = { ...proof, accuracy: proof.accuracy + 1 };
      expect(await fixture.oracle.read.verifyTimeProof([flipped])).to.equal(false);
    } finally {
      await t.close();
    }
  });
});
