/**
 * The attestor: the only code that asks the card and the node key to sign. It produces a *local attestation*
 * (card P-256 signature + this node's EIP-712 entry over cardId, nanoMoment, accuracy, the card signature's hash
 * and the node's own timestamp) on a short tick and on demand, hands it to the co-signing stage (cosign.ts; a
 * lone node's passes it through) once per attestation, and keeps the resulting SignedTime in a cache that every
 * transport reads (background loop writes, handlers read).
 *
 * Cost: one P-256 signature (OpenSSL) plus one EIP-712 digest and one secp256k1 signature (libsecp256k1, or
 * @noble/curves when the addon is missing: protocol/secp256k1.ts) per attestation. Where they run (`signInWorker`,
 * default defaultSignInWorker below; the node's `signerThread` setting):
 * - **Self-ticking signer thread** (signerWorker.ts), when the card lets the thread hold its key and read its clock
 *   (TimeCard.exportKeyForSignerThread and clockAnchorForSignerThread: the dev card) and the node clock is a
 *   host-clock anchor (`nodeClockAnchor`): the thread makes whole ticks on its own timer (card clock, both
 *   signatures) and writes each to its shared result slot (signerResultSlot.ts). The serving thread takes the
 *   newest on every proof request and on its own timer (#takeThreadTick), checks the card's tamper state and
 *   measured error when it takes it (so the card's state is sampled after the signature, not before it as for a
 *   tick signed here), and grants or withholds the thread's permit to sign by the same checks at the tick pace
 *   (#checkSelfTicking). Nothing is posted per tick. Each thread's first tick is verified like the known-answer
 *   test (both signatures, recomputed or checked here) before any of its ticks is published.
 * - **Requested ticks** in the signer thread, otherwise: per tick the main thread checks tamper and accuracy, reads
 *   the card clock, posts the request, and swaps its cached proof when the signatures come back; the thread signs
 *   the card's message too when it holds the card key (a hardware card signs through its driver, in the main
 *   thread). Proof requests drive those ticks under load (#driveSignerTicks): each takes a result the thread has
 *   finished from the result slot instead of waiting for the event loop to reach the reply, and starts the next
 *   tick when none is in flight and the cached proof is a tick interval old, instead of waiting for a timer the
 *   busy loop runs late. Ticks never overlap: the next tick is armed only after the previous one finished (worker
 *   reply included), so with the timer alone the effective period is max(tickInterval, signing round trip + the
 *   1 ms timer granularity); a proof request may start a worker tick earlier, never before the cached proof is an
 *   interval old.
 * - **The serving thread** (main thread), otherwise, and always until the worker has loaded and passed its
 *   known-answer test, and from the moment it fails.
 * `attest()` (on demand: attestNow, schedule delivery) always signs synchronously in the calling thread.
 * `tickIntervalNs` trades CPU for proof freshness.
 *
 * Freshness under load: a loaded event loop runs timers late (a loop turn answering 100 requests takes
 * milliseconds), so ticks alone let a served proof age by the loop's delay. With `refreshAfterNs` set (the
 * node's `refreshAfterNs` setting, off by default) and signing in the main thread, current() signs a new proof
 * when the cached one is older than that: the request pays one attestation, and a tick that finds a proof
 * younger than half an interval skips signing. The price under saturation is about one attestation per
 * (refreshAfterNs − attestation time): at 1 ms, half a core of this class (measured: `npm run bench:node`).
 * Idle, the tick keeps the cache (and streams, archive, health) fresh as before.
 *
 * Safety rules:
 * - the node refuses to sign while the card's measured error exceeds the accuracy bound (the accuracy in the
 *   proof is signed, so it must be true); the cache keeps the previous proof, which ages and stops being served
 *   once older than maxServeAgeNs. A card that proves its own bound (TimeCard.accuracyBoundNs: the chrony card)
 *   has that bound signed for each moment instead of accuracyNs, and nothing signed while it proves none or one
 *   above signingErrorBoundNs;
 * - on tamper the attestor stops at once, drops the cached proof (current() throws UnavailableError with the
 *   reason), notifies tamper listeners and raises an alert; a worker reply that arrives after the tamper is
 *   discarded and the worker is terminated. Tamper is latched: only a restart with a healthy card resumes
 *   attesting;
 * - a self-ticking thread signs only while its permit is granted, and what it signed is published only after the
 *   same checks pass in the serving thread: a tick it made in the interval after the card left its bound, before
 *   the permit was withdrawn, never leaves the process.
 */
