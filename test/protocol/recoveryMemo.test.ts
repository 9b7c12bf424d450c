/**
 * The caller-owned verification caches of protocol/: RecoveryMemo (sign.ts) and P256KeyCache (verify.ts). protocol/
 * keeps no cache of its own: calls without one always compute, two caches never share entries, both are bounded
 * LRUs, and verifyTimeProof reaches the same verdicts with and without them.
 */
import { expect } from "chai";
import {
  DEFAULT_P256_KEY_CACHE_MAX_ENTRIES,
  DEFAULT_RECOVERY_MEMO_MAX_ENTRIES,
  NodeKey,
  ProtocolError,
  SECP256K1_HALF_N,
  SECP256K1_N,
  attest,
  createP256KeyCache,
  createRecoveryMemo,
  decodeHardwareSignature,
  decodeNodeEntry,
  encodeNodeEntry,
  hwMessage,
  recoverNodeAddress,
  recoverNodeAddressFromDigest,
  recoverNodeAddresses,
  signHardware,
  signNodeEntry,
  timeAttestationDigest,
  timeAttestationForProof,
  verifyP256Signature,
  verifyTimeProof,
  type Address,
  type Hex,
  type RecoveryMemo,
  type TimeAttestation,
  type VerifyTimeProofContext,
} from "../../protocol";
import {
  CARD_KEY,
  CARD_PUBLIC_KEY,
  NANO_MOMENT,
  NODE_ADDRESSES,
  NODE_KEYS,
  OTHER_CARD_KEY,
  context,
  forgedCardProof,
  highSProof,
  publicKeyOf,
  toWord,
  validProof,
} from "./fixtures";

// A marker address no real key produces here: seeing it proves the memo answered, not the curve math.
const MARKER: Address = "0x000000000000000000000000000000000000dEaD";

function attestation(): TimeAttestation {
  return timeAttestationForProof(validProof({ nodes: [NODE_KEYS[0]] }), NANO_MOMENT + 40n);
}

/** Seeds `count` unrelated memo entries (distinct fake digests): cheap, no curve math. */
function seedOthers(memo: RecoveryMemo, count: number, salt: number): void {
  for (let i = 0; i < count; i += 1) {
    const digest = toWord((BigInt(salt) << 32n) + BigInt(i) + 1n);
    memo.remember(digest, { r: toWord(1n), yParityAndS: toWord(1n) }, NODE_ADDRESSES[1]!);
  }
}

