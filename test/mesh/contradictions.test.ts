import { expect } from "chai";
import { Value } from "@sinclair/typebox/value";
import { timeAttestationForProof } from "../../protocol/codec";
import { MAX_SIGNING_DELAY_NS, NS_PER_SECOND } from "../../protocol/constants";
import { checkEvidence } from "../../protocol/evidence";
import { signHardware, signNodeEntry } from "../../protocol/sign";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS } from "../../protocol/devkeys";
import { nodeAddressFromPrivateKey } from "../../protocol/keys";
import { createAnchoredClock } from "../../node/card/hostClock";
import { CHECKPOINT_SPACING_NS, ContradictionWatch, MAX_CHECKPOINTS_PER_PEER } from "../../node/mesh/contradictions";
import { MeshStateBody } from "../../wire/rest";
import { startMesh, stopAll, waitUntil, type MeshMember } from "./helpers";

const HOUR_NS = 3_600n * NS_PER_SECOND;
/** A step of every member's clock that moves moments further apart than an honest node's signing delay. */
const CLOCK_STEP_NS = 2n * MAX_SIGNING_DELAY_NS;

describe("mesh: contradiction evidence (docs/protocol.md §7.8)", function () {
  describe("ContradictionWatch (the bounded window per peer)", function () {
    const node = nodeAddressFromPrivateKey(DEV_NODE_PRIVATE_KEYS[0]);
    const startNs = 1_732_268_493_123_456_789n;
    /** Observes one entry of `node` over `momentNs`, stamped `nodeTimestampNs`. */
    const observe = (watch: ContradictionWatch, momentNs: bigint, nodeTimestampNs: bigint) => {
      const base = { nanoMoment: momentNs, hardwareSignature: signHardware(DEV_CARD_PRIVATE_KEY, momentNs), accuracy: 1_000 };
      const entry = signNodeEntry(DEV_NODE_PRIVATE_KEYS[0], timeAttestationForProof(base, nodeTimestampNs));
      return watch.observe(node, base, entry, nodeTimestampNs, nodeTimestampNs);
    };

    it("flags nothing over an honest quarter hour of one entry a second (longer than the checkpoints span)", function () {
      const watch = new ContradictionWatch();
      for (let second = 0n; second < 900n; second += 1n) {
        const atNs = startNs + second * NS_PER_SECOND;
        expect(observe(watch, atNs - 5_000_000n, atNs), `second ${second}`).to.equal(null);
      }
      expect(watch.reports()).to.deep.equal([]);
    });

    it("catches an entry stamped ahead once a later moment passes it, and one stamped behind against an old checkpoint", function () {
      const ahead = new ContradictionWatch();
      expect(observe(ahead, startNs, startNs + HOUR_NS)).to.equal(null);
      // Honest entries after it: not yet evidence while the moments are within the signing delay …
      expect(observe(ahead, startNs + MAX_SIGNING_DELAY_NS, startNs + MAX_SIGNING_DELAY_NS)).to.equal(null);
      // … then a moment beyond it, many entries later (the lie is kept in the largest-timestamp slot, not a ring).
      for (let index = 0n; index < 1_000n; index += 1n) observe(ahead, startNs + MAX_SIGNING_DELAY_NS + index, startNs + MAX_SIGNING_DELAY_NS + index);
      const found = observe(ahead, startNs + CLOCK_STEP_NS, startNs + CLOCK_STEP_NS);
      expect(found?.first).to.equal(true);
      expect(checkEvidence(found!.report.evidence)).to.include({ valid: true, nodeId: node });
      // Counted again, reported once.
      expect(observe(ahead, startNs + CLOCK_STEP_NS + 1n, startNs + CLOCK_STEP_NS + 1n)?.first).to.equal(false);
      expect(ahead.reports()).to.have.length(1);
      expect(ahead.reports()[0]).to.include({ nodeId: node, contradictionsTotal: 2 });

      const behind = new ContradictionWatch();
      expect(observe(behind, startNs, startNs)).to.equal(null);
      for (let second = 1n; second < 100n; second += 1n) observe(behind, startNs + second * NS_PER_SECOND, startNs + second * NS_PER_SECOND);
      // A new moment stamped with a clock reading from before the first checkpoint's.
      const late = observe(behind, startNs + 100n * NS_PER_SECOND, startNs - 1n);
      expect(late?.first).to.equal(true);
      expect(checkEvidence(late!.report.evidence)).to.include({ valid: true, nodeId: node });
    });

    it("keeps at most MAX_CHECKPOINTS_PER_PEER checkpoints, spaced CHECKPOINT_SPACING_NS apart", function () {
      const watch = new ContradictionWatch();
      const count = BigInt(MAX_CHECKPOINTS_PER_PEER) + 8n;
      for (let index = 0n; index < count; index += 1n) observe(watch, startNs + index * CHECKPOINT_SPACING_NS, startNs + index * CHECKPOINT_SPACING_NS);
      // Stamped before every checkpoint: the oldest kept ones are beyond the delay, so it is caught; the dropped
      // ones are gone (a later stamp than their window would not be compared with them).
      const found = observe(watch, startNs + count * CHECKPOINT_SPACING_NS, startNs - 1n);
      const earliest = found!.report.evidence.proofs.map((side) => BigInt(side.timeProof.nanoMoment)).sort((x, y) => (x < y ? -1 : 1))[0]!;
      expect(earliest).to.equal(startNs + 8n * CHECKPOINT_SPACING_NS);
    });
  });

  describe("on loopback (4 in-process members, one secondary)", function () {
    this.timeout(60_000);
    let members: MeshMember[] = [];
    afterEach(async function () {
      await stopAll(members);
      members = [];
    });

    /** A mesh whose members' card clocks all read one host clock, which `step` moves forward for all of them. */
    async function steppableMesh(): Promise<{ step: (ns: bigint) => void }> {
      const hostClock = createAnchoredClock();
      let stepNs = 0n;
      members = await startMesh(4, { roles: { 3: "secondary" }, hostClockNs: () => hostClock() + stepNs });
      return { step: (ns) => (stepNs += ns) };
    }

    /** Waits until `member` has proposed `more` further successful rounds. */
    async function rounds(member: MeshMember, more: number): Promise<void> {
      const target = member.mesh.state().roundsSucceeded + more;
      await waitUntil(() => member.mesh.state().roundsSucceeded >= target, `${more} more rounds`, 20_000);
    }

    it("an honest mesh flags nothing over many rounds, even across a clock step larger than the signing delay", async function () {
      const { step } = await steppableMesh();
      const [a, b, c, d] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
      await rounds(a, 30);
      step(CLOCK_STEP_NS);
      await rounds(a, 30);
      await rounds(c, 10);
      await waitUntil(() => d.mesh.latest !== null && d.mesh.latest.proof.nanoMoment > a.card.readTimeNs() - NS_PER_SECOND, "a relayed proof after the step");
      for (const member of [a, b, c, d]) {
        const state = member.service.meshState();
        expect(state.contradictions, member.identity.nodeAddress).to.deep.equal([]);
        expect(Value.Check(MeshStateBody, state)).to.equal(true);
      }
    });

    it("keeps evidence against a peer that stamps co-signatures an hour ahead, then honestly: proposers and the secondary", async function () {
      const { step } = await steppableMesh();
      const [a, b, liar, d] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
      let lying = true;
      let lies = 0;
      // The liar co-signs every request, stamping its nodeTimestamp an hour ahead while `lying` (its own rounds, as
      // proposer, stay honest): each entry alone verifies, and their moments are milliseconds apart.
      liar.transport.handle("cosignRequest", (_link, payload) => {
        if (payload.kind !== "cosignRequest") return null;
        const stampNs = liar.card.readTimeNs() + (lying ? HOUR_NS : 0n);
        if (lying) lies += 1;
        const base = { nanoMoment: payload.nanoMoment, hardwareSignature: payload.hardwareSignature, accuracy: payload.accuracyNs };
        return { kind: "cosignReply", nodeEntry: signNodeEntry(liar.identity.nodeKey, timeAttestationForProof(base, stampNs)), refusal: "" };
      });
      await rounds(a, 10);
      await rounds(b, 10);
      lying = false;
      expect(lies).to.be.greaterThan(0);
      await rounds(a, 10);
      for (const member of members) expect(member.service.meshState().contradictions, "not evidence yet: the moments are close").to.deep.equal([]);
      // Every clock moves forward by twice the signing delay: the liar's honest entries now carry moments long after
      // the ones it stamped an hour ahead, signed earlier by its own clock.
      step(CLOCK_STEP_NS);
      const liarId = liar.identity.nodeAddress.toLowerCase();
      const accused = (member: MeshMember) => member.service.meshState().contradictions.find((report) => report.nodeId.toLowerCase() === liarId);
      for (const member of [a, b, d]) await waitUntil(() => accused(member) !== undefined, `${member.identity.nodeAddress} to catch the liar`, 20_000);
      for (const member of [a, b, d]) {
        const state = member.service.meshState();
        expect(state.contradictions, "only the liar").to.have.length(1);
        expect(Value.Check(MeshStateBody, state)).to.equal(true);
        const report = accused(member)!;
        expect(checkEvidence(report.evidence)).to.include({ valid: true });
        expect(BigInt(report.excessNs) > 0n).to.equal(true);
        const peer = state.peers.find((candidate) => candidate.nodeId.toLowerCase() === liarId)!;
        expect(peer.faultsTotal).to.be.greaterThan(0);
      }
      // The liar itself saw nothing wrong with the others.
      expect(liar.service.meshState().contradictions).to.deep.equal([]);
    });
  });
});
