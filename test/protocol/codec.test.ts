import { createHash } from "node:crypto";
import { expect } from "chai";
import fc from "fast-check";
import { encodeAbiParameters, keccak256, toHex } from "viem";
import {
  HW_MESSAGE_LENGTH,
  ProtocolError,
  UINT128_MAX,
  cardIdFromPublicKey,
  crossChainTimeForProof,
  decodeCrossChainTime,
  decodeHardwareSignature,
  decodeNodeEntries,
  decodeNodeEntry,
  decodeTimeProof,
  encodeCrossChainTime,
  encodeHardwareSignature,
  encodeNodeEntries,
  encodeTimeProof,
  hardwareSignatureHash,
  hardwareSignatureHashBytes,
  hwDigest,
  hwMessage,
  hwMessageBytes,
  timeAttestationDigest,
  timeAttestationDigestBuffer,
  timeAttestationDigestBytes,
  timeAttestationDigestViem,
  timeAttestationStructHashViem,
  timeAttestationDomainSeparator,
  timeAttestationForProof,
  timeAttestationStructHash,
  timeAttestationTypeHash,
  type Hex,
} from "../../protocol";
import { CARD_ID, CARD_PUBLIC_KEY, NANO_MOMENT, validProof } from "./fixtures";

function expectProtocolError(fn: () => unknown, details: Record<string, unknown> = {}): void {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).to.be.instanceOf(ProtocolError);
  if (caught instanceof ProtocolError) expect(caught.details).to.include(details);
}

const bytes = (n: number, fill = "ab"): Hex => `0x${fill.repeat(n)}`;