describe("node-address recovery memo (RecoveryMemo, caller-owned)", () => {
  let memo: RecoveryMemo;
  beforeEach(() => {
    memo = createRecoveryMemo();
  });

  it("returns the same address cold and memoised, and stores successful recoveries only", () => {
    const att = attestation();
    const entry = signNodeEntry(NODE_KEYS[0], att); // raw hex key: no seeding
    expect(memo.size).to.equal(0);
    expect(recoverNodeAddress(att, entry, memo)).to.equal(NODE_ADDRESSES[0]);
    expect(memo.size).to.equal(1);
    expect(recoverNodeAddress(att, entry, memo)).to.equal(NODE_ADDRESSES[0]);
    expect(memo.size).to.equal(1);
    // The memo is keyed by digest ‖ r ‖ yParityAndS: another attestation with the same entry is a new key.
    const other = { ...att, nodeTimestamp: att.nodeTimestamp + 1n };
    expect(recoverNodeAddress(other, entry, memo)).to.not.equal(NODE_ADDRESSES[0]);
    expect(memo.size).to.equal(2);
    // Without a memo nothing is stored anywhere, and the answer is the same.
    expect(recoverNodeAddress(att, entry)).to.equal(NODE_ADDRESSES[0]);
    expect(memo.size).to.equal(2);
  });

  it("is consulted by recoverNodeAddress, case-insensitively (shown with a marker seed)", () => {
    const att = attestation();
    const entry = decodeNodeEntry(signNodeEntry(NODE_KEYS[0], att));
    memo.remember(timeAttestationDigest(att), entry, MARKER);
    expect(recoverNodeAddress(att, entry, memo)).to.equal(MARKER);
    const upper = { ...entry, r: `0x${entry.r.slice(2).toUpperCase()}` as Hex };
    expect(recoverNodeAddress(att, upper, memo)).to.equal(MARKER);
  });

  it("never leaks between memos, nor into calls without one (no module-level state)", () => {
    const att = attestation();
    const entry = decodeNodeEntry(signNodeEntry(NODE_KEYS[0], att));
    const other = createRecoveryMemo();
    memo.remember(timeAttestationDigest(att), entry, MARKER);
    expect(recoverNodeAddress(att, entry, memo)).to.equal(MARKER);
    expect(recoverNodeAddress(att, entry, other)).to.equal(NODE_ADDRESSES[0]);
    expect(recoverNodeAddress(att, entry)).to.equal(NODE_ADDRESSES[0]);
    expect([memo.size, other.size]).to.deep.equal([1, 1]);
    other.clear();
    expect([memo.size, other.size]).to.deep.equal([1, 0]);
    expect(recoverNodeAddress(att, entry, memo)).to.equal(MARKER);
  });

  it("is seeded by signNodeEntry and attest only when given, and only for NodeKey signers (their address is known)", () => {
    const key = NodeKey.fromPrivateKey(NODE_KEYS[2]!);
    const att = attestation();
    signNodeEntry(key, att); // no memo: nothing to seed
    signNodeEntry(NODE_KEYS[2]!, att, memo); // raw hex key: its address is unknown here
    expect(memo.size).to.equal(0);
    const entry = signNodeEntry(key, att, memo);
    expect(memo.size).to.equal(1);
    expect(recoverNodeAddress(att, entry, memo)).to.equal(key.address);
    expect(memo.size).to.equal(1);

    const proof = attest({ card: CARD_KEY, nodes: [key, NODE_KEYS[0]!], nanoMoment: NANO_MOMENT + 1n, accuracy: 50, nodeTimestampNs: NANO_MOMENT + 41n, recoveryMemo: memo });
    expect(memo.size).to.equal(2); // the NodeKey's entry only
    expect(recoverNodeAddresses(proof, memo).map((a) => a.toLowerCase())).to.have.members([key.address, NODE_ADDRESSES[0]!].map((a) => a.toLowerCase()));
    expect(memo.size).to.equal(3);
  });

  it(`keeps at most maxEntries (default ${DEFAULT_RECOVERY_MEMO_MAX_ENTRIES}) and evicts the least recently used`, () => {
    expect(memo.maxEntries).to.equal(DEFAULT_RECOVERY_MEMO_MAX_ENTRIES);
    seedOthers(memo, DEFAULT_RECOVERY_MEMO_MAX_ENTRIES + 10, 9);
    expect(memo.size).to.equal(DEFAULT_RECOVERY_MEMO_MAX_ENTRIES);

    const small = createRecoveryMemo({ maxEntries: 16 });
    expect(small.maxEntries).to.equal(16);
    const att = attestation();
    const entry = decodeNodeEntry(signNodeEntry(NODE_KEYS[0], att));
    const digest = timeAttestationDigest(att);

    // Oldest and never touched: evicted by the first entry beyond capacity; then real recovery answers.
    small.remember(digest, entry, MARKER);
    seedOthers(small, 15, 1);
    expect(small.size).to.equal(16);
    seedOthers(small, 1, 2);
    expect(small.size).to.equal(16);
    expect(recoverNodeAddress(att, entry, small)).to.equal(NODE_ADDRESSES[0]);
    expect(small.size).to.equal(16);

    // Oldest but used recently: a hit moves it to the young end, so it survives the next evictions.
    small.clear();
    small.remember(digest, entry, MARKER);
    seedOthers(small, 15, 3);
    expect(recoverNodeAddress(att, entry, small)).to.equal(MARKER);
    seedOthers(small, 10, 4);
    expect(small.size).to.equal(16);
    expect(recoverNodeAddress(att, entry, small)).to.equal(MARKER);

    for (const maxEntries of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => createRecoveryMemo({ maxEntries })).to.throw(ProtocolError);
    }
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
      memo.remember(digest, bad, NODE_ADDRESSES[0]!);
      expect(() => recoverNodeAddress(att, bad, memo)).to.throw(ProtocolError);
      expect(() => recoverNodeAddress(att, encodeNodeEntry(bad), memo)).to.throw(ProtocolError);
    }
  });

  it("is shared by recoverNodeAddressFromDigest (bytes), which checks and fails exactly like recoverNodeAddress", () => {
    const att = attestation();
    const entry = decodeNodeEntry(signNodeEntry(NODE_KEYS[0], att));
    const digest = timeAttestationDigest(att);
    const digestBytes = Buffer.from(digest.slice(2), "hex");
    const signatureOf = (e: { r: Hex; yParityAndS: Hex }) => Buffer.from(`${e.r.slice(2)}${e.yParityAndS.slice(2)}`, "hex");
    expect(recoverNodeAddressFromDigest(digestBytes, signatureOf(entry), memo)).to.equal(NODE_ADDRESSES[0]);
    expect(memo.size).to.equal(1);
    memo.clear();
    memo.remember(digest, entry, MARKER);
    expect(recoverNodeAddressFromDigest(digestBytes, signatureOf(entry), memo)).to.equal(MARKER);
    expect(recoverNodeAddressFromDigest(new Uint8Array(digestBytes), new Uint8Array(signatureOf(entry)), memo)).to.equal(MARKER);
    expect(recoverNodeAddressFromDigest(digestBytes, signatureOf(entry))).to.equal(NODE_ADDRESSES[0]);

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
      memo.remember(digest, signature, NODE_ADDRESSES[0]!);
      expect(errorOf(() => recoverNodeAddressFromDigest(digestBytes, signatureOf(signature), memo))).to.deep.equal(
        errorOf(() => recoverNodeAddress(att, signature, memo)),
      );
    }
    // In range but not recoverable (5 is no x coordinate on secp256k1); not seeded: an in-range seed would answer.
    const unrecoverable = { ...entry, r: toWord(5n) };
    expect(errorOf(() => recoverNodeAddressFromDigest(digestBytes, signatureOf(unrecoverable), memo))).to.deep.equal(
      errorOf(() => recoverNodeAddress(att, unrecoverable, memo)),
    );
    expect(() => recoverNodeAddressFromDigest(digestBytes.subarray(1), signatureOf(entry), memo)).to.throw(ProtocolError);
  });
});

