/**
 * The node's health (types.ts HealthReport), from the attestor's state, the card's measured error and the node
 * clock. The order of the checks is the contract: tampered before starting before stale before degraded.
 * - tampered: the card reported tampering (latched by the attestor); nothing is served;
 * - starting: not running, or no proof yet; nothing is served;
 * - stale: the freshest proof is older than maxAttestationAgeNs, the bound current() applies, so every proof
 *   request answers 503 (signing stalled or refused for too long);
 * - degraded: refusing to sign (accuracy, or the card's signingRefusal: a required GPS fix missing), or the card
 *   reports itself degraded (the chrony card: chrony unsynchronised or its bound above the maximum; any card with
 *   gpsRequired and no fresh fix), but a proof within the age bound is still served;
 * - ok: fresh proofs are being produced.
 */
import type { CardStatus } from "../card/types";
import type { HealthReport, MeshStateReport, SignedTime } from "./types";

/** What health reads: the attestor's cache and reasons (an Attestor fits), the card, the clock, the run state. */
export interface HealthSources {
  attestor: {
    readonly latest: SignedTime | null;
    readonly tamperReason: string | null;
    readonly refusalReason: string | null;
  };
  /** The card's current measured error, ns. */
  measuredErrorNs(): number;
  /** The card driver's own report (TimeCard.status), for drivers that give one. */
  cardStatus?(): CardStatus | undefined;
  /** The node clock, ns since the Unix epoch. */
  nowNs(): bigint;
  /** Whether the service is started. */
  isRunning(): boolean;
  /** The serving age bound (config.maxAttestationAgeNs), ns. */
  maxAttestationAgeNs: bigint;
}

/** Returns the health check over `sources`; each call reads them afresh. */
export function createHealthCheck(sources: HealthSources): () => HealthReport {
  const { attestor, maxAttestationAgeNs } = sources;
  return () => {
    const latest = attestor.latest;
    const lastProofAgeNs = latest === null ? null : sources.nowNs() - latest.proof.nanoMoment;
    const measuredErrorNs = sources.measuredErrorNs();
    const card = sources.cardStatus?.();
    const report = (status: HealthReport["status"], reason: string | null): HealthReport =>
      card === undefined ? { status, reason, lastProofAgeNs, measuredErrorNs } : { status, reason, lastProofAgeNs, measuredErrorNs, card };
    if (attestor.tamperReason !== null) return report("tampered", attestor.tamperReason);
    if (!sources.isRunning() || latest === null) return report("starting", attestor.refusalReason ?? card?.reason ?? null);
    if (lastProofAgeNs !== null && lastProofAgeNs > maxAttestationAgeNs) {
      return report("stale", attestor.refusalReason ?? card?.reason ?? "no fresh attestation: signing stalled");
    }
    if (attestor.refusalReason !== null) return report("degraded", attestor.refusalReason);
    // The attestor samples the card at its tick (or a mesh round); the card's own state is newer between them.
    if (card !== undefined && card.state !== "serving") return report("degraded", card.reason ?? `card ${card.state}`);
    return report("ok", null);
  };
}

/**
 * The health source of a mesh node: healthy when its co-signed proofs are (stale once the latest is older than the
 * mesh's serving bound), degraded while the attestor refuses to sign or the mesh is not Converged.
 */
export function servedHealthSource(
  attestor: HealthSources["attestor"],
  consensus: { readonly latest: SignedTime | null; state(): MeshStateReport },
): HealthSources["attestor"] {
  return {
    get latest() {
      return consensus.latest;
    },
    get tamperReason() {
      return attestor.tamperReason;
    },
    get refusalReason() {
      const state = consensus.state();
      if (attestor.refusalReason !== null) return attestor.refusalReason;
      return state.convergenceState === "Converged" ? null : `mesh ${state.convergenceState}${state.lastError === null ? "" : `: ${state.lastError}`}`;
    },
  };
}
