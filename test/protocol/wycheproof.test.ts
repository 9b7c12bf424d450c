/**
 * All Wycheproof ECDSA P-256 / SHA-256 / IEEE P1363 vectors through the card-signature check. The protocol
 * accepts exactly what Wycheproof calls "valid" AND has s ≤ n/2 (low-S, docs/protocol.md §3): "acceptable" and
 * "invalid" vectors, and the high-S half of the valid ones, must be refused. The same file is read by the
 * contract tests (test/contracts/), so both sides see identical inputs.
 */
import { createHash } from "node:crypto";
import { expect } from "chai";
import { P256_N, verifyP256Signature, type Hex } from "../../protocol";
import { loadWycheproofP256, protocolAccepts } from "../vectors/wycheproof";

describe("Wycheproof ECDSA P-256 SHA-256 P1363 through verifyP256Signature", () => {
  const file = loadWycheproofP256();

  it("runs every test of the file and agrees with 'valid and low-S' on each", () => {
    let run = 0;
    const disagreements: string[] = [];
    const tally = { accepted: 0, refusedHighS: 0, refusedInvalid: 0 };
    for (const group of file.testGroups) {
      expect(group.key.curve).to.equal("secp256r1");
      expect(group.sha).to.equal("SHA-256");
      const publicKey = `0x${group.key.uncompressed}` as Hex;
      for (const test of group.tests) {
        run += 1;
        // Split as a 64-byte P1363 signature would be; wrong-size signatures give wrong-size halves (refused).
        const half = test.sig.length / 2;
        const r = `0x${test.sig.slice(0, Math.floor(half))}` as Hex;
        const s = `0x${test.sig.slice(Math.floor(half))}` as Hex;
        const accepted = verifyP256Signature({ message: `0x${test.msg}` as Hex }, r, s, publicKey);
        // The same decision over the SHA-256 digest: the path the contract's precompile check mirrors.
        const digest = `0x${createHash("sha256").update(Buffer.from(test.msg, "hex")).digest("hex")}` as Hex;
        const acceptedDigest = verifyP256Signature({ digest }, r, s, publicKey);
        const expected = protocolAccepts(test);
        if (accepted !== expected || acceptedDigest !== expected) {
          disagreements.push(`tcId ${test.tcId} (${test.result}, ${test.comment}): message=${accepted} digest=${acceptedDigest}`);
        }
        if (accepted) tally.accepted += 1;
        else if (test.result === "valid") tally.refusedHighS += 1;
        else tally.refusedInvalid += 1;
      }
    }
    expect(disagreements).to.deep.equal([]);
    expect(run).to.equal(file.numberOfTests);
    expect(run).to.equal(219);
    // Every valid vector is either accepted or refused only for high S.
    expect(tally.accepted + tally.refusedHighS).to.equal(
      file.testGroups.flatMap((g) => g.tests).filter((t) => t.result === "valid").length,
    );
  });

  it("accepts the low-S twin of every high-S valid vector (the refusal is about S, not the signature)", () => {
    let twins = 0;
    for (const group of file.testGroups) {
      for (const test of group.tests) {
        if (test.result !== "valid" || protocolAccepts(test)) continue;
        const lowS = (P256_N - BigInt(`0x${test.sig.slice(64)}`)).toString(16).padStart(64, "0");
        expect(
          verifyP256Signature({ message: `0x${test.msg}` as Hex }, `0x${test.sig.slice(0, 64)}`, `0x${lowS}`, `0x${group.key.uncompressed}`),
          `tcId ${test.tcId}`,
        ).to.equal(true);
        twins += 1;
      }
    }
    expect(twins).to.be.greaterThan(0);
  });
});
