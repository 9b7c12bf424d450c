import { expect } from "chai";
import fc from "fast-check";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { getAddress } from "viem";
import { publicKeyToAddress } from "viem/accounts";
import { ProtocolError, SECP256K1_N, addressOfUncompressedKey, checksumAddressBytes, secp256k1PublicKeyToAddress } from "../../protocol";

describe("keys: node addresses", () => {
  it("checksums addresses exactly like viem's getAddress (EIP-55)", () => {
    const fixed = [Buffer.alloc(20), Buffer.alloc(20, 0xff), Buffer.from("5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", "hex")];
    for (const address of fixed) expect(checksumAddressBytes(address)).to.equal(getAddress(`0x${address.toString("hex")}`));
    // The EIP-55 specification's own example.
    expect(checksumAddressBytes(fixed[2]!)).to.equal("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed");
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 20, maxLength: 20 }), (address) => {
        expect(checksumAddressBytes(address)).to.equal(getAddress(`0x${Buffer.from(address).toString("hex")}`));
      }),
      { numRuns: 300 },
    );
    expect(() => checksumAddressBytes(new Uint8Array(19))).to.throw(ProtocolError);
  });

  it("derives the address of a public key like viem, with and without the curve check", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: SECP256K1_N - 1n }), (scalar) => {
        const publicKey = secp256k1.getPublicKey(Buffer.from(scalar.toString(16).padStart(64, "0"), "hex"), false);
        const expected = publicKeyToAddress(`0x${Buffer.from(publicKey).toString("hex")}`);
        expect(secp256k1PublicKeyToAddress(publicKey)).to.equal(expected);
        expect(addressOfUncompressedKey(publicKey)).to.equal(expected);
      }),
      { numRuns: 50 },
    );
    expect(() => addressOfUncompressedKey(new Uint8Array(64))).to.throw(ProtocolError);
    expect(() => addressOfUncompressedKey(Uint8Array.of(0x02, ...new Uint8Array(64)))).to.throw(ProtocolError);
    // The checked form refuses a point off the curve.
    expect(() => secp256k1PublicKeyToAddress(Uint8Array.of(0x04, ...new Uint8Array(64).fill(1)))).to.throw();
  });
});
