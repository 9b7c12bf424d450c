/**
 * The attestor's options and counters (attestor.ts), and the small listener list it notifies.
 */
import type { Logger } from "pino";
import type { NodeKey } from "../../protocol/keys";
import type { RecoveryMemo } from "../../protocol/sign";
import type { WallClockAnchor } from "../card/hostClock";
import type { TimeCard } from "../card/types";
import type { CoSigningStage } from "./cosign";

export interface AttestorOptions {
  card: TimeCard;
  nodeKey: NodeKey;
  /**
   * Signed into every proof, ns; a card that proves its own bound (TimeCard.accuracyBoundNs) has that signed
   * instead, and this is then the most it may sign (the advertised accuracy).
   */
  accuracyNs: number;
  /** Refuse to sign while card.measuredErrorNs(), or the card's own bound, exceeds this, ns (≤ accuracyNs). */
  signingErrorBoundNs: number;
  /** Interval between ticks, ns. */
  tickIntervalNs: bigint;
  /**
   * Whether to attest on a tick at all (default true). A mesh node serves its rounds' co-signed proofs, not these:
   * it turns ticks off and keeps the attestor for its guard (assertCanSign), tamper watch and on-demand attest().
   */
  ticks?: boolean;
  /** current() refuses a cached proof older than this (node clock − nanoMoment), ns. */
  maxServeAgeNs: bigint;
  /**
   * current() signs a fresh proof first when the cached one is older than this, ns; 0n (default) = never. Only
   * while ticks sign in the main thread (libsecp256k1: 0.15–0.4 ms an attestation): a busy event loop delays
   * timers, not requests, so this is what bounds the age of a served proof under load. See current().
   */
  refreshAfterNs?: bigint;
  /** The node's own clock, ns since the Unix epoch (the nodeTimestamp it signs). */
  nodeClockNs: () => bigint;
  /**
   * The host-clock anchor nodeClockNs follows (node/card/hostClock.ts clockFromAnchor), when it is such a clock.
   * With it, and a card that lets the thread hold its key and read its clock, the signer thread makes whole ticks
   * on its own (tickStrategies.ts SelfTickingTicks).
   */
  nodeClockAnchor?: WallClockAnchor;
  logger: Logger;
  /**
   * Sign ticks in a worker thread (signerWorker.ts; self-ticking when possible: tickStrategies.ts), so the
   * serving event loop spends no time on them. Default: defaultSignInWorker. refreshAfterNs signs on demand in the
   * calling thread, so a worker turns it off.
   */
  signInWorker?: boolean;
  /**
   * The owner's recovery memo (the TimeService's, shared with its verify()): every entry this node signs is
   * remembered in it, so verifying the node's own proofs costs no ecrecover. Omitted: nothing is seeded.
   */
  recoveryMemo?: RecoveryMemo;
  /**
   * Turns each local attestation (card moment + this node's entry) into the served proof: see cosign.ts.
   * Default soloCoSigning() (a lone node: the proof carries this node's entry only).
   */
  coSigning?: CoSigningStage;
}

export interface AttestorStats {
  attestationsTotal: number;
  accuracyRefusalsTotal: number;
  tamperEventsTotal: number;
  tickErrorsTotal: number;
  /** ns from the tick's start to the cached proof (worker round trip included). */
  lastSignDurationNs: bigint | null;
  /** Attestations whose node entry the worker thread signed (the rest signed in the main thread). */
  workerAttestationsTotal: number;
  /** Where ticks sign right now. */
  signer: "worker" | "main-thread";
  /** Whether the signer thread makes whole ticks on its own (tickStrategies.ts SelfTickingTicks). */
  selfTicking: boolean;
}

type Listener<T> = (value: T) => void;

/** A tiny synchronous event list; a throwing listener is logged and does not stop the others. */
export class Listeners<T> {
  readonly #set = new Set<Listener<T>>();
  constructor(
    private readonly logger: Logger,
    private readonly event: string,
  ) {}
  add(listener: Listener<T>): () => void {
    this.#set.add(listener);
    return () => {
      this.#set.delete(listener);
    };
  }
  emit(value: T): void {
    for (const listener of this.#set) {
      try {
        listener(value);
      } catch (error) {
        this.logger.error({ err: error, event: this.event }, "listener failed");
      }
    }
  }
  clear(): void {
    this.#set.clear();
  }
}

