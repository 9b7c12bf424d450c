import { expect } from "chai";
import { Value } from "@sinclair/typebox/value";
import {
  attest,
  checkEvidence,
  checkEvidenceText,
  claimContradiction,
  contradictionEvidence,
  findContradictions,
  MAX_CONTRADICTION_EVIDENCE_BYTES,
  MAX_SIGNING_DELAY_NS,
  NS_PER_SECOND,
  SECP256K1_HALF_N,
  proofToJson,
  signNodeEntry,
  timeAttestationForProof,
  type Address,
  type ContradictionEvidenceJson,
  type Hex,
  type TimeProof,
} from "../../protocol";
import { ContradictionEvidenceObject } from "../../wire/rest";
import { ACCURACY_NS, CARD_ID, CARD_KEY, NANO_MOMENT, NODE_ADDRESSES, NODE_KEYS } from "./fixtures";

const HOUR_NS = 3_600n * NS_PER_SECOND;
/** The smallest moment gap that convicts two entries of ACCURACY_NS each: D + 2 × accuracy + 1 ns. */
const CONVICTING_GAP_NS = MAX_SIGNING_DELAY_NS + 2n * BigInt(ACCURACY_NS) + 1n;

/** A one-node proof by dev node `node` over `nanoMoment`, stamped `nodeTimestampNs`. */
function signedBy(node: number, nanoMoment: bigint, nodeTimestampNs: bigint, accuracy = ACCURACY_NS): TimeProof {
  return attest({ card: CARD_KEY, nodes: [NODE_KEYS[node]!], nanoMoment, accuracy, nodeTimestampNs });
}

/**
 * The lie of §7.8: node 0 signs NANO_MOMENT honestly, then, later by its own clock (+1 h), a moment `gapNs` before
 * it. With gapNs ≥ CONVICTING_GAP_NS that is evidence.
 */
function liePair(gapNs = CONVICTING_GAP_NS): [TimeProof, TimeProof] {
  return [signedBy(0, NANO_MOMENT, NANO_MOMENT), signedBy(0, NANO_MOMENT - gapNs, NANO_MOMENT + HOUR_NS)];
}

function evidenceOf(proofs: [TimeProof, TimeProof]): ContradictionEvidenceJson {
  const [found] = findContradictions(proofs[0], proofs[1]);
  expect(found, "a contradiction to build the evidence from").to.not.equal(undefined);
  return contradictionEvidence(found!, proofs);
}

/** A JSON copy with `edit` applied (the evidence as a file would carry it, then changed). */
function edited(evidence: ContradictionEvidenceJson, edit: (copy: { nodeId: string; proofs: Array<{ entryIndex: number; timeProof: { nanoMoment: string; proof: Record<string, unknown> } }> } & Record<string, unknown>) => void): unknown {
  const copy = JSON.parse(JSON.stringify(evidence)) as Parameters<typeof edit>[0];
  edit(copy);
  return copy;
}

/** Evidence whose two sides are `a` and `b` (entry 0 each), naming `nodeId`: a pair findContradictions would not make. */
function evidenceFromSides(a: TimeProof, b: TimeProof, nodeId: Address = NODE_ADDRESSES[0]!): ContradictionEvidenceJson {
  return { kind: "ats-contradiction", version: 1, nodeId, proofs: [{ entryIndex: 0, timeProof: proofToJson(a) }, { entryIndex: 0, timeProof: proofToJson(b) }] };
}

