/**
 * The node's core: attestor (local attestations), co-signing stage (cosign.ts: solo for a lone node), trust store
 * (trustStore.ts), health (health.ts), proof archive and schedules, composed into one TimeService (service.ts).
 * `createTimeServiceFromConfig` is what `startNode` and the CLI use; tests build services with
 * `createTimeService` and their own card, key and clock.
 */
import type { Logger } from "pino";
import { createCard } from "../card";
import type { NodeConfig } from "../config";
import { createMeshStage } from "../mesh";
import { loadNodeKeys } from "../keysource/load";
import { createTimeService, type CoreTimeService, type CreateTimeServiceParameters } from "./service";

export * from "./types";
export { createTimeService, type CoreTimeService, type CreateTimeServiceParameters } from "./service";
export { Attestor, type AttestorOptions, type AttestorStats } from "./attestor";
export { ProofArchive, type ProofArchiveOptions } from "./archive";
export {
  ScheduleService,
  parseExecuteAt,
  validateCallbackUrl,
  validateExecuteAt,
  retryDelayMs,
  isLoopbackHost,
  type ScheduleDeliveryBody,
  type ScheduleServiceOptions,
} from "../schedules";
export { buildSignedTime } from "./signedTime";
export { soloCoSigning, localProof, type CoSigningStage, type LocalAttestation } from "./cosign";
export { TrustStore, type TrustStoreOptions, type ChainFailure } from "./trustStore";
export { createHealthCheck, type HealthSources } from "./health";

export interface CreateTimeServiceFromConfigOptions {
  logger: Logger;
  /** Extra dependencies for tests (clock, callback resolver and transport, jitter). */
  deps?: Pick<CreateTimeServiceParameters, "nodeClockNs" | "resolveCallbackHost" | "callbackTransport" | "random">;
}

/**
 * Loads the keys (config.keyDir, or a PKCS#11 token), builds the configured card driver and returns a service that is not
 * started yet. The service owns the card (stop() closes it).
 */
export async function createTimeServiceFromConfig(
  config: NodeConfig,
  options: CreateTimeServiceFromConfigOptions,
): Promise<CoreTimeService> {
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
