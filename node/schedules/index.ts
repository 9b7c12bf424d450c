/**
 * The schedules wing (docs/protocol.md §9.7): ScheduleService (service.ts) over its store (store.ts), the fair
 * picker (fairness.ts), the request checks (validation.ts), one delivery attempt (delivery.ts), the worker's timer
 * (dispatcher.ts) and the SSRF guard (callbackGuard.ts). It imports node/core (types, abort.ts) and nothing above.
 */
export { ScheduleService, type ScheduleServiceOptions, type ScheduleStats } from "./service";
export { parseExecuteAt, validateCallbackUrl, validateExecuteAt, type ScheduleWindow } from "./validation";
export { retryDelayMs, type ScheduleDeliveryBody } from "./delivery";
export { pickFairly, type DueCandidate, type SuspectPolicy } from "./fairness";
export {
  isLoopbackHost,
  isNonPublicAddress,
  isNonPublicIpLiteral,
  type CallbackTransport,
  type ResolveHost,
} from "./callbackGuard";
