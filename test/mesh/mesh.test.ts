import { expect } from "chai";
import { decodeNodeEntries, timeAttestationForProof } from "../../protocol/codec";
import { ConsensusError } from "../../protocol/errors";
import { recoverNodeAddress, signNodeEntry } from "../../protocol/sign";
import type { TimeProof } from "../../protocol/types";
import { verifyTimeProof } from "../../protocol/verify";
import type { SignedTime } from "../../node/core";
import { alertSignedBy, signAlert } from "../../wire/mesh";
import { UINT32_MAX } from "../../protocol/constants";
import pino from "pino";
import { createTimeClient } from "../../client";
import { startNode } from "../../node/server";
import { startMesh, stopAll, TOLERANT_MESH_SETTINGS, waitUntil, waitUntilMeasured, type MeshMember } from "./helpers";

/** The node ids of a proof's entries, recovered, in order. */
function signersOf(signed: SignedTime): string[] {
  return decodeNodeEntries(signed.proof.nodeSignature).map((entry) =>
    recoverNodeAddress(timeAttestationForProof(signed.proof, entry.nodeTimestampNs), entry).toLowerCase(),
  );
}

async function nextProof(member: MeshMember, after: bigint = 0n): Promise<SignedTime> {
  await waitUntil(() => (member.mesh.latest?.proof.nanoMoment ?? 0n) > after, "a consensus proof");
  return member.mesh.latest!;
}

