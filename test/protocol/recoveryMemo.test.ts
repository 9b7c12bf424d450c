import { expect } from "chai";
import {
  NODE_ADDRESS_MEMO_CAPACITY,
  NodeKey,
  ProtocolError,
  SECP256K1_HALF_N,
  SECP256K1_N,
  clearNodeAddressMemo,
  decodeNodeEntry,
  encodeNodeEntry,
  nodeAddressMemoSize,
  recoverNodeAddress,
  recoverNodeAddressFromDigest,
  rememberNodeSignature,
  signNodeEntry,
  timeAttestationDigest,
  timeAttestationForProof,
  type Address,
  type Hex,
  type TimeAttestation,
} from "../../protocol";
import { NANO_MOMENT, NODE_ADDRESSES, NODE_KEYS, toWord, validProof } from "./fixtures";

// A marker address no real key produces here: seeing it proves the memo answered, not the curve math.
const MARKER: Address = "0x000000000000000000000000000000000000dEaD";

function attestation(): TimeAttestation {
  return timeAttestationForProof(validProof({ nodes: [NODE_KEYS[0]] }), NANO_MOMENT + 40n);
}

/** Seeds `count` unrelated memo entries (distinct fake digests): cheap, no curve math. */
function seedOthers(count: number, salt: number): void {
  for (let i = 0; i < count; i += 1) {
    const digest = toWord((BigInt(salt) << 32n) + BigInt(i) + 1n);
    rememberNodeSignature(digest, { r: toWord(1n), yParityAndS: toWord(1n) }, NODE_ADDRESSES[1]!);
  }
}

