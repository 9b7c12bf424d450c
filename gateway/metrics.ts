/**
 * The temporal gateway's Prometheus metrics (GET /metrics on its port, open like the node's): JSON-RPC requests by
 * transport, method family and outcome, batch sizes, the chain's (upstream) answer times, open subscriptions and
 * WebSocket connections, and rate-limit refusals; prom-client's process metrics with the `ats_gateway_` prefix, as
 * the relayer's carry `ats_relayer_`. Names follow Prometheus's conventions (`promtool check metrics` passes them;
 * test-system/ops.test.ts runs it on a live gateway).
 *
 * Label values are bounded: a method's family is its namespace (`eth_…`, `net_…`, `web3_…`, `chain_…`,
 * `temporal_…`) or `other`, never the client's method text, so a client sending random method names cannot grow the
 * series without bound.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { collectProcessMetrics } from "../lib/metrics";

export type GatewayTransport = "http" | "ws";
export const METHOD_FAMILIES = ["eth", "net", "web3", "chain", "temporal", "other"] as const;
export type MethodFamily = (typeof METHOD_FAMILIES)[number];
/**
 * How a JSON-RPC item ended: answered (`ok`), answered with an error by the method or the chain (`error`), not a
 * valid request (`invalid`), over the client's rate (`rate_limited`), past its batch's time budget (`timed_out`),
 * or with an answer over maxResponseBytes (`too_large`).
 */
export type RequestOutcome = "ok" | "error" | "invalid" | "rate_limited" | "timed_out" | "too_large";
/** How a call to the chain ended: an answer, an error the chain answered, or no answer (unreachable, timed out). */
export type UpstreamOutcome = "ok" | "error" | "unavailable";

export function methodFamily(method: string | undefined): MethodFamily {
  const prefix = method?.slice(0, Math.max(0, method.indexOf("_")));
  return (METHOD_FAMILIES as readonly string[]).includes(prefix ?? "") && prefix !== "other" ? (prefix as MethodFamily) : "other";
}

/** Batch lengths: a single call is not a batch; viem sends up to 1,000 (rpcMaxBatchItems' default). */
const BATCH_ITEMS_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000];
/** Hardhat answers in ~1 ms; a busy or remote chain in tens to hundreds; UPSTREAM_TIMEOUT_MS is 10 s. */
const UPSTREAM_SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface GatewayGaugeSources {
  /** Open subscriptions by kind (newHeads, logs, finalizedHeads). */
  subscriptions: () => Readonly<Record<string, number>>;
  /** Open WebSocket connections. */
  connections: () => number;
}

export interface GatewayMetrics {
  readonly registry: Registry;
  countRequest(transport: GatewayTransport, method: string | undefined, outcome: RequestOutcome): void;
  /** A refusal for the client's rate: one item (-32005), or a body or WebSocket call refused whole (HTTP 429). */
  countRateLimited(transport: GatewayTransport): void;
  observeBatch(items: number): void;
  observeUpstream(seconds: number, outcome: UpstreamOutcome): void;
  /** Where the gauges read from (the WebSocket server, created after the metrics). */
  bindGauges(sources: GatewayGaugeSources): void;
}

export function createGatewayMetrics(): GatewayMetrics {
  const registry = new Registry();
  collectProcessMetrics(registry, "ats_gateway_");
  let sources: GatewayGaugeSources | undefined;
  const requests = new Counter({
    name: "ats_gateway_requests_total",
    help: "JSON-RPC items answered (or, for notifications, handled), by transport (http, ws), method family (eth, net, web3, chain, temporal, other) and outcome (ok, error, invalid, rate_limited, timed_out, too_large).",
    labelNames: ["transport", "family", "outcome"],
    registers: [registry],
  });
  const rateLimited = new Counter({
    name: "ats_gateway_rate_limited_total",
    help: "Refusals for the client's rate: each item answered -32005, and each body or WebSocket call refused whole, by transport.",
    labelNames: ["transport"],
    registers: [registry],
  });
  // At zero from the start, so that rate() and increase() see the first refusal and the first error.
  for (const transport of ["http", "ws"] as const) {
    rateLimited.inc({ transport }, 0);
    for (const outcome of ["ok", "error"] as const) requests.inc({ transport, family: "eth", outcome }, 0);
  }
  const batchItems = new Histogram({
    name: "ats_gateway_batch_items",
    help: "Items per JSON-RPC batch received over HTTP (a single call is not a batch).",
    buckets: BATCH_ITEMS_BUCKETS,
    registers: [registry],
  });
  const upstreamSeconds = new Histogram({
    name: "ats_gateway_upstream_duration_seconds",
    help: "Time the chain took to answer one forwarded call (once its turn among the calls in flight came), by outcome (ok, error, unavailable).",
    labelNames: ["outcome"],
    buckets: UPSTREAM_SECONDS_BUCKETS,
    registers: [registry],
  });
  new Gauge({
    name: "ats_gateway_subscriptions",
    help: "Open WebSocket subscriptions by kind (newHeads, logs, finalizedHeads).",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, count] of Object.entries(sources?.subscriptions() ?? {})) this.set({ kind }, count);
    },
  });
  new Gauge({
    name: "ats_gateway_websocket_connections",
    help: "Open WebSocket connections.",
    registers: [registry],
    collect() {
      this.set(sources?.connections() ?? 0);
    },
  });
  return {
    registry,
    countRequest: (transport, method, outcome) => requests.inc({ transport, family: methodFamily(method), outcome }),
    countRateLimited: (transport) => rateLimited.inc({ transport }),
    observeBatch: (items) => batchItems.observe(items),
    observeUpstream: (seconds, outcome) => upstreamSeconds.observe({ outcome }, seconds),
    bindGauges(bound) {
      sources = bound;
    },
  };
}
