/**
 * gRPC transport: service `ats.v1.TimeRPC` from proto/time.proto (the source of truth, loaded at run time with
 * @grpc/proto-loader: keepCase, longs as String, enums as String, defaults) and the standard health service
 * `grpc.health.v1.Health` from proto/health.proto.
 *
 * Every TimeRPC call: metadata `x-api-key` (when keys are configured) → rate limit ("Rate limit exceeded",
 * RESOURCE_EXHAUSTED) → request checks (INVALID_ARGUMENT naming the field; malformed protobuf bytes, e.g. invalid
 * UTF-8 or a truncated field, are caught by the strict deserializers of grpcWire.ts) → the service → one reply.
 * Errors are mapped in errorMapping.ts only. The health service needs no key. TLS (server credentials from
 * tlsCertFile / tlsKeyFile, no client certificates) when configured, else plaintext: then bind to loopback or put
 * TLS in front; the node signs what it serves, so transport integrity is not what makes a proof trustworthy, but
 * API keys travel in metadata. The messages it answers with are built in grpcMessages.ts.
 */
import * as grpc from "@grpc/grpc-js";
import type { Server as NetServer } from "node:net";
import { NotFoundError, RateLimitError, UnavailableError, ValidationError } from "../../protocol/errors";
import { parseNsString } from "../../protocol/json";
import type { TlsMaterial } from "./tls";
import type { SignedTime } from "../core/types";
import { API_KEY_HEADER } from "../../wire/auth";
import { clientKeyForIp } from "./auth";
import { admitClient, verifyWithOptionalChain, type TransportContext } from "./context";
import { toGrpcError } from "../../wire/errorMapping";
import { throwIfRejected, withStrictRequestDecoding } from "./grpcWire";
import { proofFromMessage, ResponseCache } from "./grpcMessages";
import { checkDurationNs } from "./input";
import { NewerMoments } from "./newerMoments";
import type { Transport } from "./metrics";

import {
  loadProtos,
  REQUEST_TYPES,
  TIME_PROTO_PATH,
  TIME_SERVICE_NAME,
  type HealthCheckRequestMessage,
  type HealthCheckResponseMessage,
  type ScheduleRequestMessage,
  type ScheduleResponseMessage,
  type ServingStatus,
  type StreamRequestMessage,
  type TimeRequestMessage,
  type TimeResponseMessage,
  type VerifyRequestMessage,
  type VerifyResponseMessage,
} from "../../wire/grpc";

let strictTimeService: grpc.ServiceDefinition | undefined;

/**
 * TimeRPC as the server registers it: request deserializers that check the wire format first (grpcWire.ts) and
 * hand a malformed request to the handler as a RejectedRequest (INVALID_ARGUMENT), not a throw (INTERNAL).
 * Built once per process; the client side keeps loadProtos().timeService.
 */
function loadStrictTimeService(): grpc.ServiceDefinition {
  strictTimeService ??= withStrictRequestDecoding(loadProtos().timeService, TIME_PROTO_PATH, TIME_SERVICE_NAME);
  return strictTimeService;
}

const MAX_ID_CHARS = 128;
/** gRPC connections without a call for this long are closed. */
const GRPC_MAX_CONNECTION_IDLE_MS = 5 * 60_000;
/**
 * Calls in flight per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; a client's HTTP/2 layer queues the calls
 * beyond it). Every call that arrives is parsed and run through grpc-js before the rate limit can refuse it, so this
 * bounds the burst one connection can put on the event loop: 16 stalled a normal REST client for well under half as
 * long as 64 did (`npm run bench:attack`, attack 6; figures in docs/benchmarks.md). A client still has room for its
 * streams (maxStreamsPerClient) and unary calls beside them.
 */
function grpcMaxConcurrentStreams(maxStreamsPerClient: number): number {
  return Math.max(16, maxStreamsPerClient + 8);
}
/** How often Health.Watch re-reads the health status (tamper is pushed at once). */
const HEALTH_WATCH_INTERVAL_MS = 1_000;

function boundedString(field: string, value: string): string {
  if (value.length > MAX_ID_CHARS) throw new ValidationError(field, `must be at most ${MAX_ID_CHARS} characters`);
  return value;
}

// ------------------------------------------------------------------ server

export interface GrpcServerHandle {
  server: grpc.Server;
  /** "host:port" actually bound. */
  address: string;
  port: number;
  close(): Promise<void>;
}

function metadataValue(metadata: grpc.Metadata, key: string): string | undefined {
  const values = metadata.get(key);
  const first = values[0];
  return typeof first === "string" ? first : undefined;
}

