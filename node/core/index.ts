/**
 * The node's core: attestor, proof archive, schedules, verification, composed into one TimeService.
 * `createTimeServiceFromConfig` is what `startNode` and the CLI use; tests build services with
 * `createTimeService` and their own card, key and clock.
 */
import type { Logger } from "pino";
import { loadKeyDir } from "../../protocol/keystore";
import { createCard } from "../card";
import type { NodeConfig } from "../config";
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
} from "./schedules";
export { buildSignedTime } from "./signedTime";

export interface CreateTimeServiceFromConfigOptions {
  logger: Logger;
  /** Extra dependencies for tests (clock, callback resolver and transport, jitter). */
  deps?: Pick<CreateTimeServiceParameters, "nodeClockNs" | "resolveCallbackHost" | "callbackTransport" | "random">;
}

/**
 * Loads the key directory (config.keyDir), builds the configured card driver and returns a service that is not
 * started yet. The service owns the card (stop() closes it).
 */
export async function createTimeServiceFromConfig(
  config: NodeConfig,
  options: CreateTimeServiceFromConfigOptions,
): Promise<CoreTimeService> {
  const keys = await loadKeyDir(config.keyDir, config.keystorePassword === "" ? {} : { password: config.keystorePassword });
  const card = createCard(config.cardDriver, keys);
  return createTimeService({ config, card, nodeKey: keys.nodeKey, logger: options.logger, ownsCard: true, ...options.deps });
}
