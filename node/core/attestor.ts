/**
 * The attestor: the only code that asks the card and the node key to sign. It produces a dual-signed
 * SignedTime (card P-256 signature + node EIP-712 signature over cardId, nanoMoment, accuracy, the card
 * signature's hash and the node's own timestamp) on a short tick and on demand, and keeps the freshest one in a
 * cache that every transport reads (STYLE.md habit 11: background loop writes, handlers read).
 *
 * Cost: one P-256 signature (OpenSSL) plus one EIP-712 digest and one secp256k1 signature (@noble/curves) per
 * attestation. On the 2-core dev VM under heavy parallel load (loadavg ≈ 7.8) one attestation took ≈ 1.1–1.9 ms
 * p50 and the 1 ms tick used ≈ 35–50 % of one core; expect roughly a quarter of that on an idle machine. Ticks
 * never overlap: signing is synchronous and the next tick is armed only after the previous one finished, so the
 * effective period is max(tickInterval, signing time + the 1 ms timer granularity). `tickIntervalNs` trades
 * CPU for proof freshness.
 *
 * Safety rules:
 * - the node refuses to sign while the card's measured error exceeds the accuracy bound (the accuracy in the
 *   proof is signed, so it must be true); the cache keeps the previous proof, which ages and stops being served
 *   once older than maxServeAgeNs;
 * - on tamper the attestor stops at once, drops the cached proof (current() throws UnavailableError with the
 *   reason), notifies tamper listeners and raises an alert. Tamper is latched: only a restart with a healthy card
 *   resumes attesting.
 */
import type { Logger } from "pino";
import { timeAttestationForProof } from "../../protocol/codec";
import { UnavailableError } from "../../protocol/errors";
import type { NodeKey } from "../../protocol/keys";
import { signNodeEntry } from "../../protocol/sign";
import type { TimeProof } from "../../protocol/types";
import type { TimeCard } from "../card/types";
import { buildSignedTime } from "./signedTime";
import type { NodeAlert, SignedTime } from "./types";

export interface AttestorOptions {
  card: TimeCard;
  nodeKey: NodeKey;
  /** Signed into every proof, ns. */
  accuracyNs: number;
  /** Refuse to sign while card.measuredErrorNs() exceeds this, ns (≤ accuracyNs). */
  signingErrorBoundNs: number;
  /** Interval between ticks, ns. */
  tickIntervalNs: bigint;
  /** current() refuses a cached proof older than this (node clock − nanoMoment), ns. */
  maxServeAgeNs: bigint;
  /** The node's own clock, ns since the Unix epoch (the nodeTimestamp it signs). */
  nodeClockNs: () => bigint;
  logger: Logger;
}

export interface AttestorStats {
  attestationsTotal: number;
  accuracyRefusalsTotal: number;
  tamperEventsTotal: number;
  tickErrorsTotal: number;
  lastSignDurationNs: bigint | null;
}

type Listener<T> = (value: T) => void;

/** A tiny synchronous event list; a throwing listener is logged and does not stop the others. */
class Listeners<T> {
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

const NS_PER_MS = 1_000_000n;

export class Attestor {
  readonly #options: AttestorOptions;
  readonly #logger: Logger;
  readonly #proofListeners: Listeners<SignedTime>;
  readonly #tamperListeners: Listeners<string>;
  readonly #alertListeners: Listeners<NodeAlert>;
  #latest: SignedTime | null = null;
  #timer: NodeJS.Timeout | null = null;
  #running = false;
  #nextTickAtNs = 0n;
  #tamperReason: string | null = null;
  #refusalReason: string | null = null;
  #unsubscribeCard: (() => void) | null = null;
  readonly #stats: AttestorStats = {
    attestationsTotal: 0,
    accuracyRefusalsTotal: 0,
    tamperEventsTotal: 0,
    tickErrorsTotal: 0,
    lastSignDurationNs: null,
  };

