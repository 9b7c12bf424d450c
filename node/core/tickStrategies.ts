/**
 * Where the attestor's ticks sign (docs/architecture.md, "the signer thread"): three strategies behind TickStrategy.
 * - MainThreadTicks: the serving thread signs each tick (always until a signer thread has passed its known-answer
 *   test, and from the moment one fails);
 * - RequestedTicks: per tick the serving thread checks, reads the card clock and posts a request; the thread signs
 *   (the card's message too when it holds the card key). Proof requests take finished results from the shared slot
 *   and start the next tick early once the cached proof is an interval old;
 * - SelfTickingTicks: the thread makes whole ticks on its own while its permit is granted; the serving thread takes
 *   the newest from the shared slot, checks the card when it takes it, and grants or withholds the permit at the
 *   tick pace. A thread's first tick is verified like the known-answer test before any of its ticks is published.
 * Ticks never overlap: the next is armed only once the previous one finished (worker reply included).
 */
import { availableParallelism } from "node:os";
import type { Logger } from "pino";
import { SECP256K1_BACKEND } from "../../protocol/secp256k1";
import type { SlotRecord } from "./signerResultSlot";
import { threadSignatureProblem } from "./signerThreadChecks";
import type { NodeSignRequest, NodeSignerThread, SelfTicking, ThreadSignRequest } from "./signerWorker";
import type { AttestorOptions, AttestorStats } from "./attestorOptions";

/** What a strategy may use of its attestor. */
export interface AttestorHost {
  readonly options: AttestorOptions;
  readonly logger: Logger;
  readonly stats: Omit<AttestorStats, "signer" | "selfTicking">;
  /** Bumped by stop(): replies of an earlier run are ignored. */
  generation(): number;
  tamperReason(): string | null;
  refusalReason(): string | null;
  /** The last tick failed (cleared by the next proof). */
  tickFailing(): boolean;
  /** A tick timer is armed (then no tick is in flight). */
  timerArmed(): boolean;
  /** Signs in this thread, caches and publishes; throws like Attestor.attest(). */
  attest(): void;
  assertCanSign(): void;
  /** Checks and the card's part of a tick, in this thread (the card signs when `cardSigns`). */
  prepareFor(cardSigns: boolean): ThreadSignRequest;
  tickFailed(error: unknown): void;
  armNextTick(): void;
  /** Cancels the armed timer and ticks now; the schedule restarts from this tick. */
  tickNow(): void;
  /** Publishes a thread's signatures when nothing stopped attesting meanwhile and they are the newest. */
  acceptFromWorker(request: NodeSignRequest, entry: string, digest: string, signDurationNs: bigint): void;
  /** Whether `signer` is still the attestor's thread. */
  isCurrent(signer: NodeSignerThread): boolean;
  /** Stops using the thread (if it is the current one): ticks sign in this thread from now on. */
  dropSigner(signer: NodeSignerThread): void;
}

export interface TickStrategy {
  readonly kind: "main-thread" | "requested" | "self-ticking";
  /** One timer tick; arms the next (at once, or when the thread's reply is in). */
  tick(): void;
  /** A proof request, before the cache is read: takes the thread's newest finished tick. */
  beforeRead(): void;
  /** A proof request that found a cached proof `ageNs` old: may start the next tick early. */
  afterRead(ageNs: bigint): void;
}

/**
 * Where ticks sign when AttestorOptions.signInWorker is not given (the node's `signerThread: "auto"`), given whether
 * the thread could make whole ticks on its own here (`selfTickingPossible`):
 * - self-ticking possible and at least two cores: in the thread, which leaves the serving thread only taking,
 *   checking and publishing each result (`npm run bench:node` measured more requests served this way: figures in
 *   docs/benchmarks.md). On one core the thread would only add its wake-ups to the same work;
 * - signing is slow pure JS (refreshAfterNs then has no effect): in the thread, ticks requested one at a time;
 * - else in the serving thread (a hardware card: its driver signs there anyway, and requested ticks take only the
 *   node signature off the serving thread, for messaging that costs about as much on a loaded loop).
 */
export function defaultSignInWorker(selfTickingPossible: boolean, cores: number = availableParallelism()): boolean {
  return SECP256K1_BACKEND === "noble" || (selfTickingPossible && cores >= 2);
}

/** Whether a signer thread could tick on its own here: the card lets it hold the key, and both clocks are anchors. */
export function selfTickingPossible(options: AttestorOptions): boolean {
  return typeof options.card.exportKeyForSignerThread === "function" && selfTickingSettings(options) !== undefined;
}

/**
 * What the thread needs to make whole ticks itself: both clocks as host-clock anchors (the card's and the node's);
 * undefined when either clock is something else (a hardware card, an injected clock), and ticks are then
 * requested by the serving thread, one at a time (RequestedTicks).
 */
export function selfTickingSettings(options: AttestorOptions): SelfTicking | undefined {
  // The thread signs one fixed accuracy: a card that proves its own bound per moment is asked per tick instead.
  if (options.card.accuracyBoundNs !== undefined) return undefined;
  const cardClock = options.card.clockAnchorForSignerThread?.() ?? null;
  const nodeClock = options.nodeClockAnchor;
  if (cardClock === null || nodeClock === undefined) return undefined;
  return { intervalNs: options.tickIntervalNs, accuracyNs: options.accuracyNs, cardClock, nodeClock };
}

export class MainThreadTicks implements TickStrategy {
  readonly kind = "main-thread";
  readonly #host: AttestorHost;

  constructor(host: AttestorHost) {
    this.#host = host;
  }

