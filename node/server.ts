/**
 * Starts an attesting node: the TimeService (built from config unless one is passed), REST + WebSocket on one
 * fastify server (config.restPort) and gRPC on its own port (config.grpcPort), all bound to config.host
 * (127.0.0.1 by default). With tlsCertFile/tlsKeyFile all of them serve TLS (HTTPS, WSS, gRPC over TLS); the
 * files are read and checked before anything starts. Port 0 picks a free port; `endpoints` reports the real ones.
 * `close()` stops accepting, closes streams (WebSocket 1001, gRPC streams cut after a short grace), lets in-flight
 * requests finish within config.shutdownGraceMs, then stops the service if startNode built it.
 * With config.ntpEnabled the NTP time host (node/ntp) answers on config.ntpHost:ntpPort (UDP) as well.
 *
 * A passed-in `service` is owned by the caller: startNode neither starts nor stops it.
 */
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { UnavailableError } from "../protocol/errors";
import { effectiveListenBacklog, kernelListenBacklogCap } from "../lib/listenBacklog";
import { SETTINGS, type NodeConfig } from "./config";
import { loadTlsMaterial } from "./api/tls";
import { createTimeServiceFromConfig } from "./compose";
import type { TimeService } from "./core/types";
import { createTransportContext, transportLimitsFromConfig, type TransportContext, type TransportLimits } from "./api/context";
import { startGrpcServer, type GrpcServerHandle } from "./api/grpc";
import { createNodeMetrics, type NodeMetrics } from "./api/metrics";
import { buildRestApp } from "./api/rest";
import { attachStreamServer, WS_STREAM_PATH, type StreamServer } from "./api/ws";
import { publishedLimits } from "../gateway/config";
import { startTemporalGateway, type RunningGateway } from "../gateway/server";
import { createServiceNtpClock, type ServiceNtpClock } from "./ntp/source";
import { startNtpServer, type RunningNtpServer } from "./ntp/server";

export interface NodeEndpoints {
  /** e.g. "http://127.0.0.1:8080", "https://…" with TLS (REST base URL, no trailing slash). */
  rest: string;
  /** e.g. "127.0.0.1:50051" (gRPC target, TLS or not: see `tls`); "" when config.grpcEnabled is false. */
  grpc: string;
  /** e.g. "ws://127.0.0.1:8080/v1/stream", "wss://…" with TLS. */
  ws: string;
  /** Whether every transport serves TLS (tlsCertFile/tlsKeyFile set): gRPC clients need SSL credentials. */
  tls: boolean;
  /** e.g. "udp://127.0.0.1:50061": the mesh socket (docs/protocol.md §7.3); "" for a lone node (no meshPeers). */
  mesh: string;
  /** The temporal JSON-RPC gateway (docs/protocol.md §9.5); "" without rpcUpstreamUrl. */
  rpc: string;
  /** e.g. "ntp://127.0.0.1:123": the NTP time host (docs/protocol.md §9.8); "" unless config.ntpEnabled. */
  ntp: string;
}

export interface StartNodeParameters {
  config: NodeConfig;
  logger: Logger;
  /** An existing service (owned by the caller); otherwise built with createTimeServiceFromConfig and started. */
  service?: TimeService;
  /** Overrides of the transport limits not in the settings table (tests). */
  limits?: Partial<TransportLimits>;
}

export interface RunningNode {
  endpoints: NodeEndpoints;
  service: TimeService;
  metrics: NodeMetrics;
  /**
   * Graceful: stops accepting, closes streams, waits for in-flight requests (bounded), stops an owned service.
   * Idempotent: later calls return the first call's promise.
   */
  close(): Promise<void>;
}

