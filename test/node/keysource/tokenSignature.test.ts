import { expect } from "chai";
import fc from "fast-check";
import { createHash } from "node:crypto";
import { p256 } from "@noble/curves/nist.js";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { P256_HALF_N, P256_N, ProtocolError, SECP256K1_HALF_N, SECP256K1_N } from "../../../protocol";
import { NodeKey } from "../../../protocol/keys";
import { NOBLE_SECP256K1 } from "../../../protocol/secp256k1";
import { recoverNodeAddressFromDigest, signDigestCompact } from "../../../protocol/sign";
import {
  EC_PARAMS_DER,
  ecPointFromAttribute,
  eip2098Compact,
  rawSignatureFromToken,
  recoveryIdByTrial,
  toLowS,
} from "../../../node/keysource/tokenSignature";

/** Minimal DER of a non-negative integer (a leading 0x00 when the top bit is set). */
function derInteger(value: bigint): Buffer {
  let bytes = Buffer.from(value.toString(16).padStart(2, "0").replace(/^(.(..)*)$/, "0$1"), "hex");
  while (bytes.length > 1 && bytes[0] === 0 && bytes[1]! < 0x80) bytes = bytes.subarray(1);
  if (bytes[0]! >= 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
  return Buffer.concat([Buffer.from([0x02, bytes.length]), bytes]);
}

function derSignature(r: bigint, s: bigint): Buffer {
  const body = Buffer.concat([derInteger(r), derInteger(s)]);
  return Buffer.concat([Buffer.from([0x30, body.length]), body]);
}

const word = (value: bigint): string => value.toString(16).padStart(64, "0");
const rs = (r: bigint, s: bigint): Buffer => Buffer.from(word(r) + word(s), "hex");
const scalar = (n: bigint) => fc.bigInt({ min: 1n, max: n - 1n });

describe("token signatures: what a PKCS#11 token returns, as the protocol signs it", () => {
  it("names each curve by the DER of its OID in CKA_EC_PARAMS", () => {
    expect(EC_PARAMS_DER["P-256"].toString("hex")).to.equal("06082a8648ce3d030107"); // 1.2.840.10045.3.1.7
    expect(EC_PARAMS_DER.secp256k1.toString("hex")).to.equal("06052b8104000a"); // 1.3.132.0.10
  });

  it("reads CKA_EC_POINT as a DER OCTET STRING or a bare point, and refuses anything else", () => {
    const point = Buffer.from(secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), false));
    expect(ecPointFromAttribute(Buffer.concat([Buffer.from([0x04, 0x41]), point])).equals(point)).to.equal(true);
    expect(ecPointFromAttribute(point).equals(point)).to.equal(true);
    expect(() => ecPointFromAttribute(point.subarray(0, 33))).to.throw(ProtocolError, "CKA_EC_POINT");
    expect(() => ecPointFromAttribute(Buffer.concat([Buffer.from([0x04, 0x40]), point]))).to.throw(ProtocolError);
  });

  it("reads a raw r ‖ s unchanged and a DER signature as the same r ‖ s", () => {
    fc.assert(
      fc.property(scalar(SECP256K1_N), scalar(SECP256K1_N), (r, s) => {
        expect(rawSignatureFromToken(rs(r, s)).equals(rs(r, s))).to.equal(true);
        expect(rawSignatureFromToken(derSignature(r, s)).equals(rs(r, s))).to.equal(true);
      }),
      { numRuns: 300 },
    );
  });

  it("refuses a signature that is neither form, naming its size", () => {
    expect(() => rawSignatureFromToken(Buffer.alloc(63))).to.throw(ProtocolError, "neither 64 bytes");
    const der = derSignature(5n, 7n);
    expect(() => rawSignatureFromToken(Buffer.concat([der, Buffer.from([0])]))).to.throw(ProtocolError);
    const trailing = Buffer.concat([Buffer.from([0x30, der.length - 2 + 1]), der.subarray(2), Buffer.from([0])]);
    expect(() => rawSignatureFromToken(trailing)).to.throw(ProtocolError, "bytes after s");
  });

  for (const [curve, n, halfN] of [
    ["P-256", P256_N, P256_HALF_N],
    ["secp256k1", SECP256K1_N, SECP256K1_HALF_N],
  ] as const) {
    it(`normalises ${curve} s to the low half and keeps r`, () => {
      fc.assert(
        fc.property(scalar(n), scalar(n), (r, s) => {
          const low = toLowS(rs(r, s), curve);
          expect(low.subarray(0, 32).equals(rs(r, s).subarray(0, 32))).to.equal(true);
          const lowS = BigInt(`0x${low.toString("hex", 32)}`);
          expect(lowS <= halfN).to.equal(true);
          expect(lowS === s || lowS === n - s).to.equal(true);
        }),
        { numRuns: 300 },
      );
      expect(toLowS(rs(1n, halfN + 1n), curve).toString("hex", 32)).to.equal(word(n - halfN - 1n));
      expect(toLowS(rs(1n, halfN), curve).toString("hex", 32)).to.equal(word(halfN));
    });

    it(`refuses ${curve} r or s outside [1, n − 1] with the values as evidence`, () => {
      for (const [r, s] of [
        [0n, 1n],
        [1n, 0n],
        [n, 1n],
        [1n, n],
      ]) {
        expect(() => toLowS(rs(r!, s!), curve)).to.throw(ProtocolError, "outside [1, n − 1]");
      }
    });
  }

  it("a normalised P-256 signature still verifies (s and n − s both do; the protocol takes the low one)", () => {
    const secret = p256.utils.randomSecretKey();
    const digest = createHash("sha256").update("hardware message").digest();
    const high = p256.sign(digest, secret, { prehash: false, lowS: false, format: "compact" });
    const low = toLowS(high, "P-256");
    expect(p256.verify(low, digest, p256.getPublicKey(secret), { prehash: false, lowS: true })).to.equal(true);
  });

  it("finds the secp256k1 recovery id by trial, the one the signer would have reported, with either backend", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 48, maxLength: 48 }), fc.uint8Array({ minLength: 32, maxLength: 32 }), (seed, digest) => {
        const secret = secp256k1.utils.randomSecretKey(seed);
        const publicKey = secp256k1.getPublicKey(secret, false);
        const recovered = secp256k1.sign(digest, secret, { prehash: false, lowS: true, format: "recovered" });
        const low = Buffer.from(recovered.subarray(1));
        expect(recoveryIdByTrial(digest, low, publicKey)).to.equal(recovered[0]);
        expect(recoveryIdByTrial(digest, low, publicKey, NOBLE_SECP256K1)).to.equal(recovered[0]);
      }),
      { numRuns: 50 },
    );
  });

  it("refuses a signature by another key than the token reports", () => {
    const digest = createHash("sha256").update("x").digest();
    const signature = secp256k1.sign(digest, secp256k1.utils.randomSecretKey(), { prehash: false, lowS: true, format: "compact" });
    const otherKey = secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), false);
    expect(() => recoveryIdByTrial(digest, signature, otherKey)).to.throw(ProtocolError, "neither parity");
  });

  it("a NodeKey on an external signer (high-S token output, normalised and parity found) signs what recovers to its address", () => {
    const secret = secp256k1.utils.randomSecretKey();
    const publicKey = secp256k1.getPublicKey(secret, false);
    let calls = 0;
    const nodeKey = NodeKey.fromExternalSigner({
      publicKey,
      signDigestCompact(digest) {
        calls += 1;
        // What a token may return: either half of s (here always the high one), no recovery id.
        const low = secp256k1.sign(digest, secret, { prehash: false, lowS: true, format: "compact" });
        const s = BigInt(`0x${Buffer.from(low.subarray(32)).toString("hex")}`);
        const tokenOutput = rs(BigInt(`0x${Buffer.from(low.subarray(0, 32)).toString("hex")}`), SECP256K1_N - s);
        const normalised = toLowS(tokenOutput, "secp256k1");
        return eip2098Compact(normalised, recoveryIdByTrial(digest, normalised, publicKey));
      },
    });
    expect(nodeKey.holdsPrivateKey).to.equal(false);
    expect(() => nodeKey.exportPrivateKey()).to.throw(ProtocolError, "cannot be exported");
    for (let index = 0; index < 20; index += 1) {
      const digest = createHash("sha256").update(`digest ${index}`).digest();
      expect(recoverNodeAddressFromDigest(digest, signDigestCompact(nodeKey, digest))).to.equal(nodeKey.address);
    }
    expect(calls).to.equal(20);
  });

  it("signDigestCompact refuses a high-S answer from an external signer", () => {
    const publicKey = secp256k1.getPublicKey(secp256k1.utils.randomSecretKey(), false);
    const nodeKey = NodeKey.fromExternalSigner({ publicKey, signDigestCompact: () => rs(1n, SECP256K1_HALF_N + 1n) });
    expect(() => signDigestCompact(nodeKey, Buffer.alloc(32, 1))).to.throw(ProtocolError, "high-S");
  });
});
