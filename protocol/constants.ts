/**
 * Constants of the Attested Time wire format, version 1 (docs/protocol.md).
 * The names match the constants of `contracts/libraries/TimeProofLib.sol` one to one, so a reader can check
 * both sides against each other and against the golden vectors in `test/vectors/`.
 */
import type { Hex } from "./types";

/** ASCII "ATS/1 HW": the 8-byte domain tag in front of every hardware message (docs/protocol.md §3). */
export const HW_MESSAGE_TAG = "0x4154532f31204857" as const satisfies Hex;
/** The same tag as text, for documentation and error messages. */
export const HW_MESSAGE_TAG_ASCII = "ATS/1 HW";
/** tag (8) ‖ cardId (32) ‖ nanoMoment (16, big-endian). */
export const HW_MESSAGE_LENGTH = 56;
/** cardId (32) ‖ r (32) ‖ s (32). */
export const HARDWARE_SIGNATURE_LENGTH = 96;
/** nodeTimestamp (16, big-endian) ‖ r (32) ‖ yParityAndS (32). */
export const NODE_ENTRY_LENGTH = 80;
/**
 * Most node entries one proof may carry. The oracle's `MAX_NODE_ENTRIES` (it bounds the verification loop and
 * the registry), the TypeScript verifier and the REST schema all use this one number: a proof one side accepts
 * the others accept too.
 */
export const MAX_NODE_ENTRIES = 32;
/** Bytes of a card identifier: SHA-256 of the uncompressed P-256 public key. */
export const CARD_ID_LENGTH = 32;
/** Bytes of an uncompressed SEC1 public key: 0x04 ‖ X (32) ‖ Y (32). */
export const UNCOMPRESSED_PUBLIC_KEY_LENGTH = 65;
/** Bytes of a uint128 in the packed encodings above. */
export const UINT128_LENGTH = 16;

/**
 * EIP-712 domain of node attestations. No chainId and no verifyingContract on purpose: an attestation is a fact
 * about time, portable to every chain (docs/protocol.md §4).
 */
export const EIP712_DOMAIN = { name: "AttestedTime", version: "1" } as const;

/** viem typed-data types of the node attestation (docs/protocol.md §4). */
export const TIME_ATTESTATION_TYPES = {
  TimeAttestation: [
    { name: "cardId", type: "bytes32" },
    { name: "nanoMoment", type: "uint128" },
    { name: "accuracy", type: "uint32" },
    { name: "hardwareSignatureHash", type: "bytes32" },
    { name: "nodeTimestamp", type: "uint128" },
  ],
} as const;

/** The EIP-712 type string whose keccak256 is the Solidity `TIME_ATTESTATION_TYPEHASH`. */
export const TIME_ATTESTATION_TYPE =
  "TimeAttestation(bytes32 cardId,uint128 nanoMoment,uint32 accuracy,bytes32 hardwareSignatureHash,uint128 nodeTimestamp)";

/** Order of the P-256 (secp256r1) group. */
export const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
/** floor(n / 2): a card signature is valid only with s ≤ P256_HALF_N (low-S, docs/protocol.md §3). */
export const P256_HALF_N = P256_N >> 1n;
/** Order of the secp256k1 group. */
export const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
/** floor(n / 2): node signatures are low-S as well (EIP-2 / EIP-2098). */
export const SECP256K1_HALF_N = SECP256K1_N >> 1n;

export const UINT128_MAX = (1n << 128n) - 1n;
export const UINT32_MAX = 0xffff_ffff;
export const NS_PER_SECOND = 1_000_000_000n;
export const NS_PER_MILLISECOND = 1_000_000n;

/**
 * The longest an honest node takes, by its own clock, between a card reading and its signature over it, plus
 * margin: the bound of contradiction evidence (docs/protocol.md §7.8, protocol/evidence.ts). Off-chain only (no
 * contract uses it). Why 60 s and not the 10 s of the largest meshRoundTimeoutMs (node/config.ts, max 10,000 ms):
 * a co-signer checks a moment against t2, its clock when the round's exchange arrived, and accepts one up to
 * maxTransit (≤ meshRoundTimeoutMs) + accuracy + its card accuracy behind t2 (§7.5), then signs up to
 * 2 × meshRoundTimeoutMs after t2 (a round's co-sign request expires then). So M + accuracy ≥ nodeTimestamp −
 * (3 × meshRoundTimeoutMs + its card accuracy), and M − accuracy ≤ t2 + its card accuracy ≤ nodeTimestamp + its
 * card accuracy. Two such entries of one honest node, with a monotonic clock, never differ by more than
 * 3 × 10 s + 2 × accuracyNs (≤ 2 × (2^32 − 1) ns ≈ 8.6 s) ≈ 38.6 s; 60 s leaves the rest for a stalled event
 * loop between the clock reads. A proposer's own entry (its reading, then at most one timeout of exchanges) and a
 * lone node's (the card read, then the signature) stay far inside, a lone node's only while its host clock (its
 * nodeTimestamp) and card clock (its moments) agree within this. It must also dwarf any backward step of a
 * node's clock across restarts (§7.8): such a step is what would make an honest node look like a liar.
 */
