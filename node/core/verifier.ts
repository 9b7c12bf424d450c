/**
 * TimeService.verify (docs/protocol.md §6): protocol/verify.ts against the trust store's cards and nodes, the
 * settings' windows and the node clock, with the service's own caches (the recovery memo the attestor seeds, so
 * verify() of the node's own proofs costs no ecrecover, and a P-256 key cache).
 */
import { decodeHardwareSignature } from "../../protocol/codec";
import type { Hex, TimeProof } from "../../protocol/types";
import type { RecoveryMemo } from "../../protocol/sign";
import { createP256KeyCache, verifyTimeProof, type VerifyTimeProofContext } from "../../protocol/verify";
import type { CoreSettings } from "./settings";
import type { TrustStore } from "./trustStore";
import type { VerifyOptions, VerifyOutcome } from "./types";

export interface Verifier {
  verify(proof: TimeProof, options?: VerifyOptions): VerifyOutcome;
  /** verify() for a card the node may not know yet: its chain checked against the trusted roots first. */
  verifyWithCertificateChain(proof: TimeProof, certificateChainPem: readonly string[]): Promise<VerifyOutcome>;
}

function cardIdOfProof(proof: TimeProof): Hex | undefined {
  try {
    return decodeHardwareSignature(proof.hardwareSignature).cardId;
  } catch {
    return undefined;
  }
}

export function createVerifier(trust: TrustStore, settings: CoreSettings, nodeClockNs: () => bigint, recoveryMemo: RecoveryMemo): Verifier {
  const p256KeyCache = createP256KeyCache();
  function verify(proof: TimeProof, options: VerifyOptions = {}): VerifyOutcome {
    const refused = trust.chainFailure(cardIdOfProof(proof), options.certificateChainPem);
    if (refused !== undefined) return refused;
    const ctx: VerifyTimeProofContext = {
      resolveCard: trust.resolveCard,
      isActiveNode: trust.isActiveNode,
      nodeQuorum: settings.nodeQuorum,
      nowNs: nodeClockNs(),
      maxAttestationAgeNs: settings.maxAttestationAgeNs,
      maxFutureDriftNs: settings.maxFutureDriftNs,
      maxAcceptableDriftNs: settings.maxAcceptableDriftNs,
      recoveryMemo,
      p256KeyCache,
    };
    const result = verifyTimeProof(proof, ctx);
    return result.valid ? { valid: true, reason: null } : { valid: false, reason: result.reason, detail: result.detail };
  }
  return {
    verify,
    async verifyWithCertificateChain(proof, certificateChainPem) {
      await trust.checkChain(certificateChainPem);
      return verify(proof, { certificateChainPem: [...certificateChainPem] });
    },
  };
}
