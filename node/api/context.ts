/**
 * What every transport of one node shares: the service, logger, metrics, auth, rate limiter and the transport
 * limits. Built once by node/server.ts (or by a test) and passed in; no transport reaches a singleton.
 */
import type { Logger } from "pino";
import { startLoadGauge, type LoadGauge } from "./load";
import type { ApiKeyHash } from "../../lib/apiKeys";
import { SETTING_DEFAULTS, type NodeConfig } from "../config";
import type { CoreTimeService } from "../core/service";
import type { TimeProof } from "../../protocol/types";
import type { TimeService, VerifyOutcome } from "../core/types";
import { ApiKeyAuth, ClientSignatureVerifier, clientKeyForIp } from "./auth";
import { createCorsPolicy, type CorsPolicy } from "./cors";
import { createConnectionGuard, DEFAULT_CONNECTION_LIMITS, type ConnectionGuard, type ConnectionLimits } from "./connectionGuard";
import { createNodeMetrics, type NodeMetrics } from "./metrics";
import { PushScheduler } from "./pushScheduler";
import { RateLimiter } from "../../lib/rateLimit";
import { SampledLog } from "./sampledLog";
import { StreamQuota } from "./streamQuota";

/** Transport limits. Defaults suit a public node; tests override some. Units are in every name. */
export interface TransportLimits {
  /** Largest accepted HTTP request body (413 beyond). */
  bodyLimitBytes: number;
  /** Time allowed for a client to complete the TLS handshake after connecting (HTTPS only). */
  connectionTimeoutMs: number;
  /** Time allowed to receive a whole request. */
  requestTimeoutMs: number;
  /** Idle keep-alive connections are closed after this. */
  keepAliveTimeoutMs: number;
  /** Largest WebSocket frame accepted from a client (the connection closes with 1009 beyond). */
  wsMaxPayloadBytes: number;
  /** Concurrent streams per node: WebSocket connections plus gRPC StreamTime calls (503 / UNAVAILABLE beyond). */
  wsMaxConnections: number;
  /** Concurrent streams (WebSocket connections plus gRPC StreamTime calls) per client: "Rate limit exceeded" beyond. */
  maxStreamsPerClient: number;
  wsMaxSubscriptionsPerConnection: number;
  /** Bounds of a subscription interval, ns; pushes are timed with 1 ms granularity (pushScheduler.ts). */
  wsMinIntervalNs: bigint;
  wsMaxIntervalNs: bigint;
  /** Bad messages tolerated per connection before it is closed with 1008 (policy violation). */
  wsMaxErrorsPerConnection: number;
  /** WebSocket messages handled per event-loop turn, all connections together; the rest wait (turnQueue.ts). */
  wsMaxMessagesPerTurn: number;
  /** Messages one WebSocket connection may have waiting; beyond, it is closed with 1008. */
  wsMaxQueuedMessagesPerConnection: number;
  /** Updates are skipped (not queued) while this many bytes wait to be sent to a slow client. */
  wsMaxBufferedBytes: number;
  grpcMaxReceiveMessageBytes: number;
  grpcMaxSendMessageBytes: number;
  /** Longest a FUTURE_SCHEDULE GetCurrentTime call may wait for its moment, ns. */
  grpcMaxFutureWaitNs: bigint;
  /** Bounds of a StreamTime interval, ns. */
  grpcMinStreamIntervalNs: bigint;
  grpcMaxStreamIntervalNs: bigint;
  /** Pushes per second of all streams together (WebSocket subscriptions and gRPC StreamTime); more are skipped. */
  streamMaxPushesPerSecond: number;
  /** Connection caps, pipelining depth and refusal bounds of the REST/WebSocket server (connectionGuard.ts). */
  connections: ConnectionLimits;
  /** Web origins whose pages may read the public GET routes and open the stream (cors.ts; `corsAllowedOrigins`); empty = none. */
  corsAllowedOrigins: readonly string[];
}

