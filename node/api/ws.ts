/**
 * WebSocket transport: path `/v1/stream` on the REST server (the `ws` library in noServer mode, attached to the
 * HTTP server's `upgrade` event).
 *
 * Upgrade: a browser's (one with an `Origin` header) only from an origin in `corsAllowedOrigins` (cors.ts; the empty
 * default admits none), checked first, so a refused page takes neither a stream slot nor a rate-limit token; an
 * upgrade without Origin (not a browser) is not affected. Requires header `x-api-key` when keys are configured
 * (browsers cannot set headers on a WebSocket; they should go through a server-side relay — there is deliberately
 * no query-string key, which would end up in logs). The upgrade counts against the caller's rate limit. Refusals
 * are plain HTTP answers with a JSON body: 403 (Origin not allowed), 401 (auth), 429 "Rate limit exceeded", 503
 * (too many connections, or the card is tampered), 404 (other paths).
 *
 * Detail: docs/protocol.md §9.3.
 */
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { RateLimitError, UnavailableError, ValidationError } from "../../protocol/errors";
import { parseJsonLossless } from "../../protocol/json";
import type { SignedTime } from "../core/types";
import { API_KEY_HEADER } from "../../wire/auth";
import { CLIENT_MESSAGES, schemaProblem, type SubscribeMessage, type UnsubscribeMessage } from "../../wire/ws";
import { originRefusal, upgradeOrigin } from "../../lib/cors";
import { admitClient, type TransportContext } from "./context";
import { NewerMoments } from "./newerMoments";
import type { PushChannel } from "./pushScheduler";
import { TurnBudget } from "./turnBudget";
import { TurnQueue } from "./turnQueue";
import {
  INTERNAL_ERROR_MESSAGE,
  WS_CLOSE_INTERNAL_ERROR,
  WS_CLOSE_POLICY_VIOLATION,
  WS_CLOSE_TRY_AGAIN_LATER,
  toHttpError,
  toWsErrorMessage,
} from "../../wire/errorMapping";
import { checkDurationNs } from "./input";

/*
 * Client → server (text frames, JSON, at most wsMaxMessageBytes):
 *   {"type":"subscribe","interval":<ns, JSON integer>,"accuracy":"hardware","includeProof"?:<bool>}
 *       → {"type":"subscribed","id":"<id>","interval":<ns>}
 *   {"type":"unsubscribe","id":"<id>"} → {"type":"unsubscribed","id":"<id>"}
 * Server → client, every interval of each subscription, from the service's cached proofs (no signing here; one
 * timer per distinct interval and a node-wide push budget, pushScheduler.ts, so updates may be skipped under load).
 * Each push carries a moment strictly newer than the subscription's previous push; a tick with nothing newer
 * sends nothing (newerMoments.ts):
 *   {"nanoMoment":"<dec>","accuracy":<ns>,"id":"<subscription id>"[,"proof":{…docs/protocol.md §9.1 proof…}]}
 * Errors: {"type":"error","message":"…"} for bad JSON, unknown types or fields, bad interval, too many
 * subscriptions, binary frames, and "Rate limit exceeded" (each client message takes a rate-limit token). The
 * connection stays open, unless a client sends more than wsMaxErrorsPerConnection bad messages (close 1008).
 * Tamper: every connection is closed with 1013 (Try Again Later) and the reason. Shutdown: 1001.
 */
export const WS_STREAM_PATH = "/v1/stream";
const NS_PER_MS = 1_000_000n;
/** RFC 6455: a close reason is at most 123 bytes of UTF-8. */
const MAX_CLOSE_REASON_BYTES = 123;

export interface StreamServer {
  /** Open connections. */
  readonly connectionCount: number;
  /** Closes every connection (1001) and detaches from the HTTP server. */
  close(): Promise<void>;
}

interface Subscription {
  id: string;
  intervalNs: bigint;
  includeProof: boolean;
  /** The moment of its last push: the next must be newer. */
  sent: NewerMoments;
  /** Stops its pushes (context.pushes). */
  cancel: () => void;
}

