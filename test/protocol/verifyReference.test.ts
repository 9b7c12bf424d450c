/**
 * verifyTimeProof (bytes, native keccak, recovery memo) against a reference verifier written straight from
 * docs/protocol.md §6 with the generic tools: BigInt arithmetic, viem's hashTypedData and publicKeyToAddress,
 * @noble/curves for both curves, no memo. Both must reach the same decision (valid, reason, cardId, nodes) on
 * valid proofs and on thousands of tampered ones: without caches, and with the context's recovery memo and P-256
 * key cache cold and warm.
 */
import { expect } from "chai";
import fc from "fast-check";
import { p256 } from "@noble/curves/nist.js";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { keccak256 } from "viem";
import { publicKeyToAddress } from "viem/accounts";
import {
  HW_MESSAGE_TAG,
  P256_HALF_N,
  P256_N,
  SECP256K1_HALF_N,
  SECP256K1_N,
  UINT128_MAX,
  timeAttestationDigestViem,
  verifyTimeProof,
  type Address,
  type Hex,
  type TimeProof,
  type VerifyTimeProofContext,
} from "../../protocol";
import { CARD_ID, NODE_ADDRESSES, NODE_KEYS, NOW_NS, context, highSProof, validProof, withHardwareSignature } from "./fixtures";

type Decision = { valid: true; cardId: Hex; nodes: Address[] } | { valid: false; reason: string };

function word(bytes: Buffer, offset: number): bigint {
  return BigInt(`0x${bytes.toString("hex", offset, offset + 32)}`);
}

/** docs/protocol.md §6.2, rule by rule, in the contract's order. */
function referenceVerify(proof: TimeProof, ctx: VerifyTimeProofContext): Decision {
  const refuse = (reason: string): Decision => ({ valid: false, reason });
  const isHex = (value: unknown): value is Hex => typeof value === "string" && /^0x([0-9a-fA-F]{2})*$/.test(value);
  if (typeof proof.nanoMoment !== "bigint" || proof.nanoMoment < 0n || proof.nanoMoment > UINT128_MAX) return refuse("malformed-proof");
  if (!Number.isInteger(proof.accuracy) || proof.accuracy < 0 || proof.accuracy > 0xffff_ffff) return refuse("malformed-proof");
  if (!isHex(proof.hardwareSignature) || !isHex(proof.nodeSignature)) return refuse("malformed-proof");

  // Rule 1: the card.
  const hardware = Buffer.from(proof.hardwareSignature.slice(2), "hex");
  if (hardware.length !== 96) return refuse("hardware-signature-length");
  const cardId: Hex = `0x${hardware.toString("hex", 0, 32)}`;
  const card = ctx.resolveCard(cardId);
  if (card === undefined) return refuse("unknown-card");
  if (card.revoked) return refuse("revoked-card");
  if ((card.validFromNs !== undefined && ctx.nowNs < card.validFromNs) || (card.validUntilNs !== undefined && ctx.nowNs > card.validUntilNs)) {
    return refuse("card-not-valid-now");
  }
  const [hwR, hwS] = [word(hardware, 32), word(hardware, 64)];
  if (hwS > P256_HALF_N) return refuse("high-s");
  const message = Buffer.concat([
    Buffer.from(HW_MESSAGE_TAG.slice(2), "hex"),
    hardware.subarray(0, 32),
    Buffer.from(proof.nanoMoment.toString(16).padStart(32, "0"), "hex"),
  ]);
  let cardSignatureValid = false;
  try {
    cardSignatureValid =
      hwR > 0n && hwR < P256_N && hwS > 0n &&
      p256.verify(hardware.subarray(32, 96), message, Buffer.from(card.publicKey.slice(2), "hex"), { prehash: true, lowS: true, format: "compact" });
  } catch {
    cardSignatureValid = false;
  }
  if (!cardSignatureValid) return refuse("bad-hardware-signature");

  // Rule 2: the nodes.
  const entries = Buffer.from(proof.nodeSignature.slice(2), "hex");
  if (entries.length === 0 || entries.length % 80 !== 0) return refuse("node-signature-length");
  // keccak256 through viem, not protocol/keccak.ts: the reference shares no hashing code with verifyTimeProof.
  const hardwareSignatureHash = keccak256(hardware.subarray(32, 96));
  const nodes: Address[] = [];
  let previous = -1n;
  for (let offset = 0; offset < entries.length; offset += 80) {
    const r = word(entries, offset + 16);
    const yParityAndS = word(entries, offset + 48);
    const s = yParityAndS & ((1n << 255n) - 1n);
    if (r === 0n || r >= SECP256K1_N || s === 0n || s > SECP256K1_HALF_N) return refuse("bad-node-signature");
    const digest = timeAttestationDigestViem({
      cardId,
      nanoMoment: proof.nanoMoment,
      accuracy: proof.accuracy,
      hardwareSignatureHash,
      nodeTimestamp: BigInt(`0x${entries.toString("hex", offset, offset + 16)}`),
    });
    let address: Address;
    try {
      const signature = new secp256k1.Signature(r, s, Number(yParityAndS >> 255n));
      const publicKey = signature.recoverPublicKey(Buffer.from(digest.slice(2), "hex")).toBytes(false);
      address = publicKeyToAddress(`0x${Buffer.from(publicKey).toString("hex")}`);
    } catch {
      return refuse("bad-node-signature");
    }
    if (!ctx.isActiveNode(address, ctx.nowNs)) return refuse("unknown-node");
    if (BigInt(address) <= previous) return refuse("nodes-not-ascending");
    previous = BigInt(address);
    nodes.push(address);
  }
  if (nodes.length < ctx.nodeQuorum) return refuse("quorum-not-met");

  // Rules 3 and 4.
  if (ctx.nowNs > proof.nanoMoment && ctx.nowNs - proof.nanoMoment > ctx.maxAttestationAgeNs) return refuse("too-old");
  if (proof.nanoMoment > ctx.nowNs && proof.nanoMoment - ctx.nowNs > ctx.maxFutureDriftNs) return refuse("too-far-in-future");
  if (BigInt(proof.accuracy) > ctx.maxAcceptableDriftNs) return refuse("accuracy-too-low");
  return { valid: true, cardId, nodes };
}

