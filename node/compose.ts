/**
 * The node's composition root: builds the TimeService from the settings (node/config.ts). It picks the card driver
 * and the keys, the mesh when meshPeers is set, and opens the archive and the schedules with their settings, so
 * that node/core reads no settings table and imports none of the wings (docs/architecture.md, the import order).
 */
import type { Logger } from "pino";
import type { NodeKey } from "../protocol/keys";
import { createCard } from "./card";
import type { TimeCard } from "./card/types";
import { advertisedAccuracyNs, redactedConfig, signingErrorBoundNs, type NodeConfig } from "./config";
import { ProofArchive } from "./core/archive";
import type { ConsensusStageFactory } from "./core/cosign";
import { createCoreTimeService, type CoreTimeService, type ScheduleBookDeps } from "./core/service";
import { loadNodeKeys } from "./keysource/load";
import { createMeshStage } from "./mesh";
import { ScheduleService, type CallbackTransport, type ResolveHost } from "./schedules";

export interface CreateTimeServiceParameters {
  config: NodeConfig;
  card: TimeCard;
  nodeKey: NodeKey;
  logger: Logger;
  /** The node's own clock (ns since the Unix epoch); defaults to the host clock anchored to the wall clock. */
  nodeClockNs?: () => bigint;
  /** How schedule callbacks resolve host names (default: the system resolver): node/schedules/callbackGuard.ts. */
  resolveCallbackHost?: ResolveHost;
  /** How schedule callbacks are POSTed over the pinned connection (default: node:http/https). */
  callbackTransport?: CallbackTransport;
  /** Jitter source for delivery retries; defaults to Math.random. */
  random?: () => number;
  /** stop() also closes the card (the service built it). Default false. */
  ownsCard?: boolean;
  /** The mesh (node/mesh createMeshStage) when the node has peers. Omitted: a lone node. */
  consensus?: ConsensusStageFactory;
}

/** The schedules of a node, with the settings table's values for every option. */
function openSchedules(parameters: CreateTimeServiceParameters, deps: ScheduleBookDeps): ScheduleService {
  const { config } = parameters;
  return new ScheduleService({
    dataDir: config.dataDir,
    maxAttempts: config.scheduleMaxAttempts,
    baseBackoffMs: config.scheduleBaseBackoffMs,
    maxBackoffMs: config.scheduleMaxBackoffMs,
    deliveryTimeoutMs: config.scheduleDeliveryTimeoutMs,
    maxHorizonNs: config.scheduleMaxHorizonNs,
    maxPastNs: config.scheduleMaxPastNs,
    maxPending: config.scheduleMaxPending,
    maxPendingPerClient: config.scheduleMaxPendingPerClient,
    maxConcurrentDeliveries: config.scheduleMaxConcurrentDeliveries,
    maxCreatesPerSecond: config.scheduleMaxCreatesPerSecond,
    maxConcurrentDeliveriesPerClient: config.scheduleMaxConcurrentDeliveriesPerClient,
    allowedCallbackHosts: config.scheduleAllowedCallbackHosts,
    nowNs: deps.nowNs,
    proofAtOrAfter: deps.proofAtOrAfter,
    logger: parameters.logger,
    ...(parameters.resolveCallbackHost === undefined ? {} : { resolveCallbackHost: parameters.resolveCallbackHost }),
    ...(parameters.callbackTransport === undefined ? {} : { callbackTransport: parameters.callbackTransport }),
    ...(parameters.random === undefined ? {} : { random: parameters.random }),
  });
}

/** A TimeService (not started) over a given card and key, with the archive and the schedules its settings ask for. */
export function createTimeService(parameters: CreateTimeServiceParameters): CoreTimeService {
  const { config } = parameters;
  return createCoreTimeService({
    settings: config,
    bounds: { accuracyNs: advertisedAccuracyNs(config), signingErrorBoundNs: signingErrorBoundNs(config) },
    card: parameters.card,
    nodeKey: parameters.nodeKey,
    logger: parameters.logger,
    ...(parameters.nodeClockNs === undefined ? {} : { nodeClockNs: parameters.nodeClockNs }),
    ...(parameters.ownsCard === undefined ? {} : { ownsCard: parameters.ownsCard }),
    ...(parameters.consensus === undefined ? {} : { consensus: parameters.consensus }),
    openArchive: (logger) => new ProofArchive({ dataDir: config.dataDir, intervalNs: config.archiveIntervalNs, capacity: config.archiveCapacity, logger }),
    openSchedules: (deps) => openSchedules(parameters, deps),
    startLogConfig: redactedConfig(config),
  });
}

export interface CreateTimeServiceFromConfigOptions {
  logger: Logger;
  /** Extra dependencies for tests (clock, callback resolver and transport, jitter). */
  deps?: Pick<CreateTimeServiceParameters, "nodeClockNs" | "resolveCallbackHost" | "callbackTransport" | "random">;
}

/**
 * Loads the keys (config.keyDir, or a PKCS#11 token), builds the configured card driver and the mesh, and returns a
 * service that is not started yet. The service owns the card (stop() closes it).
 */
export async function createTimeServiceFromConfig(config: NodeConfig, options: CreateTimeServiceFromConfigOptions): Promise<CoreTimeService> {
  // From the key directory or a PKCS#11 token, as cardKeySource and nodeKeySource say (node/keysource/load.ts).
  const keys = await loadNodeKeys(config);
  const card = createCard(config.cardDriver, keys, config, options.logger);
  // A card that needs a first reading (the chrony card) gets it before the node attests: no refusal at start.
  await card.ready?.();
  const consensus = createMeshStage({ config, nodeKey: keys.nodeKey, card, logger: options.logger });
  return createTimeService({
    config,
    card,
    nodeKey: keys.nodeKey,
    logger: options.logger,
    ownsCard: true,
    ...(consensus === undefined ? {} : { consensus }),
    ...options.deps,
  });
}
