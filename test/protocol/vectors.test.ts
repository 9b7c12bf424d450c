/**
 * The committed golden vectors (test/vectors/protocol-v1.json) against the TypeScript codec: every digest and
 * encoding is recomputed from the vector's inputs, every verification case is re-verified, and the whole file
 * must equal what the generator produces now (so a codec change cannot silently drift from the vectors the
 * Solidity tests replay).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import {
  VERIFY_FAILURE_REASONS,
  cardIdFromPublicKey,
  decodeCrossChainTime,
  decodeTimeProof,
  encodeCrossChainTime,
  encodeTimeProof,
  hardwareSignatureHash,
  hwDigest,
  hwMessage,
  nodeAddressFromPrivateKey,
  recoverNodeAddress,
  timeAttestationDigest,
  timeAttestationDomainSeparator,
  timeAttestationStructHash,
  timeAttestationTypeHash,
  verifyTimeProof,
  type Hex,
  type TimeAttestation,
} from "../../protocol";
import {
  VECTORS_FILE_NAME,
  contextFromVector,
  proofFromVector,
  vectorsText,
  type ProtocolVectors,
} from "../vectors/build-vectors";

const path = join(__dirname, "..", "vectors", VECTORS_FILE_NAME);
const text = readFileSync(path, "utf8");
const vectors = JSON.parse(text) as ProtocolVectors;

function attestationFrom(message: ProtocolVectors["attestations"][number]["message"]): TimeAttestation {
  return { ...message, nanoMoment: BigInt(message.nanoMoment), nodeTimestamp: BigInt(message.nodeTimestamp) };
}

describe("golden vectors (test/vectors/protocol-v1.json)", () => {
  it("are exactly what scripts/gen-vectors.ts generates from the fixed keys", () => {
    expect(text === vectorsText(), "regenerate with `npx hardhat run --no-compile scripts/gen-vectors.ts` and review the diff").to.equal(true);
  });

  it("match the EIP-712 constants", () => {
    expect(vectors.constants.DOMAIN_SEPARATOR).to.equal(timeAttestationDomainSeparator());
    expect(vectors.constants.TIME_ATTESTATION_TYPEHASH).to.equal(timeAttestationTypeHash());
  });

  it("derive cardIds and node addresses from the keys", () => {
    for (const card of [vectors.keys.card, vectors.keys.otherCard]) {
      expect(cardIdFromPublicKey(card.publicKey)).to.equal(card.cardId);
      expect(cardIdFromPublicKey({ x: card.x, y: card.y })).to.equal(card.cardId);
    }
    for (const node of vectors.keys.nodes) expect(nodeAddressFromPrivateKey(node.privateKey)).to.equal(node.address);
  });

  it("recompute every hwMessage and hwDigest", () => {
    for (const vector of vectors.hwMessages) {
      expect(`0x${Buffer.from(hwMessage(vector.cardId, BigInt(vector.nanoMoment))).toString("hex")}`).to.equal(vector.hwMessage);
      expect(hwDigest(vector.cardId, BigInt(vector.nanoMoment))).to.equal(vector.hwDigest);
    }
  });

  it("recompute the hardware signature hash, attestation hashes and signers", () => {
    const hardware = vectors.hardwareSignature;
    expect(hardwareSignatureHash(hardware.r, hardware.s)).to.equal(hardware.hardwareSignatureHash);
    expect(`0x${hardware.cardId.slice(2)}${hardware.r.slice(2)}${hardware.s.slice(2)}`).to.equal(hardware.encoded);
    for (const vector of vectors.attestations) {
      const att = attestationFrom(vector.message);
      expect(timeAttestationStructHash(att)).to.equal(vector.structHash);
      expect(timeAttestationDigest(att)).to.equal(vector.digest);
      expect(recoverNodeAddress(att, vector.entry)).to.equal(vector.signer);
    }
  });

  it("recompute abi.encode(TimeProof) and CrossChainTime", () => {
    const proof = proofFromVector(vectors.timeProof.proof);
    expect(encodeTimeProof(proof)).to.equal(vectors.timeProof.abiEncoded);
    expect(decodeTimeProof(vectors.timeProof.abiEncoded)).to.deep.equal(proof);
    const raw = vectors.crossChainTime.message;
    const message = { networkTime: BigInt(raw.networkTime), targetChain: BigInt(raw.targetChain), proof: raw.proof as Hex, targetBlock: BigInt(raw.targetBlock) };
    expect(encodeCrossChainTime(message)).to.equal(vectors.crossChainTime.abiEncoded);
    expect(decodeCrossChainTime(vectors.crossChainTime.abiEncoded)).to.deep.equal(message);
    expect(message.proof).to.equal(vectors.timeProof.abiEncoded);
  });

  describe("verification cases", () => {
    for (const vector of vectors.verification.cases) {
      it(`${vector.name}: ${vector.expected.valid ? "valid" : vector.expected.reason}`, () => {
        const proof = proofFromVector(vector.proof);
        expect(encodeTimeProof(proof)).to.equal(vector.abiEncoded);
        expect(BigInt(vector.context.nowNs) % 1_000_000_000n, "on-chain replay needs a whole-second clock").to.equal(0n);
        const result = verifyTimeProof(proof, contextFromVector(vector.context));
        expect({ valid: result.valid, reason: result.valid ? null : result.reason }).to.deep.equal(vector.expected);
      });
    }

    it("cover valid proofs with 1 and 3 nodes and every on-chain failure reason", () => {
      const reasons = new Set(vectors.verification.cases.map((c) => c.expected.reason));
      const offChainOnly = new Set(["malformed-proof"]); // the ABI decoder rules these out on-chain
      for (const reason of VERIFY_FAILURE_REASONS.filter((r) => !offChainOnly.has(r))) expect(reasons, reason).to.include(reason);
      const valid = vectors.verification.cases.filter((c) => c.expected.valid);
      expect(valid.map((c) => (c.proof.nodeSignature.length - 2) / 160)).to.include.members([1, 3]);
    });
  });
});
