/**
 * The REST messages of a node (docs/protocol.md §9.1–§9.2), declared once with TypeBox: each schema is what the
 * server validates and serialises (fastify, `coerceTypes: false`, closed objects) and, through `Static<>`, the
 * TypeScript type the server builds and the client library returns. Nanosecond values are decimal strings.
 */
import { Type, type Static } from "@sinclair/typebox";
import { CONTRADICTION_EVIDENCE_KIND, CONTRADICTION_EVIDENCE_VERSION, MAX_NODE_ENTRIES } from "../protocol/constants";

import { ConsensusObject, DecimalNs, NodeIdString, NullableDecimalNs, ProofObject, SignedDecimalNs } from "../protocol/jsonSchema";

export { DECIMAL_NS_PATTERN, DecimalNs, GpsObject, ProofObject, ConsensusObject } from "../protocol/jsonSchema";

export const ErrorBody = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String(),
  message: Type.String(),
});
export type ErrorBody = Static<typeof ErrorBody>;

export type ConsensusObject = Static<typeof ConsensusObject>;

/**
 * A proof as JSON (§9.1): GET /time/current, stream updates, schedule deliveries. A mesh node's answer adds
 * `consensus`; a lone node's has none.
 */
export const ProofBody = Type.Object(
  { nanoMoment: DecimalNs, proof: ProofObject, consensus: Type.Optional(ConsensusObject) },
  { additionalProperties: false },
);
export type ProofBody = Static<typeof ProofBody>;

/** Optional card certificate chain (leaf first, PEM) in a verify request: checked against the trusted roots. */
const CertificateChain = Type.Array(Type.String({ minLength: 1, maxLength: 8192 }), { minItems: 1, maxItems: 4 });

/** POST /time/verify: a §9.1 proof, plus an optional certificate chain for a card the node does not know. */
export const VerifyBody = Type.Object(
  { nanoMoment: DecimalNs, proof: ProofObject, certificateChainPem: Type.Optional(CertificateChain) },
  { additionalProperties: false },
);
export type VerifyBody = Static<typeof VerifyBody>;

export const VerifyAnswer = Type.Object({
  valid: Type.Boolean(),
  reason: Type.Union([Type.String(), Type.Null()]),
  detail: Type.Optional(Type.String()),
});
export type VerifyAnswer = Static<typeof VerifyAnswer>;

/** POST /time/schedule. */
export const ScheduleBody = Type.Object(
  { executeAt: DecimalNs, callback: Type.String({ minLength: 1, maxLength: 2048 }) },
  { additionalProperties: false },
);
export type ScheduleBody = Static<typeof ScheduleBody>;

export const ScheduleCreated = Type.Object({
  id: Type.String(),
  status: Type.String(),
  executeAt: Type.String(),
  callback: Type.String(),
});
export type ScheduleCreated = Static<typeof ScheduleCreated>;

export const ScheduleStatus = Type.Union([
  Type.Literal("scheduled"),
  Type.Literal("delivering"),
  Type.Literal("delivered"),
  Type.Literal("failed"),
]);

/** GET /time/schedule/:id. */
export const ScheduleRecordBody = Type.Object({
  id: Type.String(),
  status: ScheduleStatus,
  executeAt: Type.String(),
  callback: Type.String(),
  attempts: Type.Integer(),
  lastError: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
  deliveredAt: NullableDecimalNs,
  nextAttemptAt: NullableDecimalNs,
  proof: Type.Union([Type.Null(), ProofBody]),
});
export type ScheduleRecordBody = Static<typeof ScheduleRecordBody>;

export const ScheduleParams = Type.Object(
  { id: Type.String({ pattern: "^[0-9a-fA-F-]{1,64}$" }) },
  { additionalProperties: false },
);

/**
 * A card driver's own report of its clock source (node/card/types.ts CardStatus): the chrony card's state, the
 * bound it proves now (what the node signs; null while it proves none), chrony's measured offset and reference.
 */
