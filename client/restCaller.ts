/**
 * REST calls of the client library, browser-safe (no Node built-in, no Node-only package): one exchange per attempt
 * over an `HttpSend` with a timeout (AbortSignal.timeout), retried per client/retry.ts; bodies parsed losslessly;
 * error answers turned back into the error classes by wire/httpStatus.ts. The Node client (client/rest.ts) adds
 * an exchange over node:https for a caller-given CA; the browser client (client/browser.ts) uses fetch only.
 */
import { Value } from "@sinclair/typebox/value";
import { LosslessNumber } from "lossless-json";
import { rootCauseMessage, UnavailableError, ValidationError } from "../protocol/errors";
import { parseJsonLossless, stringifyJsonLossless } from "../protocol/json";
import { API_KEY_HEADER } from "../wire/auth";
import { fromHttpStatus } from "../wire/httpStatus";
import { NodeInfoBody } from "../wire/rest";
import { isRefusedBeforeAnyEffect, isRetryable, withRetries, type RetryPolicy } from "./retry";

/** Per-attempt timeout when the caller sets none, ms. */
export const DEFAULT_TIMEOUT_MS = 5_000;

/** The REST base of an endpoint URL: without trailing slashes, so that paths append as `${base}/time/current`. */
export function restBaseOf(endpoint: string): string {
  return endpoint.replace(/\/+$/, "");
}

/**
 * A GET /node/info body checked against its schema (wire/rest.ts NodeInfoBody); ValidationError "nodeInfo.<field>"
 * otherwise. Its fractional numbers (`currentLoad`, `maxRequestsPerSecond`) come out of the lossless parse as
 * LosslessNumber, which the schema and the caller want as plain numbers: none of them needs more than a double.
 */
export function nodeInfoFromJson(json: unknown): NodeInfoBody {
  const body =
    typeof json === "object" && json !== null && !Array.isArray(json)
      ? Object.fromEntries(Object.entries(json).map(([key, value]) => [key, value instanceof LosslessNumber ? Number(value.toString()) : value]))
      : json;
  const problem = Value.Errors(NodeInfoBody, body).First();
  if (problem !== undefined) throw new ValidationError(`nodeInfo${problem.path.replaceAll("/", ".")}`, problem.message, {});
  return body as NodeInfoBody;
}

/** One HTTP exchange: status and body text. Network failures and timeouts reject. */
export type HttpSend = (
  method: string,
  url: string,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal,
) => Promise<{ status: number; text: string }>;

/** The fetch function an exchange goes through: the global one, or one the caller injects (tests, polyfills). */
export type FetchFunction = (url: string, init: RequestInit) => Promise<Response>;

/** An exchange over `fetchFunction` (looked up at call time when omitted, so a later polyfill is seen). */
export function fetchSend(fetchFunction?: FetchFunction): HttpSend {
  return async (method, url, headers, body, signal) => {
    const init: RequestInit = { method, headers, signal };
    if (body !== undefined) init.body = body;
    const response = await (fetchFunction ?? fetch)(url, init);
    return { status: response.status, text: await response.text() };
  };
}

export interface RestCallerOptions {
  /** REST base URL without a trailing slash. */
  base: string;
  apiKey: string | undefined;
  timeoutMs: number;
  retry: RetryPolicy;
}

export interface RestCaller {
  /**
   * One API call with timeouts and backoff. A non-idempotent call (creating a schedule) is retried only after a
   * 429, which the node answers before doing anything: after a timeout or a 5xx the schedule may exist already,
   * and a second POST would create a second one (delivered twice, under another id).
   */
  request(method: "GET" | "POST", path: string, body?: unknown, idempotent?: boolean): Promise<{ status: number; value: unknown }>;
  close(): void;
}

/** A RestCaller whose exchanges go through `send`; `close` releases what `send` holds (nothing for fetch). */
export function createRestCallerOver(send: HttpSend, options: RestCallerOptions, close: () => void = () => undefined): RestCaller {
  const { base, timeoutMs } = options;

  async function attempt(method: string, path: string, payload: string | undefined): Promise<{ status: number; value: unknown }> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (options.apiKey !== undefined) headers[API_KEY_HEADER] = options.apiKey;
    if (payload !== undefined) headers["content-type"] = "application/json";
    let status: number;
    let text: string;
    try {
      ({ status, text } = await send(method, `${base}${path}`, headers, payload, AbortSignal.timeout(timeoutMs)));
    } catch (cause) {
      // Network failures and timeouts become UnavailableError (retryable), with the cause attached. The message
      // names the deepest cause (fetch's own error is a bare "TypeError: fetch failed").
      const reason = cause instanceof Error && cause.name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : rootCauseMessage(cause);
      throw new UnavailableError(`${method} ${path} failed: ${reason}`, { path }, { cause });
    }
    let value: unknown = null;
    if (text.length > 0) {
      try {
        value = parseJsonLossless(text);
      } catch {
        value = null;
      }
    }
    if (status < 200 || status > 299) {
      const message =
        typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string"
          ? (value as { message: string }).message
          : `HTTP ${status}`;
      throw fromHttpStatus(status, message);
    }
    return { status, value };
  }

  return {
    request(method, path, body, idempotent = true) {
      const payload = body === undefined ? undefined : stringifyJsonLossless(body);
      return withRetries(options.retry, () => attempt(method, path, payload), idempotent ? isRetryable : isRefusedBeforeAnyEffect);
    },
    close,
  };
}