  tick(): void {
    try {
      this.#host.attest();
    } catch (error) {
      this.#host.tickFailed(error);
    }
    this.#host.armNextTick();
  }

  beforeRead(): void {}

  afterRead(): void {}
}

/** A strategy over a signer thread that passed its known-answer test. */
abstract class ThreadTicks {
  constructor(
    protected readonly host: AttestorHost,
    protected readonly signer: NodeSignerThread,
  ) {}
}

export class RequestedTicks extends ThreadTicks implements TickStrategy {
  readonly kind = "requested";

  /** One tick with the node signature (and the card's, when the thread holds the card key) from the thread. */
  tick(): void {
    const host = this.host;
    const signer = this.signer;
    const generation = host.generation();
    const startedAt = process.hrtime.bigint();
    let request: ThreadSignRequest;
    try {
      request = host.prepareFor(!signer.signsHardware);
    } catch (error) {
      host.tickFailed(error);
      host.armNextTick();
      return;
    }
    signer
      .sign(request)
      .then(
        (result) => {
          if (generation !== host.generation()) return;
          host.acceptFromWorker({ ...request, hardwareSignature: result.hardwareSignature }, result.entry, result.digest, process.hrtime.bigint() - startedAt);
        },
        (error: unknown) => {
          if (generation !== host.generation() || host.tamperReason() !== null) return;
          host.stats.tickErrorsTotal += 1;
          host.logger.error({ err: error }, "signer thread failed a tick; signing in the main thread from now on");
          host.dropSigner(signer);
        },
      )
      .catch((error: unknown) => host.logger.error({ err: error }, "attestation tick failed"))
      .finally(() => {
        if (generation === host.generation()) host.armNextTick();
      });
  }

  beforeRead(): void {}

  /**
   * A proof request takes a result the thread has finished (before the event loop reaches its reply) and, when no
   * tick is in flight and the cached proof is already a tick interval old, starts the next tick now instead of
   * waiting for a timer a loaded event loop runs late. Not while the card is out of its bound or the last tick
   * failed: the timer keeps trying at its pace, not every request.
   */
  afterRead(ageNs: bigint): void {
    const host = this.host;
    this.signer.collect();
    if (host.timerArmed() && ageNs >= host.options.tickIntervalNs && host.refusalReason() === null && !host.tickFailing()) host.tickNow();
  }
}

export class SelfTickingTicks extends ThreadTicks implements TickStrategy {
  readonly kind = "self-ticking";
  /** Whether this thread's first tick passed threadSignatureProblem. */
  #firstTickChecked = false;

  /**
   * The serving thread's part, at the timer's pace: publish the newest tick, then grant the permit when the card may
   * sign (assertCanSign) and withhold it when not; a tick signed before a withdrawal is never published (permit
   * epochs). A thread that holds the permit but delivered no tick within its sign timeout is dropped.
   */
  tick(): void {
    const host = this.host;
    const signer = this.signer;
    this.beforeRead();
    if (!host.isCurrent(signer)) {
      // The card was found tampered (armNextTick then does nothing) or the thread was dropped: this thread ticks.
      host.armNextTick();
      return;
    }
    if (signer.ticksOverdue()) {
      host.stats.tickErrorsTotal += 1;
      host.logger.error("signer thread delivered no tick within its sign timeout; signing in the main thread from now on");
      host.dropSigner(signer);
    } else {
      try {
        host.assertCanSign();
        signer.grantTicks(true);
      } catch (error) {
        signer.grantTicks(false);
        host.tickFailed(error);
      }
    }
    host.armNextTick();
  }

  /**
   * Publishes the thread's newest tick, if nobody took it yet, once it passes the checks: the card is not tampered
   * and within its bound now, and the moment is not ahead of the card clock read here (the thread reads the same
   * clock; anything else is a broken thread, dropped).
   */
  beforeRead(): void {
    const host = this.host;
    const signer = this.signer;
    const tick: SlotRecord | null = signer.collect();
    if (tick === null) return;
    try {
      host.assertCanSign();
    } catch {
      // Refused (logged, counted and alerted by assertCanSign) or a card driver error, which the next tick() logs:
      // either way the thread holds until a check passes.
      signer.grantTicks(false);
      return;
    }
    const { nanoMoment, hardwareSignature, nodeTimestampNs } = tick;
    const { card, accuracyNs, nodeKey } = host.options;
    const cardNowNs = card.readTimeNs();
    if (nanoMoment > cardNowNs) {
      host.stats.tickErrorsTotal += 1;
      host.logger.error({ nanoMoment: nanoMoment.toString(), cardNowNs: cardNowNs.toString() }, "signer thread signed a moment ahead of the card clock; signing in the main thread from now on");
      host.dropSigner(signer);
      return;
    }
    const request = { nanoMoment, hardwareSignature, accuracy: accuracyNs, nodeTimestampNs };
    if (!this.#firstTickChecked) {
      // The known-answer test covers the thread's signing; its first tick covers more of the tick path (the accuracy
      // and keys it signs with, the record it writes). Its clocks are checked only by the card-clock bound above.
      const problem = threadSignatureProblem(card, nodeKey, { nanoMoment, accuracy: request.accuracy, nodeTimestampNs }, tick);
      if (problem !== null) {
        host.stats.tickErrorsTotal += 1;
        host.logger.error({ problem }, "signer thread's first tick does not verify; signing in the main thread from now on");
        host.dropSigner(signer);
        return;
      }
      this.#firstTickChecked = true;
    }
    host.acceptFromWorker(request, tick.entry, tick.digest, tick.signDurationNs);
  }

  afterRead(): void {}
}
