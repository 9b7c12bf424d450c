import { generateKeyPairSync } from "node:crypto";
import { expect } from "chai";
import {
  P256_HALF_N,
  P256_N,
  ProtocolError,
  assembleProof,
  cardIdOf,
  decodeHardwareSignature,
  hwDigest,
  normalizeP256S,
  p256PublicKeyToUncompressed,
  recoverNodeAddress,
  signHardware,
  signNodeEntry,
  timeAttestationForProof,
  verifyP256,
} from "../../protocol";
import { CARD_ID, CARD_KEY, NANO_MOMENT, NODE_ADDRESSES, NODE_KEYS, entriesOf, validProof } from "./fixtures";

describe("sign", () => {
  describe("card (P-256)", () => {
    it("always produces low-S signatures with node:crypto keys (randomized k), which verify", () => {
      const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
      const publicKey = p256PublicKeyToUncompressed(privateKey);
      // OpenSSL returns high S half of the time: 64 signatures all low-S means the normalisation runs.
      for (let i = 0n; i < 64n; i += 1n) {
        const { cardId, r, s } = decodeHardwareSignature(signHardware(privateKey, NANO_MOMENT + i));
        expect(BigInt(s) <= P256_HALF_N, `signature ${i}`).to.equal(true);
        expect(verifyP256(hwDigest(cardId, NANO_MOMENT + i), r, s, publicKey)).to.equal(true);
      }
    });

    it("normalises s to n − s exactly when s > n/2", () => {
      expect(normalizeP256S(P256_HALF_N)).to.equal(P256_HALF_N);
      expect(normalizeP256S(P256_HALF_N + 1n)).to.equal(P256_N - P256_HALF_N - 1n);
      expect(normalizeP256S(1n)).to.equal(1n);
    });

    it("is deterministic with a raw scalar (RFC 6979) and puts the cardId first", () => {
      const a = signHardware(CARD_KEY, NANO_MOMENT);
      expect(signHardware(CARD_KEY, NANO_MOMENT)).to.equal(a);
      expect(decodeHardwareSignature(a).cardId).to.equal(CARD_ID);
      expect(cardIdOf(CARD_KEY)).to.equal(CARD_ID);
    });
  });

  describe("node (secp256k1, EIP-712, EIP-2098)", () => {
    it("recovers the signer's address from an 80-byte entry", () => {
      const proof = validProof({ nodes: [NODE_KEYS[1]] });
      const att = timeAttestationForProof(proof, NANO_MOMENT + 40n);
      expect(recoverNodeAddress(att, signNodeEntry(NODE_KEYS[1], att))).to.equal(NODE_ADDRESSES[1]);
    });

    it("assembles entries given in any order into ascending address order", () => {
      const proof = validProof();
      const entries = entriesOf(proof);
      const base = { nanoMoment: proof.nanoMoment, hardwareSignature: proof.hardwareSignature, accuracy: proof.accuracy };
      for (const order of [[0, 1, 2], [2, 1, 0], [1, 2, 0]]) {
        expect(assembleProof({ ...base, entries: order.map((i) => entries[i]!) }).nodeSignature).to.equal(proof.nodeSignature);
      }
    });

    it("refuses to assemble two entries of the same node", () => {
      const proof = validProof({ nodes: [NODE_KEYS[0]] });
      const [entry] = entriesOf(proof);
      expect(() => assembleProof({ ...proof, entries: [entry!, entry!] })).to.throw(ProtocolError, "same node");
    });
  });
});
