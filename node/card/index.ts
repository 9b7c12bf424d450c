/**
 * Card drivers by the name the `cardDriver` setting gives. A driver is built from the keys of keyDir (a hardware
 * driver would take its device path and HSM handle from its own settings instead).
 *
 * Decision on asynchrony: real drivers (PCIe time cards, HSM-backed signing) answer asynchronously, so the
 * second driver will need `signHardware` to return a Promise. The interface stays synchronous until then, and
 * changes together with the attestor that signs off the serving thread (docs/architecture.md): a synchronous
 * driver is the special case of an asynchronous one, not the other way round.
 */
import type { KeyMaterial } from "../../protocol/keystore";
import { DevTimeCard } from "./dev";
import type { TimeCard } from "./types";

/** What a driver is built from: the card's key and certificate chain, as keyDir holds them. */
export type CardKeyMaterial = Pick<KeyMaterial, "cardKey" | "certificateChainPem">;

export type { TamperState, TimeCard } from "./types";
export { DevTimeCard, type DevTimeCardOptions } from "./dev";

export const CARD_DRIVERS = {
  /** P-256 key from keyDir, host clock (process.hrtime anchored to the wall clock). */
  dev: (keys: CardKeyMaterial): TimeCard => new DevTimeCard({ cardKey: keys.cardKey, certificateChainPem: keys.certificateChainPem }),
} as const satisfies Record<string, (keys: CardKeyMaterial) => TimeCard>;

export type CardDriverName = keyof typeof CARD_DRIVERS;

/** The driver the setting names; config validation admits only CARD_DRIVERS' names. */
export function createCard(driver: string, keys: CardKeyMaterial): TimeCard {
  if (!Object.hasOwn(CARD_DRIVERS, driver)) throw new RangeError(`unknown cardDriver "${driver}" (known: ${Object.keys(CARD_DRIVERS).join(", ")})`);
  return CARD_DRIVERS[driver as CardDriverName](keys);
}
export { createAnchoredClock, SYSTEM_CLOCK_SOURCES, type HostClockSources } from "./hostClock";