describe("codec", () => {
  describe("hwMessage / hwDigest", () => {
    it("lays out tag ‖ cardId ‖ nanoMoment (16 bytes big-endian) in 56 bytes", () => {
      const message = hwMessage(CARD_ID, NANO_MOMENT);
      expect(message.length).to.equal(HW_MESSAGE_LENGTH);
      expect(Buffer.from(message.subarray(0, 8)).toString("ascii")).to.equal("ATS/1 HW");
      expect(toHex(message.subarray(8, 40))).to.equal(CARD_ID);
      expect(BigInt(toHex(message.subarray(40)))).to.equal(NANO_MOMENT);
      expect(hwDigest(CARD_ID, NANO_MOMENT)).to.equal(`0x${createHash("sha256").update(message).digest("hex")}`);
    });

    it("accepts the uint128 extremes and rejects values outside", () => {
      expect(hwMessage(CARD_ID, 0n).length).to.equal(56);
      expect(hwMessage(CARD_ID, UINT128_MAX).length).to.equal(56);
      expectProtocolError(() => hwMessage(CARD_ID, UINT128_MAX + 1n), { field: "nanoMoment" });
      expectProtocolError(() => hwMessage(CARD_ID, -1n), { field: "nanoMoment" });
      expectProtocolError(() => hwMessage(bytes(31), 1n), { field: "cardId", actualBytes: 31 });
    });
  });

  describe("cardId", () => {
    it("is SHA-256 of 0x04 ‖ X ‖ Y, whatever form the key is given in", () => {
      const expected = `0x${createHash("sha256").update(Buffer.from(CARD_PUBLIC_KEY.slice(2), "hex")).digest("hex")}`;
      expect(cardIdFromPublicKey(CARD_PUBLIC_KEY)).to.equal(expected);
      expect(cardIdFromPublicKey(CARD_PUBLIC_KEY.toUpperCase().replace("0X", "0x") as Hex)).to.equal(expected);
      expect(cardIdFromPublicKey(Buffer.from(CARD_PUBLIC_KEY.slice(2), "hex"))).to.equal(expected);
      const x = `0x${CARD_PUBLIC_KEY.slice(4, 68)}` as Hex;
      const y = `0x${CARD_PUBLIC_KEY.slice(68)}` as Hex;
      expect(cardIdFromPublicKey({ x, y })).to.equal(expected);
      expect(cardIdFromPublicKey({ x: BigInt(x), y: BigInt(y) })).to.equal(expected);
      expect(CARD_ID).to.equal(expected);
    });

    it("rejects compressed, truncated and off-curve keys", () => {
      expectProtocolError(() => cardIdFromPublicKey(`0x02${CARD_PUBLIC_KEY.slice(4, 68)}`), { expectedBytes: 65, actualBytes: 33 });
      expectProtocolError(() => cardIdFromPublicKey(CARD_PUBLIC_KEY.slice(0, -2) as Hex), { actualBytes: 64 });
      const offCurve = `${CARD_PUBLIC_KEY.slice(0, -2)}${CARD_PUBLIC_KEY.endsWith("00") ? "01" : "00"}` as Hex;
      expectProtocolError(() => cardIdFromPublicKey(offCurve));
    });
  });

  describe("hardware signature (96 bytes)", () => {
    it("round-trips", () => {
      const signature = { cardId: bytes(32, "01"), r: bytes(32, "02"), s: bytes(32, "03") };
      const encoded = encodeHardwareSignature(signature);
      expect(encoded.length).to.equal(2 + 96 * 2);
      expect(decodeHardwareSignature(encoded)).to.deep.equal(signature);
    });

    it("rejects every length but 96", () => {
      for (const length of [0, 64, 95, 97, 192]) {
        expectProtocolError(() => decodeHardwareSignature(bytes(length)), { expectedBytes: 96, actualBytes: length });
      }
      expectProtocolError(() => decodeHardwareSignature("0xabc" as Hex), { field: "hardwareSignature" });
    });

    it("hashes r ‖ s with keccak256 for the node attestation", () => {
      expect(hardwareSignatureHash(bytes(32, "02"), bytes(32, "03"))).to.equal(keccak256(`0x${"02".repeat(32)}${"03".repeat(32)}`));
    });
  });

  describe("node entries (80 bytes each)", () => {
    const entry = { nodeTimestampNs: NANO_MOMENT + 5n, r: bytes(32, "0a"), yParityAndS: bytes(32, "8b") };

    it("round-trips one and several entries", () => {
      const encoded = encodeNodeEntries([entry, { ...entry, nodeTimestampNs: UINT128_MAX }]);
      expect(encoded.length).to.equal(2 + 160 * 2);
      expect(decodeNodeEntries(encoded)).to.deep.equal([entry, { ...entry, nodeTimestampNs: UINT128_MAX }]);
      expect(decodeNodeEntry(encodeNodeEntries([entry]))).to.deep.equal(entry);
    });

    it("rejects empty input and any length that is not a multiple of 80", () => {
      for (const length of [0, 1, 79, 81, 159, 161]) {
        expectProtocolError(() => decodeNodeEntries(bytes(length)), { actualBytes: length, entryBytes: 80 });
      }
      expectProtocolError(() => encodeNodeEntries([]), { entries: 0 });
      expectProtocolError(() => encodeNodeEntries([{ ...entry, nodeTimestampNs: UINT128_MAX + 1n }]));
    });
  });

  describe("EIP-712 attestation", () => {
    const proof = validProof();
    const att = timeAttestationForProof(proof, NANO_MOMENT + 40n);

    it("uses the domain EIP712Domain(string name,string version) without chainId", () => {
      const domainTypeHash = keccak256(toHex("EIP712Domain(string name,string version)"));
      const expected = keccak256(
        encodeAbiParameters(
          [{ type: "bytes32" }, { type: "bytes32" }, { type: "bytes32" }],
          [domainTypeHash, keccak256(toHex("AttestedTime")), keccak256(toHex("1"))],
        ),
      );
      expect(timeAttestationDomainSeparator()).to.equal(expected);
    });

    it("computes structHash with abi.encode and digest = keccak256(0x1901 ‖ domain ‖ structHash)", () => {
      const typeHash = keccak256(
        toHex("TimeAttestation(bytes32 cardId,uint128 nanoMoment,uint32 accuracy,bytes32 hardwareSignatureHash,uint128 nodeTimestamp)"),
      );
      expect(timeAttestationTypeHash()).to.equal(typeHash);
      const structHash = keccak256(
        encodeAbiParameters(
          [{ type: "bytes32" }, { type: "bytes32" }, { type: "uint128" }, { type: "uint32" }, { type: "bytes32" }, { type: "uint128" }],
          [typeHash, att.cardId, att.nanoMoment, att.accuracy, att.hardwareSignatureHash, att.nodeTimestamp],
        ),
      );
      expect(timeAttestationStructHash(att)).to.equal(structHash);
      expect(timeAttestationDigest(att)).to.equal(keccak256(`0x1901${timeAttestationDomainSeparator().slice(2)}${structHash.slice(2)}`));
    });

    it("computes the same hashes as viem's generic hashTypedData (the fast path's oracle)", () => {
      for (const variant of [att, { ...att, accuracy: 0xffff_ffff }, { ...att, nanoMoment: UINT128_MAX, nodeTimestamp: 0n }]) {
        expect(timeAttestationDigest(variant)).to.equal(timeAttestationDigestViem(variant));
        expect(timeAttestationStructHash(variant)).to.equal(timeAttestationStructHashViem(variant));
      }
    });

    it("computes the same digest from hex and from bytes as viem, on random attestations", () => {
      const word = fc.uint8Array({ minLength: 32, maxLength: 32 });
      const uint128 = fc.bigInt({ min: 0n, max: UINT128_MAX });
      fc.assert(
        fc.property(word, uint128, fc.nat({ max: 0xffff_ffff }), word, uint128, (cardId, nanoMoment, accuracy, hash, nodeTimestamp) => {
          const hex: typeof att = {
            cardId: `0x${Buffer.from(cardId).toString("hex")}`,
            nanoMoment,
            accuracy,
            hardwareSignatureHash: `0x${Buffer.from(hash).toString("hex")}`,
            nodeTimestamp,
          };
          const expected = timeAttestationDigestViem(hex);
          expect(timeAttestationDigest(hex)).to.equal(expected);
          expect(`0x${timeAttestationDigestBuffer(hex).toString("hex")}`).to.equal(expected);
          const fromBytes = timeAttestationDigestBytes({ cardId, nanoMoment, accuracy, hardwareSignatureHash: hash, nodeTimestamp });
          expect(`0x${fromBytes.toString("hex")}`).to.equal(expected);
          expect(timeAttestationStructHash(hex)).to.equal(timeAttestationStructHashViem(hex));
        }),
        { numRuns: 200 },
      );
    });

    it("checks the bytes form like the hex form", () => {
      const fields = { cardId: Buffer.alloc(32), nanoMoment: 1n, accuracy: 1, hardwareSignatureHash: Buffer.alloc(32), nodeTimestamp: 1n };
      expectProtocolError(() => timeAttestationDigestBytes({ ...fields, cardId: Buffer.alloc(31) }), { field: "attestation.cardId", actualBytes: 31 });
      expectProtocolError(() => timeAttestationDigestBytes({ ...fields, hardwareSignatureHash: Buffer.alloc(33) }), { field: "attestation.hardwareSignatureHash" });
      expectProtocolError(() => timeAttestationDigestBytes({ ...fields, nanoMoment: UINT128_MAX + 1n }), { field: "attestation.nanoMoment" });
      expectProtocolError(() => timeAttestationDigestBytes({ ...fields, accuracy: 2 ** 32 }), { field: "attestation.accuracy" });
      expectProtocolError(() => timeAttestationDigestBytes({ ...fields, nodeTimestamp: -1n }), { field: "attestation.nodeTimestamp" });
    });

    it("binds every field: changing any one changes the digest", () => {
      const digest = timeAttestationDigest(att);
      expect(timeAttestationDigest({ ...att, accuracy: att.accuracy + 1 })).to.not.equal(digest);
      expect(timeAttestationDigest({ ...att, nanoMoment: att.nanoMoment + 1n })).to.not.equal(digest);
      expect(timeAttestationDigest({ ...att, nodeTimestamp: att.nodeTimestamp + 1n })).to.not.equal(digest);
      expect(timeAttestationDigest({ ...att, cardId: bytes(32, "00") })).to.not.equal(digest);
      expect(timeAttestationDigest({ ...att, hardwareSignatureHash: bytes(32, "00") })).to.not.equal(digest);
    });
  });

  describe("bytes forms of the hashed fields", () => {
    it("hwMessageBytes and hardwareSignatureHashBytes equal their hex forms", () => {
      fc.assert(
        fc.property(fc.uint8Array({ minLength: 96, maxLength: 96 }), fc.bigInt({ min: 0n, max: UINT128_MAX }), (signature, nanoMoment) => {
          const hex = `0x${Buffer.from(signature).toString("hex")}` as Hex;
          const { cardId, r, s } = decodeHardwareSignature(hex);
          expect(Buffer.from(hwMessageBytes(signature.subarray(0, 32), nanoMoment)).equals(hwMessage(cardId, nanoMoment))).to.equal(true);
          expect(`0x${hardwareSignatureHashBytes(signature.subarray(32, 96)).toString("hex")}`).to.equal(hardwareSignatureHash(r, s));
          expect(hardwareSignatureHash(r, s)).to.equal(keccak256(`0x${r.slice(2)}${s.slice(2)}`));
        }),
        { numRuns: 100 },
      );
      expectProtocolError(() => hwMessageBytes(new Uint8Array(31), 1n), { field: "cardId", actualBytes: 31 });
      expectProtocolError(() => hwMessageBytes(new Uint8Array(32), -1n), { field: "nanoMoment" });
      expectProtocolError(() => hardwareSignatureHashBytes(new Uint8Array(63)), { actualBytes: 63 });
    });
  });

  describe("ABI encodings", () => {
    const proof = validProof();

    it("round-trips abi.encode(TimeProof)", () => {
      expect(decodeTimeProof(encodeTimeProof(proof))).to.deep.equal(proof);
    });

    it("rejects truncated, extended and non-canonical TimeProof encodings", () => {
      const encoded = encodeTimeProof(proof);
      expectProtocolError(() => decodeTimeProof(encoded.slice(0, -2) as Hex), { field: "timeProof" });
      expectProtocolError(() => decodeTimeProof(`${encoded}00` as Hex), { field: "timeProof" });
      // Dirty high bits in the uint32 accuracy word: Solidity's decoder reverts, so must we.
      const words = encoded.slice(2).match(/.{64}/g)!;
      words[4] = `ff${words[4]!.slice(2)}`;
      expectProtocolError(() => decodeTimeProof(`0x${words.join("")}`), { field: "timeProof" });
    });

    it("round-trips CrossChainTime with networkTime = nanoMoment and targetBlock = 0", () => {
      const message = crossChainTimeForProof(proof, 31_338n);
      expect(message.networkTime).to.equal(proof.nanoMoment);
      expect(message.targetBlock).to.equal(0n);
      expect(decodeCrossChainTime(encodeCrossChainTime(message))).to.deep.equal(message);
      expect(decodeTimeProof(message.proof)).to.deep.equal(proof);
      expectProtocolError(() => decodeCrossChainTime(`${encodeCrossChainTime(message)}00` as Hex));
    });
  });
});