describe("P-256 key cache (P256KeyCache, caller-owned)", () => {
  const OTHER_PUBLIC_KEY = publicKeyOf(OTHER_CARD_KEY);

  /** A card signature over hwMessage(cardId, nanoMoment) and what verifyP256Signature needs. */
  function cardSignature(key: Hex, nanoMoment: bigint) {
    const decoded = decodeHardwareSignature(signHardware(key, nanoMoment));
    return { message: hwMessage(decoded.cardId, nanoMoment), r: decoded.r, s: decoded.s };
  }

  it("keeps parsed keys per cache, never shared, and stores no key that fails to parse", () => {
    const a = createP256KeyCache();
    const b = createP256KeyCache();
    expect(a.maxEntries).to.equal(DEFAULT_P256_KEY_CACHE_MAX_ENTRIES);
    const { message, r, s } = cardSignature(CARD_KEY, NANO_MOMENT);
    expect(verifyP256Signature({ message }, r, s, CARD_PUBLIC_KEY, a)).to.equal(true);
    expect([a.size, b.size]).to.deep.equal([1, 0]);
    // Same key in another hex case: the same entry.
    expect(verifyP256Signature({ message }, r, s, `0x${CARD_PUBLIC_KEY.slice(2).toUpperCase()}`, a)).to.equal(true);
    expect(a.size).to.equal(1);
    expect(a.get(CARD_PUBLIC_KEY)).to.equal(a.get(CARD_PUBLIC_KEY.toLowerCase() as Hex));
    expect(b.get(CARD_PUBLIC_KEY)).to.not.equal(a.get(CARD_PUBLIC_KEY));
    // Wrong key, not on the curve: same verdicts with and without a cache; an unparsable key is not stored.
    const offCurve = `0x04${"11".repeat(64)}` as Hex;
    for (const cache of [a, undefined]) {
      expect(verifyP256Signature({ message }, r, s, OTHER_PUBLIC_KEY, cache)).to.equal(false);
      expect(verifyP256Signature({ message }, r, s, offCurve, cache)).to.equal(false);
    }
    expect(a.size).to.equal(2);
    expect(() => a.get(offCurve)).to.throw(ProtocolError);
    expect(a.size).to.equal(2);
    a.clear();
    expect([a.size, b.size]).to.deep.equal([0, 1]);
  });

  it("keeps at most maxEntries and evicts the least recently used", () => {
    const cache = createP256KeyCache({ maxEntries: 2 });
    const keys = [CARD_KEY, OTHER_CARD_KEY, toWord(3n)].map(publicKeyOf);
    const first = cache.get(keys[0]!);
    cache.get(keys[1]!);
    expect(cache.get(keys[0]!)).to.equal(first); // a hit: keys[0] is now the most recently used
    cache.get(keys[2]!); // evicts keys[1]
    expect(cache.size).to.equal(2);
    expect(cache.get(keys[0]!)).to.equal(first);
    const again = cache.get(keys[1]!); // parsed anew, evicts keys[2]
    expect(cache.size).to.equal(2);
    expect(cache.get(keys[1]!)).to.equal(again);
    for (const maxEntries of [0, -3, 2.5]) expect(() => createP256KeyCache({ maxEntries })).to.throw(ProtocolError);
  });
});