interface ConnectionState {
  clientKey: string;
  /** The connection's socket: the pushes of one drain to it are corked into one write (pushScheduler.ts). */
  channel: PushChannel;
  /** Its client messages waiting for a turn (turnQueue.ts); cleared when the connection starts closing. */
  messages: TurnQueue<{ data: RawData; isBinary: boolean }> | null;
  subscriptions: Map<string, Subscription>;
  nextId: number;
  errors: number;
}

type ClientMessage =
  | { type: "subscribe"; intervalNs: bigint; includeProof: boolean }
  | { type: "unsubscribe"; id: string };

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Checks one client message against its wire/ws.ts schema (errors name the field), then the interval bounds. */
export function parseClientMessage(text: string, limits: { minIntervalNs: bigint; maxIntervalNs: bigint }): ClientMessage {
  // Throws "message: malformed JSON (…)" or "message: nesting deeper than 32 levels" (checked before parsing).
  const value = parseJsonLossless(text, "message");
  if (!isPlainObject(value)) throw new ValidationError("message", "must be a JSON object");
  const type = value["type"];
  if (type !== "subscribe" && type !== "unsubscribe") {
    throw new ValidationError("type", typeof type === "string" ? `unknown message type "${type.slice(0, 32)}"` : "is required");
  }
  const problem = schemaProblem(CLIENT_MESSAGES[type], value);
  if (problem !== null) throw new ValidationError(problem.field, problem.message);
  if (type === "unsubscribe") return { type, id: (value as UnsubscribeMessage).id };
  const subscribe = value as SubscribeMessage;
  const intervalNs = checkDurationNs("interval", BigInt(subscribe.interval), limits.minIntervalNs, limits.maxIntervalNs);
  return { type, intervalNs, includeProof: subscribe.includeProof === true };
}

function truncateReason(reason: string): string {
  let text = reason;
  while (Buffer.byteLength(text, "utf8") > MAX_CLOSE_REASON_BYTES) text = text.slice(0, -1);
  return text;
}

