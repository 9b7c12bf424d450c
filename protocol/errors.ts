/**
 * The one error hierarchy of the package. Every error carries a stable `code` and structured `details`
 * (the evidence: field names, lengths, values). The transports (node/) translate `code` to an HTTP status,
 * a JSON-RPC code or a gRPC status at their edge; nothing inside the package matches on message text.
 */

export type AtsErrorCode =
  | "PROTOCOL"
  | "VALIDATION"
  | "NOT_FOUND"
  | "AUTH"
  | "RATE_LIMIT"
  | "UNAVAILABLE"
  | "CONSENSUS"
  | "INTERNAL";

/** Evidence attached to an error. Values must be safe to log: never put key material here. */
export type AtsErrorDetails = Readonly<Record<string, unknown>>;

export interface AtsErrorOptions {
  cause?: unknown;
}

export class AtsError extends Error {
  override name = "AtsError";
  readonly code: AtsErrorCode;
  readonly details: AtsErrorDetails;

  constructor(code: AtsErrorCode, message: string, details: AtsErrorDetails = {}, options: AtsErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = details;
  }

  /**
   * Walks the `cause` chain (as viem's `BaseError.walk`): returns the first error for which `predicate` holds,
   * or, without a predicate, the deepest cause. Returns `undefined` when the predicate matches nothing.
   */
  walk(predicate?: (error: unknown) => boolean): unknown {
    return walk(this, predicate);
  }
}

/**
 * Walks the `cause` chain of any error (as viem's `BaseError.walk`): the first error, `error` included, for which
 * `predicate` holds (`undefined` when none does), or, without a predicate, the deepest cause. Cycles end the walk.
 */
export function walk(error: unknown, predicate?: (error: unknown) => boolean): unknown {
  let current: unknown = error;
  let deepest: unknown = error;
  const seen = new Set<unknown>();
  while (current !== undefined && current !== null && !seen.has(current)) {
    seen.add(current);
    if (predicate?.(current)) return current;
    deepest = current;
    current = current instanceof Error ? current.cause : undefined;
  }
  return predicate ? undefined : deepest;
}

/**
 * The message of the deepest cause of `error`: what actually went wrong (e.g. "connect ECONNREFUSED 127.0.0.1:80"
 * under fetch's "fetch failed"). An AggregateError without a message (a connection tried on several addresses)
 * gives its errors' messages, joined by "; ".
 */
export function rootCauseMessage(error: unknown): string {
  const root = walk(error);
  if (root instanceof AggregateError && root.message === "" && root.errors.length > 0) {
    return root.errors.map((item: unknown) => rootCauseMessage(item)).join("; ");
  }
  if (root instanceof Error) return root.message === "" ? root.name : root.message;
  return String(root);
}

/** Malformed bytes or values of the wire format (wrong length, out of range, bad encoding). */
export class ProtocolError extends AtsError {
  override name = "ProtocolError";
  constructor(message: string, details: AtsErrorDetails = {}, options: AtsErrorOptions = {}) {
    super("PROTOCOL", message, details, options);
  }
}

/** Untrusted input (JSON, request parameters, configuration) that does not match its schema. */
export class ValidationError extends AtsError {
  override name = "ValidationError";
  /** The offending field as a dotted path, e.g. `proof.accuracyNs`. */
  readonly field: string;
  constructor(field: string, message: string, details: AtsErrorDetails = {}, options: AtsErrorOptions = {}) {
    super("VALIDATION", `${field}: ${message}`, { field, ...details }, options);
    this.field = field;
  }
}

export class NotFoundError extends AtsError {
  override name = "NotFoundError";
  constructor(message: string, details: AtsErrorDetails = {}, options: AtsErrorOptions = {}) {
    super("NOT_FOUND", message, details, options);
  }
}

export class AuthError extends AtsError {
  override name = "AuthError";
  constructor(message: string, details: AtsErrorDetails = {}, options: AtsErrorOptions = {}) {
    super("AUTH", message, details, options);
  }
}

export interface RateLimitErrorOptions extends AtsErrorOptions {
  /** For a quota that is not the request rate (e.g. pending schedules per client): says which one. */
  message?: string;
}

/**
 * A client over one of its limits (429 / RESOURCE_EXHAUSTED). The request rate's refusal carries the fixed
 * MESSAGE (docs/protocol.md §11.3), the default; other per-client quotas name themselves.
 */
export class RateLimitError extends AtsError {
  override name = "RateLimitError";
  static readonly MESSAGE = "Rate limit exceeded";
  constructor(details: AtsErrorDetails = {}, options: RateLimitErrorOptions = {}) {
    const { message = RateLimitError.MESSAGE, ...rest } = options;
    super("RATE_LIMIT", message, details, rest);
  }
}

/** The service cannot answer truthfully right now (e.g. the time card reports tampering). */
export class UnavailableError extends AtsError {
  override name = "UnavailableError";
  constructor(message: string, details: AtsErrorDetails = {}, options: AtsErrorOptions = {}) {
    super("UNAVAILABLE", message, details, options);
  }
}

/** Messages fixed by docs/protocol.md §7. */
export type ConsensusErrorMessage = "Insufficient node responses" | "Time divergence too high";

export class ConsensusError extends AtsError {
  override name = "ConsensusError";
  static readonly INSUFFICIENT_RESPONSES: ConsensusErrorMessage = "Insufficient node responses";
  static readonly DIVERGENCE_TOO_HIGH: ConsensusErrorMessage = "Time divergence too high";
  constructor(message: ConsensusErrorMessage, details: AtsErrorDetails = {}, options: AtsErrorOptions = {}) {
    super("CONSENSUS", message, details, options);
  }
}
