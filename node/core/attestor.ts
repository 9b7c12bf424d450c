/**
 * The attestor: the only code that asks the card and the node key to sign (docs/protocol.md §3–§5; docs/
 * architecture.md, "the attestor" and "the signer thread"). It makes a local attestation on a fixed-rate tick and on
 * demand, passes it through the co-signing stage (cosign.ts) once, and keeps the served SignedTime that every
 * transport reads. Where ticks sign is a TickStrategy (tickStrategies.ts). Safety rules, each pinned by a test:
 * - assertCanSign guards every signature of this node (ticks, on-demand, mesh rounds and co-signatures): nothing
 *   is signed while the card is tampered, refuses, or its measured error or own bound exceeds signingErrorBoundNs;
 * - tamper is latched: the cache is dropped, the thread closed, listeners and alerts told; only a restart resumes;
 * - a thread's signatures are published only after the serving thread's checks pass at publication.
 * With refreshAfterNs (serving-thread signing only) current() signs first when the cached proof is older, because a
 * loaded event loop runs timers late, not requests.
 * Why one file: every path that signs and the guard, latch and publication checks around it stay side by side, so the
 * signing rules read and review in one place; where ticks sign is already apart (tickStrategies.ts).
 */
import type { Logger } from "pino";
import { timeAttestationForProof } from "../../protocol/codec";
import { UnavailableError } from "../../protocol/errors";
import { signNodeEntry } from "../../protocol/sign";
import type { Hex } from "../../protocol/types";
import { Listeners, type AttestorOptions, type AttestorStats } from "./attestorOptions";
import { soloCoSigning, type CoSigningStage, type LocalAttestation } from "./cosign";
import { nextFixedRateTick } from "./fixedRate";
import { knownAnswerTest } from "./signerThreadChecks";
import { NodeSignerThread, type NodeSignRequest, type ThreadSignRequest } from "./signerWorker";
import {
  defaultSignInWorker,
  MainThreadTicks,
  RequestedTicks,
  selfTickingPossible,
  selfTickingSettings,
  SelfTickingTicks,
  type AttestorHost,
  type TickStrategy,
} from "./tickStrategies";
import type { NodeAlert, SignedTime } from "./types";

export { defaultSignInWorker } from "./tickStrategies";
export type { AttestorOptions, AttestorStats } from "./attestorOptions";

/** The refusal every path gives once the card reports tampering (the reason in message and details). */
function tamperedError(reason: string): UnavailableError {
  return new UnavailableError(`time card tampered: ${reason}`, { reason });
}

