export type { TamperState, TimeCard } from "./types";
export { DevTimeCard, type DevTimeCardOptions } from "./dev";
export { createAnchoredClock, SYSTEM_CLOCK_SOURCES, type HostClockSources } from "./hostClock";
