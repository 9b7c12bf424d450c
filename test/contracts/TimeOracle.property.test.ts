/**
 * Property test: no mutation of a valid proof is accepted (fast-check). Each run flips one bit somewhere in the
 * proof, changes a number, or truncates / extends a byte string; verifyTimeProof must return false (and never
 * revert, which would throw here).
 */
import { expect } from "chai";
import fc from "fast-check";
import { type Hex } from "viem";
import { UINT128_MAX, UINT32_MAX, type TimeProof } from "../../protocol";
import { deployOracleFixture, loadFixture } from "./fixtures";

function flipBit(hex: Hex, bitIndex: number): Hex {
  const bytes = Buffer.from(hex.slice(2), "hex");
  const index = bitIndex % (bytes.length * 8);
  bytes[index >> 3] = bytes[index >> 3]! ^ (1 << (index & 7));
  return `0x${bytes.toString("hex")}`;
}

type Mutation =
  | { kind: "flip-hardware"; bit: number }
  | { kind: "flip-node"; bit: number }
  | { kind: "nanoMoment"; delta: bigint }
  | { kind: "accuracy"; value: number }
  | { kind: "truncate-hardware"; bytes: number }
  | { kind: "truncate-node"; bytes: number }
  | { kind: "extend-node"; extra: Hex };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("flip-hardware" as const), bit: fc.nat({ max: 96 * 8 - 1 }) }),
  fc.record({ kind: fc.constant("flip-node" as const), bit: fc.nat({ max: 2 * 80 * 8 - 1 }) }),
  fc.record({
    kind: fc.constant("nanoMoment" as const),
    delta: fc.bigInt({ min: -(10n ** 12n), max: 10n ** 12n }).filter((delta) => delta !== 0n),
  }),
  fc.record({ kind: fc.constant("accuracy" as const), value: fc.nat({ max: UINT32_MAX }) }),
  fc.record({ kind: fc.constant("truncate-hardware" as const), bytes: fc.integer({ min: 1, max: 96 }) }),
  fc.record({ kind: fc.constant("truncate-node" as const), bytes: fc.integer({ min: 1, max: 160 }) }),
  fc.record({
    kind: fc.constant("extend-node" as const),
    extra: fc.uint8Array({ minLength: 1, maxLength: 160 }).map((bytes) => `0x${Buffer.from(bytes).toString("hex")}` as Hex),
  }),
);

function apply(proof: TimeProof, m: Mutation): TimeProof {
  switch (m.kind) {
    case "flip-hardware":
      return { ...proof, hardwareSignature: flipBit(proof.hardwareSignature, m.bit) };
    case "flip-node":
      return { ...proof, nodeSignature: flipBit(proof.nodeSignature, m.bit) };
    case "nanoMoment": {
      const moved = proof.nanoMoment + m.delta;
      return { ...proof, nanoMoment: moved < 0n ? 0n : moved > UINT128_MAX ? UINT128_MAX : moved };
    }
    case "accuracy":
      return { ...proof, accuracy: m.value === proof.accuracy ? (m.value + 1) % (UINT32_MAX + 1) : m.value };
    case "truncate-hardware":
      return { ...proof, hardwareSignature: `0x${proof.hardwareSignature.slice(2, 2 + 2 * (96 - m.bytes))}` };
    case "truncate-node":
      return { ...proof, nodeSignature: `0x${proof.nodeSignature.slice(2, 2 + 2 * (160 - m.bytes))}` };
    case "extend-node":
      return { ...proof, nodeSignature: `0x${proof.nodeSignature.slice(2)}${m.extra.slice(2)}` };
  }
}

describe("TimeOracle.verifyTimeProof property", () => {
  it("accepts no mutation of a valid two-node proof (200 runs)", async () => {
    const f = await loadFixture(deployOracleFixture);
    const proof = f.freshProof({ nodes: f.nodeKeys.slice(0, 2) });
    expect(await f.oracle.read.verifyTimeProof([proof])).to.equal(true);
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(mutation, async (m) => {
        const mutated = apply(proof, m);
        const valid = await f.oracle.read.verifyTimeProof([mutated]);
        if (valid) accepted += 1;
        return valid === false;
      }),
      { numRuns: 200, seed: 20_241_122 },
    );
    expect(accepted).to.equal(0);
  });
});