function decisionOf(proof: TimeProof, ctx: VerifyTimeProofContext): Decision {
  const result = verifyTimeProof(proof, ctx);
  return result.valid ? result : { valid: false, reason: result.reason };
}

/** `ctx` without its caches: a pure verification. */
function withoutCaches(ctx: VerifyTimeProofContext): VerifyTimeProofContext {
  const bare = { ...ctx };
  delete bare.recoveryMemo;
  delete bare.p256KeyCache;
  return bare;
}

function expectSameDecision(proof: TimeProof, ctx: VerifyTimeProofContext): Decision {
  const expected = referenceVerify(proof, ctx);
  const label = JSON.stringify(proof, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value));
  expect(decisionOf(proof, withoutCaches(ctx)), `no caches: ${label}`).to.deep.equal(expected);
  expect(decisionOf(proof, ctx), `cold memo: ${label}`).to.deep.equal(expected);
  expect(decisionOf(proof, ctx), `warm memo: ${label}`).to.deep.equal(expected);
  return expected;
}

// Words a signature field can be set to: the edges of both curves' ranges.
const SPECIAL_WORDS: readonly bigint[] = [
  0n,
  1n,
  P256_HALF_N,
  P256_HALF_N + 1n,
  P256_N - 1n,
  P256_N,
  SECP256K1_HALF_N,
  SECP256K1_HALF_N + 1n,
  SECP256K1_N - 1n,
  SECP256K1_N,
  (1n << 255n) | 1n,
  (1n << 256n) - 1n,
];

type Mutation =
  | { kind: "xor"; field: "hardwareSignature" | "nodeSignature"; position: number; mask: number }
  | { kind: "word"; field: "hardwareSignature" | "nodeSignature"; position: number; value: bigint }
  | { kind: "nanoMoment"; delta: bigint }
  | { kind: "accuracy"; value: number }
  | { kind: "swapEntries" }
  | { kind: "duplicateEntry"; position: number };

function setBytes(hex: Hex, apply: (bytes: Buffer) => void): Hex {
  const bytes = Buffer.from(hex.slice(2), "hex");
  apply(bytes);
  return `0x${bytes.toString("hex")}`;
}