function urlHost(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/**
 * A listen failure the operator can fix, as one sentence naming the setting, the port and the host, with the
 * cause attached: a busy port (EADDRINUSE), a port this user may not bind (EACCES), a host that is not an address
 * of this host (EADDRNOTAVAIL). node:net gives `code`; gRPC only puts it in the message. Others pass unchanged.
 */
export function listenError(error: unknown, setting: "restPort" | "grpcPort" | "rpcPort", host: string, port: number): unknown {
  if (!(error instanceof Error)) return error;
  const text = `${String((error as NodeJS.ErrnoException).code ?? "")} ${error.message}`;
  const fix = `(set ${SETTINGS[setting].env} or ${setting})`;
  let problem: string;
  if (text.includes("EADDRINUSE")) problem = `${setting} ${port} is already in use on ${host} ${fix}`;
  else if (text.includes("EACCES")) problem = `${setting} ${port} on ${host} may not be bound by this user (EACCES: ports below 1024 need privileges) ${fix}`;
  else if (text.includes("EADDRNOTAVAIL")) problem = `host ${host} is not an address of this machine, so ${setting} ${port} cannot be bound (set ${SETTINGS.host.env} or host)`;
  else return error;
  return new UnavailableError(problem, { setting, host, port }, { cause: error });
}

/** How often idle rate-limit buckets are dropped. */
const RATE_LIMIT_SWEEP_INTERVAL_MS = 60_000;

export async function startNode(parameters: StartNodeParameters): Promise<RunningNode> {
  const { config, logger } = parameters;
  // Before the service starts: a bad certificate or key fails the start with an error naming the file.
  const tls = loadTlsMaterial(config);
  const ownsService = parameters.service === undefined;
  const service = parameters.service ?? (await createTimeServiceFromConfig(config, { logger }));
  if (ownsService) await service.start();

  const metrics = createNodeMetrics();
  const unbindMetrics = metrics.bindService(service);
  const context: TransportContext = createTransportContext({
    service,
    logger,
    metrics,
    apiKeyHashes: config.apiKeys,
    maxRequestsPerSecond: config.maxRequestsPerSecond,
    clientPublicKeys: config.clientPublicKeys,
    requireClientSignature: config.requireClientSignature,
    limits: { ...transportLimitsFromConfig(config), ...parameters.limits },
  });

  let app: FastifyInstance | undefined;
  let streams: StreamServer | undefined;
  let grpcServer: GrpcServerHandle | undefined;
  let gateway: RunningGateway | undefined;
  let ntpClock: ServiceNtpClock | undefined;
  let ntpServer: RunningNtpServer | undefined;
  let unbindNtpMetrics: (() => void) | undefined;
  const sweepTimer = setInterval(() => context.rateLimiter.sweepIdle(), RATE_LIMIT_SWEEP_INTERVAL_MS);
  sweepTimer.unref();

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => (closing ??= closeOnce());
  const closeOnce = async (): Promise<void> => {
    clearInterval(sweepTimer);
    const graceTimer = new Promise<void>((resolve) => setTimeout(resolve, config.shutdownGraceMs).unref());
    await streams?.close();
    await ntpServer?.close();
    ntpClock?.close();
    await Promise.race([Promise.all([app?.close(), grpcServer?.close(), gateway?.close()]), graceTimer]);
    grpcServer?.server.forceShutdown();
    context.pushes.close();
    context.load.stop();
    unbindMetrics();
    unbindNtpMetrics?.();
    context.clientErrorLog.flush(); // the counts of the last sampling window, before "node stopped"
    if (ownsService) await service.stop();
    logger.info("node stopped");
  };

  try {
    app = buildRestApp(context, { tls });
    streams = attachStreamServer(app.server, context);
    await app.listen({ host: config.host, port: config.restPort, backlog: config.listenBacklog }).catch((error: unknown) => {
      throw listenError(error, "restPort", config.host, config.restPort);
    });
    const restAddress = app.server.address();
    const restPort = typeof restAddress === "object" && restAddress !== null ? restAddress.port : config.restPort;
    if (config.grpcEnabled) {
      grpcServer = await startGrpcServer(context, config.host, config.grpcPort, tls).catch((error: unknown) => {
        throw listenError(error, "grpcPort", config.host, config.grpcPort);
      });
    }

    if (config.rpcUpstreamUrl !== "") {
      gateway = await startTemporalGateway({
        host: config.host,
        port: config.rpcPort,
        backlog: config.listenBacklog,
        upstreamUrl: config.rpcUpstreamUrl,
        dataDir: config.dataDir,
        time: {
          consensusNowNs: () => service.nowNs() + BigInt(service.meshState().consensusOffsetNs ?? "0"),
          meshState: () => service.meshState(),
        },
        limits: publishedLimits(config),
        confirmations: config.rpcConfirmations,
        chainName: config.rpcChainName,
        legacyNumbers: config.rpcLegacyNumbers,
        pollIntervalMs: 500,
        corsAllowedOrigins: config.rpcCorsAllowedOrigins,
        logger,
      }).catch((error: unknown) => {
        throw listenError(error, "rpcPort", config.host, config.rpcPort);
      });
    }

    if (config.ntpEnabled) {
      ntpClock = createServiceNtpClock(service);
      ntpServer = await startNtpServer({
        host: config.ntpHost,
        port: config.ntpPort,
        clock: ntpClock,
        clientIntervalMs: config.ntpClientIntervalMs,
        clientBurst: config.ntpClientBurst,
        logger,
        settingNames: { port: `${SETTINGS.ntpPort.env} or ntpPort`, host: `${SETTINGS.ntpHost.env} or ntpHost` },
      });
      unbindNtpMetrics = metrics.bindNtp(ntpServer.stats);
    }

    const host = urlHost(config.host);
    const endpoints: NodeEndpoints = {
      rest: `${tls === null ? "http" : "https"}://${host}:${restPort}`,
      grpc: grpcServer === undefined ? "" : `${host}:${grpcServer.port}`,
      ws: `${tls === null ? "ws" : "wss"}://${host}:${restPort}${WS_STREAM_PATH}`,
      tls: tls !== null,
      mesh: config.meshPeers.length === 0 ? "" : `udp://${host}:${config.meshPort}`,
      rpc: gateway?.url ?? "",
      ntp: ntpServer?.url ?? "",
    };
    const certificate = tls === null ? {} : { certificate: { subject: tls.subject, validTo: tls.validTo } };
    const somaxconn = kernelListenBacklogCap();
    const listenBacklog = effectiveListenBacklog(config.listenBacklog, somaxconn);
    if (listenBacklog < config.listenBacklog) {
      logger.warn({ listenBacklog: config.listenBacklog, somaxconn }, "the kernel caps the listen backlog below listenBacklog: raise net.core.somaxconn to have it");
    }
    logger.info({ endpoints, ...certificate, authRequired: context.auth.required, maxRequestsPerSecond: config.maxRequestsPerSecond, listenBacklog }, "node listening");
    return { endpoints, service, metrics, close };
  } catch (error) {
    await close().catch((closeError: unknown) => logger.error({ err: closeError }, "cleanup after failed start failed"));
    throw error;
  }
}
