/**
 * The chrony card against a real chronyd (issue 26.1): two unprivileged-safe chronyd processes on loopback (`-x`:
 * neither ever touches the system clock), a source (`local stratum 1`) and a client synchronised to it, each with
 * its own temporary config, command socket, pid and drift file. A node with `cardDriver: "chrony"` reads the client
 * through chronyc. The test checks that
 * - the node serves proofs that verify with the reference verifier and on-chain, with an accuracy chrony's own
 *   figures explain: recomputed here, in floating point, from the `chronyc -c tracking` line the card reports;
 * - once the source is stopped, the bound grows and the node stops signing (degraded) before it signs an accuracy
 *   above chronyMaxBoundNs: asserted on the card's state transitions and on every proof the node published, not on
 *   timing.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import hre from "hardhat";
import pino from "pino";
import { contractProofFromJson } from "../client/contractProof";
import { explainTimeProof } from "../client/explain";
import { startDevNode, type DevNode } from "../node/devNode";
import { startNode, type RunningNode } from "../node/server";
import type { CardStatus } from "../node/card/types";
import type { SignedTime } from "../node/core/types";
import { deployAttestedTime, devRegistrations } from "../deploy";
import { verifyDevNodeProof } from "./devProof";
import { accuracyFromChrony, CHRONYC, CLIENT_MAX_CLOCK_ERROR_PPM, startChronydPair, waitUntil, type ChronydPair } from "./chronyd";

/** The largest bound the node signs, ns: far above a loopback chronyd's bound, reached ~10 s after the source stops. */
const MAX_BOUND_NS = 1_000_000;
const POLL_INTERVAL_MS = 250;

