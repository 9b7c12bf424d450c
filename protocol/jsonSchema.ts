/**
 * The JSON form of a proof (docs/protocol.md §9.1), declared once with TypeBox: ProofJson and ConsensusJson
 * (types.ts) are `Static<>` of these schemas, and wire/rest.ts builds the REST messages from them, so the type a
 * node serves, the schema it validates with and the type a client reads cannot drift apart. Nanosecond values are
 * decimal strings; hex is lower case.
 */
import { Type } from "@sinclair/typebox";
import { MAX_NODE_ENTRIES } from "./constants";

/** A canonical unsigned decimal (the rule of json.ts parseNsString), at most 39 digits (uint128). */
export const DECIMAL_NS_PATTERN = "^(0|[1-9][0-9]{0,38})$";
const HEX_BYTES_PATTERN = "^0x(?:[0-9a-f]{2})*$";
/** Addresses and ids as TypeScript's template type (the schemas check the characters). */
type HexString = `0x${string}`;

export const DecimalNs = Type.String({ pattern: DECIMAL_NS_PATTERN, maxLength: 39 });
export const NullableDecimalNs = Type.Union([DecimalNs, Type.Null()]);
export const HexBytes = (maxBytes: number) => Type.Unsafe<HexString>(Type.String({ pattern: HEX_BYTES_PATTERN, maxLength: 2 + 2 * maxBytes }));
export const NodeIdString = Type.Unsafe<HexString>(Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" }));
export const SignedDecimalNs = Type.String({ pattern: "^-?(0|[1-9][0-9]{0,38})$", maxLength: 40 });

/** proof.gps (§9.1, types.ts GpsReference): the card's GPS reference, unsigned metadata. */
export const GpsObject = Type.Object(
  {
    fixState: Type.Union([Type.Literal("none"), Type.Literal("2d"), Type.Literal("3d"), Type.Literal("simulated")]),
    satellites: Type.Integer({ minimum: 0, maximum: 64 }),
    ppsOffsetNs: Type.Integer({ minimum: -999_999_999, maximum: 999_999_999 }),
    observedAtNs: DecimalNs,
  },
  { additionalProperties: false },
);

const proofFields = {
  /** 96 bytes. */
  hardwareSignature: HexBytes(256),
  /** 80·k bytes. */
  nodeSignature: HexBytes(80 * MAX_NODE_ENTRIES),
  /** ns, a JSON integer (uint32). */
  accuracyNs: Type.Integer({ minimum: 0, maximum: 0xffff_ffff }),
};

/**
 * The `proof` member of §9.1 as a node serves it: hardwareId (the cardId, the first 32 bytes of hardwareSignature)
 * and gps (null: none) always present.
 */
export const ServedProofObject = Type.Object(
  { ...proofFields, hardwareId: HexBytes(32), gps: Type.Union([Type.Null(), GpsObject]) },
  { additionalProperties: false },
);

/** The `proof` member of §9.1 as a request carries it (hardwareId and gps optional): checked for shape only. */
export const ProofObject = Type.Object(
  { ...proofFields, hardwareId: Type.Optional(HexBytes(32)), gps: Type.Optional(Type.Union([Type.Null(), GpsObject])) },
  { additionalProperties: false },
);

/** One member's reading in a consensus round (§9.1 `consensus.readings`). */
export const ConsensusReadingObject = Type.Object(
  {
    nodeId: NodeIdString,
    /** The member's clock at the round's moment, delay-compensated (measured by the proposer). */
    readingNs: DecimalNs,
    /** Half the exchange's delay plus the member's card accuracy. */
    uncertaintyNs: DecimalNs,
    /** readingNs − the round's median (signed). */
    deviationNs: SignedDecimalNs,
    /** The nodeTimestamp of the member's entry in proof.nodeSignature; null if it did not co-sign. */
    nodeTimestampNs: NullableDecimalNs,
  },
  { additionalProperties: false },
);

/** How a mesh proof was agreed (§7, §9.1): beside `proof`, never inside it. */
export const ConsensusObject = Type.Object(
  {
    /** n: the mesh members, the serving node included. */
    members: Type.Integer({ minimum: 1 }),
    /** ⌈2n/3⌉. */
    threshold: Type.Integer({ minimum: 1 }),
    /** Entries in proof.nodeSignature: the nodes that co-signed. */
    responders: Type.Integer({ minimum: 1 }),
    /** Their node ids, in the proof's (ascending) order. */
    nodeIds: Type.Array(NodeIdString, { maxItems: MAX_NODE_ENTRIES }),
    /** The median of the readings (§7's consensus time). */
    timeNs: DecimalNs,
    /** §7's largest absolute deviation among the valid responses; the signed bound is proof.accuracyNs. */
    deviationNs: DecimalNs,
    /** The window W of the round. */
    windowNs: DecimalNs,
    /** The valid readings, ascending by node id. */
    readings: Type.Array(ConsensusReadingObject, { maxItems: MAX_NODE_ENTRIES }),
    /** Readings outside the window. */
    excluded: Type.Array(Type.Object({ nodeId: NodeIdString, deviationNs: SignedDecimalNs }, { additionalProperties: false }), {
      maxItems: MAX_NODE_ENTRIES,
    }),
  },
  { additionalProperties: false },
);

/** The body of `GET /time/current` on a lone node (a mesh node's adds `consensus`: wire/rest.ts ProofBody). */
export const ProofJsonObject = Type.Object({ nanoMoment: DecimalNs, proof: ServedProofObject }, { additionalProperties: false });
