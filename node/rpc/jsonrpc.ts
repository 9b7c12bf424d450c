/**
 * JSON-RPC 2.0 framing for the temporal gateway, pure: a body becomes a list of calls (or one parse error), each
 * call is checked on its own, and each gets its own answer. In a batch an invalid item, an unknown method or an
 * item over a limit gets its own error object and the others their answers: never a dropped socket, never a whole
 * batch failed for one item. Notifications (no `id`) are run and get no answer.
 *
 * Codes: the standard -32700 (parse error), -32600 (invalid request), -32601 (method not found), -32602 (invalid
 * params), -32603 (internal error); and RATE_LIMITED (-32005, "Rate limit exceeded", as Infura and Alchemy use it)
 * and RESPONSE_TOO_LARGE (-32006) as application errors.
 */

export const JSON_RPC_ERRORS = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  RATE_LIMITED: -32005,
  RESPONSE_TOO_LARGE: -32006,
  UPSTREAM_ERROR: -32000,
} as const;

export type JsonRpcId = string | number | null;

export interface JsonRpcCall {
  /** Absent for a notification. */
  id: JsonRpcId | undefined;
  method: string;
  params: readonly unknown[] | Record<string, unknown>;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export type JsonRpcResponse = { jsonrpc: "2.0"; id: JsonRpcId; result: unknown } | { jsonrpc: "2.0"; id: JsonRpcId; error: JsonRpcErrorObject };

/** An error a method throws to answer with a JSON-RPC error object. */
export class JsonRpcError extends Error {
  override name = "JsonRpcError";
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** One item of a body: a valid call, or the error answer it already earned (with the id it had, if any). */
export type ParsedItem = { ok: true; call: JsonRpcCall } | { ok: false; response: JsonRpcResponse };

export type ParsedBody =
  | { kind: "single"; item: ParsedItem }
  | { kind: "batch"; items: ParsedItem[] }
  | { kind: "error"; response: JsonRpcResponse };

const METHOD_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

export function errorResponse(id: JsonRpcId, code: number, message: string, data?: unknown): JsonRpcResponse {
  return { jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } };
}

function validId(value: unknown): value is JsonRpcId {
  return value === null || typeof value === "string" || (typeof value === "number" && Number.isSafeInteger(value));
}

/** Checks one request object (JSON-RPC 2.0 §4). */
export function parseItem(value: unknown): ParsedItem {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, response: errorResponse(null, JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", "a request must be an object") };
  }
  const request = value as Record<string, unknown>;
  const hasId = Object.prototype.hasOwnProperty.call(request, "id");
  const id = hasId && validId(request.id) ? request.id : null;
  const invalid = (why: string): ParsedItem => ({ ok: false, response: errorResponse(id, JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", why) });
  if (request.jsonrpc !== "2.0") return invalid('"jsonrpc" must be "2.0"');
  if (hasId && !validId(request.id)) return invalid('"id" must be a string, a safe integer or null');
  if (typeof request.method !== "string" || !METHOD_PATTERN.test(request.method)) return invalid('"method" must be a method name');
  for (const key of Object.keys(request)) {
    if (key !== "jsonrpc" && key !== "id" && key !== "method" && key !== "params") return invalid(`unknown member "${key}"`);
  }
  const params = request.params ?? [];
  if (typeof params !== "object" || params === null) return invalid('"params" must be an array or an object');
  return { ok: true, call: { id: hasId ? (request.id as JsonRpcId) : undefined, method: request.method, params: params as JsonRpcCall["params"] } };
}

/** Parses a body: a single call, a batch (non-empty, at most `maxBatch` items), or the one error it earns. */
export function parseBody(text: string, maxBatch: number): ParsedBody {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { kind: "error", response: errorResponse(null, JSON_RPC_ERRORS.PARSE_ERROR, "Parse error") };
  }
  if (!Array.isArray(json)) return { kind: "single", item: parseItem(json) };
  if (json.length === 0) return { kind: "error", response: errorResponse(null, JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", "an empty batch") };
  // Items beyond the limit get their own error: the others are still answered.
  return {
    kind: "batch",
    items: json.map((value, index) => {
      if (index < maxBatch) return parseItem(value);
      const id = typeof value === "object" && value !== null && validId((value as { id?: unknown }).id) ? ((value as { id: JsonRpcId }).id ?? null) : null;
      return { ok: false, response: errorResponse(id, JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", `batch item ${index} is beyond the ${maxBatch}-item limit`) };
    }),
  };
}
