/**
 * JSON-RPC over WebSocket on the gateway's port (docs/protocol.md §9.5): the same methods as over HTTP, and
 * subscriptions to the chain's final blocks (./finality.ts: `confirmations` deep in the chain the gateway records).
 *
 * Detail: docs/gateway.md "Subscriptions (WebSocket)".
 */
import { randomBytes } from "node:crypto";
import type { Server } from "node:http";
import { stringify } from "lossless-json";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { originRefusal, upgradeOrigin } from "../lib/cors";
import { finalizedNumber } from "./finality";
import { errorResponse, JSON_RPC_ERRORS, JsonRpcError, parseBody, type JsonRpcCall, type ParsedItem } from "./jsonrpc";
import { blockNumberParam, SUBSCRIPTION_METHODS, type Upstream } from "./methods";
import type { GatewayMetrics } from "./metrics";
import type { BlockRecord, TemporalStore } from "./store";
import { FinalBlockFeed, logMatches, parseEthSubscribe, type LogFilter } from "./subscriptions";

/*
 * Methods:
 *
 *   eth_subscribe(["newHeads"])                → a subscription id; then `eth_subscription` notifications
 *                                                 { subscription, result: <block header, as geth sends it> }, one
 *                                                 per final block, in order, from the next final block on
 *   eth_subscribe(["logs", { address?, topics? }]) → the same, one notification per matching log of each final
 *                                                 block, in block and log order (filters: ./subscriptions.ts)
 *   eth_unsubscribe([id])                      → true; an id this connection does not hold: -32000 "subscription
 *                                                 not found", as geth
 *   chain_subscribeFinalizedHeads([cursor?])   → a subscription id; then `chain_finalizedHead` notifications
 *                                                 { subscription, result: { number, hash, parentHash } }, one per
 *                                                 final block in order, from cursor + 1 (a reconnecting client
 *                                                 passes the last number it got: no gap, no repeat), or from the
 *                                                 next final block without a cursor
 *   chain_unsubscribeFinalizedHeads([id])      → true, or false for an id it does not hold
 *
 * `newHeads` follows the finalized head, not the latest: each head is sent once, never retracted short of a reorg
 * deeper than the confirmations (so no `removed: true` log is ever sent), and every block number from the
 * subscription on is sent, however many blocks one poll of the chain found: a subscription keeps its own cursor
 * and waits for a block a reorg took away rather than skip it. Whatever became final while a client was away is
 * the client's to fetch (eth_getBlockByNumber, eth_getLogs), or, for finalized heads, to resume from its cursor.
 *
 * Every subscribe call takes a rate-limit token like any call. At most MAX_SUBSCRIPTIONS_PER_SOCKET subscriptions
 * of any kind per connection; frames are bounded by the body limit; a socket that does not read its notifications
 * (more than MAX_BUFFERED_BYTES queued) is closed.
 */
/** Subscriptions of every kind on one connection (ethers and viem open one per event or watcher). */
export const MAX_SUBSCRIPTIONS_PER_SOCKET = 16;
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** Blocks sent per subscription per pump (the rest on the next). */
const BLOCKS_PER_PUMP = 100;

type Kind = "finalizedHeads" | "newHeads" | "logs";

interface Subscription {
  /** geth's form: 16 random bytes as 0x-hex, so that no id can be guessed. */
  id: string;
  kind: Kind;
  /** For logs. */
  filter: LogFilter | null;
  /** The next block number to send; null until the gateway has recorded a block (then: the first it recorded). */
  next: bigint | null;
  /** A pump of this subscription still running (one at a time: each block goes out once, in order). */
  pumping: boolean;
}

export interface GatewaySocketServer {
  /** Sends every subscription what became final since; called after each block observation. */
  pump(): Promise<void>;
  /** Open subscriptions of every kind, on every connection. */
  subscriptionCount(): number;
  /** Open subscriptions by kind (every kind, 0 when none is open). */
  subscriptionsByKind(): Record<Kind, number>;
  /** Open WebSocket connections. */
  connectionCount(): number;
  close(): void;
}

