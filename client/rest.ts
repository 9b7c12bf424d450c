/**
 * REST calls of the Node client library: client/restCaller.ts (browser-safe: fetch, timeouts, retries, lossless
 * bodies, error classes) plus, for a caller-given CA (`tls.ca`), exchanges over node:https, since the global
 * fetch takes no per-request CA.
 */
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { createRestCallerOver, fetchSend, type HttpSend, type RestCaller, type RestCallerOptions as BaseRestCallerOptions } from "./restCaller";

export { DEFAULT_TIMEOUT_MS, nodeInfoFromJson, restBaseOf, type RestCaller } from "./restCaller";

/**
 * node:https with the caller's CA in `agent` (the global fetch cannot take one per request). Rejects like fetch:
 * a timeout with the signal's reason (TimeoutError), a connection cut before the whole body with an error.
 */
function httpsSend(agent: HttpsAgent): HttpSend {
  return (method, url, headers, body, signal) =>
    new Promise((resolve, reject) => {
      const onError = (error: Error): void => reject(signal.aborted ? (signal.reason as Error) : error);
      const outgoing = httpsRequest(url, { method, headers, agent, signal }, (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        response.on("error", onError);
        response.on("close", () => {
          if (!response.complete) onError(new Error("connection closed before the whole response"));
        });
      });
      outgoing.on("error", onError);
      outgoing.end(body);
    });
}

export interface RestCallerOptions extends BaseRestCallerOptions {
  /** A CA to trust for an https:// base (node:https is used then). */
  ca: string | Buffer | undefined;
}

export function createRestCaller(options: RestCallerOptions): RestCaller {
  // Only a caller-given CA needs node:https; otherwise fetch (system roots for https://), as without TLS.
  if (options.ca === undefined || !options.base.startsWith("https:")) return createRestCallerOver(fetchSend(), options);
  const httpsAgent = new HttpsAgent({ ca: options.ca, keepAlive: true });
  return createRestCallerOver(httpsSend(httpsAgent), options, () => httpsAgent.destroy());
}
