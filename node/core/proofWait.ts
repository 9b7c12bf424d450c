/**
 * TimeService.proofAtOrAfter (docs/protocol.md §9.7): the freshest servable proof whose moment is at or after a
 * given one, waiting on timers while the card clock is earlier. A delivery never carries a proof dated before its
 * time, never signs once the service stops or the card is tampered, and gives up when its caller does.
 */
import { setTimeout as delay } from "node:timers/promises";
import { UnavailableError } from "../../protocol/errors";
import type { TimeCard } from "../card/types";
import type { SignedTime } from "./types";

const NS_PER_MS = 1_000_000n;
/** Waits of at most WAIT_STEP_MS before the proof wait gives up. */
const PROOF_WAIT_ROUNDS = 20;
const WAIT_STEP_MS = 1_000;
/** How often a node that only serves relayed proofs looks for one at or after a moment, ms. */
const RELAYED_PROOF_POLL_MS = 50;

export interface ProofWaitSources {
  card: TimeCard;
  /** What the service serves: the mesh's co-signed proofs, or the attestor's. */
  served: { readonly latest: SignedTime | null; current(): SignedTime };
  /** A newly signed proof whose moment is at or after `notBeforeNs` (a round or an attestation). */
  freshProof(notBeforeNs: bigint): Promise<SignedTime>;
  /** Whether this node signs proofs of its own now: false for a non-primary mesh member (relayed proofs only). */
  signsOwnProofs: boolean;
  /** Whether its role lets it sign as a card (a primary); else it polls for relayed proofs. */
  signsAsCard: boolean;
  /** Throws UnavailableError once the service is stopping. */
  throwIfStopping(): void;
  /** Aborted when the service stops (a new signal per start). */
  stoppingSignal(): AbortSignal;
}

export type ProofAtOrAfter = (executeAtNs: bigint, signal?: AbortSignal) => Promise<SignedTime>;

export function createProofAtOrAfter(sources: ProofWaitSources): ProofAtOrAfter {
  const { card, served } = sources;

  async function waitForProof(executeAtNs: bigint, waitSignal: AbortSignal, signal: AbortSignal | undefined): Promise<SignedTime> {
    for (let round = 0; round < PROOF_WAIT_ROUNDS; round += 1) {
      sources.throwIfStopping();
      signal?.throwIfAborted();
      const tamper = card.tamperState();
      if (tamper.tampered) throw new UnavailableError(tamper.reason ?? "time card tampered", {});
      const cached = served.latest;
      if (cached !== null && cached.proof.nanoMoment >= executeAtNs) return served.current();
      const cardNowNs = card.readTimeNs();
      if (cardNowNs >= executeAtNs && sources.signsOwnProofs) {
        // A mesh round already in flight read its moment before executeAt: roundNow never hands that one back,
        // and the moment is checked here as well.
        const fresh = await sources.freshProof(executeAtNs);
        if (fresh.proof.nanoMoment >= executeAtNs) return fresh;
        continue;
      }
      const untilDueMs = Number((executeAtNs - cardNowNs + NS_PER_MS - 1n) / NS_PER_MS);
      const waitMs = Math.min(Math.max(untilDueMs, sources.signsAsCard ? 1 : RELAYED_PROOF_POLL_MS), WAIT_STEP_MS);
      // stop() or the caller aborts the wait (AbortError); the next round's checks then end the loop unsigned.
      await delay(waitMs, undefined, { signal: waitSignal }).catch(() => undefined);
    }
    throw new UnavailableError("the card clock did not reach executeAt", { executeAtNs: executeAtNs.toString() });
  }

  return async (executeAtNs, signal) => {
    // One controller per call, fed by both signals through listeners removed at the end: AbortSignal.any() with
    // the long-lived stopping signal would keep every call's composite signal alive on Node 20 (a leak per call).
    const stopping = sources.stoppingSignal();
    const wait = new AbortController();
    const abortWait = (): void => wait.abort();
    stopping.addEventListener("abort", abortWait, { once: true });
    signal?.addEventListener("abort", abortWait, { once: true });
    try {
      return await waitForProof(executeAtNs, wait.signal, signal);
    } finally {
      stopping.removeEventListener("abort", abortWait);
      signal?.removeEventListener("abort", abortWait);
    }
  };
}
