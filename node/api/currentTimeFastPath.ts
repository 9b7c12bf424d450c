/**
 * The node's hottest read, `GET /time/current`, answered straight on node:http in front of fastify.
 *
 * Why: the answer is a pre-serialised body (the attestor builds it once per proof), so a request needs only
 * admission (API key, rate limit), the cached proof and a write. Fastify's router, hooks, request/reply objects
 * and per-request child logger cost about as much again as that (measured on one core, wrk, constant body of the
 * same size: bare node:http ~22k req/s, bare fastify ~16.7k). Every other request, and every variant of this one
 * (HEAD, a query string, a trailing slash, a server that is closing), goes to fastify's route, which stays the
 * declared, schema-checked definition of the endpoint; a test pins both paths to the same status, headers and
 * bytes for success and every error.
 *
 * Detail: docs/protocol.md §9.2.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { FastifyBaseLogger } from "fastify";
import { API_KEY_HEADER } from "../../wire/auth";
import { admitClient, type TransportContext } from "./context";
import type { SignedTime } from "../core/types";
import { toHttpError, type HttpErrorAnswer } from "../../wire/errorMapping";

/*
 * What the fast path does is what the route and its hooks do: admitClient (auth + rate limit, same token bucket),
 * service.current(), the same headers and body, errors through toHttpError with the error handler's body and log
 * levels, the same CORS headers (cors.ts), and the same metrics (requests by route and status, served proofs and
 * their age).
 */
export const CURRENT_TIME_PATH = "/time/current";
export const JSON_CONTENT_TYPE = "application/json; charset=utf-8";
/** A proof is a reading of the clock: no cache may keep it. */
export const CURRENT_TIME_HEADERS = { "content-type": JSON_CONTENT_TYPE, "cache-control": "no-store" } as const;

/** The JSON body of every REST error (fastify's error handler and the fast path). */
export function errorBody(answer: HttpErrorAnswer): { statusCode: number; error: string; message: string } {
  return { statusCode: answer.statusCode, error: answer.error, message: answer.message };
}

/**
 * What follows a refused or failed REST request (the error handler and the fast path alike). The log: a server
 * fault at error level with its stack, every one (ours to fix); a client error sampled and without stack
 * (sampledLog.ts), so a flood of refusals cannot turn into a flood of log. And a 429 (client over its rate) tells
 * the connection guard, which then stops reading that connection for a while (connectionGuard.ts refused()).
 */
export function reportRequestError(
  context: Pick<TransportContext, "clientErrorLog" | "connections">,
  log: FastifyBaseLogger,
  error: unknown,
  url: string,
  answer: HttpErrorAnswer,
  response: ServerResponse,
): void {
  if (answer.serverFault) log.error({ err: error, url }, "request failed");
  else context.clientErrorLog.clientError({ transport: "rest", status: String(answer.statusCode), route: url, error });
  if (answer.statusCode === 429) context.connections.refused(response);
}

export interface CurrentTimeFastPath {
  /** Answers the request and returns true when it is exactly `GET /time/current`; false leaves it to fastify. */
  tryServe(request: IncomingMessage, response: ServerResponse): boolean;
  /** From now on every request goes to fastify (which answers 503 while closing). */
  stop(): void;
}

export function createCurrentTimeFastPath(context: TransportContext, log: FastifyBaseLogger): CurrentTimeFastPath {
  const { service, metrics, auth, rateLimiter, cors } = context;
  const guarded = auth.required || rateLimiter.enabled;
  // The route's CORS headers (cors.ts), which depend on the request's Origin: merged per request, and only when on.
  const corsCovered = cors.coversCurrentTime(auth.required);
  let serving = true;
  // Looked up once: almost every answer of this path is a 200.
  const servedTally = metrics.requestTally("rest", CURRENT_TIME_PATH, "200");

  // The route sets cache-control on its 200 only; errors carry just the JSON content type, as fastify sends them.
  const answer = (
    request: IncomingMessage,
    response: ServerResponse,
    statusCode: number,
    headers: Record<string, string | number>,
    body: string | Buffer,
  ): void => {
    response.writeHead(statusCode, corsCovered ? { ...headers, ...cors.answerHeaders(request.headers.origin) } : headers);
    response.end(body);
    if (statusCode === 200) servedTally.add();
    else metrics.countRequest("rest", CURRENT_TIME_PATH, String(statusCode));
  };
  // A proof is served thousands of times: its bytes and headers are made once, when it first goes out.
  let cached: { signed: SignedTime; body: Buffer; headers: Record<string, string | number> } | null = null;
  const encoded = (signed: SignedTime) => {
    if (cached === null || cached.signed !== signed) {
      const body = Buffer.from(signed.body, "utf8");
      cached = { signed, body, headers: { ...CURRENT_TIME_HEADERS, "content-length": body.length } };
    }
    return cached;
  };

  return {
    tryServe(request, response) {
      if (!serving || request.method !== "GET" || request.url !== CURRENT_TIME_PATH) return false;
      let signed: SignedTime;
      try {
        if (guarded) {
          const header = request.headers[API_KEY_HEADER];
          admitClient(context, typeof header === "string" ? header : undefined, request.socket.remoteAddress);
        }
        signed = service.current();
      } catch (error) {
        const mapped = toHttpError(error);
        reportRequestError(context, log, error, CURRENT_TIME_PATH, mapped, response);
        const body = JSON.stringify(errorBody(mapped));
        answer(request, response, mapped.statusCode, { "content-type": JSON_CONTENT_TYPE, "content-length": Buffer.byteLength(body), ...mapped.headers }, body);
        return true;
      }
      metrics.countServedProof("rest", signed);
      const { body, headers } = encoded(signed);
      answer(request, response, 200, headers, body);
      return true;
    },
    stop() {
      serving = false;
    },
  };
}
