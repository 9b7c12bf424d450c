/**
 * Card drivers by the name the `cardDriver` setting gives. A driver is built from the keys of keyDir (a hardware
 * driver would take its device path and HSM handle from its own settings instead).
 *
 * Decision on asynchrony: real drivers (PCIe time cards, HSM-backed signing) answer asynchronously, so the
 * second driver will need `signHardware` to return a Promise. The interface stays synchronous until then, and
 * changes together with the attestor that signs off the serving thread (docs/architecture.md): a synchronous
 * driver is the special case of an asynchronous one, not the other way round.
 */
import { KeyObject } from "node:crypto";
import type { Logger } from "pino";
import type { CardKey } from "../keysource/tokenKeys";
import { SETTING_DEFAULTS, type NodeConfig } from "../config";
import { ChronyTimeCard, chronycRunner, fileCardKey } from "./chrony";
import { DevTimeCard } from "./dev";
import { GpsdClient, type GpsdClientEvent } from "./gpsdClient";
import type { TimeCard } from "./types";

/**
 * What a driver is built from: the card's key (a key file's KeyObject, or a signer holding it elsewhere: a PKCS#11
 * token, node/keysource/) and certificate chain (keyDir/card.pem). node/keysource/load.ts loads both.
 */
export interface CardKeyMaterial {
  cardKey: KeyObject | CardKey;
  certificateChainPem: readonly string[];
}

/** The settings a driver reads besides its keys (the chrony driver's, and the optional gpsd reference of both). */
export type CardDriverSettings = Pick<
  NodeConfig,
  "chronySocketPath" | "chronycPath" | "chronyPollIntervalMs" | "chronyMaxBoundNs" | "chronyMaxClockErrorPpb" | "gpsdHost" | "gpsdPort" | "gpsRequired" | "gpsStaleAfterMs"
>;

/**
 * The GPS reference the settings configure (gpsdHost non-empty: a started gpsd client, which the card owns and
 * closes), or undefined. Reference metadata for every driver; never the signed moment (gpsdClient.ts).
 */
function gpsSource(settings: CardDriverSettings, logger: Logger | undefined): { gps: GpsdClient } | Record<string, never> {
  if (settings.gpsdHost === "") return {};
  const gpsd = { host: settings.gpsdHost, port: settings.gpsdPort };
  const onEvent = logger === undefined ? undefined : (event: GpsdClientEvent) => logGpsdEvent(logger, gpsd, event);
  return { gps: new GpsdClient({ ...gpsd, required: settings.gpsRequired, staleAfterMs: settings.gpsStaleAfterMs, ...(onEvent === undefined ? {} : { onEvent }) }).start() };
}

/**
 * gpsd's connection changes, each (a retry is at most every 10 s), and malformed lines at the 1st, 10th, 100th, ...:
 * a gpsd that sends nothing but garbage is seen at once without flooding the log (the count is in each line).
 */
function logGpsdEvent(logger: Logger, gpsd: { host: string; port: number }, event: GpsdClientEvent): void {
  switch (event.kind) {
    case "connected":
      logger.info({ gpsd, attempt: event.attempt }, "gpsd connected: watching TPV, SKY and PPS reports");
      break;
    case "disconnected":
      logger.warn({ gpsd, error: event.error, retryInMs: event.retryInMs }, "gpsd connection lost or refused; retrying");
      break;
    case "malformed":
      if (/^10*$/.test(String(event.malformedLinesTotal))) {
        logger.warn({ gpsd, error: event.error, malformedLinesTotal: event.malformedLinesTotal }, "gpsd sent a malformed line; dropped");
      }
      break;
  }
}

export type { CardStatus, TamperState, TimeCard } from "./types";
export { DevTimeCard, type DevTimeCardOptions } from "./dev";
export { ChronyTimeCard, chronycRunner, fileCardKey, type ChronyCardKey, type ChronyTimeCardOptions } from "./chrony";
export { GpsdClient, type GpsdClientOptions, type GpsReferenceSource } from "./gpsdClient";

export const CARD_DRIVERS = {
  /** P-256 key from keyDir, host clock (process.hrtime anchored to the wall clock). */
  dev: (keys: CardKeyMaterial, settings: CardDriverSettings, logger?: Logger): TimeCard =>
    new DevTimeCard({ cardKey: keys.cardKey, certificateChainPem: keys.certificateChainPem, ...gpsSource(settings, logger) }),
  /** P-256 key from keyDir, the host clock with the bound chronyd's tracking figures prove (chrony.ts). */
  chrony: (keys: CardKeyMaterial, settings: CardDriverSettings, logger?: Logger): TimeCard =>
    new ChronyTimeCard({
      key: keys.cardKey instanceof KeyObject ? fileCardKey(keys.cardKey) : keys.cardKey,
      certificateChainPem: keys.certificateChainPem,
      runChronyc: chronycRunner({ chronycPath: settings.chronycPath, socketPath: settings.chronySocketPath }),
      pollIntervalMs: settings.chronyPollIntervalMs,
      maxBoundNs: settings.chronyMaxBoundNs,
      maxClockErrorPpb: settings.chronyMaxClockErrorPpb,
      ...gpsSource(settings, logger),
    }),
} as const satisfies Record<string, (keys: CardKeyMaterial, settings: CardDriverSettings, logger?: Logger) => TimeCard>;

export type CardDriverName = keyof typeof CARD_DRIVERS;

/** The driver the setting names; config validation admits only CARD_DRIVERS' names. `logger`: what its inputs (gpsd) log. */
export function createCard(driver: string, keys: CardKeyMaterial, settings: CardDriverSettings = SETTING_DEFAULTS, logger?: Logger): TimeCard {
  if (!Object.hasOwn(CARD_DRIVERS, driver)) throw new RangeError(`unknown cardDriver "${driver}" (known: ${Object.keys(CARD_DRIVERS).join(", ")})`);
  return CARD_DRIVERS[driver as CardDriverName](keys, settings, logger);
}
export { createAnchoredClock, SYSTEM_CLOCK_SOURCES, type HostClockSources } from "./hostClock";
