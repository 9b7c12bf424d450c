/**
 * The client library for web pages: `createBrowserTimeClient({ endpoint })`. Runs in a browser as it is: REST over
 * `fetch`, the stream over the WebSocket API, and nothing that needs Node (no Node built-in, no Node-only package
 * anywhere in its imports; test/client/browserImports.test.ts walks them). Both can be injected (`fetch`,
 * `WebSocket`): tests on Node 20, which has no global WebSocket, pass the `ws` package's.
 *
 * - `getCurrentTime()`, `info()`, `verifyRemote(proof)`, `stream({ intervalNs, onUpdate })`: the same calls,
 *   timeouts, retries (network errors, timeouts, 429 and 5xx; never other 4xx), lossless and strict parsing
 *   (protocol/json.ts) and error classes as the Node client (client/index.ts), from the same modules.
 * - `contractProofFromJson(json)`: a proof's REST JSON as the contracts' `TimeProof` struct, for viem.
 *
 * Detail: docs/client.md "From a browser".
 */
import { createRestCallerOver, DEFAULT_TIMEOUT_MS, fetchSend, restBaseOf, type FetchFunction } from "./restCaller";
import { createRestReads, type RestReads } from "./restApi";
import { retryPolicyOf, type RetryOptions } from "./retry";
import { openBrowserStream, webSocketConstructorOf, type WebSocketConstructor } from "./browserStream";
import { streamUrlOf } from "./streamSession";
import type { StreamOptions, TimeStream } from "./types";

/*
 * What a page cannot do, it does not offer: no API key (a key shipped to browsers is no secret, and a browser cannot
 * put one on the WebSocket upgrade), no schedules (they need a key), no gRPC, no local verification (it needs
 * node:crypto; `verifyRemote` asks the node). Cross-origin, the page's origin must be listed in the node's
 * `corsAllowedOrigins` (docs/protocol.md §9.2): the node answers CORS on its public GET routes only, so
 * `verifyRemote` (a POST) works from the node's own origin or through the page's own server.
 */
export { contractProofFromJson } from "./contractProof";
export { AtsError, AuthError, NotFoundError, RateLimitError, UnavailableError, ValidationError, walk } from "../protocol/errors";
export type { Hex, ProofJson, TimeProof } from "../protocol/types";
export type { NodeInfoBody } from "../wire/rest";
export type { FetchedProof, StreamOptions, StreamUpdate, TimeStream, VerifyResult } from "./types";
export type { BrowserSocketEvent, BrowserWebSocket, WebSocketConstructor } from "./browserStream";
export type { FetchFunction } from "./restCaller";

export interface BrowserTimeClientOptions extends RetryOptions {
  /** REST base URL of the node, e.g. "https://time.example.org". */
  endpoint: string;
  /** WebSocket URL; defaults to the endpoint with ws(s):// and path /v1/stream. */
  wsEndpoint?: string;
  /** Per-attempt timeout, and the wait for a stream's acknowledgement (default 5,000 ms). */
  timeoutMs?: number;
  /** Default: the global fetch, looked up at each call. */
  fetch?: FetchFunction;
  /** Default: the global WebSocket, looked up when a stream opens (Node 20 has none: pass the `ws` package's). */
  WebSocket?: WebSocketConstructor;
}

export interface BrowserTimeClient extends RestReads {
  /** A `/v1/stream` subscription; resolves once the node acknowledged it. */
  stream(options: StreamOptions): Promise<TimeStream>;
}

export function createBrowserTimeClient(options: BrowserTimeClientOptions): BrowserTimeClient {
  const base = restBaseOf(options.endpoint);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const rest = createRestCallerOver(fetchSend(options.fetch), { base, apiKey: undefined, timeoutMs, retry: retryPolicyOf(options) });
  const wsEndpoint = options.wsEndpoint ?? streamUrlOf(base);
  return {
    ...createRestReads(rest),
    // async: a missing WebSocket rejects like every other failure of stream(), rather than throwing.
    stream: async (streamOptions) => openBrowserStream(webSocketConstructorOf(options.WebSocket), { wsEndpoint, timeoutMs }, streamOptions),
  };
}
