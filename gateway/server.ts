/**
 * The temporal JSON-RPC gateway of a node (docs/protocol.md §9.5): HTTP POST (and WebSocket, ./ws.ts) on its own port in front of an EVM
 * chain, with the framing of ./jsonrpc.ts, the methods of ./methods.ts, the store of ./store.ts and the block
 * follower of ./observer.ts. Limits, published by `temporal_getLimits`: body size (HTTP 413 beyond it), batch
 * length (a longer batch is refused whole), response size (an item over it gets its own error, and a batch's
 * answer as a whole stays within it), requests per second per client address (every item counts, invalid ones
 * too, and a body refused whole; each item over it gets -32005, and a client already over it gets HTTP 429 before
 * its body is parsed), connections. Bad input never crashes it and never earns a stack trace.
 */
import { setMaxListeners } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { stringify } from "lossless-json";
import type { Logger } from "pino";
import { createCorsPolicy } from "../lib/cors";
import { RateLimiter } from "../lib/rateLimit";
import { toJsonRpcError } from "../wire/errorMapping";
import { errorResponse, JSON_RPC_ERRORS, JsonRpcError, parseBody, serializeBatch, type JsonRpcResponse, type ParsedItem } from "./jsonrpc";
import { resolveMethod, type MethodContext, type PublishedLimits, type TemporalTimeSource } from "./methods";
import { createGatewayMetrics, type GatewayMetrics, type GatewayTransport, type RequestOutcome } from "./metrics";
import { BlockObserver } from "./observer";
import { TemporalStore } from "./store";
import { httpUpstream } from "./upstream";
import { attachGatewaySockets } from "./ws";

export interface TemporalGatewayOptions {
  host: string;
  port: number;
  /** Listen backlog (connections the kernel queues until they are accepted); Node's default (511) when absent. */
  backlog?: number;
  upstreamUrl: string;
  dataDir: string;
  time: TemporalTimeSource;
  limits: PublishedLimits;
  confirmations: number;
  chainName: string;
  legacyNumbers: boolean;
  /** How often the chain is polled for new blocks, ms. */
  pollIntervalMs: number;
  /**
   * Web origins whose pages may call the gateway over HTTP (CORS, lib/cors.ts; e.g. the time explorer's): every
   * answer carries their headers, and a preflight (OPTIONS) admits a JSON POST. Empty or absent: none.
   */
  corsAllowedOrigins?: readonly string[];
  logger: Logger;
}

export interface RunningGateway {
  readonly url: string;
  /** Its Prometheus metrics, served at GET <url>/metrics (./metrics.ts). */
  readonly metrics: GatewayMetrics;
  readonly store: TemporalStore;
  readonly observer: BlockObserver;
  /** Open WebSocket subscriptions of every kind. */
  subscriptionCount(): number;
  close(): Promise<void>;
}

/** Where the gateway serves its metrics (GET, open like the node's /metrics; every other request is JSON-RPC). */
export const METRICS_PATH = "/metrics";

/** The body's bytes, undecoded: parseBody refuses invalid UTF-8 rather than reading it as U+FFFD. */
function readBody(request: IncomingMessage, maxBytes: number): Promise<Buffer | "too-large"> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        request.removeAllListeners("data");
        request.resume(); // drain the rest, answer 413
        resolve("too-large");
        return;
      }
      chunks.push(chunk);
    });
    request.on("end", () => resolve(Buffer.concat(chunks)));
    request.on("error", reject);
  });
}

/** An answer and its JSON text, serialized once. */
export interface AnsweredItem {
  id: JsonRpcResponse["id"];
  json: string;
}

function serialized(response: JsonRpcResponse): AnsweredItem {
  return { id: response.id, json: stringify(response)! };
}

