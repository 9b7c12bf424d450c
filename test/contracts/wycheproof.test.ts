/**
 * All Wycheproof ECDSA P-256/SHA-256 (IEEE P1363) vectors through the contract's card-signature check
 * (TimeProofLib.verifyP256, via TimeProofLibHarness): a signature is accepted exactly when Wycheproof says
 * "valid" and s is low (docs/protocol.md §3). Run once on the precompile and once on OpenZeppelin's Solidity fallback.
 */
import { expect } from "chai";
import hre from "hardhat";
import { sha256, toHex, type Address, type Hex } from "viem";
import { P256_HALF_N } from "../../protocol";
import { loadWycheproofP256, protocolAccepts } from "../vectors/wycheproof";
import { loadFixture } from "./fixtures";

const suite = loadWycheproofP256();

const word = (hex: string): Hex => toHex(BigInt(`0x${hex}`), { size: 32 });

interface Case {
  tcId: number;
  comment: string;
  digest: Hex;
  r: Hex;
  s: Hex;
  x: Hex;
  y: Hex;
  /** A P1363 signature that is not exactly r ‖ s of 32 bytes each cannot be a card signature at all. */
  wellFormed: boolean;
  /** Wycheproof's verdict is "valid". */
  wycheproofValid: boolean;
  expected: boolean;
}

const cases: Case[] = suite.testGroups.flatMap((group) =>
  group.tests.map((test) => {
    const wellFormed = test.sig.length === 128;
    const r = wellFormed ? word(test.sig.slice(0, 64)) : word("0");
    const s = wellFormed ? word(test.sig.slice(64)) : word("0");
    return {
      tcId: test.tcId,
      comment: test.comment,
      digest: sha256(`0x${test.msg}`),
      r,
      s,
      x: word(group.key.wx),
      y: word(group.key.wy),
      wellFormed,
      wycheproofValid: test.result === "valid",
      expected: protocolAccepts(test),
    };
  }),
);

/** An address with no code: calls to it return empty data, exactly like a chain without the P-256 precompile. */
const NO_PRECOMPILE: Address = "0x000000000000000000000000000000000000dEaD";

describe("Wycheproof ecdsa_secp256r1_sha256_p1363 through TimeProofLib.verifyP256", () => {
  async function deployLib() {
    return hre.viem.deployContract("TimeProofLibHarness", []);
  }

  it(`has all ${suite.numberOfTests} vectors`, () => {
    expect(cases).to.have.length(219);
    expect(suite.numberOfTests).to.equal(219);
  });

  for (const [label, precompile] of [
    ["the P-256 precompile (0x100)", undefined],
    ["OpenZeppelin's Solidity fallback (no precompile)", NO_PRECOMPILE],
  ] as const) {
    it(`accepts exactly the valid low-S signatures on ${label}`, async function () {
      this.timeout(600_000);
      const lib = await loadFixture(deployLib);
      let accepted = 0;
      const mismatches: string[] = [];
      for (const c of cases) {
        const result = !c.wellFormed
          ? false // not representable as (r, s): the oracle's 96-byte length rule rejects it first
          : precompile === undefined
            ? await lib.read.verifyP256([c.digest, c.r, c.s, c.x, c.y])
            : await lib.read.verifyP256Using([precompile, c.digest, c.r, c.s, c.x, c.y]);
        if (result) accepted += 1;
        if (result !== c.expected) mismatches.push(`tcId ${c.tcId} (${c.comment}): got ${String(result)}`);
      }
      expect(mismatches).to.deep.equal([]);
      expect(accepted).to.equal(cases.filter((c) => c.expected).length);
      // Wycheproof marks 146 vectors valid; the low-S rule rejects the 67 high-S ones among them.
      expect(accepted).to.equal(EXPECTED_ACCEPTED);
    });
  }

  it("counts what the protocol rejects beyond Wycheproof: every valid high-S vector", () => {
    const validHighS = cases.filter((c) => c.wycheproofValid && BigInt(c.s) > P256_HALF_N);
    expect(validHighS.length).to.equal(67);
  });
});

/** Accepted vectors: Wycheproof "valid" (146) and s ≤ n/2; the other 67 valid ones are high-S. */
const EXPECTED_ACCEPTED = 79;
