/**
 * Types of every record of the wire format (docs/protocol.md). Time values are nanoseconds since the Unix epoch as
 * `bigint` (uint128); field names that come from the on-chain structs keep their Solidity names and state the
 * unit in their doc comment.
 */
import type { Static } from "@sinclair/typebox";
import type { ConsensusObject, ConsensusReadingObject, ProofJsonObject } from "./jsonSchema";

/** A `0x`-prefixed hex string. Values produced by this package are always lowercase. */
export type Hex = `0x${string}`;

/** An Ethereum address (20 bytes), EIP-55 checksummed when produced by this package. */
export type Address = `0x${string}`;

/** The proof as contracts see it: exactly the Solidity `TimeProof` struct (docs/protocol.md §5). */
export interface TimeProof {
  /** The card's timestamp, ns since the Unix epoch (uint128). */
  nanoMoment: bigint;
  /** cardId (32) ‖ r (32) ‖ s (32): exactly 96 bytes. */
  hardwareSignature: Hex;
  /** k ≥ 1 entries of 80 bytes: nodeTimestamp (16) ‖ r (32) ‖ yParityAndS (32), ascending by node address. */
  nodeSignature: Hex;
  /** ns: the largest deviation among the nodes that agreed (uint32). */
  accuracy: number;
}

/** The decoded 96-byte hardware signature. */
export interface HardwareSignature {
  /** SHA-256 of the card's uncompressed P-256 public key (32 bytes). */
  cardId: Hex;
  /** 32 bytes. */
  r: Hex;
  /** 32 bytes, ≤ P256_HALF_N in a valid signature. */
  s: Hex;
}

/** One decoded 80-byte node entry. */
export interface NodeEntry {
  /** The node's own reading, ns since the Unix epoch (uint128). */
  nodeTimestampNs: bigint;
  /** 32 bytes. */
  r: Hex;
  /** EIP-2098: bit 255 is the y parity, the low 255 bits are s (32 bytes). */
  yParityAndS: Hex;
}

/** The EIP-712 message every node entry signs (docs/protocol.md §4). */
export interface TimeAttestation {
  /** 32 bytes. */
  cardId: Hex;
  /** The card's timestamp, ns (uint128). */
  nanoMoment: bigint;
  /** ns (uint32). */
  accuracy: number;
  /** keccak256(r ‖ s) of the card's signature (32 bytes). */
  hardwareSignatureHash: Hex;
  /** The signing node's own reading, ns (uint128). */
  nodeTimestamp: bigint;
}

/** Fix states of a GPS reference (docs/protocol.md §9.1): none, 2-D, 3-D, or a development card's simulation. */
export const GPS_FIX_STATES = ["none", "2d", "3d", "simulated"] as const;
export type GpsFixState = (typeof GPS_FIX_STATES)[number];

/**
 * What the card's GPS reference reported (docs/protocol.md §9.1). Unsigned: it is never part of the signed bytes
 * or the on-chain struct, so it informs an operator, never a verifier.
 */
export interface GpsReference {
  fixState: GpsFixState;
  /** Satellites used in the fix, 0..64. */
  satellites: number;
  /** The last PPS edge minus the card clock's whole second, ns (signed, |value| < 1 s). */
  ppsOffsetNs: number;
  /** The card clock when the reference was read, decimal ns. */
  observedAtNs: string;
}

/** The REST body of `GET /time/current` on a lone node (docs/protocol.md §9.1; jsonSchema.ts ProofJsonObject). */
export type ProofJson = Static<typeof ProofJsonObject>;

/** One member's reading in a consensus round (docs/protocol.md §9.1 `consensus.readings`); ns as decimal strings. */
export type ConsensusReadingJson = Static<typeof ConsensusReadingObject>;

/** How a mesh proof was agreed (docs/protocol.md §7, §9.1; jsonSchema.ts ConsensusObject): beside `proof`. */
export type ConsensusJson = Static<typeof ConsensusObject>;

/** ITimeScheduler.ScheduledCall, as `CallScheduled` emits it and executors pass it back (viem's decoding). */
export interface ScheduledCall {
  caller: Address;
  nonce: bigint;
  /** ns */
  executeAt: bigint;
  /** ns */
  window: bigint;
  gasLimit: number;
  bounty: bigint;
  data: Hex;
}

/** The cross-chain message (docs/protocol.md §10): exactly the Solidity struct. */
export interface CrossChainTime {
  /** Equals the proof's nanoMoment, ns (uint128). */
  networkTime: bigint;
  /** Chain id of the receiving chain. */
  targetChain: bigint;
  /** abi.encode(TimeProof). */
  proof: Hex;
  /** 0 when sent; the receiver's block.number once delivered. */
  targetBlock: bigint;
}

/** What a verifier knows about a registered card. */
export interface CardRecord {
  /** Uncompressed SEC1 public key, 65 bytes (0x04 ‖ X ‖ Y). */
  publicKey: Hex;
  revoked: boolean;
  /** ns; the card is not valid before this moment (inclusive bound). */
  validFromNs?: bigint;
  /** ns; the card is not valid after this moment (inclusive bound). */
  validUntilNs?: bigint;
}

// The contracts' status enums by numeric value (the ABI carries only the number): ITimeOracle.CardStatus and
// NodeStatus, ITimeScheduler.CallStatus. test/relayer/decide.test.ts pins them to the Solidity sources.
export const CARD_STATUS = ["None", "Active", "Revoked"] as const;
export type CardStatusName = (typeof CARD_STATUS)[number];
export const NODE_STATUS = ["None", "Active", "Inactive"] as const;
export type NodeStatusName = (typeof NODE_STATUS)[number];
export const CALL_STATUS = ["None", "Scheduled", "Executed", "Failed", "Cancelled", "Expired"] as const;
export type CallStatusName = (typeof CALL_STATUS)[number];