import { availableParallelism } from "node:os";
import type { Logger } from "pino";
import { hwMessage, timeAttestationDigest, timeAttestationForProof } from "../../protocol/codec";
import { UnavailableError } from "../../protocol/errors";
import type { NodeKey } from "../../protocol/keys";
import { signNodeEntry, type RecoveryMemo } from "../../protocol/sign";
import { SECP256K1_BACKEND } from "../../protocol/secp256k1";
import type { Hex } from "../../protocol/types";
import type { WallClockAnchor } from "../card/hostClock";
import type { TimeCard } from "../card/types";
import { soloCoSigning, type CoSigningStage, type LocalAttestation } from "./cosign";
import { nextFixedRateTick } from "./fixedRate";
import { verifyP256Signature } from "../../protocol/verify";
import type { SlotRecord, SlotResult } from "./signerResultSlot";
import { NodeSignerThread, type NodeSignRequest, type SelfTicking, type ThreadSignRequest } from "./signerWorker";
import type { NodeAlert, SignedTime } from "./types";

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
   * on its own (self-ticking: see #checkSelfTicking).
   */
  nodeClockAnchor?: WallClockAnchor;
  logger: Logger;
  /**
   * Sign ticks in a worker thread (signerWorker.ts; self-ticking when possible: see the module comment), so the
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
  /** Whether the signer thread makes whole ticks on its own (self-ticking: #checkSelfTicking); false without one. */
  selfTicking: boolean;
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

/**
 * Where ticks sign when AttestorOptions.signInWorker is not given (the node's `signerThread: "auto"`), given whether
 * the thread could make whole ticks on its own here (`selfTickingPossible`: a card that lets the thread hold its key
 * and read its clock, and a host-clock node clock; Attestor#selfTickingSettings):
 * - self-ticking possible and at least two cores: in the thread. The serving thread then does no signing and posts
 *   nothing per tick; what is left of the tick there is taking each result from shared memory, checking it and
 *   publishing it (~2 % of a busy serving core, CPU profile at saturation). Measured against ticks signed in the
 *   serving thread, the two nodes loaded at once on one core, both orders: 1–11 % more requests served over two runs
 *   (`npm run bench:node`, README). On one core the thread would only add its wake-ups to the same work;
 * - signing is slow pure JS (~0.35–1.5 ms a tick; refreshAfterNs then has no effect): in the thread, ticks requested
 *   one at a time when it cannot tick on its own;
 * - else in the serving thread (a hardware card: its driver signs there anyway, and requested ticks take only the
 *   node signature off the serving thread, for messaging that costs about as much on a loaded loop).
 */
export function defaultSignInWorker(selfTickingPossible: boolean, cores: number = availableParallelism()): boolean {
  return SECP256K1_BACKEND === "noble" || (selfTickingPossible && cores >= 2);
}

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
  #latest: SignedTime | null = null;
  #timer: NodeJS.Timeout | null = null;
  #running = false;
  #nextTickAtNs = 0n;
  #tamperReason: string | null = null;
  #refusalReason: string | null = null;
  /** Set when an on-demand refresh failed for a reason other than tamper or accuracy; cleared by the next proof. */
  #refreshSuspended = false;
  /** Set when a tick failed; cleared by the next proof. Proof requests do not start ticks meanwhile (#driveSignerTicks). */
  #tickFailing = false;
  #unsubscribeCard: (() => void) | null = null;
  /** The signer thread; ticks use it once #signerReady (loaded and known-answer-tested). */
  #signer: NodeSignerThread | null = null;
  #signerReady = false;
  /** The self-ticking thread whose first tick passed #threadSignatureProblem (each new thread's is checked once). */
  #tickCheckedFor: NodeSignerThread | null = null;
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
    if (threadCanHoldNodeKey && (this.#options.signInWorker ?? defaultSignInWorker(refreshAfterNs === 0n && this.#selfTickingPossible()))) {
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
    const signer = this.#signerReady ? this.#signer : null;
    return { ...this.#stats, signer: signer === null ? "main-thread" : "worker", selfTicking: signer?.selfTicking === true };
  }

  /**
   * The freshest proof. When the cached one is older than refreshAfterNs and signing runs in this thread, a new
   * one is signed first (so a request never waits for a timer that a loaded event loop fires late); if that
   * fails, the cached proof is served under the usual rules. Throws UnavailableError when tampered, not started,
   * or when the cached proof is older than maxServeAgeNs (signing refused for a while).
   */
  current(): SignedTime {
    this.#throwIfTampered();
    const signer = this.#signerReady ? this.#signer : null;
    if (signer?.selfTicking === true) {
      this.#takeThreadTick(signer);
      // Taking it may have found the card tampered: nothing is served from then on.
      this.#throwIfTampered();
    }
    let latest = this.#latest;
    if (latest === null) {
      throw new UnavailableError(this.#refusalReason ?? "no attestation yet: the node is starting", {});
    }
    let ageNs = this.#options.nodeClockNs() - latest.proof.nanoMoment;
    if (signer !== null && !signer.selfTicking) {
      this.#driveSignerTicks(signer, ageNs);
      // The tick it started may have found the card tampered: nothing is served from then on.
      this.#throwIfTampered();
    }
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

  /**
   * What a proof request does for ticks signed in the signer thread (no card or node signature here): it takes a
   * result the thread has finished (NodeSignerThread.collect: its tick publishes before the next request is
   * answered, not when the event loop reaches the thread's reply), and when no tick is in flight and the cached
   * proof is already a tick interval old, it starts the next tick now instead of waiting for the timer, which a
   * loaded event loop runs late. The serving thread's share of a tick stays the card clock, the checks, posting
   * the request and the publication; under saturation ticks then follow requests at about the tick interval.
   */
  #driveSignerTicks(signer: NodeSignerThread, ageNs: bigint): void {
    signer.collect();
    const timer = this.#timer;
    // An armed timer means no tick is in flight (the next one is armed only when the previous one finished).
    // Not while the card is out of its accuracy bound or the last tick failed: the timer keeps trying at its pace
    // (each try is a counted refusal or a logged error), not every request.
    if (timer !== null && ageNs >= this.#options.tickIntervalNs && this.#refusalReason === null && !this.#tickFailing) {
      clearTimeout(timer);
      this.#nextTickAtNs = this.#options.nodeClockNs(); // the schedule restarts from this tick
      this.#tick();
    }
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
   * Signs a fresh attestation now, caches it and notifies proof listeners. Throws UnavailableError when the
   * card is tampered or its measured error exceeds the bound.
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
    const signer = this.#signer;
    if (signer !== null && this.#signerReady) {
      if (signer.selfTicking) this.#checkSelfTicking(signer);
      else this.#tickInWorker(signer);
      return;
    }
    try {
      this.attest();
    } catch (error) {
      this.#tickFailed(error);
    }
    this.#armNextTick();
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

  /**
   * One tick with the node signature (and the card's, when the thread holds the card key) from the worker; the
   * next tick is armed when the reply is in.
   */
  #tickInWorker(signer: NodeSignerThread): void {
    const generation = this.#generation;
    const startedAt = process.hrtime.bigint();
    let request: ThreadSignRequest;
    try {
      request = this.#prepareFor(!signer.signsHardware);
    } catch (error) {
      this.#tickFailed(error);
      this.#armNextTick();
      return;
    }
    signer
      .sign(request)
      .then(
        (result) => {
          if (generation !== this.#generation) return;
          this.#acceptFromWorker({ ...request, hardwareSignature: result.hardwareSignature }, result.entry, result.digest, process.hrtime.bigint() - startedAt);
        },
        (error: unknown) => {
          if (generation !== this.#generation || this.#tamperReason !== null) return;
          this.#stats.tickErrorsTotal += 1;
          this.#logger.error({ err: error }, "signer thread failed a tick; signing in the main thread from now on");
          if (this.#signer === signer) this.#closeSigner();
        },
      )
      .catch((error: unknown) => this.#logger.error({ err: error }, "attestation tick failed"))
      .finally(() => {
        if (generation === this.#generation) this.#armNextTick();
      });
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

  /**
   * The serving thread's part of a self-ticking thread's tick, at the timer's pace: it publishes the newest tick,
   * then grants the thread its permit when the card may sign (assertCanSign: not tampered, measured error within
   * the bound) and withholds it when not. The card's state is sampled at this pace, as when the serving thread
   * signs: a tick signed before a withdrawal is never published (TickPermit epochs), and the thread stops signing
   * at its next tick after the withdrawal. Requests take ticks in between (#takeThreadTick); this keeps listeners,
   * archive and streams fed when idle. A thread that holds the permit but has delivered no tick for longer than its
   * sign timeout (stuck, posting no error) is closed, and ticks sign in the serving thread from then on.
   */
  #checkSelfTicking(signer: NodeSignerThread): void {
    this.#takeThreadTick(signer);
    if (this.#signer !== signer) {
      // The card was found tampered (then #armNextTick does nothing: attesting stopped), or the thread was closed
      // (a tick ahead of the card clock): ticks go on in this thread.
      this.#armNextTick();
      return;
    }
    if (signer.ticksOverdue()) {
      this.#stats.tickErrorsTotal += 1;
      this.#logger.error("signer thread delivered no tick within its sign timeout; signing in the main thread from now on");
      this.#closeSigner();
    } else {
      try {
        this.assertCanSign();
        signer.grantTicks(true);
      } catch (error) {
        signer.grantTicks(false);
        this.#tickFailed(error);
      }
    }
    this.#armNextTick();
  }

  /**
   * Publishes the newest tick of a self-ticking thread of the epoch granted now, if nobody has taken it yet, once it
   * passes the checks: the card is not tampered and within its bound now (when the tick is taken: a card that left
   * its bound and came back between two checks goes unseen, as between two ticks signed here), and the moment
   * is not ahead of the card clock read here (the thread reads the same clock; anything else is a broken thread,
   * closed).
   */
  #takeThreadTick(signer: NodeSignerThread): void {
    const tick: SlotRecord | null = signer.collect();
    if (tick === null) return;
    try {
      this.assertCanSign();
    } catch {
      // Refused (logged, counted and alerted by assertCanSign on the transition) or a card driver error, which the
      // next check (#checkSelfTicking) logs: either way the thread holds until a check passes.
      signer.grantTicks(false);
      return;
    }
    const { nanoMoment, hardwareSignature, nodeTimestampNs } = tick;
    const cardNowNs = this.#options.card.readTimeNs();
    if (nanoMoment > cardNowNs) {
      this.#stats.tickErrorsTotal += 1;
      this.#logger.error({ nanoMoment: nanoMoment.toString(), cardNowNs: cardNowNs.toString() }, "signer thread signed a moment ahead of the card clock; signing in the main thread from now on");
      this.#closeSigner();
      return;
    }
    const request = { nanoMoment, hardwareSignature, accuracy: this.#options.accuracyNs, nodeTimestampNs };
    if (this.#tickCheckedFor !== signer) {
      // The known-answer test covers the thread's signing; its first tick covers more of the tick path (the accuracy
      // and keys it signs with, the record it writes), checked the same way before any tick of it is published. Its
      // clocks are not checked here beyond the card-clock bound above: it signs the moment it read.
      const problem = this.#threadSignatureProblem({ nanoMoment, accuracy: request.accuracy, nodeTimestampNs }, tick);
      if (problem !== null) {
        this.#stats.tickErrorsTotal += 1;
        this.#logger.error({ problem }, "signer thread's first tick does not verify; signing in the main thread from now on");
        this.#closeSigner();
        return;
      }
      this.#tickCheckedFor = signer;
    }
    this.#acceptFromWorker(request, tick.entry, tick.digest, tick.signDurationNs);
  }

  /** Spawns the signer thread; ticks switch to it after its known-answer test passes. */
  #startSigner(): void {
    const generation = this.#generation;
    let signer: NodeSignerThread;
    try {
      const cardPrivateKey = this.#options.card.exportKeyForSignerThread?.();
      const selfTicking = cardPrivateKey === undefined ? undefined : this.#selfTickingSettings();
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
      .then(() => this.#knownAnswerTest(signer))
      .then(
        () => {
          if (generation !== this.#generation || this.#signer !== signer) return;
          this.#signerReady = true;
          this.#logger.debug({ secp256k1Backend: signer.backend }, "signer thread ready: ticks sign off the main thread");
        },
        (error: unknown) => {
          if (generation !== this.#generation || this.#signer !== signer) return;
          this.#logger.warn({ err: error }, "signer thread unusable; signing in the main thread");
          this.#closeSigner();
        },
      );
  }

  /** Whether a signer thread could tick on its own here: the card lets it hold the key, and both clocks are anchors. */
  #selfTickingPossible(): boolean {
    return typeof this.#options.card.exportKeyForSignerThread === "function" && this.#selfTickingSettings() !== undefined;
  }

  /**
   * What the thread needs to make whole ticks itself: both clocks as host-clock anchors (the card's and the node's);
   * undefined when either clock is something else (a hardware card, an injected clock), and ticks are then
   * requested by this thread, one at a time (#tickInWorker).
   */
  #selfTickingSettings(): SelfTicking | undefined {
    // The thread signs one fixed accuracy: a card that proves its own bound per moment is asked per tick instead.
    if (this.#options.card.accuracyBoundNs !== undefined) return undefined;
    const cardClock = this.#options.card.clockAnchorForSignerThread?.() ?? null;
    const nodeClock = this.#options.nodeClockAnchor;
    if (cardClock === null || nodeClock === undefined) return undefined;
    return { intervalNs: this.#options.tickIntervalNs, accuracyNs: this.#options.accuracyNs, cardClock, nodeClock };
  }

  /**
   * The worker must produce byte for byte what protocol/sign.ts produces for the node entry (RFC 6979 is
   * deterministic) and, when it holds the card key, a low-S card signature that verifies with the card's public key
   * (P-256 signatures are randomised: checked, not compared).
   */
  async #knownAnswerTest(signer: NodeSignerThread): Promise<void> {
    const { card } = this.#options;
    const request: ThreadSignRequest = {
      nanoMoment: 1_700_000_000_123_456_789n,
      ...(signer.signsHardware ? {} : { hardwareSignature: `0x${card.cardId.slice(2)}${"11".repeat(32)}${"22".repeat(32)}` as Hex }),
      accuracy: this.#options.accuracyNs,
      nodeTimestampNs: 1_700_000_000_123_457_000n,
    };
    const problem = this.#threadSignatureProblem(request, await signer.sign(request));
    if (problem !== null) throw new Error(`signer thread failed its known-answer test (${problem})`);
  }

  /**
   * What is wrong with signatures the thread made for `request` (null: nothing): the card signature must verify
   * with the card's public key for the moment (or be the one the request gave), and the digest and node entry must
   * be byte for byte what protocol/sign.ts makes for the attestation with the node's key and this node's accuracy.
   */
  #threadSignatureProblem(request: ThreadSignRequest, result: SlotResult): string | null {
    const { card } = this.#options;
    const { hardwareSignature } = result;
    if (request.hardwareSignature === undefined) {
      const cardSigned =
        hardwareSignature.length === 2 + 2 * 96 &&
        hardwareSignature.slice(0, 66) === card.cardId &&
        verifyP256Signature({ message: hwMessage(card.cardId, request.nanoMoment) }, `0x${hardwareSignature.slice(66, 130)}`, `0x${hardwareSignature.slice(130, 194)}`, card.publicKey);
      if (!cardSigned) return "its card signature does not verify with the card's public key";
    } else if (hardwareSignature !== request.hardwareSignature) {
      return "it did not keep the hardware signature it was given";
    }
    const att = timeAttestationForProof({ nanoMoment: request.nanoMoment, hardwareSignature, accuracy: request.accuracy }, request.nodeTimestampNs);
    if (result.digest !== timeAttestationDigest(att) || result.entry !== signNodeEntry(this.#options.nodeKey, att)) {
      return "digest or entry differs from protocol/sign.ts";
    }
    return null;
  }

  #closeSigner(): void {
    const signer = this.#signer;
    this.#signer = null;
    this.#signerReady = false;
    this.#tickCheckedFor = null;
    if (signer !== null) void signer.close();
  }

  #armNextTick(): void {
    if (!this.#running || this.#tamperReason !== null) return;
    // Fixed-rate schedule without catch-up bursts: if a tick ran late, the next one is due one interval later.
    // Worker ticks follow the same schedule, and a proof request may start one early when the cached proof is
    // already an interval old (#driveSignerTicks): never back to back (setImmediate) when a reply is late, which
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
