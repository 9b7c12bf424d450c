/**
 * Client library for dApps and relayers: `createTimeClient({ endpoint, apiKey })`.
 *
 * - REST (`getCurrentTime`, `verifyRemote`, `schedule`, `getSchedule`, `info`): fetch with a per-attempt timeout
 *   (AbortSignal.timeout) and retries with exponential backoff and full jitter on retryable failures only
 *   (network errors, timeouts, 429 and 5xx; never other 4xx). Bodies are parsed losslessly and proofs strictly
 *   (protocol/json.ts), so a proof arrives exactly as the node signed it.
 * - `verify(proof, { context })`: local verification with protocol/verify.ts (the same rules as the contract);
 *   without a context it asks the node (`POST /time/verify`).
 * - `stream({ intervalNs, onUpdate })`: WebSocket subscription (`/v1/stream`).
 * - `grpc.getCurrentTime()` etc. over @grpc/grpc-js when `grpcEndpoint` is given.
 * - TLS: an https:// endpoint means HTTPS and WSS; `tls` (or an https:// endpoint) means gRPC over TLS. `tls.ca`
 *   trusts a private CA or a self-signed node certificate instead of the system roots, on all three transports
 *   (REST then goes through node:https, since the global fetch takes no per-request CA).
 * Errors are the classes of protocol/errors.ts (ValidationError, AuthError, NotFoundError, RateLimitError,
 * UnavailableError, AtsError "INTERNAL").
 */
import * as grpc from "@grpc/grpc-js";
import { request as httpsRequest, Agent as HttpsAgent } from "node:https";
import WebSocket from "ws";
import { AtsError, rootCauseMessage, UnavailableError, ValidationError } from "../../protocol/errors";
import { parseJsonLossless, proofFromJson, stringifyJsonLossless } from "../../protocol/json";
import type { Hex, ProofJson, TimeProof } from "../../protocol/types";
import { verifyTimeProof, type VerifyTimeProofContext } from "../../protocol/verify";
import { API_KEY_HEADER } from "../api/auth";
import { fromGrpcStatus, fromHttpStatus } from "../api/errorMapping";
import {
  loadProtos,
  REQUEST_TYPES,
  type ConsensusProofMessage,
  type NodeInfoMessage,
  type ProofMessage,
  type RequestTypeName,
  type TimeRequestMessage,
  type TimeResponseMessage,
  type VerifyResponseMessage,
} from "../api/grpc";

/** The text a registered gRPC client signs (EIP-191) for `GrpcTimeRequestOptions.clientSignature`. */
export { clientRequestMessage } from "../api/auth";

export interface TimeClientOptions {
  /** REST base URL of the node, e.g. "http://127.0.0.1:8080". */
  endpoint: string;
  /** Sent as header / metadata `x-api-key`. */
  apiKey?: string;
  /** gRPC target "host:port"; gRPC calls throw without it. */
  grpcEndpoint?: string;
  /** WebSocket URL; defaults to the endpoint with ws(s):// and path /v1/stream. */
  wsEndpoint?: string;
  /**
   * For a node serving TLS (its `endpoints.tls`). gRPC uses TLS when this is set or `endpoint` is https://;
   * REST and WebSocket follow their URL's scheme.
   */
  tls?: TimeClientTlsOptions;
  /** Per-attempt timeout (default 5,000 ms). */
  timeoutMs?: number;
  /** Retries after the first attempt on retryable failures (default 2). */
  retries?: number;
  /** First backoff (default 100 ms); doubles per retry, full jitter, capped by backoffMaxMs (default 2,000 ms). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

export interface TimeClientTlsOptions {
  /** PEM certificate(s) to trust for the node (a private CA or a self-signed node certificate); default: system roots. */
  ca?: string | Buffer;
}

export interface FetchedProof {
  /** The on-chain struct: pass it to `verifyTimeProof` unchanged. */
  proof: TimeProof;
  /** docs/protocol.md §9.1 JSON as received. */
  json: ProofJson;
  cardId: Hex;
  /** Local clock when the answer arrived, ns since the Unix epoch (Date.now() resolution). */
  receivedAtNs: bigint;
}

export interface VerifyResult {
  valid: boolean;
  reason: string | null;
  detail?: string;
}

export interface ScheduleCreated {
  id: string;
  status: string;
  executeAt: string;
  callback: string;
}

export interface StreamUpdate {
  /** ns since the Unix epoch. */
  nanoMoment: bigint;
  accuracyNs: number;
  subscriptionId: string;
  /** Present when the subscription asked for proofs. */
  proof?: FetchedProof;
}