describe("verifyTimeProof with and without caller-owned caches", () => {
  /** `ctx` without its caches. */
  function bare(ctx: VerifyTimeProofContext): VerifyTimeProofContext {
    const copy = { ...ctx };
    delete copy.recoveryMemo;
    delete copy.p256KeyCache;
    return copy;
  }

  it("reaches the same verdicts with no caches, cold caches and warm caches", () => {
    const proofs = [validProof(), validProof({ nodes: [NODE_KEYS[1]!] }), highSProof(), forgedCardProof(), validProof({ nanoMoment: NANO_MOMENT - 10n ** 12n })];
    const contexts = [context(), context({ nodeQuorum: 3 }), context({ nodes: [NODE_ADDRESSES[0]!] })];
    for (const ctx of contexts) {
      for (const proof of proofs) {
        const expected = verifyTimeProof(proof, bare(ctx));
        expect(verifyTimeProof(proof, ctx)).to.deep.equal(expected);
        expect(verifyTimeProof(proof, ctx)).to.deep.equal(expected);
      }
    }
    expect(verifyTimeProof(proofs[0]!, bare(contexts[0]!)).valid).to.equal(true);
  });

  it("createVerifyContext gives each context its own caches unless told to share or to go without", () => {
    const a = context();
    const b = context();
    expect(a.recoveryMemo).to.not.equal(undefined);
    expect(a.p256KeyCache).to.not.equal(undefined);
    expect(a.recoveryMemo).to.not.equal(b.recoveryMemo);
    expect(a.p256KeyCache).to.not.equal(b.p256KeyCache);
    const none = context({ recoveryMemo: null, p256KeyCache: null });
    expect("recoveryMemo" in none || "p256KeyCache" in none).to.equal(false);
    const shared = createRecoveryMemo();
    const sharedKeys = createP256KeyCache();
    expect(context({ recoveryMemo: shared, p256KeyCache: sharedKeys })).to.deep.include({ recoveryMemo: shared, p256KeyCache: sharedKeys });

    const proof = validProof();
    expect(verifyTimeProof(proof, a).valid).to.equal(true);
    expect([a.recoveryMemo!.size, a.p256KeyCache!.size]).to.deep.equal([NODE_KEYS.length, 1]);
    expect([b.recoveryMemo!.size, b.p256KeyCache!.size]).to.deep.equal([0, 0]);
    expect(verifyTimeProof(proof, none).valid).to.equal(true);
  });

  it("consults the context's memo only (a marker seed in one context does not reach another)", () => {
    const proof = validProof({ nodes: [NODE_KEYS[0]!] });
    const entry = decodeNodeEntry(proof.nodeSignature);
    const att = timeAttestationForProof(proof, entry.nodeTimestampNs);
    const seeded = context();
    seeded.recoveryMemo!.remember(timeAttestationDigest(att), entry, MARKER);
    expect(verifyTimeProof(proof, seeded)).to.deep.include({ valid: false, reason: "unknown-node" });
    expect(verifyTimeProof(proof, context()).valid).to.equal(true);
    expect(verifyTimeProof(proof, bare(seeded)).valid).to.equal(true);
  });
});
