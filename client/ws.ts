/**
 * WebSocket subscriptions of the Node client library (`/v1/stream`, docs/protocol.md §9.3) over the `ws` package,
 * which can send the API key header and trust a caller-given CA. The protocol is client/streamSession.ts; this
 * module wires the socket's events into it. (The browser client's twin is client/browserStream.ts.)
 */
import WebSocket from "ws";
import { API_KEY_HEADER } from "../wire/auth";
import { startStreamSession } from "./streamSession";
import type { StreamOptions, TimeStream } from "./types";

export interface StreamConnectOptions {
  wsEndpoint: string;
  apiKey: string | undefined;
  timeoutMs: number;
  ca: string | Buffer | undefined;
}

export function openStream(options: StreamConnectOptions, streamOptions: StreamOptions): Promise<TimeStream> {
  const { wsEndpoint, timeoutMs, ca } = options;
  const headers: Record<string, string> = {};
  if (options.apiKey !== undefined) headers[API_KEY_HEADER] = options.apiKey;
  const socket = new WebSocket(wsEndpoint, { headers, handshakeTimeout: timeoutMs, ...(ca === undefined ? {} : { ca }) });
  const { events, subscribed } = startStreamSession(
    { send: (text) => socket.send(text), close: (code, reason) => socket.close(code, reason), abort: () => socket.terminate() },
    streamOptions,
    timeoutMs,
  );
  socket.on("unexpected-response", (_request, response) => events.refused(response.statusCode ?? 500));
  socket.on("open", () => events.opened());
  socket.on("message", (data, isBinary) => {
    if (isBinary) events.unexpectedFrame("binary");
    else events.message(String(data));
  });
  socket.on("error", (error) => events.failed(error));
  socket.on("close", (code, reason) => events.closed(code, reason.toString()));
  return subscribed;
}