const CardBoundEvidenceBody = Type.Object({
  report: Type.String(),
  readAtNs: Type.String({ pattern: "^[0-9]{1,20}$" }),
  clockExtraNs: Type.Integer({ minimum: 0 }),
  growthPpb: Type.Integer({ minimum: 0 }),
});
export const CardStatusBody = Type.Object({
  driver: Type.String(),
  state: Type.Union([Type.Literal("starting"), Type.Literal("serving"), Type.Literal("degraded")]),
  reason: Type.Union([Type.String(), Type.Null()]),
  accuracyBoundNs: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
  offsetNs: Type.Union([Type.Integer(), Type.Null()]),
  source: Type.Union([Type.String(), Type.Null()]),
  /** What the bound is computed from (node/card/types.ts CardBoundEvidence), null before the first reading. */
  evidence: Type.Optional(Type.Union([CardBoundEvidenceBody, Type.Null()])),
});
export type CardStatusBody = Static<typeof CardStatusBody>;

/** GET /node/info. */
export const NodeInfoBody = Type.Object({
  nodeId: Type.String(),
  cardId: Type.String(),
  certificateChainPem: Type.Array(Type.String()),
  version: Type.String(),
  /**
   * The source revision (40 hex) the node was built from, from its release bundle; null when it runs from sources.
   * Optional for clients: older nodes do not send it.
   */
  revision: Type.Optional(Type.Union([Type.String({ pattern: "^[0-9a-f]{40}$" }), Type.Null()])),
  protocol: Type.String(),
  accuracyNs: Type.Integer(),
  tickIntervalNs: Type.String(),
  maxAttestationAgeNs: Type.String(),
  maxFutureDriftNs: Type.String(),
  maxAcceptableDriftNs: Type.String(),
  nodeQuorum: Type.Integer(),
  archiveIntervalNs: Type.String(),
  archiveCapacity: Type.Integer(),
  authRequired: Type.Boolean(),
  maxRequestsPerSecond: Type.Number(),
  /** The serving process's event-loop utilisation over about the last second, 0..1 (docs/protocol.md §8). */
  currentLoad: Type.Number({ minimum: 0, maximum: 1 }),
  /** primary, secondary, archive or bridge (docs/protocol.md §7.6). */
  role: Type.String(),
  /** The card driver's clock source and state, from drivers that report one (the chrony card); absent otherwise. */
  card: Type.Optional(CardStatusBody),
});
export type NodeInfoBody = Static<typeof NodeInfoBody>;

/**
 * A verified tamper alert as GET /mesh/state lists it (docs/protocol.md §7.6): signed by the node it is about with
 * its node key over alertDigest (wire/mesh.ts), so anyone holding it can check it (the relayer's guardian does).
 */
export const TamperAlertJson = Type.Object(
  {
    nodeId: NodeIdString,
    cardId: Type.String({ pattern: "^0x[0-9a-f]{64}$" }),
    reason: Type.String({ maxLength: 256 }),
    atNs: Type.String({ pattern: "^(0|[1-9][0-9]{0,38})$" }),
    /** 64 bytes (EIP-2098 compact), 0x-hex. */
    signature: Type.String({ pattern: "^0x[0-9a-f]{128}$" }),
  },
  { additionalProperties: false },
);
export type TamperAlertJson = Static<typeof TamperAlertJson>;

/**
 * Contradiction evidence (docs/protocol.md §7.8; protocol/evidence.ts ContradictionEvidenceJson, whose strict reader
 * checkEvidence is what convicts): two §9.1 proofs without `consensus`, each naming the accused node's entry.
 */
export const ContradictionEvidenceObject = Type.Object(
  {
    kind: Type.Literal(CONTRADICTION_EVIDENCE_KIND),
    version: Type.Literal(CONTRADICTION_EVIDENCE_VERSION),
    nodeId: NodeIdString,
    proofs: Type.Array(
      Type.Object(
        {
          entryIndex: Type.Integer({ minimum: 0, maximum: MAX_NODE_ENTRIES - 1 }),
          timeProof: Type.Object({ nanoMoment: DecimalNs, proof: ProofObject }, { additionalProperties: false }),
        },
        { additionalProperties: false },
      ),
      { minItems: 2, maxItems: 2 },
    ),
  },
  { additionalProperties: false },
);
export type ContradictionEvidenceObject = Static<typeof ContradictionEvidenceObject>;