describe("node-address recovery memo", () => {
  beforeEach(() => clearNodeAddressMemo());
  after(() => clearNodeAddressMemo());

  it("returns the same address cold and memoised, and stores successful recoveries only", () => {
    const att = attestation();
    const entry = signNodeEntry(NODE_KEYS[0], att); // raw hex key: no seeding
    expect(nodeAddressMemoSize()).to.equal(0);
    expect(recoverNodeAddress(att, entry)).to.equal(NODE_ADDRESSES[0]);
    expect(nodeAddressMemoSize()).to.equal(1);
    expect(recoverNodeAddress(att, entry)).to.equal(NODE_ADDRESSES[0]);
    expect(nodeAddressMemoSize()).to.equal(1);
    // The memo is keyed by digest ‖ r ‖ yParityAndS: another attestation with the same entry is a new key.
    const other = { ...att, nodeTimestamp: att.nodeTimestamp + 1n };
    expect(recoverNodeAddress(other, entry)).to.not.equal(NODE_ADDRESSES[0]);
    expect(nodeAddressMemoSize()).to.equal(2);
  });

  it("is consulted by recoverNodeAddress, case-insensitively (shown with a marker seed)", () => {
    const att = attestation();
    const entry = decodeNodeEntry(signNodeEntry(NODE_KEYS[0], att));
    rememberNodeSignature(timeAttestationDigest(att), entry, MARKER);
    expect(recoverNodeAddress(att, entry)).to.equal(MARKER);
    const upper = { ...entry, r: `0x${entry.r.slice(2).toUpperCase()}` as Hex };
    expect(recoverNodeAddress(att, upper)).to.equal(MARKER);
  });

  it("is seeded by signNodeEntry when the signer is a NodeKey (its address is known)", () => {
    const key = NodeKey.fromPrivateKey(NODE_KEYS[2]!);
    const att = attestation();
    const entry = signNodeEntry(key, att);
    expect(nodeAddressMemoSize()).to.equal(1);
    expect(recoverNodeAddress(att, entry)).to.equal(key.address);
    expect(nodeAddressMemoSize()).to.equal(1);
  });

  it(`keeps at most ${NODE_ADDRESS_MEMO_CAPACITY} entries and evicts the least recently used`, () => {
    const att = attestation();
    const entry = decodeNodeEntry(signNodeEntry(NODE_KEYS[0], att));
    const digest = timeAttestationDigest(att);

    // Oldest and never touched: evicted by the first entry beyond capacity; then real recovery answers.
    rememberNodeSignature(digest, entry, MARKER);
    seedOthers(NODE_ADDRESS_MEMO_CAPACITY - 1, 1);
    expect(nodeAddressMemoSize()).to.equal(NODE_ADDRESS_MEMO_CAPACITY);
    seedOthers(1, 2);
    expect(nodeAddressMemoSize()).to.equal(NODE_ADDRESS_MEMO_CAPACITY);
    expect(recoverNodeAddress(att, entry)).to.equal(NODE_ADDRESSES[0]);
    expect(nodeAddressMemoSize()).to.equal(NODE_ADDRESS_MEMO_CAPACITY);

    // Oldest but used recently: a hit moves it to the young end, so it survives the next evictions.
    clearNodeAddressMemo();
    rememberNodeSignature(digest, entry, MARKER);
    seedOthers(NODE_ADDRESS_MEMO_CAPACITY - 1, 3);
    expect(recoverNodeAddress(att, entry)).to.equal(MARKER);
    seedOthers(10, 4);
    expect(nodeAddressMemoSize()).to.equal(NODE_ADDRESS_MEMO_CAPACITY);
    expect(recoverNodeAddress(att, entry)).to.equal(MARKER);
  });

  it("checks range and high-S before the memo: a memoised key never makes a refused signature pass", () => {
    const att = attestation();
    const entry = decodeNodeEntry(signNodeEntry(NODE_KEYS[0], att));
    const digest = timeAttestationDigest(att);
    const parity = BigInt(entry.yParityAndS) >> 255n;
    // The smallest high s (n/2 < s < 2^255, so it fits EIP-2098's 255 bits).
    const highS = { ...entry, yParityAndS: toWord((parity << 255n) | (SECP256K1_HALF_N + 1n)) };
    const zeroS = { ...entry, yParityAndS: toWord(parity << 255n) };
    const bigR = { ...entry, r: toWord(SECP256K1_N) };
    for (const bad of [highS, zeroS, bigR]) {
      rememberNodeSignature(digest, bad, NODE_ADDRESSES[0]!);
      expect(() => recoverNodeAddress(att, bad)).to.throw(ProtocolError);
      expect(() => recoverNodeAddress(att, encodeNodeEntry(bad))).to.throw(ProtocolError);
    }
  });

  it("is shared by recoverNodeAddressFromDigest (bytes), which checks and fails exactly like recoverNodeAddress", () => {
    const att = attestation();
    const entry = decodeNodeEntry(signNodeEntry(NODE_KEYS[0], att));
    const digest = timeAttestationDigest(att);
    const digestBytes = Buffer.from(digest.slice(2), "hex");
    const signatureOf = (e: { r: Hex; yParityAndS: Hex }) => Buffer.from(`${e.r.slice(2)}${e.yParityAndS.slice(2)}`, "hex");
    expect(recoverNodeAddressFromDigest(digestBytes, signatureOf(entry))).to.equal(NODE_ADDRESSES[0]);
    expect(nodeAddressMemoSize()).to.equal(1);
    clearNodeAddressMemo();
    rememberNodeSignature(digest, entry, MARKER);
    expect(recoverNodeAddressFromDigest(digestBytes, signatureOf(entry))).to.equal(MARKER);
    expect(recoverNodeAddressFromDigest(new Uint8Array(digestBytes), new Uint8Array(signatureOf(entry)))).to.equal(MARKER);

    const parity = BigInt(entry.yParityAndS) >> 255n;
    const bad = [
      { ...entry, yParityAndS: toWord((parity << 255n) | (SECP256K1_HALF_N + 1n)) },
      { ...entry, yParityAndS: toWord(parity << 255n) },
      { ...entry, r: toWord(SECP256K1_N) },
      { ...entry, r: toWord(0n) },
    ];
    const errorOf = (run: () => unknown): { message: string; details: unknown } => {
      try {
        run();
      } catch (error) {
        expect(error).to.be.instanceOf(ProtocolError);
        return { message: (error as ProtocolError).message, details: (error as ProtocolError).details };
      }
      throw new Error("expected a ProtocolError");
    };
    for (const signature of bad) {
      rememberNodeSignature(digest, signature, NODE_ADDRESSES[0]!);
      expect(errorOf(() => recoverNodeAddressFromDigest(digestBytes, signatureOf(signature)))).to.deep.equal(
        errorOf(() => recoverNodeAddress(att, signature)),
      );
    }
    // In range but not recoverable (5 is no x coordinate on secp256k1); not seeded: an in-range seed would answer.
    const unrecoverable = { ...entry, r: toWord(5n) };
    expect(errorOf(() => recoverNodeAddressFromDigest(digestBytes, signatureOf(unrecoverable)))).to.deep.equal(
      errorOf(() => recoverNodeAddress(att, unrecoverable)),
    );
    expect(() => recoverNodeAddressFromDigest(digestBytes.subarray(1), signatureOf(entry))).to.throw(ProtocolError);
  });
});