describe("contradiction evidence (docs/protocol.md §7.8)", () => {
  describe("the rule", () => {
    const claim = (nodeTimestampNs: bigint, nanoMoment: bigint, accuracyNs = ACCURACY_NS) => ({ nodeTimestampNs, nanoMoment, accuracyNs });

    it("an honest node's pairs are not evidence, in either argument order", () => {
      const base = NANO_MOMENT;
      const honest: Array<[ReturnType<typeof claim>, ReturnType<typeof claim>, string]> = [
        [claim(base, base), claim(base + NS_PER_SECOND, base + NS_PER_SECOND), "later signature, later moment"],
        [claim(base, base), claim(base, base), "equal timestamps and moments"],
        [claim(base, base), claim(base, base + 5n * NS_PER_SECOND), "equal timestamps, moments apart within the delay"],
        [claim(base, base), claim(base + NS_PER_SECOND, base - 100n, 1_000), "overlapping intervals"],
        // A co-signer signing, later by its clock, a reading a whole signing delay old: allowed, not a lie.
        [claim(base, base), claim(base + 1n, base - MAX_SIGNING_DELAY_NS), "a later signature over a reading D old"],
        [claim(base, base), claim(base + 1n, base - CONVICTING_GAP_NS + 1n), "one ns short of the bound"],
        // Later by the clock and later in moment by far: what every honest stream looks like over an hour.
        [claim(base, base), claim(base + HOUR_NS, base + HOUR_NS), "an hour apart"],
      ];
      for (const [a, b, what] of honest) {
        expect(claimContradiction(a, b), what).to.equal(null);
        expect(claimContradiction(b, a), `${what} (reversed)`).to.equal(null);
      }
    });

    it("convicts a later signature over a reading wholly before the earlier one by more than D, from the first ns", () => {
      const earlier = claim(NANO_MOMENT, NANO_MOMENT);
      const later = claim(NANO_MOMENT + 1n, NANO_MOMENT - CONVICTING_GAP_NS);
      for (const [a, b] of [[earlier, later], [later, earlier]] as const) {
        const found = claimContradiction(a, b);
        expect(found?.earlier).to.equal(earlier);
        expect(found?.later).to.equal(later);
        expect(found?.excessNs).to.equal(1n);
      }
    });

    it("with equal timestamps either order is the node's: the larger moment gap convicts", () => {
      const a = claim(NANO_MOMENT, NANO_MOMENT);
      const b = claim(NANO_MOMENT, NANO_MOMENT - 2n * CONVICTING_GAP_NS);
      expect(claimContradiction(a, b)?.excessNs).to.equal(CONVICTING_GAP_NS + 1n);
      expect(claimContradiction(b, a)?.excessNs).to.equal(CONVICTING_GAP_NS + 1n);
    });

    it("the accuracy widens what an honest node may sign", () => {
      const loose = 1_000_000;
      expect(claimContradiction(claim(NANO_MOMENT, NANO_MOMENT, loose), claim(NANO_MOMENT + 1n, NANO_MOMENT - CONVICTING_GAP_NS, loose))).to.equal(null);
    });
  });

  describe("findContradictions", () => {
    it("finds the lying node's pair among honest co-signers, with its indexes and numbers", () => {
      // Nodes 1 and 2 stamp honestly; node 0 stamps its second signature an hour ahead over an older moment.
      const first = attest({ card: CARD_KEY, nodes: NODE_KEYS, nanoMoment: NANO_MOMENT, accuracy: ACCURACY_NS, nodeTimestampNs: NANO_MOMENT });
      const secondMoment = NANO_MOMENT - CONVICTING_GAP_NS - 10n;
      const second = attest({
        card: CARD_KEY,
        nodes: NODE_KEYS,
        nanoMoment: secondMoment,
        accuracy: ACCURACY_NS,
        nodeTimestampNs: [NANO_MOMENT + HOUR_NS, secondMoment, secondMoment],
      });
      const found = findContradictions(first, second);
      expect(found).to.have.length(1);
      const [contradiction] = found;
      expect(contradiction!.nodeId).to.equal(NODE_ADDRESSES[0]);
      const index = [...NODE_ADDRESSES].sort((x, y) => (x.toLowerCase() < y.toLowerCase() ? -1 : 1)).indexOf(NODE_ADDRESSES[0]!);
      expect(contradiction!.earlier).to.deep.equal({ proofIndex: 0, entryIndex: index, nodeTimestampNs: NANO_MOMENT, nanoMoment: NANO_MOMENT, accuracyNs: ACCURACY_NS });
      expect(contradiction!.later).to.deep.equal({ proofIndex: 1, entryIndex: index, nodeTimestampNs: NANO_MOMENT + HOUR_NS, nanoMoment: secondMoment, accuracyNs: ACCURACY_NS });
      expect(contradiction!.excessNs).to.equal(11n);
    });

    it("finds nothing between honest proofs, nor between one proof and itself", () => {
      const [honestA] = liePair();
      const honestB = signedBy(0, NANO_MOMENT + NS_PER_SECOND, NANO_MOMENT + NS_PER_SECOND);
      expect(findContradictions(honestA, honestB)).to.deep.equal([]);
      expect(findContradictions(honestB, honestA)).to.deep.equal([]);
      const [first, second] = liePair();
      expect(findContradictions(first, first)).to.deep.equal([]);
      expect(findContradictions(second, second)).to.deep.equal([]);
    });

    it("does not pair entries of different nodes", () => {
      const [first] = liePair();
      const other = signedBy(1, NANO_MOMENT - CONVICTING_GAP_NS, NANO_MOMENT + HOUR_NS);
      expect(findContradictions(first, other)).to.deep.equal([]);
    });
  });

  describe("checkEvidence", () => {
    it("accepts a crafted contradiction, names the node, and its document passes the wire schema", () => {
      const evidence = evidenceOf(liePair());
      expect(Value.Check(ContradictionEvidenceObject, evidence)).to.equal(true);
      const verdict = checkEvidence(evidence);
      expect(verdict.valid, JSON.stringify(verdict, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v))).to.equal(true);
      if (!verdict.valid) return;
      expect(verdict.nodeId).to.equal(NODE_ADDRESSES[0]);
      expect(verdict.contradiction.excessNs).to.equal(1n);
      // The same document as text, and in either order of its two proofs.
      expect(checkEvidenceText(JSON.stringify(evidence)).valid).to.equal(true);
      expect(checkEvidence(edited(evidence, (copy) => copy.proofs.reverse())).valid).to.equal(true);
    });

    it("refuses an honest pair as not-contradictory, with the numbers", () => {
      const verdict = checkEvidence(evidenceFromSides(signedBy(0, NANO_MOMENT, NANO_MOMENT), signedBy(0, NANO_MOMENT - CONVICTING_GAP_NS + 1n, NANO_MOMENT + HOUR_NS)));
      expect(verdict).to.include({ valid: false, reason: "not-contradictory", nodeId: NODE_ADDRESSES[0] });
      expect((verdict as { detail: string }).detail).to.contain(String(MAX_SIGNING_DELAY_NS));
    });

    it("refuses the same entry twice", () => {
      const [first] = liePair();
      const verdict = checkEvidence(evidenceFromSides(first, first));
      expect(verdict).to.include({ valid: false, reason: "not-contradictory" });
      expect((verdict as { detail: string }).detail).to.contain("same signed entry twice");
    });

    it("refuses entries of different nodes, and evidence naming a node that signed neither", () => {
      const [first] = liePair();
      const other = signedBy(1, NANO_MOMENT - CONVICTING_GAP_NS, NANO_MOMENT + HOUR_NS);
      const verdict = checkEvidence(evidenceFromSides(first, other));
      expect(verdict).to.include({ valid: false, reason: "different-nodes" });
      expect((verdict as { detail: string }).detail).to.contain(NODE_ADDRESSES[0]).and.to.contain(NODE_ADDRESSES[1]);
      const framed = checkEvidence(edited(evidenceOf(liePair()), (copy) => (copy.nodeId = NODE_ADDRESSES[2]!)));
      expect(framed).to.include({ valid: false, reason: "different-nodes", nodeId: NODE_ADDRESSES[0] });
    });

    it("refuses a tampered entry: unrecoverable as bad-signature, recoverable as another node's", () => {
      const evidence = evidenceOf(liePair());
      const entryHex = (copy: Parameters<Parameters<typeof edited>[1]>[0]) => copy.proofs[1]!.timeProof.proof.nodeSignature as string;
      // s above n/2 (n − s itself does not fit EIP-2098's 255 bits): refused, as ecrecover's careful users refuse it.
      const highS = edited(evidence, (copy) => {
        const hex = entryHex(copy);
        const parityBit = BigInt(`0x${hex.slice(2 + 96, 2 + 160)}`) & (1n << 255n);
        const tampered = parityBit | (SECP256K1_HALF_N + 1n);
        copy.proofs[1]!.timeProof.proof.nodeSignature = `${hex.slice(0, 2 + 96)}${tampered.toString(16).padStart(64, "0")}`;
      });
      expect(checkEvidence(highS)).to.include({ valid: false, reason: "bad-signature" });
      const zeroR = edited(evidence, (copy) => {
        const hex = entryHex(copy);
        copy.proofs[1]!.timeProof.proof.nodeSignature = `${hex.slice(0, 2 + 32)}${"0".repeat(64)}${hex.slice(2 + 96)}`;
      });
      expect(checkEvidence(zeroR)).to.include({ valid: false, reason: "bad-signature" });
      // A changed moment (or timestamp, or accuracy) changes the digest: the entry recovers to a stranger.
      const movedMoment = edited(evidence, (copy) => {
        copy.proofs[1]!.timeProof.nanoMoment = (BigInt(copy.proofs[1]!.timeProof.nanoMoment) - HOUR_NS).toString();
      });
      expect(checkEvidence(movedMoment)).to.include({ valid: false, reason: "different-nodes" });
    });

    it("refuses malformed input with the field at fault, and never throws", () => {
      const evidence = evidenceOf(liePair());
      const cases: Array<[unknown, string]> = [
        [null, "$"],
        ["evidence", "$"],
        [edited(evidence, (copy) => (copy.kind = "something-else")), "kind"],
        [edited(evidence, (copy) => (copy.version = 2)), "version"],
        [edited(evidence, (copy) => (copy.extra = true)), "extra"],
        [edited(evidence, (copy) => (copy.nodeId = "0x1234")), "nodeId"],
        [edited(evidence, (copy) => copy.proofs.pop()), "proofs"],
        [edited(evidence, (copy) => (copy.proofs[0]!.entryIndex = 1)), "entryIndex 1 is beyond"],
        [edited(evidence, (copy) => (copy.proofs[0]!.entryIndex = -1)), "proofs[0].entryIndex"],
        [edited(evidence, (copy) => ((copy.proofs[0]!.timeProof as Record<string, unknown>).consensus = {})), "proofs[0].timeProof.consensus"],
        [edited(evidence, (copy) => (copy.proofs[1]!.timeProof.proof.nodeSignature = "0x1234")), "proofs[1].timeProof.proof.nodeSignature"],
        [edited(evidence, (copy) => (copy.proofs[1]!.timeProof.nanoMoment = "01")), "proofs[1].timeProof.nanoMoment"],
      ];
      for (const [input, where] of cases) {
        const verdict = checkEvidence(input);
        expect(verdict, where).to.include({ valid: false, reason: "malformed" });
        expect((verdict as { detail: string }).detail, where).to.contain(where);
      }
      expect(checkEvidenceText("{")).to.include({ valid: false, reason: "malformed" });
      expect(checkEvidenceText(`${"[".repeat(40)}${"]".repeat(40)}`)).to.include({ valid: false, reason: "malformed" });
      const padded = JSON.stringify(evidence) + " ".repeat(MAX_CONTRADICTION_EVIDENCE_BYTES);
      const oversized = checkEvidenceText(padded);
      expect(oversized).to.include({ valid: false, reason: "malformed" });
      expect((oversized as { detail: string }).detail).to.contain(`at most ${MAX_CONTRADICTION_EVIDENCE_BYTES}`);
    });

    it("does not need the card's signature to be valid: the node signed the moment either way", () => {
      // Node 0 co-signs 64 bytes that are no valid card signature: its entry still binds them and the moment.
      const base = { nanoMoment: NANO_MOMENT - CONVICTING_GAP_NS, hardwareSignature: `0x${CARD_ID.slice(2)}${"11".repeat(64)}` as Hex, accuracy: ACCURACY_NS };
      const lie: TimeProof = { ...base, nodeSignature: signNodeEntry(NODE_KEYS[0]!, timeAttestationForProof(base, NANO_MOMENT + HOUR_NS)) };
      const verdict = checkEvidence(evidenceFromSides(signedBy(0, NANO_MOMENT, NANO_MOMENT), lie));
      expect(verdict).to.include({ valid: true, nodeId: NODE_ADDRESSES[0] });
    });
  });
});
