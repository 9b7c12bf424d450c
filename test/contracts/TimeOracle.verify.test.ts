/**
 * verifyTimeProof: one test (at least) per rule of docs/protocol.md §6.2, each failing if the rule were removed, plus
 * malformed inputs that must yield false, never a revert. Runs on TimeOracleHarness, whose clock is pinned.
 */
import { expect } from "chai";
import { concatHex, decodeFunctionResult, encodeFunctionData, sliceHex, toHex, type Hex } from "viem";
import hre from "hardhat";
import {
  DEFAULT_MAX_ACCEPTABLE_DRIFT_NS,
  DEFAULT_MAX_ATTESTATION_AGE_NS,
  DEFAULT_MAX_FUTURE_DRIFT_NS,
  NS_PER_SECOND,
  P256_N,
  SECP256K1_N,
  assembleProof,
  createDevIdentity,
  createVerifyContext,
  signNodeEntry,
  timeAttestationForProof,
  verifyTimeProof,
  type TimeProof,
} from "../../protocol";
import {
  FIXTURE_NOW_NS,
  FOREVER_NS,
  byAddress,
  deployOracleFixture,
  joinEntries,
  loadFixture,
  splitEntries,
  testScalar,
  type OracleFixture,
} from "./fixtures";

function withS(hardwareSignature: Hex, s: bigint): Hex {
  return concatHex([sliceHex(hardwareSignature, 0, 64), toHex(s, { size: 32 })]);
}

/** The same node signature in its malleable high-S form: s → n − s and the y parity flipped. */
function highSEntry(entry: Hex): Hex {
  const word = BigInt(sliceHex(entry, 48, 80));
  const parity = word >> 255n;
  const s = word & ((1n << 255n) - 1n);
  const flipped = ((1n - parity) << 255n) | (SECP256K1_N - s);
  return concatHex([sliceHex(entry, 0, 48), toHex(flipped, { size: 32 })]);
}