/** Limits no setting exposes: fixed for every node. */
const FIXED_LIMITS = {
  keepAliveTimeoutMs: 5_000,
  wsMaxErrorsPerConnection: 20,
  // ~50–100 µs a subscribe (parse, schema, rate limit, reply): a few ms of messages per turn.
  wsMaxMessagesPerTurn: 32,
  wsMaxQueuedMessagesPerConnection: 64,
  wsMaxBufferedBytes: 256 * 1024,
  grpcMaxSendMessageBytes: 64 * 1024,
  grpcMaxFutureWaitNs: 10_000_000_000n,
} as const;

/** The transport limits a configuration sets (the settings table declares each default once). */
export function transportLimitsFromConfig(config: NodeConfig): TransportLimits {
  return {
    ...FIXED_LIMITS,
    bodyLimitBytes: config.bodyLimitBytes,
    requestTimeoutMs: config.requestTimeoutMs,
    connectionTimeoutMs: config.requestTimeoutMs,
    wsMaxPayloadBytes: config.wsMaxMessageBytes,
    wsMaxConnections: config.wsMaxConnections,
    maxStreamsPerClient: config.maxStreamsPerClient,
    wsMaxSubscriptionsPerConnection: config.wsMaxSubscriptionsPerConnection,
    wsMinIntervalNs: config.wsMinIntervalNs,
    wsMaxIntervalNs: config.wsMaxIntervalNs,
    grpcMaxReceiveMessageBytes: config.grpcMaxMessageBytes,
    grpcMinStreamIntervalNs: config.grpcMinStreamIntervalNs,
    grpcMaxStreamIntervalNs: config.grpcMaxStreamIntervalNs,
    streamMaxPushesPerSecond: config.streamMaxPushesPerSecond,
    corsAllowedOrigins: config.corsAllowedOrigins,
    connections: {
      ...DEFAULT_CONNECTION_LIMITS,
      maxConnections: config.maxConnections,
      maxConnectionsPerAddress: config.maxConnectionsPerAddress,
      maxPipelinedRequests: config.maxPipelinedRequests,
      stalledRequestTimeoutMs: config.requestTimeoutMs,
    },
  };
}

/** The limits of a node with every setting at its default (contexts built without a configuration: tests). */
export const DEFAULT_TRANSPORT_LIMITS: Readonly<TransportLimits> = transportLimitsFromConfig(SETTING_DEFAULTS);

/**
 * The service as transports see it: the seam, plus (optionally) the core's asynchronous chain check used when a
 * verify request carries the card's certificate chain.
 */
export type TransportService = TimeService & Partial<Pick<CoreTimeService, "verifyWithCertificateChain">>;

export interface TransportContext {
  service: TransportService;
  logger: Logger;
  metrics: NodeMetrics;
  auth: ApiKeyAuth;
  clientSignatures: ClientSignatureVerifier;
  rateLimiter: RateLimiter;
  /** Long-lived streams per client and in all, shared by the WebSocket and gRPC transports. */
  streams: StreamQuota;
  /** Connection caps and penalties of the node's servers (REST/WebSocket and gRPC), pipelining and refusals. */
  connections: ConnectionGuard;
  /** The shared timers and push budget of every stream (WebSocket subscriptions, gRPC StreamTime). */
  pushes: PushScheduler;
  /** Client errors of every transport, logged sampled and without stacks (server faults go to `logger`). */
  clientErrorLog: SampledLog;
  /** This process's event-loop utilisation (GET /node/info `currentLoad`); stopped when the node closes. */
  load: LoadGauge;
  limits: TransportLimits;
  /** CORS of the public GET routes (fastify's and the GET /time/current fast path's) and the stream's Origin check, from `limits.corsAllowedOrigins`. */
  cors: CorsPolicy;
}

