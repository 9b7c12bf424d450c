import { expect } from "chai";
import fc from "fast-check";
import { secp256k1 as noble } from "@noble/curves/secp256k1.js";
import {
  NATIVE_SECP256K1,
  NOBLE_SECP256K1,
  ProtocolError,
  SECP256K1_BACKEND,
  SECP256K1_HALF_N,
  SECP256K1_NATIVE_FAILURE,
  SECP256K1_NATIVE_MODULE_PATH,
  SECP256K1_N,
  assertSecp256k1KnownAnswer,
  recoverUncompressedPublicKey,
  signDigest,
  type Secp256k1Implementation,
} from "../../protocol";

const IMPLEMENTATIONS: readonly Secp256k1Implementation[] = NATIVE_SECP256K1 === null ? [NOBLE_SECP256K1] : [NOBLE_SECP256K1, NATIVE_SECP256K1];

function word(value: bigint): Uint8Array {
  return Uint8Array.from(Buffer.from(value.toString(16).padStart(64, "0"), "hex"));
}

function compact(r: bigint, s: bigint): Uint8Array {
  const bytes = new Uint8Array(64);
  bytes.set(word(r), 0);
  bytes.set(word(s), 32);
  return bytes;
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}

/** The outcome of a call: the bytes it returned, or the ProtocolError it threw (anything else fails the test). */
function outcome(run: () => Uint8Array): string {
  try {
    return hex(run());
  } catch (error) {
    expect(error).to.be.instanceOf(ProtocolError);
    return "refused";
  }
}

const digestArbitrary = fc.uint8Array({ minLength: 32, maxLength: 32 });
const privateKeyArbitrary = fc.bigInt({ min: 1n, max: SECP256K1_N - 1n }).map(word);