  constructor(options: AttestorOptions) {
    if (options.signingErrorBoundNs > options.accuracyNs) {
      throw new RangeError("signingErrorBoundNs must not exceed accuracyNs: the node would sign an accuracy it does not meet");
    }
    this.#options = options;
    this.#logger = options.logger.child({ component: "attestor" });
    this.#proofListeners = new Listeners(this.#logger, "proof");
    this.#tamperListeners = new Listeners(this.#logger, "tamper");
    this.#alertListeners = new Listeners(this.#logger, "alert");
  }

  /** Subscribes to the card's tamper events, signs the first proof, then ticks. Idempotent. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#unsubscribeCard = this.#options.card.onTamper((reason) => this.#handleTamper(reason));
    const state = this.#options.card.tamperState();
    if (state.tampered) {
      this.#handleTamper(state.reason ?? "card reports tampering");
      return;
    }
    this.#nextTickAtNs = this.#options.nodeClockNs();
    this.#tick();
  }

  /** Stops ticking and drops the cache. Listeners stay registered (a restarted attestor reuses them). */
  stop(): void {
    this.#running = false;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#unsubscribeCard?.();
    this.#unsubscribeCard = null;
    this.#latest = null;
  }

  get running(): boolean {
    return this.#running;
  }

  /** The tamper reason, or null. */
  get tamperReason(): string | null {
    return this.#tamperReason;
  }

  /** Why the node currently refuses to sign (accuracy), or null. */
  get refusalReason(): string | null {
    return this.#refusalReason;
  }

  /** The freshest proof without freshness checks (health, archive); null when none. */
  get latest(): SignedTime | null {
    return this.#latest;
  }