describe("mesh: consensus rounds on loopback (4 in-process members)", function () {
  this.timeout(20_000);
  let members: MeshMember[] = [];
  afterEach(async function () {
    await stopAll(members);
    members = [];
  });

  it("serves proofs co-signed by at least ⌈2n/3⌉ members in ascending order, which verify with nodeQuorum 3", async function () {
    members = await startMesh(4);
    const [a] = members;
    const signed = await nextProof(a!);
    const signers = signersOf(signed);
    expect(signers.length).to.be.at.least(3);
    expect([...signers].sort()).to.deep.equal(signers);
    expect(new Set(signers).size).to.equal(signers.length);
    expect(signers).to.include(a!.identity.nodeAddress.toLowerCase());
    // The consensus object beside the proof names the same signers and an honest bound.
    const consensus = signed.json.consensus!;
    expect(consensus).to.include({ members: 4, threshold: 3, responders: signers.length });
    expect(consensus.nodeIds.map((id) => id.toLowerCase())).to.deep.equal(signers);
    expect(signed.proof.accuracy).to.be.at.least(a!.config.accuracyNs);
    // §7.2: the (f + 1)-th smallest of |reading − moment| + uncertainty over the valid readings, f = ⌊(4 − 1)/3⌋ = 1.
    const bounds = consensus.readings
      .map((reading) => {
        const distance = BigInt(reading.readingNs) - signed.proof.nanoMoment;
        return BigInt(reading.uncertaintyNs) + (distance < 0n ? -distance : distance);
      })
      .sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    expect(BigInt(signed.proof.accuracy)).to.equal(bounds[1]! > 50n ? bounds[1]! : 50n);
    expect(JSON.parse(signed.body)).to.have.property("consensus");
    const allNodes = new Set(members.map((member) => member.identity.nodeAddress.toLowerCase()));
    const outcome = verifyTimeProof(signed.proof, {
      resolveCard: (cardId) => (cardId.toLowerCase() === a!.card.cardId.toLowerCase() ? { publicKey: a!.card.publicKey, revoked: false } : undefined),
      isActiveNode: (address) => allNodes.has(address.toLowerCase()),
      nodeQuorum: 3,
      nowNs: a!.card.readTimeNs(),
      maxAttestationAgeNs: 60_000_000_000n,
      maxFutureDriftNs: 1_000_000_000n,
      maxAcceptableDriftNs: 10_000_000n,
    });
    expect(outcome).to.include({ valid: true });
    // The service serves the mesh's proof, and its own verify() accepts it.
    expect(a!.service.current().proof.nodeSignature.length).to.be.greaterThan(2 + 160);
    expect(a!.service.verify(a!.service.current().proof)).to.deep.equal({ valid: true, reason: null });
  });

  it("converges, reports peers and state, and survives one member down; two down is exactly 'Insufficient node responses'", async function () {
    // Tolerant settings (a round's outcome is who answers), with a 500 ms timeout: the rounds after two members
    // stopped wait that long until both are absent (§7.1), and the test waits for Degraded behind them.
    members = await startMesh(4, { overrides: { ...TOLERANT_MESH_SETTINGS, meshRoundTimeoutMs: 500 } });
    const [a, b, c, d] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    await waitUntil(() => a.service.meshState().convergenceState === "Converged", "Converged", 10_000);
    const state = a.service.meshState();
    expect(state).to.include({ members: 4, threshold: 3, peerCount: 3, role: "primary" });
    expect(state.peers).to.have.length(3);
    expect(a.service.health()).to.include({ status: "ok" });

    await d.stop();
    const before = a.mesh.latest!.proof.nanoMoment;
    const withThree = await a.mesh.roundNow();
    expect(withThree.proof.nanoMoment > before).to.equal(true);
    expect(signersOf(withThree)).to.have.length(3);
    expect(signersOf(withThree)).to.not.include(d.identity.nodeAddress.toLowerCase());

    await c.stop();
    const error = await a.mesh.roundNow().catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ConsensusError);
    expect((error as Error).message).to.equal("Insufficient node responses");
    // Once the last good proof is older than meshMaxProofAgeNs, nothing is served: 503 with the round's error.
    await waitUntil(() => {
      try {
        a.service.current();
        return false;
      } catch {
        return true;
      }
    }, "the consensus proof to age out");
    expect(() => a.service.current()).to.throw("no consensus proof: Insufficient node responses");
    await waitUntil(() => b.service.meshState().lastError === "Insufficient node responses", "b's rounds to fail too");
    await waitUntil(() => a.service.meshState().convergenceState === "Degraded", "Degraded");
    expect(a.service.health().status).to.equal("stale");
  });

  it("refuses to co-sign a backdated moment whose claimed accuracy does not cover it, and signs the honest one", async function () {
    // A 2 s round timeout: the old bound (the whole timeout) covers the backdated moment below, while b's measured
    // path plus slack stays far below it even on a busy machine (a 100 ms backdate flaked under load).
    members = await startMesh(4, { overrides: { meshRoundTimeoutMs: 2_000 } });
    const [a, b] = members as [MeshMember, MeshMember];
    await nextProof(a); // sessions up and b's clock filter of a fed by probes
    const askToCoSign = async (roundId: bigint, backdateNs: bigint) => {
      const momentNs = a.card.readTimeNs() - backdateNs;
      await a.transport.request(b.identity.nodeAddress, { kind: "probe", t1Ns: a.card.readTimeNs(), roundId }, 1_000);
      const reply = await a.transport.request(
        b.identity.nodeAddress,
        { kind: "cosignRequest", roundId, nanoMoment: momentNs, accuracyNs: 1_000, hardwareSignature: a.card.signHardware(momentNs) },
        1_000,
      );
      return reply.payload;
    };
    // 1 s behind, claiming ±1 µs: within the old bound (the whole round timeout), far beyond b's measured path to
    // a (at most 2 × meshMaxPeerUncertaintyNs = 20 ms) plus four jitters and the 20 ms transit slack.
    const backdated = await askToCoSign(1_000_001n, 1_000_000_000n);
    expect(backdated).to.include({ kind: "cosignReply", nodeEntry: null });
    expect((backdated as { refusal: string }).refusal).to.match(/^the moment is \d+ ns behind this node's clock; at most \d+ ns allowed$/);
    const honest = await askToCoSign(1_000_002n, 0n);
    expect(honest).to.include({ kind: "cosignReply", refusal: "" });
  });

  it("refuses to co-sign a moment seconds from its clock claimed with the loosest accuracy, and records it against the proposer (issue 31.5)", async function () {
    // A 50 ms window (so that nothing else in this honest mesh counts as a fault of a) and a 2 s round timeout.
    members = await startMesh(4, { overrides: { meshRoundTimeoutMs: 2_000, meshWindowNs: "50000000" } });
    const [a, b] = members as [MeshMember, MeshMember];
    await nextProof(a); // sessions up and b's clock filter of a fed by probes
    const aAtB = () => b.service.meshState().peers.find((peer) => peer.nodeId === a.identity.nodeAddress)!;
    const faultsBefore = aAtB().faultsTotal;
    // A rogue a: a real round exchange, then a co-sign request for its card's moment of 3 s ago, claiming the most
    // a proof can carry (2^32 − 1 ns, 4.3 s), which covers it.
    const roundId = 2_000_001n;
    const momentNs = a.card.readTimeNs() - 3_000_000_000n;
    await a.transport.request(b.identity.nodeAddress, { kind: "probe", t1Ns: a.card.readTimeNs(), roundId }, 1_000);
    const reply = await a.transport.request(
      b.identity.nodeAddress,
      { kind: "cosignRequest", roundId, nanoMoment: momentNs, accuracyNs: UINT32_MAX, hardwareSignature: a.card.signHardware(momentNs) },
      1_000,
    );
    expect(reply.payload).to.include({ kind: "cosignReply", nodeEntry: null });
    // 2 × meshWindowNs + meshMaxPeerUncertaintyNs (10 ms) = 110 ms: the most an honest round of this mesh signs.
    expect((reply.payload as { refusal: string }).refusal).to.equal(
      "the claimed accuracy 4294967295 ns exceeds what an honest round of this mesh can sign: at most 110000000 ns (2 × meshWindowNs + meshMaxPeerUncertaintyNs)",
    );
    // Recorded: by rule in GET /mesh/state, and as a fault of the proposer (no honest proposer makes that claim).
    expect(b.service.meshState().refused.coSignRequestsByRule).to.deep.equal({ "accuracy-over-bound": 1 });
    expect(aAtB().faultsTotal).to.equal(faultsBefore + 1);
  });

  it("excludes a member whose clock is skewed beyond the window, and its error does not enter the bound", async function () {
    members = await startMesh(4, { skewNs: { 3: 20_000_000n } }); // member 3 runs 20 ms ahead; the window is 1 ms
    const [a, , , skewed] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    let signed = await nextProof(a);
    await waitUntil(() => (a.mesh.latest?.json.consensus?.readings.length ?? 0) + (a.mesh.latest?.json.consensus?.excluded.length ?? 0) === 4, "all four readings");
    signed = a.mesh.latest!;
    const consensus = signed.json.consensus!;
    expect(consensus.excluded.map((item) => item.nodeId.toLowerCase())).to.deep.equal([skewed.identity.nodeAddress.toLowerCase()]);
    expect(signersOf(signed)).to.not.include(skewed.identity.nodeAddress.toLowerCase());
    // The 20 ms skew did not enter the bound (a busy host's loopback still costs a millisecond or two).
    expect(signed.proof.accuracy).to.be.below(10_000_000);
    // The skewed member's own rounds fail: its clock is outside the window of everyone else's.
    const own = await skewed.mesh.roundNow().catch((e: unknown) => e);
    expect((own as Error).message).to.equal("Time divergence too high");
  });

  describe("pipelined rounds (meshMaxRoundsInFlight)", function () {
    /** A mesh whose rounds run only on demand (no background round for a minute), after a first round succeeded. */
    async function onDemandMesh(maxRoundsInFlight: number): Promise<MeshMember> {
      // Tolerant settings (a 1 s round timeout is well above the 150 ms these tests inject): they are about which
      // rounds run and which proof is served, not about agreement.
      members = await startMesh(4, {
        overrides: { ...TOLERANT_MESH_SETTINGS, meshRoundIntervalMs: 60_000, meshMaxRoundsInFlight: maxRoundsInFlight },
      });
      const a = members[0]!;
      await waitUntilMeasured(members);
      await a.mesh.roundNow();
      return a;
    }

    it("runs concurrent callers' rounds at once up to the bound, then joins the newest in flight", async function () {
      const a = await onDemandMesh(3);
      const roundsBefore = a.mesh.stats().roundsTotal;
      const proofs = await Promise.all([a.mesh.roundNow(), a.mesh.roundNow(), a.mesh.roundNow(), a.mesh.roundNow()]);
      const moments = proofs.map((signed) => signed.proof.nanoMoment);
      // Three rounds of their own (three moments, in the order they started); the fourth caller joined the third.
      expect(moments[0]! < moments[1]! && moments[1]! < moments[2]!, `moments ${moments.join(", ")}`).to.equal(true);
      expect(proofs[3]).to.equal(proofs[2]);
      expect(a.mesh.stats().roundsTotal - roundsBefore).to.equal(3);
      expect(a.mesh.latest).to.equal(proofs[2]);
    });

    it("serves the newest proof when pipelined rounds finish out of order; the older round's caller still gets its own", async function () {
      const a = await onDemandMesh(2);
      // Hold back the co-signatures of the older round by 150 ms, so the round started after it finishes first. The
      // older round is the one whose probes go out first (a round sends them as it starts).
      const request = a.transport.request.bind(a.transport);
      let slowRound: bigint | null = null;
      a.transport.request = (nodeId, payload, timeoutMs) => {
        if (payload.kind === "probe" && payload.roundId !== 0n) slowRound ??= payload.roundId;
        const reply = request(nodeId, payload, timeoutMs);
        if (payload.kind !== "cosignRequest" || payload.roundId !== slowRound) return reply;
        return reply.then(async (answer) => {
          await new Promise((resolve) => setTimeout(resolve, 150));
          return answer;
        });
      };
      const older = a.mesh.roundNow();
      const newer = await a.mesh.roundNow();
      expect(a.mesh.latest).to.equal(newer);
      const olderProof = await older;
      expect(olderProof.proof.nanoMoment < newer.proof.nanoMoment).to.equal(true);
      expect(a.mesh.latest, "an older round finishing last must not replace the served proof").to.equal(newer);
      expect(a.service.current()).to.equal(newer);
    });

    it("never hands a schedule due now a round that read its moment before (one round in flight at the bound)", async function () {
      const a = await onDemandMesh(1);
      const inFlight = a.mesh.roundNow();
      const dueNs = a.card.readTimeNs();
      const signed = await a.service.proofAtOrAfter(dueNs);
      expect(signed.proof.nanoMoment >= dueNs, `${signed.proof.nanoMoment} ≥ ${dueNs}`).to.equal(true);
      expect((await inFlight).proof.nanoMoment < dueNs).to.equal(true);
      // A moment the card clock has not reached is refused rather than answered with an earlier one.
      const ahead = await a.mesh.roundNow(a.card.readTimeNs() + 60_000_000_000n).catch((error: unknown) => error);
      expect(ahead).to.be.instanceOf(Error).with.property("message", "the card clock has not reached the requested moment");
    });
  });

  it("drops a co-signature that does not recover to the member (a liar), and logs it as a fault", async function () {
    members = await startMesh(4, { overrides: TOLERANT_MESH_SETTINGS });
    const [a, , , liar] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    liar.transport.handle("cosignRequest", () => ({ kind: "cosignReply", nodeEntry: `0x${"11".repeat(80)}`, refusal: "" }));
    await waitUntilMeasured(members);
    const signed = await a.mesh.roundNow();
    expect(signersOf(signed)).to.not.include(liar.identity.nodeAddress.toLowerCase());
    expect(signersOf(signed)).to.have.length(3);
    const report = a.service.meshState().peers.find((peer) => peer.nodeId.toLowerCase() === liar.identity.nodeAddress.toLowerCase())!;
    expect(report.faultsTotal).to.be.greaterThan(0);
  });

  it("a tampered member's signed alert excludes it everywhere; an alert it did not sign excludes nobody", async function () {
    members = await startMesh(4, { overrides: TOLERANT_MESH_SETTINGS });
    const [a, b, c, d] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    await nextProof(a);
    await waitUntil(() => members.every((m) => m.mesh.state().peerCount === 3), "every session");
    // C sends an alert about its own card, signed by someone else's key: refused, C stays in.
    const forged = signAlert(d.identity.nodeKey, c.identity.nodeAddress, c.card.cardId, 1n, "forged");
    c.transport.notify(a.identity.nodeAddress, { kind: "alert", alert: { kind: "tamper", cardId: c.card.cardId, reason: "forged", atNs: 1n, signature: forged } });
    d.card.simulateTamper("enclosure opened");
    const excluded = (member: MeshMember, target: MeshMember) =>
      member.service.meshState().peers.find((peer) => peer.nodeId.toLowerCase() === target.identity.nodeAddress.toLowerCase())!.excluded;
    await waitUntil(() => [a, b, c].every((member) => excluded(member, d)), "d excluded by every peer");
    expect(excluded(a, c)).to.equal(false);
    // The evidence is kept, as signed: GET /mesh/state lists it, and it checks against d's key alone; the forged
    // one is not kept.
    const alerts = a.service.meshState().tamperAlerts;
    expect(alerts.map((alert) => alert.nodeId)).to.deep.equal([d.identity.nodeAddress]);
    const [alert] = alerts;
    expect(alert).to.include({ cardId: d.card.cardId.toLowerCase(), reason: "enclosure opened" });
    const payload = { kind: "tamper" as const, cardId: alert!.cardId, reason: alert!.reason, atNs: BigInt(alert!.atNs), signature: Buffer.from(alert!.signature.slice(2), "hex") };
    expect(alertSignedBy(payload, d.identity.nodeAddress)).to.equal(true);
    expect(alertSignedBy(payload, c.identity.nodeAddress)).to.equal(false);
    const signed = await a.mesh.roundNow();
    expect(signersOf(signed)).to.not.include(d.identity.nodeAddress.toLowerCase());
    expect(d.service.health().status).to.equal("tampered");
  });

  it("serves the round beside the proof over REST and gRPC alike, and GET /mesh/state and /health report the mesh", async function () {
    // Tolerant settings and a 5 s proof age: starting the node's servers holds this one event loop for a while, and
    // /health must still find a fresh proof and a Converged mesh after it.
    members = await startMesh(4, { overrides: { ...TOLERANT_MESH_SETTINGS, meshMaxProofAgeNs: "5000000000" } });
    const [a] = members as [MeshMember];
    await waitUntil(() => a.service.meshState().convergenceState === "Converged", "Converged", 10_000);
    const node = await startNode({ config: a.config, logger: pino({ level: "silent" }), service: a.service });
    const client = createTimeClient({ endpoint: node.endpoints.rest, grpcEndpoint: node.endpoints.grpc });
    try {
      const rest = await client.getCurrentTime();
      expect(rest.consensus?.members).to.equal(4);
      expect(rest.consensus?.readings.length).to.be.at.least(3);
      const grpc = await client.grpc.getCurrentTime();
      const round = grpc.consensus?.round;
      expect(round?.threshold).to.equal(3);
      expect(grpc.consensus?.responders).to.equal(round?.responders);
      expect(grpc.consensus?.nodeIds).to.deep.equal(round?.nodeIds);
      expect(BigInt(round!.timeNs) > 0n).to.equal(true);
      const state = (await (await fetch(`${node.endpoints.rest}/mesh/state`)).json()) as { convergenceState: string; peers: unknown[]; members: number };
      expect(state).to.include({ convergenceState: "Converged", members: 4 });
      expect(state.peers).to.have.length(3);
      const health = (await (await fetch(`${node.endpoints.rest}/health`)).json()) as { status: string; convergenceState: string };
      expect(health).to.include({ status: "ok", convergenceState: "Converged" });
      // The refusal counters over REST (schema-checked by the route) and as a metric, one line per reason.
      const refused = (state as unknown as { refused: { packets: Record<string, number>; coSignRequests: number } }).refused;
      expect(refused.packets).to.have.property("replay").that.is.a("number");
      expect(refused.coSignRequests).to.be.a("number");
      const metrics = await (await fetch(`${node.endpoints.rest}/metrics`)).text();
      expect(metrics).to.match(/^timerpc_mesh_packets_dropped_total\{reason="replay"\} \d+$/m);
      expect(metrics).to.match(/^timerpc_mesh_rounds_total\{outcome="ok"\} [1-9]\d*$/m);
      // Counters, as their names say (rate() and increase() need the counter type); the state as a 0/1 per state.
      expect(metrics).to.match(/^# TYPE timerpc_mesh_rounds_total counter$/m);
      expect(metrics).to.match(/^# TYPE timerpc_mesh_packets_dropped_total counter$/m);
      const states = [...metrics.matchAll(/^timerpc_mesh_convergence_state\{state="(\w+)"\} ([01])$/gm)].map((match) => [match[1], Number(match[2])]);
      expect(states.map(([state]) => state)).to.have.members(["Initializing", "Converging", "Converged", "Degraded"]);
      expect(states.filter(([, value]) => value === 1)).to.have.length(1);
      expect(metrics).to.match(/^timerpc_mesh_members 4$/m);
      expect(metrics).to.match(/^timerpc_mesh_peers_reachable [0-3]$/m);
      expect(metrics).to.match(/^timerpc_mesh_tamper_alerts 0$/m);
      // Peer offsets and delays in seconds: loopback peers are well within a second of each other.
      const offsets = [...metrics.matchAll(/^timerpc_mesh_peer_offset_seconds\{peer="0x[0-9a-fA-F]{40}"\} (\S+)$/gm)].map((match) => Number(match[1]));
      expect(offsets).to.have.length(3);
      for (const offset of offsets) expect(Math.abs(offset)).to.be.lessThan(1);
      // A mesh proof's accuracy (100 µs to 10 ms on loopback) lands below the 100 ms top bucket, not in +Inf only.
      const accuracyCount = Number(/^timerpc_accuracy_ns_count (\d+)$/m.exec(metrics)?.[1]);
      expect(accuracyCount).to.be.greaterThan(0);
      expect(metrics).to.match(new RegExp(`^timerpc_accuracy_ns_bucket\\{le="100000000"\\} ${accuracyCount}$`, "m"));
    } finally {
      client.close();
      await node.close();
    }
  });

  it("a secondary member proposes no rounds (it never signs as a card), co-signs the primaries', and serves their relayed proofs", async function () {
    members = await startMesh(4, { roles: { 3: "secondary" } });
    const [a, , , secondary] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    const error = await secondary.mesh.roundNow().catch((e: unknown) => e);
    expect((error as Error).message).to.equal("a secondary node proposes no rounds: it never signs as a card");
    await waitUntil(() => (a.mesh.latest?.json.consensus?.nodeIds.length ?? 0) === 4, "a proof co-signed by all four");
    expect(a.mesh.latest!.json.consensus!.nodeIds.map((id) => id.toLowerCase())).to.include(secondary.identity.nodeAddress.toLowerCase());
    // What it serves is a primary's proof (another card), checked on arrival like any verifier would.
    await waitUntil(() => secondary.mesh.latest !== null, "a relayed proof");
    const served = secondary.service.current();
    expect(served.json.proof.hardwareId).to.not.equal(secondary.card.cardId);
    expect(served.json.consensus!.responders).to.be.at.least(3);
    expect(secondary.service.verify(served.proof)).to.deep.equal({ valid: true, reason: null });
    await waitUntil(() => secondary.service.meshState().convergenceState === "Converged", "Converged on relayed proofs", 10_000);
    // A proof at or after a moment (schedules, FUTURE_SCHEDULE): it waits for the next relayed one, never signs.
    const nowNs = secondary.card.readTimeNs();
    const later = await secondary.service.proofAtOrAfter(nowNs);
    expect(later.proof.nanoMoment >= nowNs).to.equal(true);
    expect(later.json.proof.hardwareId).to.not.equal(secondary.card.cardId);
    // Its offset is its own measurement of the primary's clock, and with the primaries gone it is no longer
    // Converged on old news: each period without a relayed proof is a failed round.
    expect(secondary.service.meshState().consensusOffsetNs).to.not.equal(null);
    await Promise.all(members.slice(0, 3).map((member) => member.stop()));
    await waitUntil(() => secondary.service.meshState().lastError === "no relayed proof from a primary", "a period without relayed proofs", 10_000);
    await waitUntil(() => secondary.service.meshState().convergenceState === "Degraded", "Degraded without relayed proofs", 10_000);
  });

  it("takes a peer's role from its own configuration: a member configured as secondary gets no co-signature for its 'rounds'", async function () {
    members = await startMesh(4, { roles: { 3: "secondary" } });
    const [a, , , secondary] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    const secondaryAtA = () => a.service.meshState().peers.find((peer) => peer.nodeId === secondary.identity.nodeAddress)!;
    // Sessions up and a's path to the secondary measured, so that only its role can stand in the way.
    await waitUntil(() => secondaryAtA().offsetNs !== null, "a's first measurement of the secondary");
    // A faulty secondary (it holds a card, like every dev node) proposes a round as if it were a primary.
    const roundId = 9_000_001n;
    const momentNs = secondary.card.readTimeNs();
    await secondary.transport.request(a.identity.nodeAddress, { kind: "probe", t1Ns: secondary.card.readTimeNs(), roundId }, 1_000);
    const reply = await secondary.transport.request(
      a.identity.nodeAddress,
      { kind: "cosignRequest", roundId, nanoMoment: momentNs, accuracyNs: 1_000_000, hardwareSignature: secondary.card.signHardware(momentNs) },
      1_000,
    );
    expect(reply.payload).to.deep.equal({ kind: "cosignReply", nodeEntry: null, refusal: "the proposer is configured here as secondary, not primary (meshPeers)" });
    expect(secondaryAtA().role).to.equal("secondary");
  });

  it("a secondary refuses a relayed proof dated ahead of its clock by more than the proof's bound, and keeps serving the mesh's", async function () {
    members = await startMesh(4, { roles: { 3: "secondary" } });
    const [a, b, c, secondary] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    await waitUntil(() => secondary.mesh.latest !== null && a.mesh.latest !== null, "a relayed proof");
    // A proof valid in every other way: the primary's card, ±1 µs, co-signed by three members, dated 100 ms ahead
    // (within meshMaxProofAgeNs, 300 ms here). Served, it would stay "newest" for 100 ms.
    const aheadNs = 100_000_000n;
    const momentNs = secondary.card.readTimeNs() + aheadNs;
    const base = { nanoMoment: momentNs, hardwareSignature: a.card.signHardware(momentNs), accuracy: 1_000 };
    const entries = [a, b, c]
      .map((member) => ({ id: member.identity.nodeAddress.toLowerCase(), entry: signNodeEntry(member.identity.nodeKey, timeAttestationForProof(base, momentNs)) }))
      .sort((x, y) => (x.id < y.id ? -1 : 1));
    const proof: TimeProof = { ...base, nodeSignature: `0x${entries.map((e) => e.entry.slice(2)).join("")}` };
    a.transport.notify(secondary.identity.nodeAddress, { kind: "relayedProof", proof, consensusJson: JSON.stringify(a.mesh.latest!.json.consensus) });
    await waitUntil(() => secondary.mesh.stats().relayedProofsRefusedTotal["future-dated"] === 1, "the future-dated proof refused");
    expect(secondary.mesh.latest!.proof.nanoMoment < momentNs).to.equal(true);
    // Operators see it in GET /mesh/state (the same report) beside the transport's packet drops.
    const refused = secondary.mesh.state().refused;
    expect(refused.relayedProofs["future-dated"]).to.equal(1);
    expect(Object.keys(refused.packets)).to.include.members(["wrong-source", "replay", "cosign-rate"]);
    // The mesh's own proofs keep arriving and being served.
    const before = secondary.mesh.latest!.proof.nanoMoment;
    await waitUntil(() => secondary.mesh.latest!.proof.nanoMoment > before, "a newer relayed proof");
  });

  it("a lone node with a non-primary role serves nothing of its own, and says why", async function () {
    members = await startMesh(1, { roles: { 0: "archive" } });
    expect(() => members[0]!.service.current()).to.throw(/role is archive: it never signs as a card/);
    const error = await members[0]!.service.attestNow().catch((e: unknown) => e);
    expect((error as Error).message).to.match(/role is archive/);
  });

  it("a flapping member (answering one probe in two) shows it in its reachability register, and rounds go on above the threshold", async function () {
    members = await startMesh(4, { overrides: TOLERANT_MESH_SETTINGS });
    const [a, , , flapping] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    await nextProof(a);
    let answer = false;
    flapping.transport.handle("probe", (_peer, payload, receivedAtNs) => {
      answer = !answer;
      if (!answer || payload.kind !== "probe") return null; // every other exchange, rounds' included, goes unanswered
      return { kind: "probeReply", t2Ns: receivedAtNs, t3Ns: flapping.card.readTimeNs(), cardAccuracyNs: flapping.config.accuracyNs, state: "Converging" };
    });
    const flappingId = flapping.identity.nodeAddress.toLowerCase();
    const reachOf = () => a.service.meshState().peers.find((peer) => peer.nodeId.toLowerCase() === flappingId)!.reach;
    // Eight probe intervals later the register holds the pattern: neither all ones nor all zeros.
    await waitUntil(() => reachOf() !== 0 && reachOf() !== 0xff && (reachOf() & 0x0f) !== 0x0f, "a flapping reach register", 5_000);
    const before = a.mesh.latest!.proof.nanoMoment;
    for (let round = 0; round < 5; round += 1) {
      const signed = await a.mesh.roundNow();
      expect(signed.json.consensus!.responders).to.be.at.least(3);
    }
    expect(a.mesh.latest!.proof.nanoMoment > before).to.equal(true);
    expect(a.service.meshState().convergenceState).to.not.equal("Degraded");
  });
});