describe("TimeOracle.verifyTimeProof", () => {
  let f: OracleFixture;
  beforeEach(async () => {
    f = await loadFixture(deployOracleFixture);
  });

  const verify = (proof: TimeProof) => f.oracle.read.verifyTimeProof([proof]);

  describe("accepts", () => {
    it("a fresh proof signed by the dev card and one registered node", async () => {
      expect(await verify(f.freshProof())).to.equal(true);
    });

    it("a proof with three registered nodes in ascending order", async () => {
      expect(await verify(f.freshProof({ nodes: f.nodeKeys }))).to.equal(true);
    });
  });

  describe("rule 1: the card", () => {
    it("rejects a proof signed by an unregistered card", async () => {
      const other = await createDevIdentity({ cardPrivateKey: testScalar("unregistered card") });
      expect(await verify(f.freshProof({ card: other.cardKey }))).to.equal(false);
    });

    it("rejects a proof of a revoked card (and accepted it before)", async () => {
      const proof = f.freshProof();
      expect(await verify(proof)).to.equal(true);
      await f.asGuardian.write.revokeCard([f.dev.cardId]);
      expect(await verify(proof)).to.equal(false);
    });

    it("rejects a card outside its validity window, accepting it at both inclusive edges", async () => {
      const proof = f.freshProof();
      const { x, y } = f.cardKey;
      const cases: [bigint, bigint, boolean][] = [
        [FIXTURE_NOW_NS, FOREVER_NS, true], // valid from exactly now
        [FIXTURE_NOW_NS + 1n, FOREVER_NS, false], // not yet valid
        [0n, FIXTURE_NOW_NS, true], // valid until exactly now
        [0n, FIXTURE_NOW_NS - 1n, false], // expired
      ];
      for (const [validFromNs, validUntilNs, expected] of cases) {
        await f.asRegistrar.write.registerCard([x, y, validFromNs, validUntilNs]);
        expect(await verify(proof), `window [${validFromNs}, ${validUntilNs}]`).to.equal(expected);
      }
    });

    it("rejects a high-S card signature (s replaced by n − s), which is otherwise a valid ECDSA signature", async () => {
      const proof = f.freshProof();
      const s = BigInt(sliceHex(proof.hardwareSignature, 64, 96));
      const highS = withS(proof.hardwareSignature, P256_N - s);
      const lib = await hre.viem.deployContract("TimeProofLibHarness", []);
      // Sanity: the precompile itself accepts the high-S form, so only the low-S rule rejects it.
      const digest = (await lib.read.hwDigest([f.dev.cardId, proof.nanoMoment])) as Hex;
      const precompileInput = concatHex([digest, sliceHex(highS, 32, 64), sliceHex(highS, 64, 96), f.cardKey.x, f.cardKey.y]);
      const answer = await f.publicClient.call({ to: "0x0000000000000000000000000000000000000100", data: precompileInput });
      expect(answer.data).to.equal(toHex(1n, { size: 32 }));
      // Node entries signed over the high-S hardware signature, so only rule 1 fails.
      const resigned = resignWithHardwareSignature(f, proof, highS);
      expect(await verify(resigned)).to.equal(false);
    });

    it("rejects a card signature over another nanoMoment", async () => {
      const proof = f.freshProof();
      const other = f.proofAt(proof.nanoMoment + 1n);
      expect(await verify({ ...proof, hardwareSignature: other.hardwareSignature })).to.equal(false);
    });
  });

  describe("rule 2: the node entries", () => {
    it("rejects an entry from an unregistered node", async () => {
      expect(await verify(f.freshProof({ nodes: [f.strangerNode] }))).to.equal(false);
    });

    it("rejects an entry from a deactivated node", async () => {
      const proof = f.freshProof();
      await f.asGuardian.write.deactivateNode([f.dev.nodeAddress]);
      expect(await verify(proof)).to.equal(false);
    });

    it("rejects a node outside its validity window, accepting it at both inclusive edges", async () => {
      const proof = f.freshProof();
      const cases: [bigint, bigint, boolean][] = [
        [FIXTURE_NOW_NS, FOREVER_NS, true],
        [FIXTURE_NOW_NS + 1n, FOREVER_NS, false],
        [0n, FIXTURE_NOW_NS, true],
        [0n, FIXTURE_NOW_NS - 1n, false],
      ];
      for (const [validFromNs, validUntilNs, expected] of cases) {
        await f.asRegistrar.write.registerNode([f.dev.nodeAddress, validFromNs, validUntilNs]);
        expect(await verify(proof), `window [${validFromNs}, ${validUntilNs}]`).to.equal(expected);
      }
    });

    it("rejects entries in descending order", async () => {
      const proof = f.freshProof({ nodes: f.nodeKeys.slice(0, 2) });
      const entries = splitEntries(proof.nodeSignature);
      expect(await verify(proof)).to.equal(true);
      expect(await verify({ ...proof, nodeSignature: joinEntries([...entries].reverse()) })).to.equal(false);
    });

    it("rejects a duplicated entry (one node counted twice), even with quorum 2", async () => {
      await f.oracle.write.setNodeQuorum([2n]);
      const proof = f.freshProof();
      const [entry] = splitEntries(proof.nodeSignature);
      expect(await verify({ ...proof, nodeSignature: joinEntries([entry!, entry!]) })).to.equal(false);
    });

    it("rejects fewer entries than nodeQuorum, accepting exactly nodeQuorum", async () => {
      await f.oracle.write.setNodeQuorum([2n]);
      expect(await verify(f.freshProof({ nodes: [f.dev.nodeKey] }))).to.equal(false);
      expect(await verify(f.freshProof({ nodes: f.nodeKeys.slice(0, 2) }))).to.equal(true);
      await f.oracle.write.setNodeQuorum([3n]);
      expect(await verify(f.freshProof({ nodes: f.nodeKeys.slice(0, 2) }))).to.equal(false);
      expect(await verify(f.freshProof({ nodes: f.nodeKeys }))).to.equal(true);
    });

    it("rejects a high-S node signature (the malleable twin of a valid one)", async () => {
      const proof = f.freshProof();
      const [entry] = splitEntries(proof.nodeSignature);
      expect(await verify({ ...proof, nodeSignature: highSEntry(entry!) })).to.equal(false);
    });

    it("rejects an entry with the wrong y parity (recovers another address)", async () => {
      const proof = f.freshProof();
      const [entry] = splitEntries(proof.nodeSignature);
      const word = BigInt(sliceHex(entry!, 48, 80)) ^ (1n << 255n);
      expect(await verify({ ...proof, nodeSignature: concatHex([sliceHex(entry!, 0, 48), toHex(word, { size: 32 })]) })).to.equal(false);
    });

    it("rejects entries that do not recover at all (r = 0, s = 0, r ≥ n)", async () => {
      const proof = f.freshProof();
      const [entry] = splitEntries(proof.nodeSignature);
      const ts = sliceHex(entry!, 0, 16);
      const r = sliceHex(entry!, 16, 48);
      const yps = sliceHex(entry!, 48, 80);
      for (const bad of [
        concatHex([ts, toHex(0n, { size: 32 }), yps]),
        concatHex([ts, r, toHex(0n, { size: 32 })]),
        concatHex([ts, toHex(SECP256K1_N, { size: 32 }), yps]),
      ]) {
        expect(await verify({ ...proof, nodeSignature: bad })).to.equal(false);
      }
    });

    it("rejects a proof whose accuracy was changed after the nodes signed it", async () => {
      const proof = f.freshProof({ accuracy: 50 });
      expect(await verify({ ...proof, accuracy: 40 })).to.equal(false);
    });

    it("rejects a node entry taken from a proof of another moment", async () => {
      const proof = f.freshProof();
      const other = f.proofAt(proof.nanoMoment + 1n);
      expect(await verify({ ...proof, nodeSignature: other.nodeSignature })).to.equal(false);
    });
  });

  describe("rule 3: freshness against the chain clock", () => {
    it("accepts a proof exactly maxAttestationAge old and rejects one 1 ns older", async () => {
      expect(await verify(f.proofAt(FIXTURE_NOW_NS - DEFAULT_MAX_ATTESTATION_AGE_NS))).to.equal(true);
      expect(await verify(f.proofAt(FIXTURE_NOW_NS - DEFAULT_MAX_ATTESTATION_AGE_NS - 1n))).to.equal(false);
    });

    it("accepts a proof exactly maxFutureDrift ahead and rejects one 1 ns further", async () => {
      expect(await verify(f.proofAt(FIXTURE_NOW_NS + DEFAULT_MAX_FUTURE_DRIFT_NS))).to.equal(true);
      expect(await verify(f.proofAt(FIXTURE_NOW_NS + DEFAULT_MAX_FUTURE_DRIFT_NS + 1n))).to.equal(false);
    });

    it("keeps the two bounds separate (a future drift larger than the age bound is honoured)", async () => {
      await f.oracle.write.setMaxAttestationAge([NS_PER_SECOND]);
      await f.oracle.write.setMaxFutureDrift([30n * NS_PER_SECOND]);
      expect(await verify(f.proofAt(FIXTURE_NOW_NS + 30n * NS_PER_SECOND))).to.equal(true);
      expect(await verify(f.proofAt(FIXTURE_NOW_NS - 30n * NS_PER_SECOND))).to.equal(false);
      expect(await verify(f.proofAt(FIXTURE_NOW_NS - NS_PER_SECOND))).to.equal(true);
    });

    it("follows the settings and the clock", async () => {
      const proof = f.proofAt(FIXTURE_NOW_NS - 90n * NS_PER_SECOND);
      expect(await verify(proof)).to.equal(false);
      await f.oracle.write.setMaxAttestationAge([90n * NS_PER_SECOND]);
      expect(await verify(proof)).to.equal(true);
      await f.oracle.write.setNow([FIXTURE_NOW_NS / NS_PER_SECOND + 1n]);
      expect(await verify(proof)).to.equal(false);
    });

    it("rejects nanoMoment 0 and the largest uint128 without reverting", async () => {
      expect(await verify(f.proofAt(0n))).to.equal(false);
      expect(await verify(f.proofAt((1n << 128n) - 1n, { nodeTimestampNs: 0n }))).to.equal(false);
    });
  });

  describe("rule 4: accuracy", () => {
    it("accepts accuracy equal to maxAcceptableDrift and rejects one more", async () => {
      const max = Number(DEFAULT_MAX_ACCEPTABLE_DRIFT_NS);
      expect(await verify(f.freshProof({ accuracy: max }))).to.equal(true);
      expect(await verify(f.freshProof({ accuracy: max + 1 }))).to.equal(false);
    });

    it("follows the setting", async () => {
      const proof = f.freshProof({ accuracy: 5_000 });
      expect(await verify(proof)).to.equal(false);
      await f.oracle.write.setMaxAcceptableDrift([5_000n]);
      expect(await verify(proof)).to.equal(true);
    });
  });

  describe("malformed input yields false, never a revert", () => {
    it("rejects hardware signatures of the wrong length", async () => {
      const proof = f.freshProof();
      for (const hardwareSignature of [
        "0x" as Hex,
        sliceHex(proof.hardwareSignature, 0, 95),
        concatHex([proof.hardwareSignature, "0x00"]),
        concatHex([proof.hardwareSignature, proof.hardwareSignature]),
      ]) {
        expect(await verify({ ...proof, hardwareSignature })).to.equal(false);
      }
    });

    it("rejects node signatures that are empty or not a whole number of entries", async () => {
      const proof = f.freshProof();
      for (const nodeSignature of [
        "0x" as Hex,
        sliceHex(proof.nodeSignature, 0, 79),
        concatHex([proof.nodeSignature, "0x00"]),
        concatHex([proof.nodeSignature, sliceHex(proof.nodeSignature, 0, 40)]),
      ]) {
        expect(await verify({ ...proof, nodeSignature })).to.equal(false);
      }
    });

    it("rejects more than MAX_NODE_ENTRIES entries", async () => {
      const max = Number(await f.oracle.read.MAX_NODE_ENTRIES());
      const proof = f.freshProof();
      expect(await verify({ ...proof, nodeSignature: joinEntries(Array(max + 1).fill(proof.nodeSignature)) })).to.equal(false);
    });

    it("rejects garbage of the right lengths and zeroed signatures", async () => {
      const proof = f.freshProof();
      const zero96 = toHex(0n, { size: 96 });
      const zero80 = toHex(0n, { size: 80 });
      const ff = `0x${"ff".repeat(96)}` as Hex;
      for (const candidate of [
        { ...proof, hardwareSignature: zero96 },
        { ...proof, hardwareSignature: ff },
        { ...proof, hardwareSignature: concatHex([f.dev.cardId, toHex(0n, { size: 64 })]) },
        { ...proof, hardwareSignature: concatHex([f.dev.cardId, `0x${"ff".repeat(64)}`]) },
        { ...proof, hardwareSignature: withS(proof.hardwareSignature, 0n) },
        { ...proof, nodeSignature: zero80 },
        { ...proof, nodeSignature: `0x${"ff".repeat(80)}` as Hex },
      ]) {
        expect(await verify(candidate)).to.equal(false);
      }
    });

    it("rejects non-canonical ABI encodings (offsets out of bounds, dirty words) with false, not a revert", async () => {
      const proof = f.freshProof();
      const data = encodeFunctionData({ abi: f.oracle.abi, functionName: "verifyTimeProof", args: [proof] });
      // Layout after the selector: word 0 = offset of the tuple (0x20); the tuple's words: nanoMoment,
      // offset of hardwareSignature, offset of nodeSignature, accuracy (offsets relative to the tuple).
      const words = data.slice(10).match(/.{64}/g)!;
      const call = async (patched: string[]) => {
        const result = await f.publicClient.call({ to: f.oracle.address, data: `0x${data.slice(2, 10)}${patched.join("")}` as Hex });
        return decodeFunctionResult({ abi: f.oracle.abi, functionName: "verifyTimeProof", data: result.data! });
      };
      expect(await call(words)).to.equal(true);
      const patch = (index: number, value: bigint) => words.map((word, i) => (i === index ? value.toString(16).padStart(64, "0") : word));
      expect(await call(patch(2, 1n << 200n))).to.equal(false); // hardwareSignature offset far out of bounds
      expect(await call(patch(2, 0x10000n))).to.equal(false); // hardwareSignature offset past the calldata
      expect(await call(patch(3, 1n << 255n))).to.equal(false); // nodeSignature offset wraps around
      expect(await call(patch(1, (1n << 128n) | proof.nanoMoment))).to.equal(false); // dirty uint128
      expect(await call(patch(4, (1n << 32n) | BigInt(proof.accuracy)))).to.equal(false); // dirty uint32
      // A 96-byte length word at the very end of the calldata: the bytes it announces are not there (Solidity's
      // accessor would revert; the oracle says false).
      const lastWordOffset = BigInt((words.length - 1) * 32); // relative to the tuple, which starts at word 1
      expect(await call([...patch(2, lastWordOffset), (96n).toString(16).padStart(64, "0")])).to.equal(false);
    });

    it("rejects r = n and r = 0 in the card signature", async () => {
      const proof = f.freshProof();
      const s = sliceHex(proof.hardwareSignature, 64, 96);
      for (const r of [0n, P256_N, P256_N + 1n]) {
        const hardwareSignature = concatHex([f.dev.cardId, toHex(r, { size: 32 }), s]);
        expect(await verify({ ...proof, hardwareSignature })).to.equal(false);
      }
    });
  });

  describe("agrees with the TypeScript verifier", () => {
    it("on the accepted and rejected proofs above", async () => {
      const ctx = createVerifyContext({
        cards: { [f.dev.cardId]: { publicKey: f.dev.cardPublicKey, revoked: false } },
        nodes: f.nodeKeys.map((key) => key.address),
        nowNs: FIXTURE_NOW_NS,
      });
      const proofs = [
        f.freshProof(),
        f.freshProof({ nodes: byAddress(f.nodeKeys) }),
        f.freshProof({ nodes: [f.strangerNode] }),
        f.proofAt(FIXTURE_NOW_NS - DEFAULT_MAX_ATTESTATION_AGE_NS - 1n),
        f.proofAt(FIXTURE_NOW_NS + DEFAULT_MAX_FUTURE_DRIFT_NS),
        f.freshProof({ accuracy: 1_001 }),
      ];
      for (const proof of proofs) {
        expect(await verify(proof)).to.equal(verifyTimeProof(proof, ctx).valid);
      }
    });
  });
});

/** Re-signs the node entries of `proof` over a substituted hardware signature (so only rule 1 can fail). */
function resignWithHardwareSignature(f: OracleFixture, proof: TimeProof, hardwareSignature: Hex): TimeProof {
  const base = { nanoMoment: proof.nanoMoment, hardwareSignature, accuracy: proof.accuracy };
  const entry = signNodeEntry(f.dev.nodeKey, timeAttestationForProof(base, proof.nanoMoment + 7n));
  return assembleProof({ ...base, entries: [entry] });
}