/** "ipv4:127.0.0.1:5000", "127.0.0.1:5000" or "[::1]:5000" → the address part. */
function peerIp(peer: string): string {
  const withoutScheme = peer.replace(/^ipv[46]:/, "");
  const bracketed = /^\[([^\]]+)\]/.exec(withoutScheme);
  if (bracketed?.[1] !== undefined) return bracketed[1];
  const colon = withoutScheme.lastIndexOf(":");
  return colon > 0 ? withoutScheme.slice(0, colon) : withoutScheme;
}

const TRANSPORT: Transport = "grpc";

export function createGrpcServer(context: TransportContext): grpc.Server {
  const { service, logger, metrics, streams, clientSignatures, limits } = context;
  const log = logger.child({ transport: "grpc" });
  const responses = new ResponseCache(context);
  const protos = loadProtos();

  /** API key + rate limit; returns the client key. */
  function admit(call: grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>): string {
    return admitClient(context, metadataValue(call.metadata, API_KEY_HEADER), peerIp(call.getPeer()));
  }

  function fail(route: string, error: unknown): grpc.ServiceError {
    const answer = toGrpcError(error);
    const status = grpc.status[answer.code] ?? String(answer.code);
    // Server faults in full; client errors sampled and without stacks (sampledLog.ts).
    if (answer.serverFault) log.error({ err: error, route }, "rpc failed");
    else context.clientErrorLog.clientError({ transport: TRANSPORT, status, route, error });
    metrics.countRequest(TRANSPORT, route, status);
    const metadata = new grpc.Metadata();
    for (const [key, value] of Object.entries(answer.metadata ?? {})) metadata.set(key, value);
    return Object.assign(new Error(answer.details), { code: answer.code, details: answer.details, metadata });
  }

  function unary<Req, Res>(
    route: string,
    handler: (call: grpc.ServerUnaryCall<Req, Res>, clientKey: string) => Promise<Res> | Res,
  ): grpc.handleUnaryCall<Req, Res> {
    return (call, callback) => {
      Promise.resolve()
        .then(() => {
          const clientKey = admit(call as grpc.ServerUnaryCall<unknown, unknown>);
          throwIfRejected(call.request); // malformed bytes (grpcWire.ts): INVALID_ARGUMENT naming the field
          return handler(call, clientKey);
        })
        .then(
          (response) => {
            context.connections.noteCall(call.getPeer(), false);
            metrics.countRequest(TRANSPORT, route, "OK");
            callback(null, response);
          },
          (error: unknown) => {
            // A channel refused maxRefusalsPerConnection times in a row is closed (connectionGuard.ts), as a REST
            // connection answered 429 that often: its refusals would otherwise cost the node's event loop for ever.
            context.connections.noteCall(call.getPeer(), error instanceof RateLimitError);
            const answer = fail(route, error);
            // A refusal (client over its rate) is answered after the same pause as a REST 429 (connectionGuard):
            // a flooding client waits for its refusals instead of getting them as fast as it can ask.
            const pauseMs = limits.connections.refusalPauseMs;
            if (error instanceof RateLimitError && pauseMs > 0) setTimeout(() => callback(answer), pauseMs).unref();
            else callback(answer);
          },
        );
    };
  }

  /**
   * FUTURE_SCHEDULE: the core's one "proof at or after t" (service.proofAtOrAfter, shared with schedules), for a
   * moment at most grpcMaxFutureWaitNs ahead; the wait ends when the client cancels.
   */
  async function proofAtOrAfter(atNs: bigint, call: grpc.ServerUnaryCall<TimeRequestMessage, TimeResponseMessage>): Promise<SignedTime> {
    const nowNs = service.nowNs();
    if (atNs > nowNs && atNs - nowNs > limits.grpcMaxFutureWaitNs) {
      throw new ValidationError("at_ns", `must be at most ${limits.grpcMaxFutureWaitNs} ns ahead for FUTURE_SCHEDULE; use ScheduleAttestation for later moments`);
    }
    const cancelled = new AbortController();
    const onCancelled = (): void => cancelled.abort(new ValidationError("call", "cancelled"));
    if (call.cancelled) onCancelled();
    call.on("cancelled", onCancelled);
    try {
      return await service.proofAtOrAfter(atNs, cancelled.signal);
    } finally {
      call.off("cancelled", onCancelled);
    }
  }

  const getCurrentTime = unary<TimeRequestMessage, TimeResponseMessage>("GetCurrentTime", async (call) => {
    const request = call.request;
    const requestId = boundedString("request_id", request.request_id);
    boundedString("client_id", request.client_id);
    // proto-loader (enums: String) passes a number it has no name for through as that number: refuse it here.
    // An absent type is CURRENT_TIME (enum value 0), by the description's numbering.
    if (typeof request.type !== "string" || !REQUEST_TYPES.includes(request.type)) {
      throw new ValidationError("type", `unknown RequestType ${String(request.type)} (CURRENT_TIME = 0, HISTORICAL_PROOF = 1, FUTURE_SCHEDULE = 2)`);
    }
    await clientSignatures.check(
      {
        requestId,
        // uint64 in decimal (longs: String), "0" when absent: a checked signature needs it non-zero (auth.ts).
        nonce: request.nonce,
        type: request.type,
        atNs: request.at_ns,
        clientId: request.client_id,
        issuedAtMs: boundedString("issued_at_ms", request.issued_at_ms),
      },
      request.client_signature,
    );
    let signed: SignedTime;
    switch (request.type) {
      case "CURRENT_TIME":
        if (request.at_ns !== "") throw new ValidationError("at_ns", "must be empty for CURRENT_TIME");
        signed = service.current();
        break;
      case "HISTORICAL_PROOF":
        signed = service.historical(parseNsString(request.at_ns, "at_ns"));
        break;
      case "FUTURE_SCHEDULE":
        signed = await proofAtOrAfter(parseNsString(request.at_ns, "at_ns"), call);
        break;
    }
    metrics.countServedProof(TRANSPORT, request.type === "CURRENT_TIME" ? signed : undefined);
    return responses.response(signed, requestId);
  });

  const verifyTime = unary<VerifyRequestMessage, VerifyResponseMessage>("VerifyTime", async (call) => {
    const chain = call.request.certificate_chain_pem;
    if (chain.length > 4 || chain.some((pem) => pem.length > 8192)) {
      throw new ValidationError("certificate_chain_pem", "at most 4 certificates of at most 8192 characters each");
    }
    const outcome = await verifyWithOptionalChain(service, proofFromMessage(call.request.nano_moment, call.request.proof), chain);
    return outcome.valid ? { valid: true, reason: "", detail: "" } : { valid: false, reason: outcome.reason, detail: outcome.detail };
  });

  const scheduleAttestation = unary<ScheduleRequestMessage, ScheduleResponseMessage>("ScheduleAttestation", async (call, clientKey) => {
    const executeAtNs = parseNsString(call.request.execute_at_ns, "execute_at_ns");
    if (call.request.callback_url.length === 0 || call.request.callback_url.length > 2048) {
      throw new ValidationError("callback_url", "must be a URL of 1 to 2048 characters");
    }
    const record = await service.schedule(executeAtNs, call.request.callback_url, clientKey);
    return { id: record.id, status: record.status, execute_at_ns: record.executeAtNs.toString(), callback_url: record.callbackUrl };
  });

  const streamTime: grpc.handleServerStreamingCall<StreamRequestMessage, TimeResponseMessage> = (call) => {
    const route = "StreamTime";
    let stopPushes: (() => void) | undefined;
    let offTamper: (() => void) | undefined;
    let release: (() => void) | undefined;
    const finish = (error?: unknown): void => {
      stopPushes?.();
      offTamper?.();
      release?.();
      stopPushes = undefined;
      offTamper = undefined;
      release = undefined;
      if (error !== undefined) call.emit("error", fail(route, error));
    };
    try {
      const clientKey = admit(call as grpc.ServerWritableStream<unknown, unknown>);
      throwIfRejected(call.request);
      // One slot per open stream, shared with the client's WebSocket connections.
      release = streams.acquire(clientKey);
      const requestId = boundedString("request_id", call.request.request_id);
      const intervalNs = checkDurationNs(
        "interval_ns",
        parseNsString(call.request.interval_ns, "interval_ns"),
        limits.grpcMinStreamIntervalNs,
        limits.grpcMaxStreamIntervalNs,
      );
      const sent = new NewerMoments();
      const send = (): void => {
        try {
          // Skip an update rather than queue without bound when the client reads slowly.
          if (call.writableNeedDrain) return;
          const signed = service.current();
          // Each message carries a moment newer than the stream's previous one (newerMoments.ts).
          if (!sent.admit(signed)) return;
          call.write(responses.response(signed, requestId));
          metrics.countServedProof(TRANSPORT, signed);
        } catch (error) {
          finish(error);
        }
      };
      metrics.countRequest(TRANSPORT, route, "OK");
      offTamper = service.onTamper((reason) => finish(new UnavailableError(reason)));
      // The node-wide push timers and budget shared with WebSocket subscriptions (pushScheduler.ts).
      stopPushes = context.pushes.add(Number(intervalNs / 1_000_000n), send);
      call.on("cancelled", () => finish());
      call.on("close", () => finish());
      if (context.pushes.tryTake()) send(); // the first update at once, budget permitting (else at its tick)
    } catch (error) {
      finish(error);
    }
  };

  // Health: "" and the TimeRPC name are known; SERVING only while proofs can be served (ok, degraded).
  const servingStatus = (name: string): ServingStatus | undefined => {
    if (name !== "" && name !== TIME_SERVICE_NAME) return undefined;
    const status = service.health().status;
    return status === "ok" || status === "degraded" ? "SERVING" : "NOT_SERVING";
  };

  const healthCheck: grpc.handleUnaryCall<HealthCheckRequestMessage, HealthCheckResponseMessage> = (call, callback) => {
    const status = servingStatus(call.request.service);
    if (status === undefined) {
      callback(fail("Health.Check", new NotFoundError(`unknown service "${call.request.service.slice(0, 64)}"`)));
      return;
    }
    callback(null, { status });
  };

  // Watch needs no key, so it is held to the stream quota of the caller's address and polled from the shared
  // push timers (one timer per interval for the whole node), like every other stream.
  const healthWatch: grpc.handleServerStreamingCall<HealthCheckRequestMessage, HealthCheckResponseMessage> = (call) => {
    let release: () => void;
    try {
      release = streams.acquire(clientKeyForIp(peerIp(call.getPeer())));
    } catch (error) {
      call.emit("error", fail("Health.Watch", error));
      return;
    }
    let last: ServingStatus | undefined;
    const update = (): void => {
      const status = servingStatus(call.request.service) ?? "SERVICE_UNKNOWN";
      if (status !== last) {
        last = status;
        call.write({ status });
      }
    };
    const stopPolling = context.pushes.add(HEALTH_WATCH_INTERVAL_MS, update);
    const offTamper = service.onTamper(update);
    let stopped = false;
    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      stopPolling();
      offTamper();
      release();
    };
    call.on("cancelled", stop);
    call.on("close", stop);
    update();
  };

  const server = new grpc.Server({
    // Connections without calls are closed after this (REST closes idle ones after keepAliveTimeoutMs); the
    // connection caps of context.connections apply on accept (startGrpcServer).
    "grpc.max_connection_idle_ms": GRPC_MAX_CONNECTION_IDLE_MS,
    "grpc.max_receive_message_length": limits.grpcMaxReceiveMessageBytes,
    "grpc.max_send_message_length": limits.grpcMaxSendMessageBytes,
    // Calls in flight per connection: with refusals answered after a pause, this also bounds the refusals per
    // second one connection can draw (16 per 100 ms by default).
    "grpc.max_concurrent_streams": grpcMaxConcurrentStreams(limits.maxStreamsPerClient),
    "grpc.keepalive_time_ms": 60_000,
    "grpc.keepalive_timeout_ms": 10_000,
  });
  server.addService(loadStrictTimeService(), {
    GetCurrentTime: getCurrentTime,
    StreamTime: streamTime,
    VerifyTime: verifyTime,
    ScheduleAttestation: scheduleAttestation,
  });
  server.addService(protos.healthService, { Check: healthCheck, Watch: healthWatch });
  return server;
}