describe("secp256k1 backends (protocol/secp256k1.ts)", () => {
  it("reports which backend is active, and why native is not when it is not", () => {
    expect(SECP256K1_BACKEND).to.equal(NATIVE_SECP256K1 === null ? "noble" : "libsecp256k1");
    expect(SECP256K1_NATIVE_FAILURE === null).to.equal(NATIVE_SECP256K1 !== null);
    expect(SECP256K1_NATIVE_MODULE_PATH === null).to.equal(NATIVE_SECP256K1 === null);
    if (SECP256K1_NATIVE_MODULE_PATH !== null) expect(SECP256K1_NATIVE_MODULE_PATH).to.match(/secp256k1[\\/]bindings\.js$/);
  });

  it("passes the known-answer test with every available backend", () => {
    for (const implementation of IMPLEMENTATIONS) assertSecp256k1KnownAnswer(implementation);
  });

  it("libsecp256k1 and noble sign and recover identically on random digests and keys", function () {
    if (NATIVE_SECP256K1 === null) this.skip(); // no native addon on this platform: nothing to compare
    const native = NATIVE_SECP256K1!;
    fc.assert(
      fc.property(digestArbitrary, privateKeyArbitrary, (digest, privateKey) => {
        const expected = NOBLE_SECP256K1.signDigest(digest, privateKey);
        const actual = native.signDigest(digest, privateKey);
        expect(hex(actual.compact)).to.equal(hex(expected.compact));
        expect(actual.recovery).to.equal(expected.recovery);
        expect(actual.r).to.equal(expected.r);
        expect(actual.s).to.equal(expected.s);
        expect(actual.s <= SECP256K1_HALF_N).to.equal(true);
        const publicKey = hex(noble.getPublicKey(privateKey, false));
        expect(hex(native.recoverUncompressedPublicKey(digest, actual.compact, actual.recovery))).to.equal(publicKey);
        expect(hex(NOBLE_SECP256K1.recoverUncompressedPublicKey(digest, expected.compact, expected.recovery))).to.equal(publicKey);
      }),
      { numRuns: 100 },
    );
  });

  it("libsecp256k1 and noble agree on recovering arbitrary in-range low-S (r, s, recovery), including refusals", function () {
    if (NATIVE_SECP256K1 === null) this.skip(); // no native addon on this platform: nothing to compare
    const native = NATIVE_SECP256K1!;
    let refused = 0;
    fc.assert(
      fc.property(
        digestArbitrary,
        fc.bigInt({ min: 1n, max: SECP256K1_N - 1n }),
        fc.bigInt({ min: 1n, max: SECP256K1_HALF_N }),
        fc.constantFrom(0, 1),
        (digest, r, s, recovery) => {
          const signature = compact(r, s);
          const expected = outcome(() => NOBLE_SECP256K1.recoverUncompressedPublicKey(digest, signature, recovery));
          expect(outcome(() => native.recoverUncompressedPublicKey(digest, signature, recovery))).to.equal(expected);
          if (expected === "refused") refused += 1;
        },
      ),
      { numRuns: 200 },
    );
    // About half of random r are not the x of a curve point: both sides must have refused some.
    expect(refused).to.be.greaterThan(0);
  });

  it("accepts sub-array views (non-zero byteOffset) like fresh arrays", () => {
    const buffer = new Uint8Array(200).map((_, index) => (index * 7 + 3) & 0xff);
    const digest = buffer.subarray(5, 37);
    const privateKey = buffer.subarray(41, 73);
    for (const implementation of IMPLEMENTATIONS) {
      const signed = implementation.signDigest(digest, privateKey);
      expect(hex(signed.compact)).to.equal(hex(NOBLE_SECP256K1.signDigest(Uint8Array.from(digest), Uint8Array.from(privateKey)).compact));
      const view = new Uint8Array(70);
      view.set(signed.compact, 3);
      expect(hex(implementation.recoverUncompressedPublicKey(digest, view.subarray(3, 67), signed.recovery))).to.equal(hex(noble.getPublicKey(Uint8Array.from(privateKey), false)));
    }
  });

  it("refuses high-S, out-of-range r or s, and recovery ids other than 0/1 on every backend", () => {
    const digest = word(0x1234n);
    const privateKey = word(0xabcdefn);
    const good = NOBLE_SECP256K1.signDigest(digest, privateKey);
    const highS = compact(good.r, SECP256K1_N - good.s);
    const cases: { name: string; signature: Uint8Array; recovery: number }[] = [
      { name: "high-S (n − s, the malleated twin)", signature: highS, recovery: good.recovery ^ 1 },
      { name: "high-S with the original parity", signature: highS, recovery: good.recovery },
      { name: "s = n/2 + 1", signature: compact(good.r, SECP256K1_HALF_N + 1n), recovery: 0 },
      { name: "r = 0", signature: compact(0n, good.s), recovery: good.recovery },
      { name: "r = n", signature: compact(SECP256K1_N, good.s), recovery: good.recovery },
      { name: "r = 2^256 − 1", signature: compact((1n << 256n) - 1n, good.s), recovery: good.recovery },
      { name: "s = 0", signature: compact(good.r, 0n), recovery: good.recovery },
      { name: "s = n", signature: compact(good.r, SECP256K1_N), recovery: good.recovery },
      { name: "recovery 2", signature: good.compact, recovery: 2 },
      { name: "recovery 3", signature: good.compact, recovery: 3 },
      { name: "recovery −1", signature: good.compact, recovery: -1 },
      { name: "recovery 0.5", signature: good.compact, recovery: 0.5 },
      { name: "recovery NaN", signature: good.compact, recovery: Number.NaN },
      { name: "63-byte signature", signature: good.compact.subarray(0, 63), recovery: good.recovery },
      { name: "65-byte signature", signature: Uint8Array.from([...good.compact, 0]), recovery: good.recovery },
    ];
    for (const implementation of IMPLEMENTATIONS) {
      // The untampered signature recovers (so each refusal below is the mutation's doing).
      expect(hex(implementation.recoverUncompressedPublicKey(digest, good.compact, good.recovery))).to.equal(hex(noble.getPublicKey(privateKey, false)));
      for (const { name, signature, recovery } of cases) {
        expect(() => implementation.recoverUncompressedPublicKey(digest, signature, recovery), `${implementation.backend}: ${name}`).to.throw(ProtocolError);
      }
      expect(() => implementation.recoverUncompressedPublicKey(digest.subarray(1), good.compact, good.recovery)).to.throw(ProtocolError, /digest/);
    }
  });

  it("refuses private keys 0 and ≥ n and malformed lengths on every backend, without echoing the key", () => {
    const digest = word(1n);
    for (const implementation of IMPLEMENTATIONS) {
      for (const privateKey of [word(0n), word(SECP256K1_N), word((1n << 256n) - 1n)]) {
        expect(() => implementation.signDigest(digest, privateKey)).to.throw(ProtocolError, /not a valid secp256k1 scalar/);
      }
      expect(() => implementation.signDigest(digest, new Uint8Array(31).fill(1))).to.throw(ProtocolError, /privateKey/);
      expect(() => implementation.signDigest(new Uint8Array(33), word(1n))).to.throw(ProtocolError, /digest/);
      try {
        implementation.signDigest(digest, word(SECP256K1_N));
      } catch (error) {
        expect(JSON.stringify((error as ProtocolError).details)).to.not.include(SECP256K1_N.toString(16));
      }
    }
  });

  it("signDigest and recoverUncompressedPublicKey use the active backend", () => {
    const digest = word(42n);
    const privateKey = word(7n);
    const signed = signDigest(digest, privateKey);
    expect(hex(signed.compact)).to.equal(hex(NOBLE_SECP256K1.signDigest(digest, privateKey).compact));
    expect(hex(recoverUncompressedPublicKey(digest, signed.compact, signed.recovery))).to.equal(hex(noble.getPublicKey(privateKey, false)));
  });
});
