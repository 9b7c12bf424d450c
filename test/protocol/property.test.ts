import { expect } from "chai";
import fc from "fast-check";
import { verifyTimeProof, type Hex, type TimeProof } from "../../protocol";
import { NODE_KEYS, context, validProof } from "./fixtures";

type Field = "hardwareSignature" | "nodeSignature" | "nanoMoment" | "accuracy";

interface Mutation {
  field: Field;
  /** Byte index (mod field length) and a non-zero XOR mask. */
  position: number;
  mask: number;
}

function xorByte(hex: Hex, position: number, mask: number): Hex {
  const bytes = Buffer.from(hex.slice(2), "hex");
  const index = position % bytes.length;
  bytes[index] = bytes[index]! ^ mask;
  return `0x${bytes.toString("hex")}`;
}

function mutate(proof: TimeProof, { field, position, mask }: Mutation): TimeProof {
  switch (field) {
    case "hardwareSignature":
      return { ...proof, hardwareSignature: xorByte(proof.hardwareSignature, position, mask) };
    case "nodeSignature":
      return { ...proof, nodeSignature: xorByte(proof.nodeSignature, position, mask) };
    case "nanoMoment":
      // Flip within the 16 bytes the card signed.
      return { ...proof, nanoMoment: proof.nanoMoment ^ (BigInt(mask) << BigInt(8 * (position % 16))) };
    case "accuracy":
      return { ...proof, accuracy: (proof.accuracy ^ (mask << (8 * (position % 4)))) >>> 0 };
  }
}

function sameProof(a: TimeProof, b: TimeProof): boolean {
  return a.nanoMoment === b.nanoMoment && a.accuracy === b.accuracy && a.hardwareSignature === b.hardwareSignature && a.nodeSignature === b.nodeSignature;
}

describe("property: tampering", () => {
  // Wide settings so that only the signatures decide: a mutated nanoMoment must fail on the card signature,
  // not merely on freshness, and a mutated accuracy on the node signatures, not on the accuracy bound.
  // The quorum equals each proof's entry count: dropping a whole entry leaves a genuinely valid proof with fewer
  // co-signers, which only a quorum can refuse.
  const wide = { maxAttestationAgeNs: 1n << 128n, maxFutureDriftNs: 1n << 128n, maxAcceptableDriftNs: 1n << 32n };
  const contextFor = (proof: TimeProof) => context({ ...wide, nodeQuorum: (proof.nodeSignature.length - 2) / 160 });
  const proofs = [validProof(), validProof({ nodes: [NODE_KEYS[0]] })];

  it("the unmutated proofs verify under these settings", () => {
    for (const proof of proofs) expect(verifyTimeProof(proof, contextFor(proof)).valid).to.equal(true);
  });

  it("accepts no proof with a flipped byte (single and multiple mutations)", () => {
    const mutation = fc.record({
      field: fc.constantFrom<Field>("hardwareSignature", "nodeSignature", "nanoMoment", "accuracy"),
      position: fc.nat({ max: 1_000 }),
      mask: fc.integer({ min: 1, max: 255 }),
    });
    fc.assert(
      fc.property(fc.constantFrom(...proofs), fc.array(mutation, { minLength: 1, maxLength: 3 }), (proof, mutations) => {
        const tampered = mutations.reduce(mutate, proof);
        // Two mutations can cancel out (same byte, same mask): that is the original proof, not a tampered one.
        fc.pre(!sameProof(tampered, proof));
        expect(verifyTimeProof(tampered, contextFor(proof)).valid).to.equal(false);
      }),
      { numRuns: 300 },
    );
  });

  it("accepts no proof with bytes cut off or appended", () => {
    fc.assert(
      fc.property(fc.constantFrom(...proofs), fc.boolean(), fc.integer({ min: 1, max: 100 }), fc.boolean(), (proof, hardware, count, append) => {
        const key = hardware ? "hardwareSignature" : "nodeSignature";
        const value = proof[key];
        const changed = (append ? `${value}${"00".repeat(count)}` : value.slice(0, Math.max(2, value.length - 2 * count))) as Hex;
        expect(verifyTimeProof({ ...proof, [key]: changed }, contextFor(proof)).valid).to.equal(false);
      }),
      // The example drops one whole entry of the 3-node proof: refused only through the quorum.
      { numRuns: 200, examples: [[proofs[0]!, false, 80, false]] },
    );
  });

  it("never throws and never accepts arbitrary input", () => {
    const hex = (minLength: number, maxLength: number) =>
      fc.uint8Array({ minLength, maxLength }).map((bytes) => `0x${Buffer.from(bytes).toString("hex")}` as Hex);
    const ctx = contextFor(validProof());
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }),
        fc.oneof(hex(0, 200), hex(96, 96)),
        fc.oneof(hex(0, 300), fc.constant(validProof().nodeSignature)),
        fc.nat({ max: 0xffff_ffff }),
        (nanoMoment, hardwareSignature, nodeSignature, accuracy) => {
          const result = verifyTimeProof({ nanoMoment, hardwareSignature, nodeSignature, accuracy }, ctx);
          expect(result.valid).to.equal(false);
        },
      ),
      { numRuns: 200 },
    );
  });
});