export function attachGatewaySockets(options: {
  server: Server;
  store: TemporalStore;
  upstream: Upstream;
  confirmations: number;
  maxPayloadBytes: number;
  maxConnections: number;
  /** The HTTP path's answer for one parsed item (the same methods). */
  answer: (item: ParsedItem, clientKey: string) => Promise<{ json: string } | null>;
  /** Takes a client's rate-limit token for a subscription call; false when it is over its rate. */
  allow: (clientKey: string) => boolean;
  /** What a call over the rate is told. */
  rateLimitedMessage: string;
  /** Subscription calls and invalid frames are counted here (the other calls by `answer`). */
  metrics: GatewayMetrics;
  /** Whether a browser page of this Origin may open a WebSocket (rpcCorsAllowedOrigins, as for the HTTP answers). */
  admitsOrigin: (origin: string) => boolean;
}): GatewaySocketServer {
  const { metrics } = options;
  const { store } = options;
  const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxPayloadBytes, clientTracking: true });
  const subscriptions = new Map<WebSocket, Subscription[]>();
  const feed = new FinalBlockFeed(options.upstream);

  const finalNumber = () => finalizedNumber(store, options.confirmations);

  function send(socket: WebSocket, message: unknown): void {
    sendText(socket, stringify(message)!);
  }

  function sendText(socket: WebSocket, json: string): void {
    if (socket.readyState !== socket.OPEN) return;
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      socket.close(1008, "notifications not read");
      return;
    }
    socket.send(json);
  }

  /** Sends one recorded block to a subscription; false when the block's content is not to be had yet (wait). */
  async function deliver(socket: WebSocket, subscription: Subscription, block: BlockRecord): Promise<boolean> {
    if (subscription.kind === "finalizedHeads") {
      const result = { number: block.number.toString(), hash: block.hash, parentHash: block.parentHash };
      send(socket, { jsonrpc: "2.0", method: "chain_finalizedHead", params: { subscription: subscription.id, result } });
      return true;
    }
    const notify = (result: unknown) => send(socket, { jsonrpc: "2.0", method: "eth_subscription", params: { subscription: subscription.id, result } });
    if (subscription.kind === "newHeads") {
      const header = await feed.header(block);
      if (header === null) return false;
      notify(header);
      return true;
    }
    const logs = await feed.logs(block);
    if (logs === null) return false;
    for (const log of logs) if (logMatches(subscription.filter!, log)) notify(log);
    return true;
  }

  async function pumpOne(socket: WebSocket, subscription: Subscription): Promise<void> {
    if (subscription.pumping) return; // the running pump will get there; the next one picks up the rest
    subscription.pumping = true;
    try {
      if (subscription.next === null) {
        const first = store.firstBlock();
        if (first === undefined) return;
        subscription.next = first.number;
      }
      const final = finalNumber();
      for (let sent = 0; subscription.next <= final && sent < BLOCKS_PER_PUMP; sent++) {
        if (!isHeld(socket, subscription)) return;
        const block = store.block(subscription.next);
        if (block === undefined) return; // forgotten by a reorg and not recorded again yet: wait, never skip
        if (!(await deliver(socket, subscription, block))) return;
        subscription.next += 1n;
      }
    } finally {
      subscription.pumping = false;
    }
  }

  function isHeld(socket: WebSocket, subscription: Subscription): boolean {
    return socket.readyState === socket.OPEN && (subscriptions.get(socket)?.includes(subscription) ?? false);
  }

  /** Where a subscription without a cursor starts: the next final block (the first recorded, before any is). */
  function nextFinal(): bigint | null {
    return store.latestBlock() === undefined ? null : finalNumber() + 1n;
  }

  function hold(socket: WebSocket, kind: Kind, next: bigint | null, filter: LogFilter | null = null): string {
    const held = subscriptions.get(socket) ?? [];
    if (held.length >= MAX_SUBSCRIPTIONS_PER_SOCKET) {
      throw new JsonRpcError(JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", `at most ${MAX_SUBSCRIPTIONS_PER_SOCKET} subscriptions per connection`);
    }
    const subscription: Subscription = { id: `0x${randomBytes(16).toString("hex")}`, kind, filter, next, pumping: false };
    subscriptions.set(socket, [...held, subscription]);
    // After the subscription id is answered: a client must know the id before its first notification.
    setImmediate(() => void pumpOne(socket, subscription).catch(() => undefined));
    return subscription.id;
  }

  function subscribeFinalizedHeads(socket: WebSocket, call: JsonRpcCall): string {
    const params = Array.isArray(call.params) ? call.params : [];
    if (params.length > 1) throw new JsonRpcError(JSON_RPC_ERRORS.INVALID_PARAMS, "Invalid params", "expected [cursor?]");
    if (params.length === 0) return hold(socket, "finalizedHeads", nextFinal());
    const cursor = blockNumberParam(params[0]);
    const first = store.firstBlock();
    if (first === undefined || cursor + 1n < first.number) {
      throw new JsonRpcError(JSON_RPC_ERRORS.INVALID_PARAMS, "Invalid params", `cursor ${cursor} is before this gateway's history (it starts at block ${first?.number ?? "none yet"})`);
    }
    return hold(socket, "finalizedHeads", cursor + 1n);
  }

  function unsubscribe(socket: WebSocket, call: JsonRpcCall, kinds: readonly Kind[]): boolean {
    const [id] = Array.isArray(call.params) ? call.params : [];
    if (typeof id !== "string") throw new JsonRpcError(JSON_RPC_ERRORS.INVALID_PARAMS, "Invalid params", "expected [subscription id]");
    const held = subscriptions.get(socket) ?? [];
    const kept = held.filter((subscription) => subscription.id !== id || !kinds.includes(subscription.kind));
    subscriptions.set(socket, kept);
    return kept.length < held.length;
  }

  function subscriptionCall(socket: WebSocket, call: JsonRpcCall): unknown {
    switch (call.method) {
      case "eth_subscribe": {
        const wanted = parseEthSubscribe(call.params);
        return hold(socket, wanted.kind, nextFinal(), wanted.kind === "logs" ? wanted.filter : null);
      }
      case "eth_unsubscribe":
        if (!unsubscribe(socket, call, ["newHeads", "logs"])) throw new JsonRpcError(JSON_RPC_ERRORS.UPSTREAM_ERROR, "subscription not found");
        return true;
      case "chain_subscribeFinalizedHeads":
        return subscribeFinalizedHeads(socket, call);
      default:
        return unsubscribe(socket, call, ["finalizedHeads"]);
    }
  }

  async function onMessage(socket: WebSocket, data: RawData, clientKey: string): Promise<void> {
    // One call per frame over WebSocket; the bytes as received, so that invalid UTF-8 in a binary frame is refused.
    const parsed = parseBody(Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : new Uint8Array(data), 1);
    if (parsed.kind !== "single") {
      metrics.countRequest("ws", undefined, "invalid");
      send(socket, parsed.kind === "error" ? parsed.response : errorResponse(null, JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", "one call per WebSocket message"));
      return;
    }
    const { item } = parsed;
    if (item.ok && SUBSCRIPTION_METHODS.has(item.call.method)) {
      const id = item.call.id ?? null;
      if (!options.allow(clientKey)) {
        metrics.countRequest("ws", item.call.method, "rate_limited");
        metrics.countRateLimited("ws");
        send(socket, errorResponse(id, JSON_RPC_ERRORS.RATE_LIMITED, "Rate limit exceeded", options.rateLimitedMessage));
        return;
      }
      try {
        send(socket, { jsonrpc: "2.0", id, result: subscriptionCall(socket, item.call) });
        metrics.countRequest("ws", item.call.method, "ok");
      } catch (error) {
        metrics.countRequest("ws", item.call.method, "error");
        const rpcError = error instanceof JsonRpcError ? error : new JsonRpcError(JSON_RPC_ERRORS.INTERNAL_ERROR, "Internal error");
        send(socket, errorResponse(id, rpcError.code, rpcError.message, rpcError.data));
      }
      return;
    }
    const answered = await options.answer(item, clientKey);
    if (answered !== null) sendText(socket, answered.json);
  }

  options.server.on("upgrade", (request, socket, head) => {
    // Browsers apply no same-origin rule to WebSockets: a page's upgrade (it names its Origin) must come from an
    // origin on the list, checked first, so a refused page takes no connection slot (lib/cors.ts).
    const origin = upgradeOrigin(request.headers);
    if (origin !== undefined && !options.admitsOrigin(origin)) {
      const message = originRefusal(origin, "a WebSocket", "the gateway's rpcCorsAllowedOrigins");
      const body = stringify(errorResponse(null, JSON_RPC_ERRORS.INVALID_REQUEST, "Forbidden", message))!;
      socket.end(`HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      return;
    }
    if (wss.clients.size >= options.maxConnections) {
      socket.end("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
      return;
    }
    wss.handleUpgrade(request, socket, head, (ws) => {
      const clientKey = request.socket.remoteAddress ?? "unknown";
      ws.on("message", (data) => {
        onMessage(ws, data, clientKey).catch(() => ws.close(1011, "internal error"));
      });
      ws.on("close", () => subscriptions.delete(ws));
      ws.on("error", () => ws.terminate());
    });
  });

  return {
    async pump() {
      const pumps: Promise<void>[] = [];
      for (const [socket, held] of subscriptions) for (const subscription of held) pumps.push(pumpOne(socket, subscription));
      // One subscription's failed fetch (the chain away) costs the others nothing; it is retried at the next pump.
      await Promise.allSettled(pumps);
    },
    subscriptionCount() {
      let count = 0;
      for (const held of subscriptions.values()) count += held.length;
      return count;
    },
    subscriptionsByKind() {
      const counts: Record<Kind, number> = { newHeads: 0, logs: 0, finalizedHeads: 0 };
      for (const held of subscriptions.values()) for (const subscription of held) counts[subscription.kind] += 1;
      return counts;
    },
    connectionCount: () => wss.clients.size,
    close() {
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}
