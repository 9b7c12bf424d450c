/**
 * The REST messages of a node (docs/protocol.md §9.1–§9.2), declared once with TypeBox: each schema is what the
 * server validates and serialises (fastify, `coerceTypes: false`, closed objects) and, through `Static<>`, the
 * TypeScript type the server builds and the client library returns. Nanosecond values are decimal strings.
 */
import { Type, type Static } from "@sinclair/typebox";
import { MAX_NODE_ENTRIES } from "../protocol/constants";

/** A canonical unsigned decimal (the rule of protocol/json.ts parseNsString), at most 39 digits (uint128). */
export const DECIMAL_NS_PATTERN = "^(0|[1-9][0-9]{0,38})$";
const HEX_BYTES_PATTERN = "^0x(?:[0-9a-f]{2})*$";
/** Addresses and ids as TypeScript's template type (the schemas check the characters). */
type HexString = `0x${string}`;

export const DecimalNs = Type.String({ pattern: DECIMAL_NS_PATTERN, maxLength: 39 });
const NullableDecimalNs = Type.Union([DecimalNs, Type.Null()]);
const HexBytes = (maxBytes: number) => Type.Unsafe<HexString>(Type.String({ pattern: HEX_BYTES_PATTERN, maxLength: 2 + 2 * maxBytes }));

export const ErrorBody = Type.Object({
  statusCode: Type.Integer(),
  error: Type.String(),
  message: Type.String(),
});
export type ErrorBody = Static<typeof ErrorBody>;

/** The `proof` member of §9.1. As a request body it is checked for shape only; content is verify()'s. */
export const ProofObject = Type.Object(
  {
    hardwareSignature: HexBytes(256),
    nodeSignature: HexBytes(80 * MAX_NODE_ENTRIES),
    accuracyNs: Type.Integer({ minimum: 0, maximum: 0xffff_ffff }),
    hardwareId: Type.Optional(HexBytes(32)),
    gps: Type.Optional(Type.Null()),
  },
  { additionalProperties: false },
);

/** A proof as JSON (§9.1): GET /time/current, stream updates, schedule deliveries. */
export const ProofBody = Type.Object({ nanoMoment: DecimalNs, proof: ProofObject }, { additionalProperties: false });
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

/** GET /node/info. */
export const NodeInfoBody = Type.Object({
  nodeId: Type.String(),
  cardId: Type.String(),
  certificateChainPem: Type.Array(Type.String()),
  version: Type.String(),
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
});
export type NodeInfoBody = Static<typeof NodeInfoBody>;

/** GET /health. */
export const HealthBody = Type.Object({
  status: Type.Union([Type.Literal("ok"), Type.Literal("tampered"), Type.Literal("starting"), Type.Literal("degraded"), Type.Literal("stale")]),
  reason: Type.Union([Type.String(), Type.Null()]),
  lastProofAgeNs: Type.Union([Type.String(), Type.Null()]),
  measuredErrorNs: Type.Number(),
});
export type HealthBody = Static<typeof HealthBody>;
