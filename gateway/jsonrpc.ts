/**
 * JSON-RPC 2.0 framing for the temporal gateway, pure: a body becomes a list of calls (or one error for the whole
 * body), each call is checked on its own, and each gets its own answer. In a batch within the limits an invalid
 * item, an unknown method or an item over the rate gets its own error object and the others their answers: never a
 * dropped socket, never a whole batch failed for one item. Notifications (no `id`) are run and get no answer.
 *
 * What is refused as a whole, before JSON.parse, because answering item by item would let a small body buy a large
 * answer (a 260 kB batch of 130,000 invalid items once bought a 17.5 MB answer) and parsing it would let its size
 * buy CPU: a body that is not UTF-8, nests deeper than {@link MAX_JSON_DEPTH}, or is a batch longer than the batch
 * limit ({@link scanJson}). A batch's answer as a
 * whole is bounded by {@link serializeBatch}.
 *
 * Detail: docs/protocol.md §9.5.
 */

/*
 * Codes: the standard -32700 (parse error), -32600 (invalid request), -32601 (method not found), -32602 (invalid
 * params), -32603 (internal error); and RATE_LIMITED (-32005, "Rate limit exceeded", as Infura and Alchemy use it),
 * RESPONSE_TOO_LARGE (-32006) and REQUEST_TIMED_OUT (-32002, a batch item past the batch's time budget, geth's code)
 * as application errors.
 */
export const JSON_RPC_ERRORS = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  RATE_LIMITED: -32005,
  RESPONSE_TOO_LARGE: -32006,
  REQUEST_TIMED_OUT: -32002,
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

/**
 * Deepest nesting of arrays and objects in a body (a batch is one level, a request two, its params three). The
 * deepest real request (eth_call with a state override) needs about 6; a deeper one is refused before JSON.parse,
 * which is iterative and would spend ~80 ms on 256 kB of brackets, and before anything recursive (a stringify on the
 * way upstream) overflows the stack.
 */
export const MAX_JSON_DEPTH = 32;

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

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

/** What a linear scan of JSON text found before JSON.parse is asked to do any work. */
export type JsonShape = "ok" | "too-deep" | "too-many-items";

const COMMA = 0x2c;
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * One pass over a JSON body's UTF-8 bytes, outside strings: refuses arrays and objects nested deeper than
 * `maxDepth`, and a top-level array of more than `maxItems` items (counted by its commas), stopping at the first
 * excess, so that refusing a huge batch costs as little as its first `maxItems` items (it runs before the body is
 * even decoded). Exact on bytes: the ASCII delimiters it looks for never occur inside a multi-byte UTF-8 sequence.
 * The body need not be valid JSON: JSON.parse judges that afterwards (a trailing comma may count as an item; such a
 * body is refused either way).
 */
export function scanJson(bytes: Uint8Array, maxDepth: number, maxItems: number): JsonShape {
  let depth = 0;
  let inString = false;
  let start = 0;
  while (start < bytes.length && WHITESPACE.has(bytes[start]!)) start++;
  const topLevelArray = bytes[start] === OPEN_BRACKET;
  let topLevelCommas = 0;
  for (let i = start; i < bytes.length; i++) {
    const code = bytes[i]!;
    if (inString) {
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
    } else if (code === OPEN_BRACKET || code === OPEN_BRACE) {
      if (++depth > maxDepth) return "too-deep";
    } else if (code === CLOSE_BRACKET || code === CLOSE_BRACE) {
      depth--;
    } else if (code === COMMA && depth === 1 && topLevelArray) {
      if (++topLevelCommas >= maxItems) return "too-many-items";
    }
  }
  return "ok";
}

function bodyError(code: number, message: string, data?: unknown): ParsedBody {
  return { kind: "error", response: errorResponse(null, code, message, data) };
}

/**
 * Parses a body (bytes as received, or text already decoded): a single call, a batch (1 to `maxBatch` items), or
 * the one error the whole body earns.
 */
export function parseBody(body: Uint8Array | string, maxBatch: number): ParsedBody {
  const bytes = typeof body === "string" ? Buffer.from(body) : body;
  const shape = scanJson(bytes, MAX_JSON_DEPTH, maxBatch);
  if (shape === "too-deep") {
    return bodyError(JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", `arrays and objects nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  // Refused whole, as geth refuses "batch too large": an error per extra item would make the answer grow with the
  // body, and parsing the rest would let the body's size buy CPU.
  if (shape === "too-many-items") return bodyError(JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", `a batch of more than ${maxBatch} items`);
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    return bodyError(JSON_RPC_ERRORS.PARSE_ERROR, "Parse error", "the body is not valid UTF-8");
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return bodyError(JSON_RPC_ERRORS.PARSE_ERROR, "Parse error");
  }
  if (!Array.isArray(json)) return { kind: "single", item: parseItem(json) };
  if (json.length === 0) return bodyError(JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", "an empty batch");
  if (json.length > maxBatch) return bodyError(JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", `a batch of more than ${maxBatch} items`);
  return { kind: "batch", items: json.map(parseItem) };
}

/**
 * A batch's answers as one JSON array of at most about `maxBytes`: each answer is already serialized (and each
 * within `maxBytes` on its own); once the next one would take the array past `maxBytes`, it and every later one are
 * replaced by a short RESPONSE_TOO_LARGE error with its id, so the answer stays bounded whatever the items asked.
 */
export function serializeBatch(answers: readonly { id: JsonRpcId; json: string }[], maxBytes: number): string {
  const parts: string[] = [];
  let bytes = 2; // the brackets
  let overBudget = false;
  for (const answer of answers) {
    const separator = parts.length === 0 ? 0 : 1;
    overBudget ||= bytes + separator + Buffer.byteLength(answer.json) > maxBytes;
    const json = overBudget
      ? JSON.stringify(errorResponse(answer.id, JSON_RPC_ERRORS.RESPONSE_TOO_LARGE, "Response too large", `the batch's answer would exceed ${maxBytes} bytes; split the batch`))
      : answer.json;
    bytes += separator + Buffer.byteLength(json);
    parts.push(json);
  }
  return `[${parts.join(",")}]`;
}
