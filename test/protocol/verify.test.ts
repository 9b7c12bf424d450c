import { expect } from "chai";
import { MAX_NODE_ENTRIES } from "../../protocol/constants";
import {
  DEFAULT_MAX_ATTESTATION_AGE_NS,
  DEFAULT_MAX_FUTURE_DRIFT_NS,
  DEFAULT_MAX_ACCEPTABLE_DRIFT_NS,
  NS_PER_SECOND,
  SECP256K1_HALF_N,
  recoverNodeAddresses,
  verifyTimeProof,
  type TimeProof,
  type VerifyFailureReason,
  type VerifyTimeProofContext,
} from "../../protocol";
import {
  CARD_ID,
  CARD_PUBLIC_KEY,
  NANO_MOMENT,
  NODE_ADDRESSES,
  NODE_KEYS,
  NOW_NS,
  OTHER_CARD_KEY,
  concatEntries,
  context,
  entriesOf,
  forgedCardProof,
  highSProof,
  validProof,
} from "./fixtures";

function expectReason(proof: TimeProof, ctx: VerifyTimeProofContext, reason: VerifyFailureReason): void {
  const result = verifyTimeProof(proof, ctx);
  expect(result.valid, JSON.stringify(result)).to.equal(false);
  if (!result.valid) expect(result.reason, result.detail).to.equal(reason);
}

function expectValid(proof: TimeProof, ctx: VerifyTimeProofContext): void {
  const result = verifyTimeProof(proof, ctx);
  expect(result, JSON.stringify(result, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))).to.include({ valid: true });
}

