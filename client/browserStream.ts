/**
 * WebSocket subscriptions of the browser client (`/v1/stream`, docs/protocol.md §9.3) over the WebSocket API of
 * browsers (`addEventListener`; the global `WebSocket` or one the caller injects, e.g. the `ws` package on Node
 * 20, which has no global WebSocket). The protocol is client/streamSession.ts, shared with the Node client.
 * A browser cannot set headers on the upgrade, so no API key is sent; nor does it show a refused upgrade's HTTP
 * status: a refusal arrives as an error and a close (1006), and rejects with UnavailableError.
 */
import { ValidationError } from "../protocol/errors";
import { startStreamSession } from "./streamSession";
import type { StreamOptions, TimeStream } from "./types";

/** The part of the browser WebSocket API the client uses (the `ws` package's WebSocket has it too). */
export interface BrowserWebSocket {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open" | "message" | "error" | "close", listener: (event: BrowserSocketEvent) => void): void;
}

/** The fields of open/message/error/close events the client reads. */
export interface BrowserSocketEvent {
  /** message: the frame (a string for text frames). */
  data?: unknown;
  /** error: a description, where the implementation gives one (browsers do not). */
  message?: unknown;
  /** close. */
  code?: number;
  reason?: string;
}

export type WebSocketConstructor = new (url: string) => BrowserWebSocket;

/** A description of a socket error event: browsers give none, on purpose (it would reveal network details). */
function errorOf(event: BrowserSocketEvent): Error {
  return new Error(typeof event.message === "string" && event.message !== "" ? event.message : "WebSocket error (no detail given by the WebSocket API)");
}

export function openBrowserStream(
  WebSocketImpl: WebSocketConstructor,
  options: { wsEndpoint: string; timeoutMs: number },
  streamOptions: StreamOptions,
): Promise<TimeStream> {
  const socket = new WebSocketImpl(options.wsEndpoint);
  const { events, subscribed } = startStreamSession(
    {
      send: (text) => socket.send(text),
      close: (code, reason) => socket.close(code, reason),
      // The API has no terminate: close() also fails a connection still being opened.
      abort: () => socket.close(),
    },
    streamOptions,
    options.timeoutMs,
  );
  socket.addEventListener("open", () => events.opened());
  socket.addEventListener("message", (event) => {
    if (typeof event.data === "string") events.message(event.data);
    else events.unexpectedFrame("binary");
  });
  socket.addEventListener("error", (event) => events.failed(errorOf(event)));
  socket.addEventListener("close", (event) => events.closed(event.code ?? 1006, event.reason ?? ""));
  return subscribed;
}

/** The WebSocket constructor to use: the injected one, else the global one; ValidationError when there is none. */
export function webSocketConstructorOf(injected: WebSocketConstructor | undefined): WebSocketConstructor {
  if (injected !== undefined) return injected;
  const globalWebSocket = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (globalWebSocket === undefined) {
    throw new ValidationError("WebSocket", "no global WebSocket here (Node before 22): pass one, e.g. `WebSocket` of the ws package", {});
  }
  return globalWebSocket;
}