export const MAX_SIGNING_DELAY_NS = 60n * NS_PER_SECOND;

/**
 * Contradiction evidence (docs/protocol.md §7.8, protocol/evidence.ts). The `kind` of an evidence document: says
 * what the file is before anything else is read.
 */
export const CONTRADICTION_EVIDENCE_KIND = "ats-contradiction";
/** The evidence format's version (of protocol version 1). */
export const CONTRADICTION_EVIDENCE_VERSION = 1;
/**
 * Most bytes of evidence text a checker reads. Two §9.1 proofs of MAX_NODE_ENTRIES entries are about 11.5 KB of
 * JSON; 16 KiB leaves room for indentation, and bounds what a checker parses from an untrusted file.
 */
export const MAX_CONTRADICTION_EVIDENCE_BYTES = 16 * 1024;

/**
 * On-chain defaults (docs/protocol.md §6.3). The chain clock is `block.timestamp * 1e9`, so with 12-second
 * blocks a fresh proof can look up to one block "in the future" or several blocks old.
 */
export const DEFAULT_MAX_ATTESTATION_AGE_NS = 60n * NS_PER_SECOND;
export const DEFAULT_MAX_FUTURE_DRIFT_NS = 15n * NS_PER_SECOND;
export const DEFAULT_MAX_ACCEPTABLE_DRIFT_NS = 1_000n;
export const DEFAULT_NODE_QUORUM = 1;
/**
 * Accuracy of the golden vectors' and test fixtures' development card. Fixed: the golden vectors sign it. Not what a
 * network signs (see LOCAL_MESH_ACCURACY_NS).
 */
export const DEV_CARD_ACCURACY_NS = 50;

/** AccuracyTiers.HARDWARE_TIMESTAMPED_NS: a consumer's bound for a hardware-timestamped network, ns. */
export const HARDWARE_TIMESTAMPED_ACCURACY_NS = 100;
/** AccuracyTiers.SOFTWARE_MESH_NS: a consumer's bound for a mesh of software clocks, ns; the local network's oracle bound too. */
export const SOFTWARE_MESH_ACCURACY_NS = 10_000_000;

/**
 * contracts/libraries/AccuracyTiers.sol, mirrored (test/contracts/accuracyTiers.test.ts compares them): the bound, ns,
 * a consumer passes to TimeConsumer's constructor for each kind of network, tightest first.
 */
export const ACCURACY_TIERS = [
  {
    name: "HARDWARE_TIMESTAMPED_NS",
    maxAccuracyNs: HARDWARE_TIMESTAMPED_ACCURACY_NS,
    network: "a hardware-timestamped network (PTP-capable NICs, a GPS/PPS-disciplined time card)",
  },
  {
    name: "SOFTWARE_MESH_NS",
    maxAccuracyNs: SOFTWARE_MESH_ACCURACY_NS,
    network: "a mesh of software clocks on commodity hosts (the local network's loopback mesh included)",
  },
] as const;
export type AccuracyTier = (typeof ACCURACY_TIERS)[number];

/** The loosest tier a consumer with this bound (ns) accepts proofs from; undefined when it is tighter than every tier. */
export function accuracyTierFor(maxAccuracyNs: number): AccuracyTier | undefined {
  return [...ACCURACY_TIERS].reverse().find((tier) => tier.maxAccuracyNs <= maxAccuracyNs);
}

/**
 * What the local network's mesh signs: the p99 of the signed accuracy `npm run bench:mesh` measured on loopback,
 * rounded up to 10 µs (the mesh table in docs/benchmarks.md; test/testing/kit.test.ts pins the two together). The test kit
 * signs it by default, so that a dApp's tests meet the bound a real network proof has, not the card's 50 ns.
 */
export const LOCAL_MESH_ACCURACY_NS = 150_000;
/**
 * Accuracy a node running the development card driver advertises by default: the card reads the host clock,
 * anchored to it at a millisecond edge to within a few hundred ns at worst (node/card/hostClock.ts), so 1 µs is a
 * bound it meets, where 50 ns would not be (docs/protocol.md §14.16).
 */
export const DEV_CARD_DRIVER_ACCURACY_NS = 1_000;