export interface CreateTransportContextParameters {
  service: TransportService;
  logger: Logger;
  /** SHA-256 digests of the API keys (node/config.ts `apiKeys`); empty = no auth. */
  apiKeyHashes?: readonly ApiKeyHash[];
  /** MAX_REQUESTS_PER_SECOND per client; 0 = unlimited. */
  maxRequestsPerSecond?: number;
  /** client_id → secp256k1 address whose signature gRPC requests of that client must carry. */
  clientPublicKeys?: Readonly<Record<string, string>>;
  /** Every GetCurrentTime must name a registered client_id and be signed (default false: only registered ids). */
  requireClientSignature?: boolean;
  limits?: Partial<TransportLimits>;
  metrics?: NodeMetrics;
  /** Sampling window of `clientErrorLog` (default sampledLog.ts DEFAULT_SAMPLE_WINDOW_MS). */
  clientErrorLogWindowMs?: number;
}

export function createTransportContext(parameters: CreateTransportContextParameters): TransportContext {
  const limits = { ...DEFAULT_TRANSPORT_LIMITS, ...parameters.limits };
  const metrics = parameters.metrics ?? createNodeMetrics();
  return {
    service: parameters.service,
    logger: parameters.logger,
    metrics,
    auth: new ApiKeyAuth(parameters.apiKeyHashes ?? []),
    clientSignatures: new ClientSignatureVerifier({
      clientAddresses: parameters.clientPublicKeys ?? {},
      requireSignature: parameters.requireClientSignature ?? false,
    }),
    rateLimiter: new RateLimiter({ ratePerSecond: parameters.maxRequestsPerSecond ?? 0 }),
    streams: new StreamQuota({ maxPerClient: limits.maxStreamsPerClient, maxTotal: limits.wsMaxConnections }),
    connections: createConnectionGuard({ limits: limits.connections, onDrop: (reason) => metrics.countDroppedConnection(reason) }),
    pushes: new PushScheduler({ maxPushesPerSecond: limits.streamMaxPushesPerSecond, onSkipped: (count) => metrics.countSkippedPushes(count) }),
    clientErrorLog: new SampledLog(
      parameters.logger,
      parameters.clientErrorLogWindowMs === undefined ? {} : { windowMs: parameters.clientErrorLogWindowMs },
    ),
    load: startLoadGauge(),
    limits,
    cors: createCorsPolicy(limits.corsAllowedOrigins),
  };
}

/**
 * Who is calling, for the rate limit (and the stream quota): the API key's client key when keys are configured,
 * else the caller's address. Takes one rate-limit token. A missing or wrong key is answered with AuthError only
 * after taking a token from the caller's address, so key guessing is throttled like any other traffic.
 * One implementation for REST, the WebSocket upgrade and gRPC.
 */
export function admitClient(context: Pick<TransportContext, "auth" | "rateLimiter">, presentedKey: string | undefined, ip: string | undefined): string {
  let clientKey: string;
  try {
    clientKey = context.auth.authenticate(presentedKey) ?? clientKeyForIp(ip);
  } catch (error) {
    context.rateLimiter.take(clientKeyForIp(ip)); // throws RateLimitError first when this address is over its rate
    throw error;
  }
  context.rateLimiter.take(clientKey);
  return clientKey;
}

/**
 * Verifies a proof, first checking `certificateChainPem` against the trusted roots when one is given and the
 * service can (the core's verifyWithCertificateChain); otherwise the service's synchronous verify().
 */
export async function verifyWithOptionalChain(
  service: TransportService,
  proof: TimeProof,
  certificateChainPem: readonly string[] | undefined,
): Promise<VerifyOutcome> {
  if (certificateChainPem === undefined || certificateChainPem.length === 0) return service.verify(proof);
  if (service.verifyWithCertificateChain !== undefined) return service.verifyWithCertificateChain(proof, certificateChainPem);
  return service.verify(proof, { certificateChainPem: [...certificateChainPem] });
}