describe("chrony card against a real chronyd (test-system)", function () {
  this.timeout(180_000);

  let dir = "";
  let chronyd: ChronydPair | null = null;
  let node: DevNode | null = null;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ats-chrony-"));
    chronyd = await startChronydPair(dir);
  });

  after(async () => {
    await node?.close();
    await chronyd?.stop();
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
  });

  it("serves proofs that verify off-chain and on-chain with the bound chrony's figures give; stops signing before its maximum once the source stops", async () => {
    // The node as `ats-node dev` starts it, with its service kept to watch its proofs and its card's state.
    let running: RunningNode | null = null;
    node = await startDevNode({
      startNode: async (parameters) => (running = await startNode(parameters)),
      env: {},
      cwd: process.cwd(),
      logger: () => pino({ level: "silent" }),
      overrides: {
        cardDriver: "chrony",
        chronySocketPath: chronyd!.clientSocket,
        chronycPath: CHRONYC,
        chronyPollIntervalMs: POLL_INTERVAL_MS,
        chronyMaxBoundNs: MAX_BOUND_NS,
        chronyMaxClockErrorPpb: CLIENT_MAX_CLOCK_ERROR_PPM * 1_000,
        maxAcceptableDriftNs: BigInt(MAX_BOUND_NS),
        grpcEnabled: false,
      },
    });
    const { service, endpoints } = running!;
    const published: SignedTime[] = [];
    service.onProof((signed) => published.push(signed));
    await waitUntil("the node to serve", 30_000, () => (service.health().status === "ok" ? true : null));

    const info = (await (await fetch(`${endpoints.rest}/node/info`)).json()) as { accuracyNs: number; card: CardStatus };
    expect(info.accuracyNs).to.equal(MAX_BOUND_NS);
    expect(info.card).to.deep.include({ driver: "chrony", state: "serving", reason: null });
    expect(info.card.source).to.match(/^chrony 7F000001 127\.0\.0\.1 stratum 2, leap status Normal$/);

    // On-chain: the dev card and node registered on the in-process chain, an oracle that accepts up to the maximum.
    // Deployed before the proof is read, so that the proof is checked on-chain while fresh however long a deployment
    // takes on a busy host (deployed after it, the proof could age past the oracle's freshness window).
    const deployment = await deployAttestedTime(hre, { ...devRegistrations(), settings: { maxAcceptableDriftNs: BigInt(MAX_BOUND_NS) }, scheduler: false, bridge: false, example: false });
    const oracle = await hre.viem.getContractAt("TimeOracle", deployment.oracle);

    // A proof over REST, signed under one reading: the card's report before and after it names the same reading.
    const { proof, status } = await waitUntil("a proof signed under a reading the card still reports", 30_000, async () => {
      const before = service.info().card!;
      const json = (await (await fetch(`${endpoints.rest}/time/current`)).json()) as unknown;
      const after = service.info().card!;
      const candidate = contractProofFromJson(json);
      const sameReading = before.evidence?.readAtNs === after.evidence?.readAtNs && before.evidence !== null;
      return sameReading && candidate.nanoMoment >= BigInt(before.evidence!.readAtNs) ? { proof: candidate, status: before } : null;
    });
    const explained = accuracyFromChrony(status, proof.nanoMoment);
    expect(status.evidence!.growthPpb).to.equal(explained.growthPpb);
    // Float recomputation against the card's bigint: equal, give or take the two roundings.
    expect(Math.abs(proof.accuracy - explained.accuracyNs), `signed ${proof.accuracy} ns, chrony's figures give ${explained.accuracyNs} ns`).to.be.at.most(2);
    expect(proof.accuracy).to.be.below(MAX_BOUND_NS);

    // The reference verifier, with the oracle's rules and this node's card and key; then the oracle deployed above.
    const offChain = verifyDevNodeProof(proof, node.nodeAddress, BigInt(MAX_BOUND_NS));
    expect(offChain, JSON.stringify(offChain)).to.deep.include({ valid: true });
    const onChain = await explainTimeProof(await hre.viem.getPublicClient(), oracle.address, proof);
    expect(onChain, JSON.stringify(onChain, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value))).to.include({ valid: true, onChainValid: true });

    // Stop the source: chrony's root dispersion, and the card's bound with it, grow until the card is degraded.
    const transitions: CardStatus[] = [service.info().card!];
    const bounds: number[] = [];
    await chronyd!.stopSource();
    const degraded = await waitUntil("the card to become degraded", 120_000, () => {
      const now = service.info().card!;
      if (now.state !== transitions.at(-1)!.state) transitions.push(now);
      if (now.accuracyBoundNs !== null) bounds.push(now.accuracyBoundNs);
      return now.state === "degraded" ? now : null;
    });
    expect(transitions.map((entry) => entry.state)).to.deep.equal(["serving", "degraded"]);
    // chronyd 4.3 keeps its leap status "Normal" with an unreachable source and grows its root dispersion, so the
    // card leaves on its bound; should a chronyd declare itself unsynchronised first, the node stops signing as well.
    expect(degraded.reason).to.match(new RegExp(`^chrony's error bound \\d+ ns exceeds chronyMaxBoundNs ${MAX_BOUND_NS} ns$|^chrony is not synchronised`));
    // The bound grew while the source was gone.
    expect(bounds.length).to.be.at.least(2);
    expect(bounds.at(-1)!).to.be.above(bounds[0]!);
    // Nothing the node ever published carries more than the maximum; it signs nothing while degraded.
    expect(Math.max(...published.map((signed) => signed.proof.accuracy))).to.be.at.most(MAX_BOUND_NS);
    const publishedWhenDegraded = published.length;
    await waitUntil("the node to report degraded", 10_000, () => (service.health().status === "degraded" ? true : null));
    const refusal = await service.attestNow().then(
      () => null,
      (error: Error) => error.message,
    );
    expect(refusal).to.match(/chrony's error bound \d+ ns exceeds chronyMaxBoundNs|card error bound \d+ ns exceeds the signing bound|chrony is not synchronised/);
    expect(published.length).to.equal(publishedWhenDegraded);
    const health = (await (await fetch(`${endpoints.rest}/health`)).json()) as { status: string; card: CardStatus };
    expect(health.status).to.equal("degraded");
    expect(health.card.state).to.equal("degraded");
  });
});
