/**
 * The WebSocket messages of `/v1/stream` (docs/protocol.md §9.3), declared once with TypeBox: the node validates
 * client messages with these schemas (node/api/ws.ts) and both sides take their types from them. Each field's
 * schema carries the message a client gets when that field is wrong (`errorMessage`), so errors name the field.
 * Interval bounds are the node's settings and are checked after the shape.
 */
import { Type, type Static, type TObject } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";

export const SubscribeMessage = Type.Object(
  {
    type: Type.Literal("subscribe"),
    /** ns; a JSON integer (kept exact above 2^53 by the lossless parser, hence bigint). */
    interval: Type.Union([Type.Integer(), Type.BigInt()], { errorMessage: "must be a JSON integer number of nanoseconds" }),
    accuracy: Type.Literal("hardware", { errorMessage: 'must be "hardware"' }),
    includeProof: Type.Optional(Type.Boolean({ errorMessage: "must be a boolean" })),
  },
  { additionalProperties: false },
);
export type SubscribeMessage = Static<typeof SubscribeMessage>;

export const UnsubscribeMessage = Type.Object(
  {
    type: Type.Literal("unsubscribe"),
    id: Type.String({ minLength: 1, maxLength: 32, errorMessage: "must be a subscription id string" }),
  },
  { additionalProperties: false },
);
export type UnsubscribeMessage = Static<typeof UnsubscribeMessage>;

/** Client messages by their `type`. */
export const CLIENT_MESSAGES = { subscribe: SubscribeMessage, unsubscribe: UnsubscribeMessage } as const;
export type ClientMessageType = keyof typeof CLIENT_MESSAGES;

/** Server → client frames. */
export interface SubscribedFrame {
  type: "subscribed";
  id: string;
  /** ns. */
  interval: number;
}
export interface UnsubscribedFrame {
  type: "unsubscribed";
  id: string;
}
export interface ErrorFrame {
  type: "error";
  message: string;
}
/** An update: the latest proof's moment (decimal ns) and accuracy, and the proof itself when asked for. */
export interface UpdateFrame {
  nanoMoment: string;
  accuracy: number;
  id: string;
  proof?: unknown;
}

/**
 * The first problem of `value` against `schema`: the field and the field's `errorMessage` ("is required" when it
 * is missing), or field "message" with the unknown fields listed; null when it conforms.
 */
export function schemaProblem(schema: TObject, value: unknown): { field: string; message: string } | null {
  // Check first: listing the errors costs about twice as much, and almost every message has none.
  if (Value.Check(schema, value)) return null;
  const errors = [...Value.Errors(schema, value)];
  if (errors.length === 0) return null;
  const present = typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};
  const unknown = Object.keys(present).filter((key) => !(key in schema.properties));
  if (unknown.length > 0) return { field: "message", message: `unknown field(s): ${unknown.join(", ")}` };
  const field = errors[0]!.path.split("/")[1] ?? "message";
  if (!(field in present)) return { field, message: "is required" };
  const fieldSchema = schema.properties[field] as { errorMessage?: unknown } | undefined;
  return { field, message: typeof fieldSchema?.errorMessage === "string" ? fieldSchema.errorMessage : errors[0]!.message };
}