/** Server credentials: TLS with the node's certificate (no client certificates asked) or, without it, insecure. */
function serverCredentials(tls: TlsMaterial | null): grpc.ServerCredentials {
  if (tls === null) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(null, [{ cert_chain: tls.certificateChainPem, private_key: tls.privateKeyPem() }], false);
}

/**
 * Puts the gRPC port's TCP connections under the node's connection guard (caps per address and in total, the
 * address penalty). grpc-js offers no connection cap and no public handle on its listening servers, so this reads
 * its `http2Servers` map; a grpc-js without it fails the start here (and the connection-cap test), rather than
 * serving uncapped.
 */
function watchGrpcConnections(server: grpc.Server, context: TransportContext): void {
  const listening = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(listening instanceof Map) || listening.size === 0) {
    server.forceShutdown();
    throw new Error("grpc-js internals changed: no http2Servers map to apply the connection caps to");
  }
  for (const http2Server of listening.keys() as IterableIterator<NetServer>) context.connections.watch(http2Server, { byPeer: true });
}

/** Binds `host:port` (0 = a free port) and starts serving, over TLS when `tls` is given. */
export async function startGrpcServer(
  context: TransportContext,
  host: string,
  port: number,
  tls: TlsMaterial | null = null,
): Promise<GrpcServerHandle> {
  const server = createGrpcServer(context);
  const bindHost = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  const boundPort = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${bindHost}:${port}`, serverCredentials(tls), (error, actual) => {
      if (error !== null) reject(error);
      else resolve(actual);
    });
  });
  watchGrpcConnections(server, context);
  return {
    server,
    address: `${bindHost}:${boundPort}`,
    port: boundPort,
    close: () =>
      new Promise<void>((resolve) => {
        // Graceful first; streams (which never end by themselves) are cut after a short grace period.
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1_000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}
