/**
 * JSON schemas of the REST and WebSocket messages, declared once. Validation runs with `coerceTypes: false`
 * (a string is never accepted for a number, nor a number for a string) and `additionalProperties: false`
 * everywhere. Nanosecond values are decimal strings (docs/protocol.md §1).
 */
import { MAX_NODE_ENTRIES } from "../../protocol/constants";
import { DECIMAL_NS_PATTERN } from "./input";

const HEX_BYTES_PATTERN = "^0x(?:[0-9a-f]{2})*$";

export const decimalNsSchema = { type: "string", pattern: DECIMAL_NS_PATTERN, maxLength: 39 } as const;

const nullableDecimalNsSchema = { type: ["string", "null"], pattern: DECIMAL_NS_PATTERN } as const;

export const errorResponseSchema = {
  type: "object",
  properties: {
    statusCode: { type: "integer" },
    error: { type: "string" },
    message: { type: "string" },
  },
  required: ["statusCode", "error", "message"],
} as const;

/** The `proof` member of docs/protocol.md §9.1. As a request body it is checked for shape only; content is verify()'s. */
export const proofObjectSchema = {
  type: "object",
  additionalProperties: false,
  required: ["hardwareSignature", "nodeSignature", "accuracyNs"],
  properties: {
    hardwareSignature: { type: "string", pattern: HEX_BYTES_PATTERN, maxLength: 2 + 2 * 256 },
    nodeSignature: { type: "string", pattern: HEX_BYTES_PATTERN, maxLength: 2 + 2 * 80 * MAX_NODE_ENTRIES },
    accuracyNs: { type: "integer", minimum: 0, maximum: 0xffff_ffff },
    hardwareId: { type: "string", pattern: HEX_BYTES_PATTERN, maxLength: 2 + 2 * 32 },
    gps: { type: "null" },
  },
} as const;

export const proofJsonSchema = {
  type: "object",
  additionalProperties: false,
  required: ["nanoMoment", "proof"],
  properties: { nanoMoment: decimalNsSchema, proof: proofObjectSchema },
} as const;

/** Optional card certificate chain (leaf first, PEM) in a verify request: checked against the trusted roots. */
export const certificateChainSchema = {
  type: "array",
  minItems: 1,
  maxItems: 4,
  items: { type: "string", minLength: 1, maxLength: 8192 },
} as const;

/** POST /time/verify: the §9 body, plus an optional certificate chain for a card the node does not know. */
export const verifyBodySchema = {
  type: "object",
  additionalProperties: false,
  required: ["nanoMoment", "proof"],
  properties: { nanoMoment: decimalNsSchema, proof: proofObjectSchema, certificateChainPem: certificateChainSchema },
} as const;

export const verifyResponseSchema = {
  type: "object",
  required: ["valid", "reason"],
  properties: {
    valid: { type: "boolean" },
    reason: { type: ["string", "null"] },
    detail: { type: "string" },
  },
} as const;

export const scheduleBodySchema = {
  type: "object",
  additionalProperties: false,
  required: ["executeAt", "callback"],
  properties: {
    executeAt: decimalNsSchema,
    callback: { type: "string", minLength: 1, maxLength: 2048 },
  },
} as const;

export const scheduleCreatedSchema = {
  type: "object",
  required: ["id", "status", "executeAt", "callback"],
  properties: {
    id: { type: "string" },
    status: { type: "string" },
    executeAt: { type: "string" },
    callback: { type: "string" },
  },
} as const;

export const scheduleRecordSchema = {
  type: "object",
  required: ["id", "status", "executeAt", "callback", "attempts", "lastError", "createdAt", "deliveredAt", "proof"],
  properties: {
    id: { type: "string" },
    status: { type: "string", enum: ["scheduled", "delivering", "delivered", "failed"] },
    executeAt: { type: "string" },
    callback: { type: "string" },
    attempts: { type: "integer" },
    lastError: { type: ["string", "null"] },
    createdAt: { type: "string" },
    deliveredAt: nullableDecimalNsSchema,
    nextAttemptAt: nullableDecimalNsSchema,
    proof: { anyOf: [{ type: "null" }, proofJsonSchema] },
  },
} as const;

export const scheduleParamsSchema = {
  type: "object",
  additionalProperties: false,
  required: ["id"],
  properties: { id: { type: "string", pattern: "^[0-9a-fA-F-]{1,64}$" } },
} as const;

export const nodeInfoSchema = {
  type: "object",
  required: [
    "nodeId",
    "cardId",
    "certificateChainPem",
    "version",
    "protocol",
    "accuracyNs",
    "tickIntervalNs",
    "maxAttestationAgeNs",
    "maxFutureDriftNs",
    "maxAcceptableDriftNs",
    "nodeQuorum",
    "archiveIntervalNs",
    "archiveCapacity",
    "authRequired",
    "maxRequestsPerSecond",
  ],
  properties: {
    nodeId: { type: "string" },
    cardId: { type: "string" },
    certificateChainPem: { type: "array", items: { type: "string" } },
    version: { type: "string" },
    protocol: { type: "string" },
    accuracyNs: { type: "integer" },
    tickIntervalNs: { type: "string" },
    maxAttestationAgeNs: { type: "string" },
    maxFutureDriftNs: { type: "string" },
    maxAcceptableDriftNs: { type: "string" },
    nodeQuorum: { type: "integer" },
    archiveIntervalNs: { type: "string" },
    archiveCapacity: { type: "integer" },
    authRequired: { type: "boolean" },
    maxRequestsPerSecond: { type: "number" },
  },
} as const;

export const healthSchema = {
  type: "object",
  required: ["status", "reason", "lastProofAgeNs", "measuredErrorNs"],
  properties: {
    status: { type: "string", enum: ["ok", "tampered", "starting", "degraded", "stale"] },
    reason: { type: ["string", "null"] },
    lastProofAgeNs: { type: ["string", "null"] },
    measuredErrorNs: { type: "number" },
  },
} as const;
