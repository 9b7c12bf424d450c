/**
 * The ONE place where errors become transport answers (HTTP status for REST and the WebSocket upgrade, gRPC
 * status, JSON-RPC code) and, for the client library, where answers become errors again. Everything inside the
 * package throws the classes of protocol/errors.ts; the transports call these functions at their edge and nowhere
 * else decide a status.
 *
 * Leak policy: client errors (4xx / INVALID_ARGUMENT …) carry their message, which is written for the caller
 * (field names and bounds, never key material). Anything unexpected becomes a generic 500 / INTERNAL whose message
 * says nothing about the cause; the caller logs the full error.
 */
import { status as GrpcStatus } from "@grpc/grpc-js";
import {
  AtsError,
  AuthError,
  NotFoundError,
  RateLimitError,
  UnavailableError,
  ValidationError,
  type AtsErrorCode,
} from "../protocol/errors";

/** The generic message of every unexpected failure. */
export const INTERNAL_ERROR_MESSAGE = "Internal server error";

export interface HttpErrorAnswer {
  statusCode: number;
  /** Short, stable name of the error class (the JSON body's `error` field). */
  error: string;
  /** Safe to show the caller. */
  message: string;
  /** True when the cause is a server fault (log at error level). */
  serverFault: boolean;
  /** Headers the answer must carry: `retry-after` (whole seconds) on a 429 of the request rate. */
  headers?: Readonly<Record<string, string>>;
}

/**
 * Retry-After of an error that knows when the caller may come back: a RateLimitError whose details carry
 * `retryAfterMs` (the rate limiter's refill time) → whole seconds, at least 1. Other quotas (streams, pending
 * schedules) free up when the client's own work ends, at no time the node can name: no header.
 */