describe("verifyTimeProof (docs/protocol.md §6)", () => {
  describe("valid proofs", () => {
    it("accepts a proof with one node entry", () => {
      expectValid(validProof({ nodes: [NODE_KEYS[0]] }), context());
    });

    it("accepts a proof with three node entries and quorum 3, reporting the nodes ascending", () => {
      const result = verifyTimeProof(validProof(), context({ nodeQuorum: 3 }));
      expect(result.valid).to.equal(true);
      if (result.valid) {
        expect(result.cardId).to.equal(CARD_ID);
        expect(result.nodes.map((a) => BigInt(a))).to.deep.equal([...NODE_ADDRESSES].map((a) => BigInt(a)).sort((a, b) => (a < b ? -1 : 1)));
      }
    });
  });

  describe("rule 1: the card", () => {
    it("rejects a hardware signature that is not 96 bytes", () => {
      const proof = validProof();
      expectReason({ ...proof, hardwareSignature: `${proof.hardwareSignature}00` }, context(), "hardware-signature-length");
      expectReason({ ...proof, hardwareSignature: proof.hardwareSignature.slice(0, -2) as `0x${string}` }, context(), "hardware-signature-length");
      expectReason({ ...proof, hardwareSignature: "0x" }, context(), "hardware-signature-length");
    });

    it("rejects a proof from an unregistered card (wrong card)", () => {
      expectReason(validProof({ card: OTHER_CARD_KEY }), context(), "unknown-card");
    });

    it("rejects a proof from a revoked card", () => {
      const ctx = context({ cards: { [CARD_ID]: { publicKey: CARD_PUBLIC_KEY, revoked: true } } });
      expectReason(validProof(), ctx, "revoked-card");
    });

    it("rejects a card outside its validity window, at both ends", () => {
      const early = context({ cards: { [CARD_ID]: { publicKey: CARD_PUBLIC_KEY, revoked: false, validFromNs: NOW_NS + 1n } } });
      const late = context({ cards: { [CARD_ID]: { publicKey: CARD_PUBLIC_KEY, revoked: false, validUntilNs: NOW_NS - 1n } } });
      expectReason(validProof(), early, "card-not-valid-now");
      expectReason(validProof(), late, "card-not-valid-now");
      const exact = context({ cards: { [CARD_ID]: { publicKey: CARD_PUBLIC_KEY, revoked: false, validFromNs: NOW_NS, validUntilNs: NOW_NS } } });
      expectValid(validProof(), exact);
    });

    it("rejects the high-S twin of a valid card signature", () => {
      expectReason(highSProof(), context(), "high-s");
    });

    it("rejects a card signature made by another key", () => {
      expectReason(forgedCardProof(), context(), "bad-hardware-signature");
    });

    it("rejects a card signature over a different nanoMoment", () => {
      const proof = validProof();
      const other = validProof({ nanoMoment: NANO_MOMENT + 1n });
      // Nodes signed `other` completely; only the card's signature belongs to a different moment.
      expectReason({ ...other, hardwareSignature: proof.hardwareSignature }, context(), "bad-hardware-signature");
    });
  });

  describe("rule 2: the nodes", () => {
    it("rejects a nodeSignature that is empty or not a multiple of 80 bytes", () => {
      const proof = validProof();
      expectReason({ ...proof, nodeSignature: "0x" }, context(), "node-signature-length");
      expectReason({ ...proof, nodeSignature: proof.nodeSignature.slice(0, -2) as `0x${string}` }, context(), "node-signature-length");
      expectReason({ ...proof, nodeSignature: `${proof.nodeSignature}00` }, context(), "node-signature-length");
    });

    it("rejects more than MAX_NODE_ENTRIES (32) entries, as the oracle does, before recovering any", () => {
      const proof = validProof();
      const entry = proof.nodeSignature.slice(2, 2 + 160); // one 80-byte entry
      const tooMany = `0x${entry.repeat(MAX_NODE_ENTRIES + 1)}` as const;
      const result = verifyTimeProof({ ...proof, nodeSignature: tooMany }, context());
      expect(result).to.deep.equal({ valid: false, reason: "node-signature-length", detail: "nodeSignature has 33 entries, at most 32" });
    });

    it("rejects an entry signed by an unregistered node (wrong node)", () => {
      expectReason(validProof(), context({ nodes: NODE_ADDRESSES.slice(0, 2) }), "unknown-node");
    });

    it("rejects an entry of a node that is not active now", () => {
      const nodes = NODE_ADDRESSES.map((address) => ({ address, validUntilNs: NOW_NS - 1n }));
      expectReason(validProof({ nodes: [NODE_KEYS[0]] }), context({ nodes }), "unknown-node");
    });

    it("rejects entries in descending order (unsorted)", () => {
      const proof = validProof();
      expectReason({ ...proof, nodeSignature: concatEntries([...entriesOf(proof)].reverse()) }, context(), "nodes-not-ascending");
    });

    it("rejects a duplicated entry, so one node cannot count twice", () => {
      const proof = validProof({ nodes: [NODE_KEYS[0]] });
      const [entry] = entriesOf(proof);
      expectReason({ ...proof, nodeSignature: concatEntries([entry!, entry!]) }, context({ nodeQuorum: 2 }), "nodes-not-ascending");
    });

    it("rejects fewer distinct nodes than the quorum", () => {
      expectReason(validProof({ nodes: NODE_KEYS.slice(0, 2) }), context({ nodeQuorum: 3 }), "quorum-not-met");
      expectValid(validProof({ nodes: NODE_KEYS.slice(0, 2) }), context({ nodeQuorum: 2 }));
    });

    it("rejects a node entry whose s is above n/2 or zero (what OpenZeppelin ECDSA refuses)", () => {
      // EIP-2098 keeps only 255 bits of s, so the high-S twin (n − s, almost always ≥ 2^255) cannot even be
      // written down; the representable high values (n/2, 2^255) and s = 0 must still be refused.
      const proof = validProof({ nodes: [NODE_KEYS[0]] });
      const entry = entriesOf(proof)[0]!;
      const prefix = entry.slice(0, 2 + 32 + 64);
      for (const s of [SECP256K1_HALF_N + 1n, (1n << 255n) - 1n, 0n]) {
        const tampered = `${prefix}${s.toString(16).padStart(64, "0")}` as `0x${string}`;
        expectReason({ ...proof, nodeSignature: tampered }, context(), "bad-node-signature");
      }
    });

    it("recovers node addresses in proof order", () => {
      const proof = validProof();
      expect(recoverNodeAddresses(proof).map((a) => a.toLowerCase())).to.have.members(NODE_ADDRESSES.map((a) => a.toLowerCase()));
    });
  });

  describe("rule 3: freshness (two separate bounds, never abs())", () => {
    it("accepts a proof exactly maxAttestationAge old and rejects one 1 ns older", () => {
      const nowNs = NANO_MOMENT + DEFAULT_MAX_ATTESTATION_AGE_NS;
      expectValid(validProof(), context({ nowNs }));
      expectReason(validProof(), context({ nowNs: nowNs + 1n }), "too-old");
    });

    it("accepts a proof exactly maxFutureDrift ahead and rejects one 1 ns further", () => {
      const nowNs = NANO_MOMENT - DEFAULT_MAX_FUTURE_DRIFT_NS;
      expectValid(validProof(), context({ nowNs }));
      expectReason(validProof(), context({ nowNs: nowNs - 1n }), "too-far-in-future");
    });

    it("applies the future bound to future proofs even when the age bound is larger", () => {
      // 20 s ahead: within an abs() check against the 60 s age bound, outside the 15 s future bound.
      expectReason(validProof(), context({ nowNs: NANO_MOMENT - 20n * NS_PER_SECOND }), "too-far-in-future");
      // 20 s old: outside a 15 s bound, inside the 60 s age bound.
      expectValid(validProof(), context({ nowNs: NANO_MOMENT + 20n * NS_PER_SECOND }));
    });
  });

  describe("rule 4: accuracy", () => {
    it("accepts accuracy equal to maxAcceptableDrift and rejects 1 ns more", () => {
      expectValid(validProof({ accuracy: Number(DEFAULT_MAX_ACCEPTABLE_DRIFT_NS) }), context());
      expectReason(validProof({ accuracy: Number(DEFAULT_MAX_ACCEPTABLE_DRIFT_NS) + 1 }), context(), "accuracy-too-low");
    });

    it("notices a relayer lowering accuracy after the nodes signed (accuracy is signed)", () => {
      const proof = validProof({ accuracy: 2_000 });
      expectReason({ ...proof, accuracy: 10 }, context(), "unknown-node");
    });
  });

  describe("malformed input", () => {
    it("never throws, whatever the input", () => {
      const proof = validProof();
      const inputs: unknown[] = [
        null,
        42,
        "0x",
        {},
        { ...proof, nanoMoment: -1n },
        { ...proof, nanoMoment: 1n << 128n },
        { ...proof, nanoMoment: 1 },
        { ...proof, accuracy: -1 },
        { ...proof, accuracy: 1.5 },
        { ...proof, accuracy: 2 ** 32 },
        { ...proof, hardwareSignature: "0xzz" },
        { ...proof, nodeSignature: "abc" },
        { ...proof, hardwareSignature: `0x${"00".repeat(96)}` },
        { ...proof, nodeSignature: `0x${"00".repeat(80)}` },
        { ...proof, nodeSignature: `0x${"ff".repeat(160)}` },
      ];
      for (const input of inputs) {
        const result = verifyTimeProof(input as TimeProof, context());
        expect(result.valid).to.equal(false);
      }
      expectReason({ ...proof, nanoMoment: 1 } as unknown as TimeProof, context(), "malformed-proof");
      expectReason({ ...proof, nodeSignature: `0x${"00".repeat(80)}` }, context(), "bad-node-signature");
    });

    it("treats a registered card with a broken public key as a bad signature, not an exception", () => {
      const ctx = context({ cards: { [CARD_ID]: { publicKey: `0x04${"11".repeat(64)}`, revoked: false } } });
      expectReason(validProof(), ctx, "bad-hardware-signature");
    });
  });
});
