/**
 * One `/v1/stream` subscription (docs/protocol.md §9.3) as a state machine over any WebSocket, browser-safe: it
 * sends the subscribe frame once the socket is open, resolves when the node acknowledges, hands updates (proofs
 * parsed strictly, client/fetched.ts), server error frames and the close to the caller's callbacks, and rejects
 * when the connection fails, closes or stays silent before the acknowledgement. The Node client (client/ws.ts,
 * the `ws` package) and the browser client (client/browserStream.ts, the WebSocket API) only wire socket events
 * into it, so both read the stream with the same rules.
 */
import { UnavailableError, ValidationError } from "../protocol/errors";
import { parseJsonLossless } from "../protocol/json";
import { fromHttpStatus } from "../wire/httpStatus";
import type { SubscribeMessage } from "../wire/ws";
import { toFetched } from "./fetched";
import type { StreamOptions, StreamUpdate, TimeStream } from "./types";

/** What the session needs of a socket. */
export interface StreamSocket {
  send(text: string): void;
  /** Closes with a code and reason (the subscription's `close()`, code 1000). */
  close(code: number, reason: string): void;
  /** Drops the connection now, whatever its state (no acknowledgement in time, a refused upgrade). */
  abort(): void;
}

/** The socket's events, as the transport adapter reports them. */
export interface StreamSessionEvents {
  opened(): void;
  /** A text frame. */
  message(text: string): void;
  /** A frame the protocol never sends (binary): reported to onError, the subscription stays. */
  unexpectedFrame(description: string): void;
  /** The upgrade was answered with this HTTP status (only where the socket API shows it: not in browsers). */
  refused(statusCode: number): void;
  failed(error: Error): void;
  closed(code: number, reason: string): void;
}

export interface StreamSession {
  events: StreamSessionEvents;
  /** Resolves once the node acknowledged the subscription. */
  subscribed: Promise<TimeStream>;
}

/** The stream URL of a REST base URL (no trailing slash): ws(s):// for http(s)://, path /v1/stream. */
export function streamUrlOf(restBase: string): string {
  return `${restBase.replace(/^http/, "ws")}/v1/stream`;
}

/** The subscribe frame of `streamOptions` (interval in ns as a JSON integer). */
function subscribeFrame(streamOptions: StreamOptions): string {
  const frame: SubscribeMessage = {
    type: "subscribe",
    interval: Number(streamOptions.intervalNs),
    accuracy: "hardware",
    includeProof: streamOptions.includeProof === true,
  };
  return JSON.stringify(frame);
}

export function startStreamSession(socket: StreamSocket, streamOptions: StreamOptions, timeoutMs: number): StreamSession {
  let subscriptionId: string | undefined;
  let settle!: { resolve: (stream: TimeStream) => void; reject: (error: Error) => void };
  const subscribed = new Promise<TimeStream>((resolve, reject) => {
    settle = { resolve, reject };
  });
  const timer = setTimeout(() => {
    socket.abort();
    settle.reject(new UnavailableError("stream subscription timed out", { timeoutMs }));
  }, timeoutMs);

  const onUpdate = (message: Record<string, unknown>): void => {
    const update: StreamUpdate = {
      nanoMoment: BigInt(message["nanoMoment"] as string),
      accuracyNs: Number(message["accuracy"]),
      subscriptionId: String(message["id"]),
    };
    if (message["proof"] !== undefined) update.proof = toFetched({ nanoMoment: message["nanoMoment"], proof: message["proof"] });
    streamOptions.onUpdate(update);
  };

  const events: StreamSessionEvents = {
    opened() {
      socket.send(subscribeFrame(streamOptions));
    },
    message(text) {
      let message: Record<string, unknown>;
      try {
        message = parseJsonLossless(text) as Record<string, unknown>;
      } catch (error) {
        streamOptions.onError?.(error as Error);
        return;
      }
      if (message["type"] === "subscribed" && typeof message["id"] === "string") {
        subscriptionId = message["id"];
        clearTimeout(timer);
        settle.resolve({ id: subscriptionId, close: () => socket.close(1000, "client closed") });
      } else if (message["type"] === "error") {
        const error = new ValidationError("stream", String(message["message"]));
        if (subscriptionId === undefined) {
          clearTimeout(timer);
          settle.reject(error);
          socket.close(1000, "subscription refused");
        } else streamOptions.onError?.(error);
      } else if (typeof message["nanoMoment"] === "string") {
        try {
          onUpdate(message);
        } catch (error) {
          streamOptions.onError?.(error as Error);
        }
      }
    },
    unexpectedFrame(description) {
      streamOptions.onError?.(new ValidationError("stream", `unexpected frame: ${description}`, { frame: description }));
    },
    refused(statusCode) {
      clearTimeout(timer);
      settle.reject(fromHttpStatus(statusCode, `WebSocket upgrade refused (HTTP ${statusCode})`));
      socket.abort();
    },
    failed(error) {
      clearTimeout(timer);
      if (subscriptionId === undefined) settle.reject(new UnavailableError(`stream connection failed: ${error.message}`, {}, { cause: error }));
      else streamOptions.onError?.(error);
    },
    closed(code, reason) {
      clearTimeout(timer);
      if (subscriptionId === undefined) settle.reject(new UnavailableError(`stream closed (${code} ${reason})`, { code }));
      streamOptions.onClose?.(code, reason);
    },
  };
  return { events, subscribed };
}