export async function startTemporalGateway(options: TemporalGatewayOptions): Promise<RunningGateway> {
  const { limits, logger } = options;
  const store = new TemporalStore(options.dataDir);
  const metrics = createGatewayMetrics();
  const upstream = httpUpstream(options.upstreamUrl, metrics.observeUpstream);
  const observer = new BlockObserver(upstream, store, () => options.time.consensusNowNs(), logger);
  const rateLimiter = new RateLimiter({ ratePerSecond: limits.requestsPerSecondPerClient });
  // A JSON-RPC call is a POST with content-type application/json: a browser preflights it, asking for that header.
  const cors = createCorsPolicy(options.corsAllowedOrigins ?? [], { methods: "POST", allowHeaders: "content-type" });
  const rateLimitedMessage = `at most ${limits.requestsPerSecondPerClient} requests per second per client`;
  const context: MethodContext = {
    store,
    upstream,
    time: options.time,
    limits,
    confirmations: options.confirmations,
    chainName: options.chainName,
    legacyNumbers: options.legacyNumbers,
  };

  /** The methods' context for the items of one batch: their upstream calls end when the batch's budget does. */
  function withinBudget(signal: AbortSignal): MethodContext {
    return { ...context, upstream: { call: (method, params) => upstream.call(method, params, signal) } };
  }

  /**
   * A batch's answers, each item's within the batch's time budget (maxBatchMs, as geth bounds a batch by its
   * write timeout): an item still unanswered when it runs out gets -32002 "Request timed out" with its id, and its
   * upstream call, waiting or running, is abandoned. The others keep theirs: one slow item costs no other.
   */
  async function answerBatch(items: readonly ParsedItem[], clientKey: string): Promise<AnsweredItem[]> {
    metrics.observeBatch(items.length);
    const budget = new AbortController();
    // One listener per item waiting on it (its upstream call), and one for the race below: not a leak.
    setMaxListeners(items.length + 1, budget.signal);
    const timedOut = new Promise<"timed-out">((resolve) => {
      budget.signal.addEventListener("abort", () => resolve("timed-out"), { once: true });
    });
    const timer = setTimeout(() => budget.abort(new DOMException("the batch's time budget ran out", "TimeoutError")), limits.maxBatchMs);
    const ctx = withinBudget(budget.signal);
    try {
      const answers = await Promise.all(
        items.map(async (item) => {
          const outcome = await Promise.race([answer(item, clientKey, "http", ctx, budget.signal), timedOut]);
          if (outcome !== "timed-out") return outcome;
          // Counted here, not by answer(), which counts nothing once the budget has run out.
          metrics.countRequest("http", item.ok ? item.call.method : undefined, "timed_out");
          if (item.ok && item.call.id === undefined) return null; // a notification gets no answer, late or not
          const id = item.ok ? (item.call.id ?? null) : item.response.id;
          return serialized(errorResponse(id, JSON_RPC_ERRORS.REQUEST_TIMED_OUT, "Request timed out", `the batch's answer is due within ${limits.maxBatchMs} ms; split the batch`));
        }),
      );
      return answers.filter((a): a is AnsweredItem => a !== null);
    } finally {
      clearTimeout(timer);
      budget.abort(); // a late item's upstream call, if any is still waiting for its turn, never starts
    }
  }

  /**
   * One item's answer as JSON text (null for a notification), within maxResponseBytes; counted in the metrics by
   * how it ended, unless `budget` (its batch's) ran out first: the batch then answers, and counts, the item.
   */
  async function answer(item: ParsedItem, clientKey: string, transport: GatewayTransport, ctx: MethodContext = context, budget?: AbortSignal): Promise<AnsweredItem | null> {
    const method = item.ok ? item.call.method : undefined;
    const count = (outcome: RequestOutcome) => {
      if (budget?.aborted !== true) metrics.countRequest(transport, method, outcome);
    };
    // Every item takes a token, an invalid one too: refusing costs the gateway work as well.
    const allowed = rateLimiter.tryTake(clientKey);
    const id = item.ok ? (item.call.id ?? null) : item.response.id;
    const notification = item.ok && item.call.id === undefined;
    if (!allowed) {
      count("rate_limited");
      metrics.countRateLimited(transport);
      return notification ? null : serialized(errorResponse(id, JSON_RPC_ERRORS.RATE_LIMITED, "Rate limit exceeded", rateLimitedMessage));
    }
    if (!item.ok) {
      count("invalid");
      return serialized(item.response);
    }
    const { call } = item;
    let response: JsonRpcResponse;
    try {
      const result = await resolveMethod(call.method)(call.params, ctx);
      response = { jsonrpc: "2.0", id, result };
    } catch (error) {
      if (error instanceof JsonRpcError) {
        response = errorResponse(id, error.code, error.message, error.data);
      } else {
        // The node's own errors map through the one table every transport uses (wire/errorMapping.ts).
        const mapped = toJsonRpcError(error);
        if (mapped.serverFault) logger.warn({ method: call.method, err: (error as Error).message }, "temporal gateway: internal error");
        response = errorResponse(id, mapped.code, mapped.message);
      }
    }
    const tooLarge = (answered: AnsweredItem) => Buffer.byteLength(answered.json) > limits.maxResponseBytes;
    if (notification) {
      count("error" in response ? "error" : "ok");
      return null;
    }
    // Errors too: an upstream error's data is the chain's, of any size.
    const answered = serialized(response);
    count(tooLarge(answered) ? "too_large" : "error" in response ? "error" : "ok");
    if (tooLarge(answered)) {
      return serialized(errorResponse(id, JSON_RPC_ERRORS.RESPONSE_TOO_LARGE, "Response too large", `more than ${limits.maxResponseBytes} bytes; narrow the request`));
    }
    return answered;
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const sendJson = (status: number, json: string): void => {
      response.writeHead(status, { "content-type": "application/json" }).end(json);
    };
    const send = (status: number, body: unknown) => sendJson(status, body === null ? "" : stringify(body)!);
    const clientKey = request.socket.remoteAddress ?? "unknown";
    // Before the CORS headers: a page reads the JSON-RPC, never the metrics. A scrape takes a token like a call.
    if (request.method === "GET" && (request.url ?? "").split("?")[0] === METRICS_PATH) {
      if (!rateLimiter.tryTake(clientKey)) {
        metrics.countRateLimited("http");
        return send(429, errorResponse(null, JSON_RPC_ERRORS.RATE_LIMITED, "Rate limit exceeded", rateLimitedMessage));
      }
      const text = await metrics.registry.metrics();
      response.writeHead(200, { "content-type": metrics.registry.contentType }).end(text);
      return;
    }
    // On every answer, errors and 429s too: a page must be able to read why it was refused.
    for (const [name, value] of Object.entries(cors.answerHeaders(request.headers.origin))) response.setHeader(name, value);
    if (request.method === "OPTIONS" && cors.enabled) {
      response.writeHead(204, cors.preflightHeaders(request.headers.origin)).end();
      return;
    }
    if (request.method !== "POST") {
      send(405, errorResponse(null, JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", `JSON-RPC is served over POST (and the metrics at GET ${METRICS_PATH})`));
      return;
    }
    const body = await readBody(request, limits.maxBodyBytes);
    if (body === "too-large") {
      send(413, errorResponse(null, JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", `the body is larger than ${limits.maxBodyBytes} bytes`));
      return;
    }
    // A client over its rate is refused before its body is parsed: parsing is the work a flood would buy.
    const retryAfterMs = rateLimiter.msUntilNextToken(clientKey);
    if (retryAfterMs > 0) {
      metrics.countRateLimited("http");
      response.setHeader("retry-after", String(Math.ceil(retryAfterMs / 1000)));
      return send(429, errorResponse(null, JSON_RPC_ERRORS.RATE_LIMITED, "Rate limit exceeded", rateLimitedMessage));
    }
    const parsed = parseBody(body, limits.maxBatchItems);
    if (parsed.kind === "error") {
      rateLimiter.tryTake(clientKey); // a body refused whole cost the gateway work too
      metrics.countRequest("http", undefined, "invalid");
      return send(200, parsed.response);
    }
    if (parsed.kind === "single") {
      const single = await answer(parsed.item, clientKey, "http");
      return single === null ? send(204, null) : sendJson(200, single.json);
    }
    const answers = await answerBatch(parsed.items, clientKey);
    return answers.length === 0 ? send(204, null) : sendJson(200, serializeBatch(answers, limits.maxResponseBytes));
  }

  const server: Server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      logger.warn({ err: (error as Error).message }, "temporal gateway: request failed");
      if (!response.headersSent) response.writeHead(500, { "content-type": "application/json" }).end(stringify(errorResponse(null, JSON_RPC_ERRORS.INTERNAL_ERROR, "Internal error")));
      else response.destroy();
    });
  });
  const sockets = attachGatewaySockets({
    server,
    store,
    upstream,
    confirmations: options.confirmations,
    maxPayloadBytes: limits.maxBodyBytes,
    maxConnections: limits.maxConnections,
    answer: (item, clientKey) => answer(item, clientKey, "ws"),
    allow: (clientKey) => rateLimiter.tryTake(clientKey),
    rateLimitedMessage,
    metrics,
    admitsOrigin: (origin) => cors.allows(origin),
  });
  metrics.bindGauges({ subscriptions: () => sockets.subscriptionsByKind(), connections: () => sockets.connectionCount() });
  server.maxConnections = limits.maxConnections;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: options.port, host: options.host, ...(options.backlog === undefined ? {} : { backlog: options.backlog }) }, () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let ticking: Promise<void> = Promise.resolve();
  let lastObserverError = 0;
  const tick = () => {
    ticking = observer.tick().then(() => sockets.pump()).catch((error: unknown) => {
      if (Date.now() - lastObserverError > 10_000) logger.warn({ err: (error as Error).message }, "temporal gateway: following the chain failed; retried");
      lastObserverError = Date.now();
    });
    void ticking.then(() => {
      if (!stopped) timer = setTimeout(tick, options.pollIntervalMs);
    });
  };
  tick();

  return {
    url: `http://${options.host.includes(":") ? `[${options.host}]` : options.host}:${port}`,
    metrics,
    store,
    observer,
    subscriptionCount: () => sockets.subscriptionCount(),
    async close() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      await ticking;
      sockets.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections(); // a keep-alive client would otherwise hold close() until its timeout
      await closed;
      store.close();
    },
  };
}