function mutate(proof: TimeProof, mutation: Mutation): TimeProof {
  switch (mutation.kind) {
    case "xor":
      return {
        ...proof,
        [mutation.field]: setBytes(proof[mutation.field], (bytes) => {
          const index = mutation.position % bytes.length;
          bytes[index] = bytes[index]! ^ mutation.mask;
        }),
      };
    case "word": {
      // hardwareSignature: r or s; nodeSignature: some entry's r or yParityAndS.
      return {
        ...proof,
        [mutation.field]: setBytes(proof[mutation.field], (bytes) => {
          const offsets = mutation.field === "hardwareSignature" ? [32, 64] : [...Array(bytes.length / 80).keys()].flatMap((i) => [80 * i + 16, 80 * i + 48]);
          const offset = offsets[mutation.position % offsets.length]!;
          bytes.write(mutation.value.toString(16).padStart(64, "0"), offset, "hex");
        }),
      };
    }
    case "nanoMoment": {
      const nanoMoment = proof.nanoMoment + mutation.delta;
      return { ...proof, nanoMoment: nanoMoment < 0n ? 0n : nanoMoment };
    }
    case "accuracy":
      return { ...proof, accuracy: mutation.value };
    case "swapEntries": {
      const body = proof.nodeSignature.slice(2);
      return body.length < 320 ? proof : { ...proof, nodeSignature: `0x${body.slice(160, 320)}${body.slice(0, 160)}${body.slice(320)}` };
    }
    case "duplicateEntry": {
      const body = proof.nodeSignature.slice(2);
      const index = mutation.position % (body.length / 160);
      return { ...proof, nodeSignature: `0x${body}${body.slice(160 * index, 160 * index + 160)}` };
    }
  }
}

const mutationArbitrary: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({
    kind: fc.constant("xor" as const),
    field: fc.constantFrom("hardwareSignature" as const, "nodeSignature" as const),
    position: fc.nat({ max: 1_000 }),
    mask: fc.integer({ min: 1, max: 255 }),
  }),
  fc.record({
    kind: fc.constant("word" as const),
    field: fc.constantFrom("hardwareSignature" as const, "nodeSignature" as const),
    position: fc.nat({ max: 10 }),
    value: fc.constantFrom(...SPECIAL_WORDS),
  }),
  fc.record({ kind: fc.constant("nanoMoment" as const), delta: fc.bigInt({ min: -(1n << 40n), max: 1n << 40n }) }),
  fc.record({ kind: fc.constant("accuracy" as const), value: fc.constantFrom(0, 50, 999, 1_000, 1_001, 0xffff_ffff) }),
  fc.record({ kind: fc.constant("swapEntries" as const) }),
  fc.record({ kind: fc.constant("duplicateEntry" as const), position: fc.nat({ max: 10 }) }),
);

describe("verifyTimeProof agrees with a reference verifier (docs/protocol.md §6, generic code, no caches)", () => {
  const proofs = [validProof(), validProof({ nodes: [NODE_KEYS[0]] }), validProof({ nodes: [NODE_KEYS[2], NODE_KEYS[1]] })];
  const contexts = [
    context(),
    context({ nodeQuorum: 3 }),
    context({ nodes: [NODE_ADDRESSES[0]!, NODE_ADDRESSES[2]!] }),
    context({ nowNs: NOW_NS + 60n * 1_000_000_000n }),
    context({ maxAttestationAgeNs: 1n << 128n, maxFutureDriftNs: 1n << 128n, maxAcceptableDriftNs: 1n << 32n }),
  ];
  // Every context owns its caches (createVerifyContext): each test starts them cold.
  beforeEach(() => {
    for (const ctx of contexts) {
      ctx.recoveryMemo?.clear();
      ctx.p256KeyCache?.clear();
    }
  });

  it("on the valid proofs and the crafted bad ones", () => {
    const crafted = [...proofs, highSProof(), withHardwareSignature(`0x${CARD_ID.slice(2)}${"00".repeat(64)}`)];
    for (const proof of crafted) for (const ctx of contexts) expectSameDecision(proof, ctx);
    expect(referenceVerify(proofs[0]!, contexts[0]!).valid).to.equal(true);
  });

  it("on tampered proofs (byte flips, range-edge words, moved times, reordered and duplicated entries)", () => {
    const reasons = new Set<string>();
    fc.assert(
      fc.property(
        fc.nat({ max: proofs.length - 1 }),
        fc.nat({ max: contexts.length - 1 }),
        fc.array(mutationArbitrary, { minLength: 1, maxLength: 3 }),
        (proofIndex, contextIndex, mutations) => {
          const decision = expectSameDecision(mutations.reduce(mutate, proofs[proofIndex]!), contexts[contextIndex]!);
          reasons.add(decision.valid ? "valid" : decision.reason);
        },
      ),
      { numRuns: 400 },
    );
    // The runs reached deep into the rules, not only the first check.
    for (const reason of ["bad-hardware-signature", "high-s", "bad-node-signature", "unknown-node", "nodes-not-ascending"]) {
      expect([...reasons], reason).to.include(reason);
    }
  });
});
