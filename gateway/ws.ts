/**
 * JSON-RPC over WebSocket on the gateway's port (docs/protocol.md §9.5): the same methods as over HTTP, and the
 * finalized-heads subscription:
 *
 *   chain_subscribeFinalizedHeads([cursor?])   → a subscription id; then `chain_finalizedHead` notifications
 *                                                 { subscription, result: { number, hash, parentHash } }, one per
 *                                                 final block (rpcConfirmations deep) in order, from cursor + 1
 *                                                 (a reconnecting client passes the last number it got: no gap,
 *                                                 no repeat), or from the next final block without a cursor
 *   chain_unsubscribeFinalizedHeads([id])      → true
 *
 * Only final blocks are sent, so none is ever retracted short of a reorg deeper than the confirmations. At most
 * MAX_SUBSCRIPTIONS_PER_SOCKET per connection; frames are bounded by the body limit; a socket that does not read
 * its notifications (more than MAX_BUFFERED_BYTES queued) is closed.
 */
import type { Server } from "node:http";
import { stringify } from "lossless-json";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { errorResponse, JSON_RPC_ERRORS, JsonRpcError, parseBody, type JsonRpcCall, type ParsedItem } from "./jsonrpc";
import { blockNumberParam } from "./methods";
import type { TemporalStore } from "./store";

export const MAX_SUBSCRIPTIONS_PER_SOCKET = 4;
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
/** Notifications sent per subscription per pump (the rest on the next). */
const BLOCKS_PER_PUMP = 100;

interface Subscription {
  id: string;
  /** The next block number to send. */
  next: bigint;
}

export interface GatewaySocketServer {
  /** Sends every subscription what became final since; called after each block observation. */
  pump(): void;
  close(): void;
}

export function attachGatewaySockets(options: {
  server: Server;
  store: TemporalStore;
  confirmations: number;
  maxPayloadBytes: number;
  maxConnections: number;
  /** The HTTP path's answer for one parsed item (the same methods). */
  answer: (item: ParsedItem, clientKey: string) => Promise<{ json: string } | null>;
}): GatewaySocketServer {
  const { store } = options;
  const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxPayloadBytes, clientTracking: true });
  const subscriptions = new Map<WebSocket, Subscription[]>();
  let nextSubscriptionId = 1;

  function finalNumber(): bigint {
    const latest = store.latestBlock();
    return latest === undefined ? -1n : latest.number - BigInt(options.confirmations);
  }

  function send(socket: WebSocket, message: unknown): void {
    sendText(socket, stringify(message)!);
  }

  function sendText(socket: WebSocket, json: string): void {
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      socket.close(1008, "notifications not read");
      return;
    }
    socket.send(json);
  }

  function pumpOne(socket: WebSocket, subscription: Subscription): void {
    const final = finalNumber();
    for (let sent = 0; subscription.next <= final && sent < BLOCKS_PER_PUMP; sent++) {
      const block = store.block(subscription.next);
      if (block === undefined) return; // forgotten by a reorg and not recorded again yet: wait, never skip
      send(socket, { jsonrpc: "2.0", method: "chain_finalizedHead", params: { subscription: subscription.id, result: { number: block.number.toString(), hash: block.hash, parentHash: block.parentHash } } });
      subscription.next += 1n;
    }
  }

  function subscribe(socket: WebSocket, call: JsonRpcCall): unknown {
    const params = Array.isArray(call.params) ? call.params : [];
    if (params.length > 1) throw new JsonRpcError(JSON_RPC_ERRORS.INVALID_PARAMS, "Invalid params", "expected [cursor?]");
    const held = subscriptions.get(socket) ?? [];
    if (held.length >= MAX_SUBSCRIPTIONS_PER_SOCKET) throw new JsonRpcError(JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", `at most ${MAX_SUBSCRIPTIONS_PER_SOCKET} subscriptions per connection`);
    let next: bigint;
    if (params.length === 1) {
      const cursor = blockNumberParam(params[0]);
      next = cursor + 1n;
      const first = store.firstBlock();
      if (first === undefined || next < first.number) {
        throw new JsonRpcError(JSON_RPC_ERRORS.INVALID_PARAMS, "Invalid params", `cursor ${cursor} is before this gateway's history (it starts at block ${first?.number ?? "none yet"})`);
      }
    } else {
      next = finalNumber() + 1n;
    }
    const subscription = { id: `0x${(nextSubscriptionId++).toString(16)}`, next };
    subscriptions.set(socket, [...held, subscription]);
    setImmediate(() => pumpOne(socket, subscription)); // after the subscription id is answered
    return subscription.id;
  }

  function unsubscribe(socket: WebSocket, call: JsonRpcCall): unknown {
    const [id] = Array.isArray(call.params) ? call.params : [];
    if (typeof id !== "string") throw new JsonRpcError(JSON_RPC_ERRORS.INVALID_PARAMS, "Invalid params", "expected [subscription id]");
    const held = subscriptions.get(socket) ?? [];
    subscriptions.set(socket, held.filter((subscription) => subscription.id !== id));
    return held.some((subscription) => subscription.id === id);
  }

  async function onMessage(socket: WebSocket, data: RawData, clientKey: string): Promise<void> {
    // One call per frame over WebSocket; the bytes as received, so that invalid UTF-8 in a binary frame is refused.
    const parsed = parseBody(Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : new Uint8Array(data), 1);
    if (parsed.kind !== "single") {
      send(socket, parsed.kind === "error" ? parsed.response : errorResponse(null, JSON_RPC_ERRORS.INVALID_REQUEST, "Invalid Request", "one call per WebSocket message"));
      return;
    }
    const { item } = parsed;
    if (item.ok && (item.call.method === "chain_subscribeFinalizedHeads" || item.call.method === "chain_unsubscribeFinalizedHeads")) {
      const id = item.call.id ?? null;
      try {
        const result = item.call.method === "chain_subscribeFinalizedHeads" ? subscribe(socket, item.call) : unsubscribe(socket, item.call);
        send(socket, { jsonrpc: "2.0", id, result });
      } catch (error) {
        const rpcError = error instanceof JsonRpcError ? error : new JsonRpcError(JSON_RPC_ERRORS.INTERNAL_ERROR, "Internal error");
        send(socket, errorResponse(id, rpcError.code, rpcError.message, rpcError.data));
      }
      return;
    }
    const answered = await options.answer(item, clientKey);
    if (answered !== null) sendText(socket, answered.json);
  }

  options.server.on("upgrade", (request, socket, head) => {
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
    pump() {
      for (const [socket, held] of subscriptions) for (const subscription of held) pumpOne(socket, subscription);
    },
    close() {
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}
