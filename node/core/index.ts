/**
 * The node's core: attestor (local attestations), co-signing stage (cosign.ts: solo for a lone node), trust store
 * (trustStore.ts), verification, health, the proof archive, composed into one TimeService (service.ts). It imports
 * node/card and nothing else of node/; node/compose.ts builds it from the settings with the mesh and the schedules.
 */
export * from "./types";
export {
  createCoreTimeService,
  type CoreTimeService,
  type CoreTimeServiceParameters,
  type ScheduleBook,
  type ScheduleBookDeps,
} from "./service";
export type { CoreSettings, SigningBounds } from "./settings";
export { Attestor, type AttestorOptions, type AttestorStats } from "./attestor";
export { ProofArchive, type ProofArchiveOptions } from "./archive";
export { buildSignedTime } from "./signedTime";
export { soloCoSigning, localProof, type CoSigningStage, type LocalAttestation } from "./cosign";
export { TrustStore, type TrustStoreOptions, type ChainFailure } from "./trustStore";
export { createHealthCheck, type HealthSources } from "./health";
