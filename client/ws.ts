/**
 * WebSocket subscriptions of the client library (`/v1/stream`, docs/protocol.md §9.3): resolves once the node
 * acknowledged the subscription; updates, server error messages and the close go to the caller's callbacks.
 */
import WebSocket from "ws";
import { UnavailableError, ValidationError } from "../protocol/errors";
import { parseJsonLossless } from "../protocol/json";
import { API_KEY_HEADER } from "../wire/auth";
import { fromHttpStatus } from "../wire/errorMapping";
import { toFetched } from "./fetched";
import type { StreamOptions, StreamUpdate, TimeStream } from "./types";

export interface StreamConnectOptions {
  wsEndpoint: string;
  apiKey: string | undefined;
  timeoutMs: number;
  ca: string | Buffer | undefined;
}

export function openStream(options: StreamConnectOptions, streamOptions: StreamOptions): Promise<TimeStream> {
  const { wsEndpoint, timeoutMs, ca } = options;
    return new Promise<TimeStream>((resolve, reject) => {
      const headers: Record<string, string> = {};
      if (options.apiKey !== undefined) headers[API_KEY_HEADER] = options.apiKey;
      const socket = new WebSocket(wsEndpoint, { headers, handshakeTimeout: timeoutMs, ...(ca === undefined ? {} : { ca }) });
      let subscriptionId: string | undefined;
      const timer = setTimeout(() => {
        socket.terminate();
        reject(new UnavailableError("stream subscription timed out"));
      }, timeoutMs);
      socket.on("unexpected-response", (_request, response) => {
        clearTimeout(timer);
        reject(fromHttpStatus(response.statusCode ?? 500, `WebSocket upgrade refused (HTTP ${response.statusCode ?? "?"})`));
        socket.terminate();
      });
      socket.on("open", () => {
        socket.send(
          JSON.stringify({
            type: "subscribe",
            interval: Number(streamOptions.intervalNs),
            accuracy: "hardware",
            includeProof: streamOptions.includeProof === true,
          }),
        );
      });
      socket.on("message", (data) => {
        let message: Record<string, unknown>;
        try {
          message = parseJsonLossless(String(data)) as Record<string, unknown>;
        } catch (error) {
          streamOptions.onError?.(error as Error);
          return;
        }
        if (message["type"] === "subscribed" && typeof message["id"] === "string") {
          subscriptionId = message["id"];
          clearTimeout(timer);
          const id = subscriptionId;
          resolve({ id, close: () => socket.close(1000, "client closed") });
        } else if (message["type"] === "error") {
          const error = new ValidationError("stream", String(message["message"]));
          if (subscriptionId === undefined) {
            clearTimeout(timer);
            reject(error);
            socket.close();
          } else streamOptions.onError?.(error);
        } else if (typeof message["nanoMoment"] === "string") {
          try {
            const update: StreamUpdate = {
              nanoMoment: BigInt(message["nanoMoment"]),
              accuracyNs: Number(message["accuracy"]),
              subscriptionId: String(message["id"]),
            };
            if (message["proof"] !== undefined) update.proof = toFetched({ nanoMoment: message["nanoMoment"], proof: message["proof"] });
            streamOptions.onUpdate(update);
          } catch (error) {
            streamOptions.onError?.(error as Error);
          }
        }
      });
      socket.on("error", (error) => {
        clearTimeout(timer);
        if (subscriptionId === undefined) reject(new UnavailableError(`stream connection failed: ${error.message}`, {}, { cause: error }));
        else streamOptions.onError?.(error);
      });
      socket.on("close", (code, reason) => {
        clearTimeout(timer);
        if (subscriptionId === undefined) reject(new UnavailableError(`stream closed (${code} ${reason.toString()})`));
        streamOptions.onClose?.(code, reason.toString());
      });
    });
}