export class Attestor {
  readonly #options: AttestorOptions;
  readonly #logger: Logger;
  readonly #coSign: CoSigningStage;
  readonly #proofListeners: Listeners<SignedTime>;
  readonly #tamperListeners: Listeners<string>;
  readonly #alertListeners: Listeners<NodeAlert>;
  /** What the tick strategies may use of this attestor. */
  readonly #host: AttestorHost;
  readonly #mainThreadTicks: TickStrategy;
  /** Where ticks sign now: the serving thread until a signer thread passed its known-answer test. */
  #strategy: TickStrategy;
  #latest: SignedTime | null = null;
  #timer: NodeJS.Timeout | null = null;
  #running = false;
  #nextTickAtNs = 0n;
  #tamperReason: string | null = null;
  #refusalReason: string | null = null;
  /** Set when an on-demand refresh failed for a reason other than tamper or accuracy; cleared by the next proof. */
  #refreshSuspended = false;
  /** Set when a tick failed; cleared by the next proof. Proof requests do not start ticks meanwhile. */
  #tickFailing = false;
  #unsubscribeCard: (() => void) | null = null;
  /** The signer thread, from its start (ticks use it once it passed its known-answer test) until it is dropped. */
  #signer: NodeSignerThread | null = null;
  /** Bumped by stop(): replies and timers of an earlier run are ignored. */
  #generation = 0;
  readonly #stats: Omit<AttestorStats, "signer" | "selfTicking"> = {
    attestationsTotal: 0,
    accuracyRefusalsTotal: 0,
    tamperEventsTotal: 0,
    tickErrorsTotal: 0,
    lastSignDurationNs: null,
    workerAttestationsTotal: 0,
  };

  constructor(options: AttestorOptions) {
    if (options.signingErrorBoundNs > options.accuracyNs) {
      throw new RangeError("signingErrorBoundNs must not exceed accuracyNs: the node would sign an accuracy it does not meet");
    }
    this.#options = options;
    this.#coSign = options.coSigning ?? soloCoSigning();
    this.#logger = options.logger.child({ component: "attestor" });
    this.#proofListeners = new Listeners(this.#logger, "proof");
    this.#tamperListeners = new Listeners(this.#logger, "tamper");
    this.#alertListeners = new Listeners(this.#logger, "alert");
    this.#host = {
      options,
      logger: this.#logger,
      stats: this.#stats,
      generation: () => this.#generation,
      tamperReason: () => this.#tamperReason,
      refusalReason: () => this.#refusalReason,
      tickFailing: () => this.#tickFailing,
      timerArmed: () => this.#timer !== null,
      attest: () => void this.attest(),
      assertCanSign: () => this.assertCanSign(),
      prepareFor: (cardSigns) => this.#prepareFor(cardSigns),
      tickFailed: (error) => this.#tickFailed(error),
      armNextTick: () => this.#armNextTick(),
      tickNow: () => {
        if (this.#timer !== null) clearTimeout(this.#timer);
        this.#nextTickAtNs = this.#options.nodeClockNs(); // the schedule restarts from this tick
        this.#tick();
      },
      acceptFromWorker: (request, entry, digest, signDurationNs) => this.#acceptFromWorker(request, entry as Hex, digest as Hex, signDurationNs),
      isCurrent: (signer) => this.#signer === signer,
      dropSigner: (signer) => {
        if (this.#signer === signer) this.#closeSigner();
      },
    };
    this.#mainThreadTicks = new MainThreadTicks(this.#host);
    this.#strategy = this.#mainThreadTicks;
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
    if (this.#options.ticks === false) return;
    const refreshAfterNs = this.#options.refreshAfterNs ?? 0n;
    // On-demand refreshes sign in the serving thread: asking for them rules out the self-ticking default. A node key
    // held by a token (PKCS#11) signs where the token's session is, on this thread: the signer thread is given its
    // keys as bytes, which such a key never becomes (the configuration refuses signerThread 'on' with it).
    const threadCanHoldNodeKey = this.#options.nodeKey.holdsPrivateKey;
    if (threadCanHoldNodeKey && (this.#options.signInWorker ?? defaultSignInWorker(refreshAfterNs === 0n && selfTickingPossible(this.#options)))) {
      // Only 'auto' with pure-JS signing gets here with it set ('on' with it is refused by the configuration).
      if (refreshAfterNs > 0n) this.#logger.warn({ refreshAfterNs: refreshAfterNs.toString() }, "refreshAfterNs has no effect: ticks sign in the signer thread (pure-JS secp256k1)");
      this.#startSigner();
    }
    this.#nextTickAtNs = this.#options.nodeClockNs();
    this.#tick();
  }

  /** Stops ticking and drops the cache. Listeners stay registered (a restarted attestor reuses them). */
  stop(): void {
    this.#running = false;
    this.#generation += 1;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#closeSigner();
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
    const kind = this.#strategy.kind;
    return { ...this.#stats, signer: kind === "main-thread" ? "main-thread" : "worker", selfTicking: kind === "self-ticking" };
  }

  /**
   * The freshest proof. The tick strategy first takes what a signer thread finished; when the cached proof is older
   * than refreshAfterNs and signing runs in this thread, a new one is signed first (if that fails, the cached proof
   * is served under the usual rules). Throws UnavailableError when tampered, not started, or when the cached proof
   * is older than maxServeAgeNs (signing refused for a while).
   */
  current(): SignedTime {
    this.#throwIfTampered();
    const strategy = this.#strategy;
    strategy.beforeRead();
    // Taking a thread's tick may have found the card tampered: nothing is served from then on.
    this.#throwIfTampered();
    let latest = this.#latest;
    if (latest === null) {
      throw new UnavailableError(this.#refusalReason ?? "no attestation yet: the node is starting", {});
    }
    let ageNs = this.#options.nodeClockNs() - latest.proof.nanoMoment;
    strategy.afterRead(ageNs);
    // The tick it started may have found the card tampered: nothing is served from then on.
    this.#throwIfTampered();
    if (this.#shouldRefresh(ageNs)) {
      const refreshed = this.#refreshOnDemand();
      if (refreshed !== null) return refreshed;
      this.#throwIfTampered();
      latest = this.#latest ?? latest;
      ageNs = this.#options.nodeClockNs() - latest.proof.nanoMoment;
    }
    if (ageNs > this.#options.maxServeAgeNs) {
      throw new UnavailableError(`no fresh attestation (latest is ${ageNs} ns old): ${this.#refusalReason ?? "attestor stalled"}`, {
        ageNs: ageNs.toString(),
      });
    }
    return latest;
  }

  /** Whether current() should sign before answering: see AttestorOptions.refreshAfterNs. */
  #shouldRefresh(ageNs: bigint): boolean {
    const refreshAfterNs = this.#options.refreshAfterNs ?? 0n;
    return (
      refreshAfterNs > 0n &&
      ageNs > refreshAfterNs &&
      this.#running &&
      this.#signer === null && // signing in a worker is asynchronous: the tick keeps the cache fresh instead
      this.#refusalReason === null && // the card is out of bounds: every request would fail the same way
      !this.#refreshSuspended
    );
  }

  /** attest() for current(); null when it failed (logged once; refreshes resume after the next good proof). */
  #refreshOnDemand(): SignedTime | null {
    try {
      return this.attest();
    } catch (error) {
      // Tamper and accuracy refusals are latched and logged by attest(); anything else would repeat on every
      // request, so on-demand refreshes pause until a tick succeeds.
      if (this.#tamperReason === null && this.#refusalReason === null) {
        this.#refreshSuspended = true;
        this.#stats.tickErrorsTotal += 1;
        this.#logger.error({ err: error }, "on-demand attestation failed; serving the cached proof until a tick succeeds");
      }
      return null;
    }
  }

  /**
   * Signs a fresh attestation now, in the calling thread, caches it and notifies proof listeners. Throws
   * UnavailableError when the card is tampered or its measured error exceeds the bound.
   */
  attest(): SignedTime {
    const startedNs = process.hrtime.bigint();
    const request = this.#prepare();
    let nodeSignature: Hex;
    try {
      const base = { nanoMoment: request.nanoMoment, hardwareSignature: request.hardwareSignature, accuracy: request.accuracy };
      nodeSignature = signNodeEntry(this.#options.nodeKey, timeAttestationForProof(base, request.nodeTimestampNs), this.#options.recoveryMemo);
    } catch (error) {
      this.#checkTamperAfterFailure();
      throw error;
    }
    return this.#publish(request, nodeSignature, process.hrtime.bigint() - startedNs);
  }

  /**
   * Everything before the node signature, in the calling (main) thread: tamper and accuracy checks, the card's
   * clock and signature, the node timestamp. Throws UnavailableError like attest().
   */
  #prepare(): NodeSignRequest {
    const { hardwareSignature, ...rest } = this.#prepareFor(true);
    if (hardwareSignature === undefined) throw new Error("attestor: the card did not sign"); // #prepareFor(true) always signs
    return { ...rest, hardwareSignature };
  }

  /** #prepare(), leaving the card's signature to the signer thread when `cardSigns` is false (it holds the key). */
  #prepareFor(cardSigns: boolean): ThreadSignRequest {
    const { card, nodeClockNs } = this.#options;
    this.assertCanSign();
    try {
      const nanoMoment = card.readTimeNs();
      const base = { nanoMoment, accuracy: this.#accuracyToSign(nanoMoment) };
      return cardSigns ? { ...base, hardwareSignature: card.signHardware(nanoMoment), nodeTimestampNs: nodeClockNs() } : { ...base, nodeTimestampNs: nodeClockNs() };
    } catch (error) {
      this.#checkTamperAfterFailure();
      throw error;
    }
  }

  /**
   * Throws UnavailableError when this node must not sign now: the card is tampered (latched), says it must not
   * (TimeCard.signingRefusal: a required GPS fix missing), or its measured error or own bound exceeds the signing
   * bound (each logged and alerted on the transition). Every signature of this node goes through it: its own
   * attestations and, in a mesh, its rounds and co-signatures.
   */
  assertCanSign(): void {
    const { card, signingErrorBoundNs } = this.#options;
    this.#throwIfTampered();
    const state = card.tamperState();
    if (state.tampered) {
      const reason = state.reason ?? "card reports tampering";
      this.#handleTamper(reason);
      throw tamperedError(reason);
    }
    // A card that says it must not sign (a required GPS reference without a fix) is refused like an error above the
    // bound: latched reason, logged and alerted once, health degraded, and signing resumes when it clears.
    const cardRefusal = card.signingRefusal?.() ?? null;
    if (cardRefusal !== null) {
      this.#refuse(`${cardRefusal}; refusing to sign`, { cardRefusal });
      throw new UnavailableError(this.#refusalReason ?? cardRefusal, { cardRefusal });
    }
    if (card.accuracyBoundNs !== undefined) {
      // A card that proves its own bound (the chrony card) signs only while it proves one within the signing bound.
      const boundNs = card.accuracyBoundNs(card.readTimeNs());
      if (boundNs === null || !(boundNs <= signingErrorBoundNs)) {
        const why = boundNs === null ? `card proves no error bound: ${card.status?.().reason ?? "no reason given"}` : `card error bound ${boundNs} ns exceeds the signing bound ${signingErrorBoundNs} ns`;
        this.#refuse(`${why}; refusing to sign`, { cardBoundNs: boundNs, signingErrorBoundNs });
        throw new UnavailableError(this.#refusalReason ?? why, { cardBoundNs: boundNs, signingErrorBoundNs });
      }
    }
    const measuredErrorNs = card.measuredErrorNs();
    if (!(measuredErrorNs <= signingErrorBoundNs)) {
      const { accuracyNs } = this.#options;
      this.#refuse(`card measured error ${measuredErrorNs} ns exceeds the signing bound ${signingErrorBoundNs} ns (advertised accuracy ${accuracyNs} ns); refusing to sign`, { measuredErrorNs, signingErrorBoundNs, accuracyNs });
      throw new UnavailableError(this.#refusalReason ?? "accuracy bound exceeded", {
        measuredErrorNs,
        signingErrorBoundNs,
      });
    }
    if (this.#refusalReason !== null) {
      this.#logger.info({ measuredErrorNs, signingErrorBoundNs }, "card back within the accuracy bound; signing resumed");
      this.#refusalReason = null;
    }
  }

  /**
   * The accuracy signed with the card's moment `nanoMoment`: the configured accuracyNs, or the bound a card that
   * proves its own gives for that moment (TimeCard.accuracyBoundNs), checked against the signing bound once more
   * (assertCanSign read it a moment earlier).
   */
  #accuracyToSign(nanoMoment: bigint): number {
    const { card, accuracyNs, signingErrorBoundNs } = this.#options;
    if (card.accuracyBoundNs === undefined) return accuracyNs;
    const boundNs = card.accuracyBoundNs(nanoMoment);
    if (boundNs === null || !(boundNs <= signingErrorBoundNs) || !Number.isSafeInteger(boundNs) || boundNs < 0) {
      this.assertCanSign(); // refuses with the card's reason (logged, alerted) when it still holds
      throw new UnavailableError(`card error bound ${String(boundNs)} ns for moment ${nanoMoment} is not signable (signing bound ${signingErrorBoundNs} ns)`, { cardBoundNs: boundNs, signingErrorBoundNs });
    }
    return boundNs;
  }

  /** Nothing is signed or served once the card was found tampered (latched). */
  #throwIfTampered(): void {
    if (this.#tamperReason !== null) throw tamperedError(this.#tamperReason);
  }

  #checkTamperAfterFailure(): void {
    const after = this.#options.card.tamperState();
    if (after.tampered) this.#handleTamper(after.reason ?? "card reports tampering");
  }

  /** Caches the signed proof and notifies listeners. */
  #publish(request: NodeSignRequest, nodeSignature: Hex, signDurationNs: bigint): SignedTime {
    this.#stats.lastSignDurationNs = signDurationNs;
    // The local attestation goes through the co-signing stage (cosign.ts) once per attestation; a lone node's
    // stage passes it through (one entry is trivially "ascending": no address recovery needed).
    const local: LocalAttestation = {
      nanoMoment: request.nanoMoment,
      hardwareSignature: request.hardwareSignature,
      accuracy: request.accuracy,
      nodeEntry: nodeSignature,
      producedAtNs: this.#options.nodeClockNs(),
      gps: this.#options.card.gpsReference(),
    };
    const signed = this.#coSign(local);
    this.#latest = signed;
    this.#refreshSuspended = false;
    this.#tickFailing = false;
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
    if (this.#recentlyRefreshed()) {
      this.#armNextTick();
      return;
    }
    this.#strategy.tick();
  }

  /**
   * Under load, requests refresh the cache (current()) and a tick right after such a refresh would only burn the
   * CPU those requests need: skip a tick when the cached proof is younger than half an interval.
   */
  #recentlyRefreshed(): boolean {
    const latest = this.#latest;
    if ((this.#options.refreshAfterNs ?? 0n) === 0n || latest === null) return false;
    return this.#options.nodeClockNs() - latest.proof.nanoMoment < this.#options.tickIntervalNs / 2n;
  }

  #tickFailed(error: unknown): void {
    if (this.#tamperReason !== null) return; // tamper handled: the loop ends here
    this.#tickFailing = true;
    if (this.#refusalReason === null) {
      this.#stats.tickErrorsTotal += 1;
      this.#logger.error({ err: error }, "attestation tick failed");
    }
  }

  /** A worker reply: cached only if nothing stopped attesting meanwhile (tamper, stop) and it is the newest. */
  #acceptFromWorker(request: NodeSignRequest, entry: Hex, digest: Hex, signDurationNs: bigint): void {
    if (!this.#running || this.#tamperReason !== null) return;
    const state = this.#options.card.tamperState();
    if (state.tampered) {
      this.#handleTamper(state.reason ?? "card reports tampering");
      return;
    }
    // attest() may have cached a newer proof while this one was in the worker: never go back in time.
    const latest = this.#latest;
    if (latest !== null && latest.proof.nanoMoment >= request.nanoMoment) return;
    // The worker signed with our key over `digest`: verifying our own proofs needs no ecrecover.
    this.#options.recoveryMemo?.remember(digest, { r: `0x${entry.slice(34, 98)}`, yParityAndS: `0x${entry.slice(98, 162)}` }, this.#options.nodeKey.address);
    this.#stats.workerAttestationsTotal += 1;
    this.#publish(request, entry, signDurationNs);
  }

  /** Spawns the signer thread; ticks switch to it after its known-answer test passes. */
  #startSigner(): void {
    const generation = this.#generation;
    let signer: NodeSignerThread;
    try {
      const cardPrivateKey = this.#options.card.exportKeyForSignerThread?.();
      const selfTicking = cardPrivateKey === undefined ? undefined : selfTickingSettings(this.#options);
      signer = new NodeSignerThread(this.#options.nodeKey, {
        ...(cardPrivateKey === undefined ? {} : { cardPrivateKey }),
        ...(selfTicking === undefined ? {} : { selfTicking }),
        onFailure: (error) => {
          if (this.#signer !== signer) return;
          this.#logger.error({ err: error }, "signer thread failed; signing in the main thread from now on");
          this.#closeSigner();
        },
      });
    } catch (error) {
      this.#logger.warn({ err: error }, "could not start the signer thread; signing in the main thread");
      return;
    }
    this.#signer = signer;
    signer.ready
      .then(() => knownAnswerTest(signer, this.#options.card, this.#options.nodeKey, this.#options.accuracyNs))
      .then(
        () => {
          if (generation !== this.#generation || this.#signer !== signer) return;
          this.#strategy = signer.selfTicking ? new SelfTickingTicks(this.#host, signer) : new RequestedTicks(this.#host, signer);
          this.#logger.debug({ secp256k1Backend: signer.backend }, "signer thread ready: ticks sign off the main thread");
        },
        (error: unknown) => {
          if (generation !== this.#generation || this.#signer !== signer) return;
          this.#logger.warn({ err: error }, "signer thread unusable; signing in the main thread");
          this.#closeSigner();
        },
      );
  }

  #closeSigner(): void {
    const signer = this.#signer;
    this.#signer = null;
    this.#strategy = this.#mainThreadTicks;
    if (signer !== null) void signer.close();
  }

  #armNextTick(): void {
    if (!this.#running || this.#tamperReason !== null) return;
    // Fixed-rate schedule without catch-up bursts: if a tick ran late, the next one is due one interval later.
    // Worker ticks follow the same schedule, and a proof request may start one early when the cached proof is
    // already an interval old (RequestedTicks.afterRead): never back to back (setImmediate) when a reply is late, which
    // raised the proof rate ~1.5x but also the main thread's share per second, the thing the thread saves.
    const next = nextFixedRateTick(this.#nextTickAtNs, this.#options.tickIntervalNs, this.#options.nodeClockNs());
    this.#nextTickAtNs = next.dueNs;
    this.#timer = setTimeout(() => this.#tick(), next.delayMs);
    this.#timer.unref();
  }

  #refuse(reason: string, evidence: Record<string, unknown>): void {
    this.#stats.accuracyRefusalsTotal += 1;
    if (this.#refusalReason !== null) return; // log and alert on the transition only, not at every tick
    const { card, nodeKey } = this.#options;
    this.#refusalReason = reason;
    this.#logger.warn({ ...evidence, cardId: card.cardId, reason }, "refusing to sign: accuracy bound exceeded");
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
    this.#closeSigner();
    this.#stats.tamperEventsTotal += 1;
    const { card, nodeKey } = this.#options;
    this.#logger.error({ cardId: card.cardId, nodeId: nodeKey.address, reason }, "time card tampered: attestation stopped");
    this.#tamperListeners.emit(reason);
    this.#alertListeners.emit({ kind: "tamper", nodeId: nodeKey.address, cardId: card.cardId, reason, atNs: this.#options.nodeClockNs() });
  }
}