export interface StreamOptions {
  intervalNs: bigint | number;
  includeProof?: boolean;
  onUpdate(update: StreamUpdate): void;
  /** Server error messages and connection errors. */
  onError?(error: Error): void;
  /** The connection closed (code, reason), e.g. 1013 with the tamper reason. */
  onClose?(code: number, reason: string): void;
}

export interface TimeStream {
  /** Subscription id given by the node. */
  readonly id: string;
  close(): void;
}

export interface GrpcTimeRequestOptions {
  /** Default CURRENT_TIME (enum value 0, also what the node assumes when the field is absent). */
  type?: RequestTypeName;
  atNs?: bigint;
  requestId?: string;
  /**
   * TimeRequest.nonce, an unsigned 64-bit integer (ValidationError outside 0 .. 2^64 - 1). Signed in decimal form
   * (`clientRequestMessage({ nonce: nonce.toString(), ... })`); a signed request needs a non-zero nonce.
   */
  nonce?: bigint;
  clientId?: string;
  /** 65-byte EIP-191 signature over node/api/auth.ts `clientRequestMessage(...)`. */
  clientSignature?: Uint8Array;
  /** The `issuedAtMs` that the signature covers (decimal ms since the Unix epoch). */
  issuedAtMs?: string;
}

/** TimeResponse.node: the node that answered. */
export interface GrpcNodeInfo {
  /** EIP-55 address of the node key. */
  nodeId: string;
  /** The node's card id (32 bytes). */
  cardId: Hex;
  /** The node software's version. */
  version: string;
  /** "ATS/1". */
  protocol: string;
}

/** TimeResponse.consensus: how the proof was agreed. */
export interface GrpcConsensusProof {
  /** Nodes whose entries are in the proof's nodeSignature. */
  responders: number;
  /** The answering node's quorum setting (entries it requires of a proof). */
  quorum: number;
  /** EIP-55 addresses of those nodes, in proof order (ascending). */
  nodeIds: string[];
}

export interface GrpcFetchedProof extends FetchedProof {
  requestId: string;
  /** null only from a node that does not send the record (an older time.proto). */
  node: GrpcNodeInfo | null;
  consensus: GrpcConsensusProof | null;
}

export interface GrpcTimeClient {
  getCurrentTime(options?: GrpcTimeRequestOptions): Promise<GrpcFetchedProof>;
  verify(proof: TimeProof): Promise<VerifyResult>;
  close(): void;
}

export interface TimeClient {
  getCurrentTime(): Promise<FetchedProof>;
  /** Local verification when `context` is given, else the node's POST /time/verify. */
  verify(proof: TimeProof, options?: { context?: VerifyTimeProofContext }): Promise<VerifyResult>;
  /** The node's POST /time/verify; with a certificate chain the node can check a card it does not know. */
  verifyRemote(proof: TimeProof, options?: { certificateChainPem?: readonly string[] }): Promise<VerifyResult>;
  schedule(executeAtNs: bigint, callbackUrl: string): Promise<ScheduleCreated>;
  getSchedule(id: string): Promise<Record<string, unknown>>;
  info(): Promise<Record<string, unknown>>;
  stream(options: StreamOptions): Promise<TimeStream>;
  readonly grpc: GrpcTimeClient;
  close(): void;
}

/** Failures worth another attempt (429, 5xx, network errors, timeouts): the node or the network may recover. */
function isRetryable(error: unknown): boolean {
  if (error instanceof AtsError) return error.code === "RATE_LIMIT" || error.code === "UNAVAILABLE" || error.code === "INTERNAL";
  return true;
}

function nowNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