function refuseUpgrade(socket: Duplex, statusCode: number, error: string, message: string, headers: Readonly<Record<string, string>> = {}): void {
  const body = JSON.stringify({ statusCode, error, message });
  const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("");
  socket.end(
    `HTTP/1.1 ${statusCode} ${error}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\n${extra}` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  socket.destroy();
}

/** One-slot cache of the frames of the latest proof: every subscription served in the same tick shares them. */
class FrameCache {
  private signed: SignedTime | null = null;
  private head = "";
  private proofJson = "";

  frame(signed: SignedTime, id: string, includeProof: boolean): string {
    if (signed !== this.signed) {
      this.signed = signed;
      this.head = `{"nanoMoment":"${signed.json.nanoMoment}","accuracy":${signed.proof.accuracy},"id":`;
      this.proofJson = JSON.stringify(signed.json.proof);
    }
    const idJson = JSON.stringify(id);
    return includeProof ? `${this.head}${idJson},"proof":${this.proofJson}}` : `${this.head}${idJson}}`;
  }
}

export function attachStreamServer(server: Server, context: TransportContext): StreamServer {
  const { service, logger, metrics, rateLimiter, streams, pushes, limits, clientErrorLog } = context;
  const log = logger.child({ transport: "ws" });
  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.wsMaxPayloadBytes, clientTracking: true });
  const states = new Map<WebSocket, ConnectionState>();
  const frames = new FrameCache();
  const intervalLimits = { minIntervalNs: limits.wsMinIntervalNs, maxIntervalNs: limits.wsMaxIntervalNs };
  // Client messages handled per event-loop turn, all connections together (turnQueue.ts).
  const messageTurn = new TurnBudget(limits.wsMaxMessagesPerTurn);

  /** A reply to a client message. A client that sends but does not read would grow its buffer: it is closed. */
  function send(ws: WebSocket, payload: object): void {
    if (ws.readyState !== ws.OPEN) return;
    if (ws.bufferedAmount > limits.wsMaxBufferedBytes) {
      closeWith(ws, WS_CLOSE_POLICY_VIOLATION, "Not reading its messages");
      return;
    }
    ws.send(JSON.stringify(payload));
  }

  function stopSubscriptions(state: ConnectionState): void {
    for (const subscription of state.subscriptions.values()) subscription.cancel();
    state.subscriptions.clear();
  }

  function closeWith(ws: WebSocket, code: number, reason: string): void {
    const state = states.get(ws);
    if (state !== undefined) {
      // Nothing it sent is handled any more: a message waiting would otherwise still subscribe, count and log.
      state.messages?.clear();
      stopSubscriptions(state);
    }
    if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, truncateReason(reason));
  }

  function push(ws: WebSocket, subscription: Subscription): void {
    if (ws.readyState !== ws.OPEN) return;
    // A slow reader gets fewer updates rather than an unbounded queue.
    if (ws.bufferedAmount > limits.wsMaxBufferedBytes) return;
    let signed: SignedTime;
    try {
      signed = service.current();
    } catch (error) {
      if (error instanceof UnavailableError) {
        closeWith(ws, WS_CLOSE_TRY_AGAIN_LATER, error.message);
        return;
      }
      log.error({ err: error }, "stream push failed");
      closeWith(ws, WS_CLOSE_INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE);
      return;
    }
    // Each push carries a moment newer than the subscription's previous push (newerMoments.ts).
    if (!subscription.sent.admit(signed)) return;
    ws.send(frames.frame(signed, subscription.id, subscription.includeProof));
    metrics.countServedProof("ws", signed);
  }

  function reject(ws: WebSocket, state: ConnectionState, error: unknown): void {
    const { message, serverFault } = toWsErrorMessage(error);
    const status = error instanceof RateLimitError ? "rate_limited" : "error";
    // Server faults in full; client errors sampled and without stacks (sampledLog.ts).
    if (serverFault) log.error({ err: error }, "stream message failed");
    else clientErrorLog.clientError({ transport: "ws", status, route: "message", error });
    metrics.countRequest("ws", "message", status);
    state.errors += 1;
    send(ws, { type: "error", message });
    if (state.errors > limits.wsMaxErrorsPerConnection) {
      log.info({ clientKey: state.clientKey, errors: state.errors }, "closing abusive stream connection");
      closeWith(ws, WS_CLOSE_POLICY_VIOLATION, "Too many invalid messages");
    }
  }

  function onMessage(ws: WebSocket, state: ConnectionState, data: RawData, isBinary: boolean): void {
    try {
      rateLimiter.take(state.clientKey);
      if (isBinary) throw new ValidationError("message", "binary frames are not supported; send JSON text");
      const text = Buffer.isBuffer(data)
        ? data.toString("utf8")
        : Array.isArray(data)
          ? Buffer.concat(data).toString("utf8")
          : Buffer.from(data).toString("utf8");
      const message = parseClientMessage(text, intervalLimits);
      if (message.type === "subscribe") {
        if (state.subscriptions.size >= limits.wsMaxSubscriptionsPerConnection) {
          throw new ValidationError("subscribe", `at most ${limits.wsMaxSubscriptionsPerConnection} subscriptions per connection`);
        }
        state.nextId += 1;
        const id = String(state.nextId);
        const subscription: Subscription = {
          id,
          intervalNs: message.intervalNs,
          includeProof: message.includeProof,
          sent: new NewerMoments(),
          cancel: () => undefined,
        };
        subscription.cancel = pushes.add(Number(message.intervalNs / NS_PER_MS), () => push(ws, subscription), state.channel);
        state.subscriptions.set(id, subscription);
        send(ws, { type: "subscribed", id, interval: Number(message.intervalNs) });
        if (pushes.tryTake()) push(ws, subscription); // the first update at once, budget permitting (else at its tick)
      } else {
        const subscription = state.subscriptions.get(message.id);
        if (subscription === undefined) throw new ValidationError("id", `no subscription "${message.id}"`);
        subscription.cancel();
        state.subscriptions.delete(message.id);
        send(ws, { type: "unsubscribed", id: message.id });
      }
      metrics.countRequest("ws", message.type, "ok");
    } catch (error) {
      reject(ws, state, error);
    }
  }

  function onUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    // A connection the guard is closing (pipelining, refusals) gets no handshake; the guard ends it once the answers
    // it was given are flushed (destroying it here would drop them).
    if (context.connections.isClosing(socket)) {
      // Node took its own error listener off for the upgrade: without one, a reset while the earlier answers are
      // flushed would be an uncaught 'error' and end the process.
      socket.on("error", () => undefined);
      return;
    }
    context.connections.upgraded(socket);
    const path = (request.url ?? "").split("?")[0];
    if (path !== WS_STREAM_PATH) {
      refuseUpgrade(socket, 404, "Not Found", `No WebSocket endpoint at ${path ?? ""}`);
      return;
    }
    // A browser names the page's origin (lib/cors.ts).
    const origin = upgradeOrigin(request.headers);
    if (origin !== undefined && !context.cors.admitsStreamOrigin(origin)) {
      const message = originRefusal(origin, "the stream", "the node's corsAllowedOrigins");
      clientErrorLog.clientError({ transport: "ws", status: "403", route: "upgrade", error: new Error(message) });
      metrics.countRequest("ws", "upgrade", "403");
      refuseUpgrade(socket, 403, "Forbidden", message);
      return;
    }
    let clientKey: string;
    let release: () => void;
    try {
      const header = request.headers[API_KEY_HEADER];
      clientKey = admitClient(context, typeof header === "string" ? header : undefined, request.socket.remoteAddress);
      const health = service.health();
      if (health.status === "tampered") throw new UnavailableError(health.reason ?? "Time card tampered");
      release = streams.acquire(clientKey);
    } catch (error) {
      const answer = toHttpError(error);
      if (answer.serverFault) log.error({ err: error }, "upgrade failed");
      else clientErrorLog.clientError({ transport: "ws", status: String(answer.statusCode), route: "upgrade", error });
      metrics.countRequest("ws", "upgrade", String(answer.statusCode));
      refuseUpgrade(socket, answer.statusCode, answer.error, answer.message, answer.headers);
      return;
    }
    // The slot is held from here until the connection closes; a socket that dies mid-handshake gives it back too.
    socket.once("close", release);
    wss.handleUpgrade(request, socket, head, (ws) => {
      const state: ConnectionState = { clientKey, channel: socket, messages: null, subscriptions: new Map(), nextId: 0, errors: 0 };
      states.set(ws, state);
      metrics.countRequest("ws", "upgrade", "101");
      const messages = new TurnQueue<{ data: RawData; isBinary: boolean }>(messageTurn, {
        handle: ({ data, isBinary }) => {
          // Closing (the client's close frame, or the node's): what it sent before is not handled.
          if (ws.readyState !== ws.OPEN) {
            messages.clear();
            return;
          }
          onMessage(ws, state, data, isBinary);
        },
        pause: () => ws.pause(),
        resume: () => ws.resume(),
        maxQueued: limits.wsMaxQueuedMessagesPerConnection,
      });
      state.messages = messages;
      ws.on("message", (data, isBinary) => {
        if (messages.offer({ data, isBinary })) return;
        messages.clear(); // the rest of this read is dropped with the connection
        clientErrorLog.clientError({ transport: "ws", status: "too_many_messages", route: "message", error: new Error("too many messages at once") });
        metrics.countRequest("ws", "message", "too_many_messages");
        closeWith(ws, WS_CLOSE_POLICY_VIOLATION, "Too many messages at once");
      });
      ws.on("close", () => {
        messages.clear();
        stopSubscriptions(state);
        states.delete(ws);
      });
      // The ws library's errors are the client's frames (too large, invalid UTF-8, bad opcode) or a reset.
      ws.on("error", (error) => clientErrorLog.clientError({ transport: "ws", status: "connection_error", route: "connection", error }));
    });
  }

  server.on("upgrade", onUpgrade);
  const offTamper = service.onTamper((reason) => {
    log.warn({ reason, connections: states.size }, "closing streams: time card tampered");
    for (const ws of states.keys()) closeWith(ws, WS_CLOSE_TRY_AGAIN_LATER, reason);
  });

  return {
    get connectionCount() {
      return states.size;
    },
    async close() {
      offTamper();
      server.off("upgrade", onUpgrade);
      for (const ws of states.keys()) closeWith(ws, 1001, "Server shutting down");
      await new Promise<void>((resolve) => {
        // Connections that do not finish the closing handshake promptly are cut.
        const timer = setTimeout(() => {
          for (const ws of states.keys()) ws.terminate();
          resolve();
        }, 1_000);
        const check = (): void => {
          if (states.size === 0) {
            clearTimeout(timer);
            resolve();
          }
        };
        for (const ws of states.keys()) ws.once("close", check);
        check();
      });
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