  stats(): AttestorStats {
    return { ...this.#stats };
  }

  /**
   * The freshest cached proof. Throws UnavailableError when tampered, not started, or when the cached proof is
   * older than maxServeAgeNs (signing refused for a while).
   */
  current(): SignedTime {
    if (this.#tamperReason !== null) {
      throw new UnavailableError(`time card tampered: ${this.#tamperReason}`, { reason: this.#tamperReason });
    }
    const latest = this.#latest;
    if (latest === null) {
      throw new UnavailableError(this.#refusalReason ?? "no attestation yet: the node is starting", {});
    }
    const ageNs = this.#options.nodeClockNs() - latest.proof.nanoMoment;
    if (ageNs > this.#options.maxServeAgeNs) {
      throw new UnavailableError(`no fresh attestation (latest is ${ageNs} ns old): ${this.#refusalReason ?? "attestor stalled"}`, {
        ageNs: ageNs.toString(),
      });
    }
    return latest;
  }

  /**
   * Signs a fresh attestation now, caches it and notifies proof listeners. Throws UnavailableError when the
   * card is tampered or its measured error exceeds the bound.
   */
  attest(): SignedTime {
    const { card, nodeKey, accuracyNs, signingErrorBoundNs, nodeClockNs } = this.#options;
    if (this.#tamperReason !== null) {
      throw new UnavailableError(`time card tampered: ${this.#tamperReason}`, { reason: this.#tamperReason });
    }
    const state = card.tamperState();
    if (state.tampered) {
      const reason = state.reason ?? "card reports tampering";
      this.#handleTamper(reason);
      throw new UnavailableError(`time card tampered: ${reason}`, { reason });
    }
    const measuredErrorNs = card.measuredErrorNs();
    if (!(measuredErrorNs <= signingErrorBoundNs)) {
      this.#refuse(measuredErrorNs);
      throw new UnavailableError(this.#refusalReason ?? "accuracy bound exceeded", {
        measuredErrorNs,
        signingErrorBoundNs,
      });
    }
    if (this.#refusalReason !== null) {
      this.#logger.info({ measuredErrorNs, signingErrorBoundNs }, "card back within the accuracy bound; signing resumed");
      this.#refusalReason = null;
    }
    const startedAt = process.hrtime.bigint();
    let proof: TimeProof;
    try {
      const nanoMoment = card.readTimeNs();
      const hardwareSignature = card.signHardware(nanoMoment);
      const base = { nanoMoment, hardwareSignature, accuracy: accuracyNs };
      const nodeSignature = signNodeEntry(nodeKey, timeAttestationForProof(base, nodeClockNs()));
      // One entry is trivially "ascending": assembleProof's address recovery would only cost time here.
      proof = { ...base, nodeSignature };
    } catch (error) {
      const after = card.tamperState();
      if (after.tampered) this.#handleTamper(after.reason ?? "card reports tampering");
      throw error;
    }
    this.#stats.lastSignDurationNs = process.hrtime.bigint() - startedAt;
    const signed = buildSignedTime(proof, nodeClockNs());
    this.#latest = signed;
    this.#stats.attestationsTotal += 1;
    this.#proofListeners.emit(signed);
    return signed;
  }

  onProof(listener: (signed: SignedTime) => void): () => void {
    return this.#proofListeners.add(listener);
  }

  onTamper(listener: (reason: string) => void): () => void {
    return this.#tamperListeners.add(listener);
  }

  onAlert(listener: (alert: NodeAlert) => void): () => void {
    return this.#alertListeners.add(listener);
  }

  #tick(): void {
    this.#timer = null;
    if (!this.#running || this.#tamperReason !== null) return;
    try {
      this.attest();
    } catch (error) {
      if (this.#tamperReason !== null) return; // tamper handled: the loop ends here
      if (this.#refusalReason === null) {
        this.#stats.tickErrorsTotal += 1;
        this.#logger.error({ err: error }, "attestation tick failed");
      }
    }
    if (!this.#running || this.#tamperReason !== null) return;
    // Fixed-rate schedule without catch-up bursts: if a tick ran late, the next one is due one interval later.
    const nowNs = this.#options.nodeClockNs();
    this.#nextTickAtNs += this.#options.tickIntervalNs;
    if (this.#nextTickAtNs < nowNs) this.#nextTickAtNs = nowNs;
    const delayMs = Math.max(1, Math.round(Number((this.#nextTickAtNs - nowNs) / NS_PER_MS)));
    this.#timer = setTimeout(() => this.#tick(), delayMs);
    this.#timer.unref();
  }

  #refuse(measuredErrorNs: number): void {
    this.#stats.accuracyRefusalsTotal += 1;
    if (this.#refusalReason !== null) return; // log and alert on the transition only, not at every tick
    const { card, nodeKey, signingErrorBoundNs, accuracyNs } = this.#options;
    this.#refusalReason = `card measured error ${measuredErrorNs} ns exceeds the signing bound ${signingErrorBoundNs} ns (advertised accuracy ${accuracyNs} ns); refusing to sign`;
    this.#logger.warn({ measuredErrorNs, signingErrorBoundNs, accuracyNs, cardId: card.cardId }, "refusing to sign: accuracy bound exceeded");
    this.#alertListeners.emit({
      kind: "accuracy",
      nodeId: nodeKey.address,
      cardId: card.cardId,
      reason: this.#refusalReason,
      atNs: this.#options.nodeClockNs(),
    });
  }

  #handleTamper(reason: string): void {
    if (this.#tamperReason !== null) return;
    this.#tamperReason = reason;
    this.#latest = null;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#stats.tamperEventsTotal += 1;
    const { card, nodeKey } = this.#options;
    this.#logger.error({ cardId: card.cardId, nodeId: nodeKey.address, reason }, "time card tampered: attestation stopped");
    this.#tamperListeners.emit(reason);
    this.#alertListeners.emit({ kind: "tamper", nodeId: nodeKey.address, cardId: card.cardId, reason, atNs: this.#options.nodeClockNs() });
  }
}
