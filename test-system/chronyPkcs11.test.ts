/**
 * The operator's full setup (issue 26's "done when"): a node process started with the chrony card driver AND its
 * card and node keys in a PKCS#11 token (SoftHSM2, provisioned by `ats-node keys init --pkcs11`), reading a real
 * chronyd pair on loopback. Its proofs verify with the reference verifier and on-chain, and each signed accuracy is
 * the bound chrony's own figures give (recomputed here from the `chronyc -c tracking` line the card reports).
 */
import hre from "hardhat";
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { contractProofFromJson } from "../client/contractProof";
import type { CardStatus } from "../node/card/types";
import { createVerifyContext, verifyTimeProof } from "../protocol/verify";
import { deployAttestedTime } from "../deploy";
import { startNodeProcess, stopNodeProcess, type NodeProcess } from "../scripts/nodeProcess";
import { accuracyFromChrony, CHRONYC, CLIENT_MAX_CLOCK_ERROR_PPM, startChronydPair, waitUntil, type ChronydPair } from "./chronyd";
import { provisionToken, type Provisioned } from "./softhsm";

/** The largest bound the node signs, ns (and the oracle's maxAcceptableDrift): far above a loopback chronyd's. */
const MAX_BOUND_NS = 1_000_000;

describe("chrony card with PKCS#11 token keys: proofs that verify on-chain, with the accuracy chrony's figures give", function () {
  // Generous: bin/ats-node.js first builds dist/ when the sources are newer (test:system builds it before).
  this.timeout(600_000);
  const dir = mkdtempSync(join(tmpdir(), "ats-chrony-pkcs11-"));
  const previousSofthsmConf = process.env.SOFTHSM2_CONF;
  let chronyd: ChronydPair | undefined;
  let node: NodeProcess | undefined;
  let provisioned: Provisioned;

  before(async () => {
    chronyd = await startChronydPair(dir);
    const token = await provisionToken(dir, "ats-chrony-token", "2718-system-test", {
      cardDriver: "chrony",
      chronySocketPath: chronyd.clientSocket,
      chronycPath: CHRONYC,
      chronyPollIntervalMs: 250,
      chronyMaxBoundNs: MAX_BOUND_NS,
      chronyMaxClockErrorPpb: CLIENT_MAX_CLOCK_ERROR_PPM * 1_000,
      maxAcceptableDriftNs: String(MAX_BOUND_NS),
    });
    provisioned = token.provisioned;
    // The node child inherits this process's environment (scripts/nodeProcess.ts): the token folder goes there.
    process.env.SOFTHSM2_CONF = token.softhsmConf;
    node = await startNodeProcess(token.configFile, 300_000);
  });

  after(async () => {
    await stopNodeProcess(node);
    await chronyd?.stop();
    if (previousSofthsmConf === undefined) delete process.env.SOFTHSM2_CONF;
    else process.env.SOFTHSM2_CONF = previousSofthsmConf;
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves proofs signed through the token whose accuracy chrony's figures explain, valid off- and on-chain", async () => {
    const cardInfo = async () => ((await (await fetch(`${node!.rest}/node/info`)).json()) as { nodeId: string; cardId: string; card: CardStatus });
    const info = await waitUntil("the chrony card to serve", 60_000, async () => {
      const current = await cardInfo();
      return current.card.state === "serving" ? current : null;
    });
    expect(info).to.include({ nodeId: provisioned.nodeAddress, cardId: provisioned.cardId });
    expect(info.card).to.deep.include({ driver: "chrony", state: "serving", reason: null });

    // A proof signed under one reading: the card's report before and after it names the same reading.
    const { proof, status } = await waitUntil("a proof signed under a reading the card still reports", 60_000, async () => {
      const before = (await cardInfo()).card;
      const candidate = contractProofFromJson(await (await fetch(`${node!.rest}/time/current`)).json());
      const after = (await cardInfo()).card;
      const sameReading = before.evidence !== null && before.evidence?.readAtNs === after.evidence?.readAtNs;
      return sameReading && candidate.nanoMoment >= BigInt(before.evidence!.readAtNs) ? { proof: candidate, status: before } : null;
    });
    const explained = accuracyFromChrony(status, proof.nanoMoment);
    expect(Math.abs(proof.accuracy - explained.accuracyNs), `signed ${proof.accuracy} ns, chrony's figures give ${explained.accuracyNs} ns`).to.be.at.most(2);
    expect(proof.accuracy).to.be.below(MAX_BOUND_NS);

    const context = createVerifyContext({
      cards: { [provisioned.cardId]: { publicKey: provisioned.cardPublicKey, revoked: false } },
      nodes: [provisioned.nodeAddress],
      nowNs: BigInt(Date.now()) * 1_000_000n,
      maxAcceptableDriftNs: BigInt(MAX_BOUND_NS),
    });
    expect(verifyTimeProof(proof, context)).to.deep.equal({ valid: true, cardId: provisioned.cardId, nodes: [provisioned.nodeAddress] });

    const deployment = await deployAttestedTime(hre, {
      oracleContract: "TimeOracleHarness",
      cards: [{ publicKey: provisioned.cardPublicKey }],
      nodes: [{ address: provisioned.nodeAddress }],
      settings: { maxAcceptableDriftNs: BigInt(MAX_BOUND_NS) },
      scheduler: false,
      bridge: false,
      example: false,
    });
    const oracle = await hre.viem.getContractAt("TimeOracleHarness", deployment.oracle);
    await oracle.write.setNow([BigInt(Math.floor(Date.now() / 1000))]);
    expect(await oracle.read.verifyTimeProof([proof])).to.equal(true);
  });
});