function retryAfterSeconds(err: AtsError): string | undefined {
  const ms = err.details["retryAfterMs"];
  if (err.code !== "RATE_LIMIT" || typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return undefined;
  return String(Math.max(1, Math.ceil(ms / 1000)));
}

const HTTP_BY_CODE: Readonly<Record<AtsErrorCode, { statusCode: number; error: string }>> = {
  PROTOCOL: { statusCode: 400, error: "Bad Request" },
  VALIDATION: { statusCode: 400, error: "Bad Request" },
  NOT_FOUND: { statusCode: 404, error: "Not Found" },
  AUTH: { statusCode: 401, error: "Unauthorized" },
  RATE_LIMIT: { statusCode: 429, error: "Too Many Requests" },
  UNAVAILABLE: { statusCode: 503, error: "Service Unavailable" },
  CONSENSUS: { statusCode: 503, error: "Service Unavailable" },
  INTERNAL: { statusCode: 500, error: "Internal Server Error" },
};

const GRPC_BY_CODE: Readonly<Record<AtsErrorCode, GrpcStatus>> = {
  PROTOCOL: GrpcStatus.INVALID_ARGUMENT,
  VALIDATION: GrpcStatus.INVALID_ARGUMENT,
  NOT_FOUND: GrpcStatus.NOT_FOUND,
  AUTH: GrpcStatus.UNAUTHENTICATED,
  RATE_LIMIT: GrpcStatus.RESOURCE_EXHAUSTED,
  UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  CONSENSUS: GrpcStatus.UNAVAILABLE,
  INTERNAL: GrpcStatus.INTERNAL,
};

/** JSON-RPC 2.0 codes: -32602 invalid params; application errors in the -32000 … -32099 server range. */
const JSON_RPC_BY_CODE: Readonly<Record<AtsErrorCode, number>> = {
  PROTOCOL: -32602,
  VALIDATION: -32602,
  NOT_FOUND: -32004,
  AUTH: -32001,
  RATE_LIMIT: -32005,
  UNAVAILABLE: -32003,
  CONSENSUS: -32002,
  INTERNAL: -32603,
};

/** Errors raised by fastify itself carry a `code` starting with FST_ and a safe `statusCode`. */
interface FrameworkError {
  code?: unknown;
  statusCode?: unknown;
  validation?: unknown;
  message: string;
}

function isFrameworkClientError(err: unknown): err is FrameworkError & { statusCode: number } {
  if (!(err instanceof Error)) return false;
  const candidate = err as Error & FrameworkError;
  return (
    typeof candidate.statusCode === "number" &&
    candidate.statusCode >= 400 &&
    candidate.statusCode < 500 &&
    (candidate.validation !== undefined || (typeof candidate.code === "string" && candidate.code.startsWith("FST_")))
  );
}

const HTTP_REASON: Readonly<Record<number, string>> = {
  400: "Bad Request",
  401: "Unauthorized",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  413: "Payload Too Large",
  414: "URI Too Long",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
};

/** The answer to a request its client abandoned (no one reads it: it is for the log and the metrics). */
export const CLIENT_ABORT_MESSAGE = "client closed the connection before the request was complete";

/**
 * Node's error when the client closes the connection before sending the whole request (e.g. headers with
 * `content-length: N`, then fewer than N bytes and a close or reset): the request stream emits Error "aborted"
 * with code ECONNRESET, and fastify hands it to the error handler from its body reader. A request handler sees
 * ECONNRESET only from its own client: the client's doing, not a server fault.
 */
function isClientAbort(err: unknown): boolean {
  return err instanceof Error && (err as Error & { code?: unknown }).code === "ECONNRESET";
}

export function toHttpError(err: unknown): HttpErrorAnswer {
  if (err instanceof AtsError) {
    const mapped = HTTP_BY_CODE[err.code];
    const serverFault = mapped.statusCode >= 500 && err.code === "INTERNAL";
    const retryAfter = retryAfterSeconds(err);
    const answer: HttpErrorAnswer = { ...mapped, message: serverFault ? INTERNAL_ERROR_MESSAGE : err.message, serverFault };
    if (retryAfter !== undefined) answer.headers = { "retry-after": retryAfter };
    return answer;
  }
  if (isClientAbort(err)) return { statusCode: 400, error: "Bad Request", message: CLIENT_ABORT_MESSAGE, serverFault: false };
  if (isFrameworkClientError(err)) {
    return {
      statusCode: err.statusCode,
      error: HTTP_REASON[err.statusCode] ?? "Bad Request",
      message: err.message,
      serverFault: false,
    };
  }
  return { statusCode: 500, error: "Internal Server Error", message: INTERNAL_ERROR_MESSAGE, serverFault: true };
}

export interface GrpcErrorAnswer {
  code: GrpcStatus;
  details: string;
  serverFault: boolean;
  /** Trailing metadata the status must carry: `retry-after` (whole seconds) on RESOURCE_EXHAUSTED of the rate. */
  metadata?: Readonly<Record<string, string>>;
}

export function toGrpcError(err: unknown): GrpcErrorAnswer {
  if (err instanceof AtsError) {
    const serverFault = err.code === "INTERNAL";
    const retryAfter = retryAfterSeconds(err);
    const answer: GrpcErrorAnswer = { code: GRPC_BY_CODE[err.code], details: serverFault ? INTERNAL_ERROR_MESSAGE : err.message, serverFault };
    if (retryAfter !== undefined) answer.metadata = { "retry-after": retryAfter };
    return answer;
  }
  return { code: GrpcStatus.INTERNAL, details: INTERNAL_ERROR_MESSAGE, serverFault: true };
}

export interface JsonRpcErrorAnswer {
  code: number;
  message: string;
  serverFault: boolean;
}

/** For the JSON-RPC transport (docs/protocol.md §9.5); parse / request / method errors are decided by that transport. */
export function toJsonRpcError(err: unknown): JsonRpcErrorAnswer {
  if (err instanceof AtsError) {
    const serverFault = err.code === "INTERNAL";
    return { code: JSON_RPC_BY_CODE[err.code], message: serverFault ? INTERNAL_ERROR_MESSAGE : err.message, serverFault };
  }
  return { code: -32603, message: INTERNAL_ERROR_MESSAGE, serverFault: true };
}

/** WebSocket close code for a server that cannot serve now (RFC 6455 "Try Again Later"): used on tamper. */
export const WS_CLOSE_TRY_AGAIN_LATER = 1013;
/** WebSocket close code for an unexpected server failure (RFC 6455 "Internal Error"). */
export const WS_CLOSE_INTERNAL_ERROR = 1011;
/** WebSocket close code for a client that keeps violating the message policy. */
export const WS_CLOSE_POLICY_VIOLATION = 1008;

/** The message of a `{"type":"error"}` WebSocket frame. */
export function toWsErrorMessage(err: unknown): { message: string; serverFault: boolean } {
  const answer = toHttpError(err);
  return { message: answer.message, serverFault: answer.serverFault };
}

// ------------------------------------------------------------------ the client side: answers back to errors

/** The error a client library raises for an HTTP error answer (wire/httpStatus.ts: a module without gRPC, for browsers). */
export { fromHttpStatus } from "./httpStatus";

/** The error a client library raises for a gRPC status (the inverse of toGrpcError). */
export function fromGrpcStatus(code: GrpcStatus, details: string): AtsError {
  const evidence = { grpcStatus: GrpcStatus[code] ?? String(code) };
  switch (code) {
    case GrpcStatus.INVALID_ARGUMENT:
      return new ValidationError("request", details, evidence);
    case GrpcStatus.UNAUTHENTICATED:
      return new AuthError(details, evidence);
    case GrpcStatus.NOT_FOUND:
      return new NotFoundError(details, evidence);
    case GrpcStatus.RESOURCE_EXHAUSTED:
      return new RateLimitError(evidence, { message: details });
    case GrpcStatus.UNAVAILABLE:
    case GrpcStatus.DEADLINE_EXCEEDED:
      return new UnavailableError(details, evidence);
    default:
      return new AtsError("INTERNAL", details, evidence);
  }
}
