/**
 * REST calls of the client library: one exchange per attempt with a timeout (AbortSignal.timeout), retried per
 * client/retry.ts; bodies parsed losslessly; error answers turned back into the error classes by
 * wire/errorMapping.ts. With a caller-given CA (`tls.ca`) the exchange goes through node:https, since the global
 * fetch takes no per-request CA.
 */
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Value } from "@sinclair/typebox/value";
import { LosslessNumber } from "lossless-json";
import { rootCauseMessage, UnavailableError, ValidationError } from "../protocol/errors";
import { parseJsonLossless, stringifyJsonLossless } from "../protocol/json";
import { API_KEY_HEADER } from "../wire/auth";
import { fromHttpStatus } from "../wire/errorMapping";
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
type HttpSend = (
  method: string,
  url: string,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal,
) => Promise<{ status: number; text: string }>;

const fetchSend: HttpSend = async (method, url, headers, body, signal) => {
  const init: RequestInit = { method, headers, signal };
  if (body !== undefined) init.body = body;
  const response = await fetch(url, init);
  return { status: response.status, text: await response.text() };
};

/**
 * node:https with the caller's CA in `agent` (the global fetch cannot take one per request). Rejects like fetch:
 * a timeout with the signal's reason (TimeoutError), a connection cut before the whole body with an error.
 */
function httpsSend(agent: HttpsAgent): HttpSend {
  return (method, url, headers, body, signal) =>
    new Promise((resolve, reject) => {
      const onError = (error: Error): void => reject(signal.aborted ? (signal.reason as Error) : error);
      const outgoing = httpsRequest(url, { method, headers, agent, signal }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        response.on("error", onError);
        response.on("close", () => {
          if (!response.complete) onError(new Error("connection closed before the whole response"));
        });
      });
      outgoing.on("error", onError);
      outgoing.end(body);
    });
}

export interface RestCallerOptions {
  /** REST base URL without a trailing slash. */
  base: string;
  apiKey: string | undefined;
  timeoutMs: number;
  retry: RetryPolicy;
  /** A CA to trust for an https:// base (node:https is used then). */
  ca: string | Buffer | undefined;
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

export function createRestCaller(options: RestCallerOptions): RestCaller {
  const { base, timeoutMs } = options;
  // Only a caller-given CA needs node:https; otherwise fetch (system roots for https://), as without TLS.
  const httpsAgent = options.ca !== undefined && base.startsWith("https:") ? new HttpsAgent({ ca: options.ca, keepAlive: true }) : undefined;
  const send = httpsAgent === undefined ? fetchSend : httpsSend(httpsAgent);

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
    close() {
      httpsAgent?.destroy();
    },
  };
}