/** A peer caught signing contradicting entries, as GET /mesh/state lists it (node/mesh/contradictions.ts). */
export const ContradictionReportJson = Type.Object(
  {
    nodeId: NodeIdString,
    /** This node's clock when the first contradiction was found, ns. */
    foundAtNs: DecimalNs,
    /** Entries of that peer found contradicting one it signed before, counted since this node started. */
    contradictionsTotal: Type.Integer({ minimum: 1 }),
    /** The first contradiction found: by how much it exceeds the rule, ns, and the evidence itself. */
    excessNs: DecimalNs,
    evidence: ContradictionEvidenceObject,
  },
  { additionalProperties: false },
);
export type ContradictionReportJson = Static<typeof ContradictionReportJson>;
/** Most contradiction reports a node keeps (one per peer: a mesh has at most 32 members). */
export const MAX_CONTRADICTION_REPORTS = 32;

/** GET /mesh/state (wire/meshState.ts MeshStateReport; node/mesh/peers.ts PeerReport). */
export const MeshStateBody = Type.Object(
  {
    convergenceState: Type.Union([Type.Literal("Initializing"), Type.Literal("Converging"), Type.Literal("Converged"), Type.Literal("Degraded")]),
    timeQuality: Type.Integer({ minimum: 0, maximum: 10_000 }),
    peerCount: Type.Integer({ minimum: 0 }),
    members: Type.Integer({ minimum: 1 }),
    threshold: Type.Integer({ minimum: 1 }),
    consensusOffsetNs: Type.Union([SignedDecimalNs, Type.Null()]),
    lastError: Type.Union([Type.String(), Type.Null()]),
    role: Type.String(),
    roundsSucceeded: Type.Integer({ minimum: 0 }),
    roundsFailed: Type.Record(Type.String(), Type.Integer({ minimum: 0 })),
    peers: Type.Array(
      Type.Object(
        {
          nodeId: NodeIdString,
          role: Type.Union([Type.String(), Type.Null()]),
          cardId: Type.Union([Type.String(), Type.Null()]),
          reachable: Type.Boolean(),
          reach: Type.Integer({ minimum: 0, maximum: 255 }),
          offsetNs: Type.Union([SignedDecimalNs, Type.Null()]),
          delayNs: NullableDecimalNs,
          jitterNs: NullableDecimalNs,
          lastSeenNs: NullableDecimalNs,
          reportedState: Type.Union([Type.String(), Type.Null()]),
          excluded: Type.Boolean(),
          excludedReason: Type.Union([Type.String(), Type.Null()]),
          absent: Type.Boolean(),
          faultsTotal: Type.Integer({ minimum: 0 }),
        },
        { additionalProperties: false },
      ),
    ),
    /** Verified tamper alerts this node holds (its own and its peers'), oldest first, at most MAX_TAMPER_ALERTS. */
    tamperAlerts: Type.Array(TamperAlertJson, { maxItems: 64 }),
    /** Peers caught signing contradicting entries (docs/protocol.md §7.8): the first evidence of each, at most 32. */
    contradictions: Type.Array(ContradictionReportJson, { maxItems: MAX_CONTRADICTION_REPORTS }),
    /** Counted since start: mesh packets dropped by reason, co-sign requests refused, relayed proofs refused by reason. */
    refused: Type.Object(
      {
        packets: Type.Record(Type.String(), Type.Integer({ minimum: 0 })),
        coSignRequests: Type.Integer({ minimum: 0 }),
        coSignRequestsByRule: Type.Record(Type.String(), Type.Integer({ minimum: 0 })),
        relayedProofs: Type.Record(Type.String(), Type.Integer({ minimum: 0 })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type MeshStateBody = Static<typeof MeshStateBody>;
/** Most tamper alerts a node keeps and reports (one per member suffices; the mesh has at most 32). */
export const MAX_TAMPER_ALERTS = 64;

/** GET /health. */
export const HealthBody = Type.Object({
  status: Type.Union([Type.Literal("ok"), Type.Literal("tampered"), Type.Literal("starting"), Type.Literal("degraded"), Type.Literal("stale")]),
  reason: Type.Union([Type.String(), Type.Null()]),
  lastProofAgeNs: Type.Union([Type.String(), Type.Null()]),
  measuredErrorNs: Type.Number(),
  /** The mesh's convergence state (a lone node: Initializing). */
  convergenceState: Type.Union([Type.Literal("Initializing"), Type.Literal("Converging"), Type.Literal("Converged"), Type.Literal("Degraded")]),
  /** The card driver's clock source and state, as in GET /node/info; absent for drivers that report none. */
  card: Type.Optional(CardStatusBody),
});
export type HealthBody = Static<typeof HealthBody>;