function hexOf(bytes: Uint8Array): Hex {
  return `0x${Buffer.from(bytes).toString("hex")}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function proofJsonFromMessage(nanoMoment: string, proof: ProofMessage): ProofJson {
  return {
    nanoMoment,
    proof: {
      hardwareSignature: hexOf(proof.hardware_signature),
      nodeSignature: hexOf(proof.node_signature),
      accuracyNs: proof.accuracy_ns,
      hardwareId: hexOf(proof.hardware_id),
      gps: null,
    },
  };
}

/** TimeResponse.node as the client library returns it (null when absent). */
export function nodeInfoFromMessage(node: NodeInfoMessage | null | undefined): GrpcNodeInfo | null {
  if (node === null || node === undefined) return null;
  return { nodeId: node.node_id, cardId: hexOf(node.card_id), version: node.version, protocol: node.protocol };
}

/** TimeResponse.consensus as the client library returns it (null when absent). */
export function consensusFromMessage(consensus: ConsensusProofMessage | null | undefined): GrpcConsensusProof | null {
  if (consensus === null || consensus === undefined) return null;
  return { responders: consensus.responders, quorum: consensus.quorum, nodeIds: [...consensus.node_ids] };
}

const MAX_UINT64 = 2n ** 64n - 1n;

/** The decimal form of a uint64 option, as proto-loader takes it (a wider value would be cut to 64 bits silently). */
function uint64Decimal(field: string, value: bigint): string {
  if (value < 0n || value > MAX_UINT64) throw new ValidationError(field, "must be an unsigned 64-bit integer");
  return value.toString();
}

function proofToMessage(proof: TimeProof): { nano_moment: string; proof: Omit<ProofMessage, "hardware_id"> } {
  return {
    nano_moment: proof.nanoMoment.toString(),
    proof: {
      hardware_signature: Buffer.from(proof.hardwareSignature.slice(2), "hex"),
      node_signature: Buffer.from(proof.nodeSignature.slice(2), "hex"),
      accuracy_ns: proof.accuracy,
    },
  };
}

function toFetched(json: unknown): FetchedProof {
  const parsed = proofFromJson(json);
  return { proof: parsed.proof, json: json as ProofJson, cardId: parsed.cardId, receivedAtNs: nowNs() };
}

/** One HTTP exchange: status and body text. Network failures and timeouts reject. */
type HttpSend = (
  method: string,
  url: string,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal,
) => Promise<{ status: number; text: string }>;

const fetchSend: HttpSend = async (method, url, headers, body, signal) => {
  const init: RequestInit = { method, headers, signal };
  if (body !== undefined) init.body = body;
  const response = await fetch(url, init);
  return { status: response.status, text: await response.text() };
};

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

export function createTimeClient(options: TimeClientOptions): TimeClient {
  const base = options.endpoint.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 5_000;
  const retries = options.retries ?? 2;
  const backoffBaseMs = options.backoffBaseMs ?? 100;
  const backoffMaxMs = options.backoffMaxMs ?? 2_000;
  const wsEndpoint = options.wsEndpoint ?? `${base.replace(/^http/, "ws")}/v1/stream`;
  const ca = options.tls?.ca;
  // Only a caller-given CA needs node:https; otherwise fetch (system roots for https://), as without TLS.
  const httpsAgent = ca !== undefined && base.startsWith("https:") ? new HttpsAgent({ ca, keepAlive: true }) : undefined;
  const send = httpsAgent === undefined ? fetchSend : httpsSend(httpsAgent);
  const grpcTls = options.tls !== undefined || base.startsWith("https:");

  async function withRetries<T>(attempt: () => Promise<T>, retryable: (error: unknown) => boolean = isRetryable): Promise<T> {
    for (let index = 0; ; index += 1) {
      try {
        return await attempt();
      } catch (error) {
        if (index >= retries || !retryable(error)) throw error;
        const capMs = Math.min(backoffMaxMs, backoffBaseMs * 2 ** index);
        await sleep(Math.random() * capMs);
      }
    }
  }

  /**
   * One API call with timeouts and backoff. A non-idempotent call (creating a schedule) is retried only after a
   * 429, which the node answers before doing anything: after a timeout or a 5xx the schedule may exist already,
   * and a second POST would create a second one (delivered twice, under another id).
   */
  async function request(
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    idempotent = true,
  ): Promise<{ status: number; value: unknown }> {
    const retryable = idempotent ? isRetryable : (error: unknown) => error instanceof AtsError && error.code === "RATE_LIMIT";
    return withRetries(async () => {
      const headers: Record<string, string> = { accept: "application/json" };
      if (options.apiKey !== undefined) headers[API_KEY_HEADER] = options.apiKey;
      if (body !== undefined) headers["content-type"] = "application/json";
      const payload = body === undefined ? undefined : stringifyJsonLossless(body);
      let status: number;
      let text: string;
      try {
        ({ status, text } = await send(method, `${base}${path}`, headers, payload, AbortSignal.timeout(timeoutMs)));
      } catch (cause) {
        // Network failures and timeouts become UnavailableError (retryable), with the cause attached. The message
        // names the deepest cause (fetch's own error is a bare "TypeError: fetch failed").
        const reason = cause instanceof Error && cause.name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : rootCauseMessage(cause);
        throw new UnavailableError(`${method} ${path} failed: ${reason}`, { path }, { cause });
      }
      let value: unknown = null;
      if (text.length > 0) {
        try {
          value = parseJsonLossless(text);
        } catch {
          value = null;
        }
      }
      if (status < 200 || status > 299) {
        const message =
          typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string"
            ? (value as { message: string }).message
            : `HTTP ${status}`;
        throw fromHttpStatus(status, message);
      }
      return { status, value };
    }, retryable);
  }

  async function verifyRemote(proof: TimeProof, verifyOptions: { certificateChainPem?: readonly string[] } = {}): Promise<VerifyResult> {
    const body: Record<string, unknown> = {
      nanoMoment: proof.nanoMoment.toString(),
      proof: { hardwareSignature: proof.hardwareSignature, nodeSignature: proof.nodeSignature, accuracyNs: proof.accuracy },
    };
    if (verifyOptions.certificateChainPem !== undefined) body["certificateChainPem"] = [...verifyOptions.certificateChainPem];
    const { value } = await request("POST", "/time/verify", body);
    return value as VerifyResult;
  }

  let grpcClient: grpc.Client | undefined;
  function timeRpc(): grpc.Client & Record<string, unknown> {
    if (options.grpcEndpoint === undefined) throw new ValidationError("grpcEndpoint", "is required for gRPC calls");
    if (grpcClient === undefined) {
      const { timeClient } = loadProtos();
      const credentials = grpcTls
        ? grpc.credentials.createSsl(ca === undefined ? null : Buffer.from(ca))
        : grpc.credentials.createInsecure();
      grpcClient = new timeClient(options.grpcEndpoint, credentials);
    }
    return grpcClient as grpc.Client & Record<string, unknown>;
  }

  function unaryCall<Req, Res>(method: string, requestMessage: Req): Promise<Res> {
    return withRetries(
      () =>
        new Promise<Res>((resolve, reject) => {
          const client = timeRpc();
          const metadata = new grpc.Metadata();
          if (options.apiKey !== undefined) metadata.set(API_KEY_HEADER, options.apiKey);
          const fn = client[method] as (
            request: Req,
            metadata: grpc.Metadata,
            callOptions: grpc.CallOptions,
            callback: (error: grpc.ServiceError | null, response?: Res) => void,
          ) => void;
          fn.call(client, requestMessage, metadata, { deadline: Date.now() + timeoutMs }, (error, response) => {
            if (error !== null) reject(fromGrpcStatus(error.code, error.details));
            else if (response === undefined) reject(new UnavailableError("empty gRPC response"));
            else resolve(response);
          });
        }),
    );
  }

  const grpcApi: GrpcTimeClient = {
    async getCurrentTime(requestOptions = {}) {
      const type = requestOptions.type ?? "CURRENT_TIME";
      // protobufjs encodes a name it does not know as 0, which is CURRENT_TIME: a typo must not ask for the wrong thing.
      if (!REQUEST_TYPES.includes(type)) throw new ValidationError("type", `must be one of ${REQUEST_TYPES.join(", ")}`);
      const message: Partial<TimeRequestMessage> = {
        request_id: requestOptions.requestId ?? "",
        nonce: uint64Decimal("nonce", requestOptions.nonce ?? 0n),
        type,
        at_ns: requestOptions.atNs === undefined ? "" : requestOptions.atNs.toString(),
        client_id: requestOptions.clientId ?? "",
        client_signature: Buffer.from(requestOptions.clientSignature ?? new Uint8Array()),
        issued_at_ms: requestOptions.issuedAtMs ?? "",
      };
      const response = await unaryCall<Partial<TimeRequestMessage>, TimeResponseMessage>("GetCurrentTime", message);
      return {
        ...toFetched(proofJsonFromMessage(response.nano_moment, response.proof)),
        requestId: response.request_id,
        node: nodeInfoFromMessage(response.node),
        consensus: consensusFromMessage(response.consensus),
      };
    },
    async verify(proof) {
      const response = await unaryCall<ReturnType<typeof proofToMessage>, VerifyResponseMessage>("VerifyTime", proofToMessage(proof));
      return response.valid ? { valid: true, reason: null } : { valid: false, reason: response.reason, detail: response.detail };
    },
    close() {
      grpcClient?.close();
      grpcClient = undefined;
    },
  };

  return {
    async getCurrentTime() {
      const { value } = await request("GET", "/time/current");
      return toFetched(value);
    },
    async verify(proof, verifyOptions = {}) {
      if (verifyOptions.context !== undefined) {
        const outcome = verifyTimeProof(proof, verifyOptions.context);
        return outcome.valid ? { valid: true, reason: null } : { valid: false, reason: outcome.reason, detail: outcome.detail };
      }
      return verifyRemote(proof);
    },
    verifyRemote,
    async schedule(executeAtNs, callbackUrl) {
      const body = { executeAt: executeAtNs.toString(), callback: callbackUrl };
      const { value } = await request("POST", "/time/schedule", body, false);
      return value as ScheduleCreated;
    },
    async getSchedule(id) {
      const { value } = await request("GET", `/time/schedule/${encodeURIComponent(id)}`);
      return value as Record<string, unknown>;
    },
    async info() {
      const { value } = await request("GET", "/node/info");
      return value as Record<string, unknown>;
    },
    stream(streamOptions) {
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
    },
    grpc: grpcApi,
    close() {
      grpcApi.close();
      httpsAgent?.destroy();
    },
  };
}
