/**
 * The chrony card: the host clock, disciplined by chronyd, with the error bound chrony's own figures prove
 * (chronyTracking.ts: ClockBound's |offset| + root dispersion + root delay / 2, grown by the maximum frequency
 * error since the reading). The node signs that bound, not a configured number (attestor.ts), and signs nothing
 * while the card is degraded: chrony not synchronised, unreadable or silent, or its bound above chronyMaxBoundNs.
 *
 * Readings: `chronyc -h <socket> -c -n tracking` every pollIntervalMs, asynchronously (execFile with a timeout and
 * an output cap: the event loop never waits for it), one at a time. Each tick uses the last reading and adds the
 * frequency error's growth since it, so no tick runs a process.
 *
 * Detail: docs/operators.md "Chrony-disciplined host clock" and docs/protocol.md §14.19.
 */
import { execFile } from "node:child_process";
import type { KeyObject } from "node:crypto";
import { UnavailableError } from "../../protocol/errors";
import { p256PublicKeyToUncompressed } from "../../protocol/keys";
import { cardIdOf, signHardware } from "../../protocol/sign";
import type { GpsReference, Hex } from "../../protocol/types";
import {
  boundAtNs,
  chronyCardState,
  frequencyErrorPpb,
  MAX_TRACKING_OUTPUT_BYTES,
  parseTracking,
  type ChronyCardState,
  type ChronyTracking,
} from "./chronyTracking";
import { gpsSigningRefusal, type GpsReferenceSource } from "./gpsdClient";
import { ANCHOR_TARGET_NS } from "./dev";
import { ANCHOR_EDGES, anchorToWallClock, clockFromAnchor, SYSTEM_CLOCK_SOURCES, type HostClockSources, type WallClockAnchor } from "./hostClock";
import type { CardBoundEvidence, CardStatus, NtpUpstream, TamperState, TimeCard } from "./types";

/*
 * The clock: like the dev card, the wall clock anchored to the monotonic timer at a millisecond edge (hostClock.ts),
 * but re-anchored after every reading, so a step chronyd made to the system clock is followed at the next reading,
 * and the reading's bound always describes the anchor it is applied to (a reading is taken before its anchor, so a
 * step in between leaves the larger, pre-step offset in the bound). Linux slews the monotonic timer as it slews the
 * wall clock, so between readings they do not drift apart. The anchor's uncertainty, and any amount by which the
 * card's monotonic reading was ahead of the new anchor, are added to the bound. A re-anchor catches one millisecond
 * edge (REANCHOR_EDGES; again while looser than 500 ns, up to 3 times): it spins the event loop for about 0.5 ms,
 * once per reading.
 *
 * The key: any ChronyCardKey (a key file today, fileCardKey; a token-held key has the same shape), kept apart from
 * the clock so that the key store can change without touching this driver.
 */
/** What the card signs with: its identity and a hardware signature (a key file, or a token with the same shape). */
export interface ChronyCardKey {
  /** SHA-256 of the uncompressed public key. */
  readonly cardId: Hex;
  /** Uncompressed P-256 public key (0x04 ‖ X ‖ Y). */
  readonly publicKey: Hex;
  /** cardId ‖ r ‖ s (96 bytes), low-S. */
  signHardware(nanoMoment: bigint): Hex;
}

/** A P-256 key file's key (keyDir/card.key) as a ChronyCardKey. */
export function fileCardKey(cardKey: KeyObject): ChronyCardKey {
  if (cardKey.type !== "private") throw new UnavailableError("the chrony card needs a private P-256 key", { keyType: cardKey.type });
  return { cardId: cardIdOf(cardKey), publicKey: p256PublicKeyToUncompressed(cardKey), signHardware: (nanoMoment) => signHardware(cardKey, nanoMoment) };
}

/** Runs `chronyc -c tracking` once and resolves with what it printed (rejects with the evidence). */
export type ChronycRunner = () => Promise<string>;

/** The measured error reported before any reading, ns: 2^32, more than any proof's accuracy (uint32) can carry. */
export const NO_READING_ERROR_NS = 2 ** 32;

/** Millisecond edges caught per re-anchoring (hostClock.ts): one, to keep the event loop's spin short. */
const REANCHOR_EDGES = 1;
/** Anchorings tried per re-anchoring at most while looser than ANCHOR_TARGET_NS (a preempted or cold spin). */
const REANCHOR_ATTEMPTS = 3;

/**
 * The tightest of up to `attempts` anchorings of `edges` edges, stopping at the first within ANCHOR_TARGET_NS: a
 * spin that was preempted, or ran cold code, catches its edge loosely (up to milliseconds), and its uncertainty is
 * then in every bound signed until the next reading.
 */
function tightAnchor(sources: HostClockSources, edges: number, attempts: number): WallClockAnchor {
  let best = anchorToWallClock(sources, edges);
  for (let attempt = 1; attempt < attempts && best.uncertaintyNs > ANCHOR_TARGET_NS; attempt += 1) {
    const next = anchorToWallClock(sources, edges);
    if (next.uncertaintyNs < best.uncertaintyNs) best = next;
  }
  return best;
}

/** How long one chronyc run may take at most, ms (it answers from a local socket in milliseconds). */
export const DEFAULT_CHRONYC_TIMEOUT_MS = 2_000;

/** A ChronycRunner over the chronyc program: async, bounded in time and output, never a shell. */
export function chronycRunner(options: { chronycPath: string; socketPath: string; timeoutMs?: number }): ChronycRunner {
  // -c: CSV; -n: no DNS lookups (a resolver stall would be a stale reading); -h: chronyd's command socket.
  const args = ["-h", options.socketPath, "-c", "-n", "tracking"];
  return () =>
    new Promise((resolve, reject) => {
      execFile(
        options.chronycPath,
        args,
        { timeout: options.timeoutMs ?? DEFAULT_CHRONYC_TIMEOUT_MS, maxBuffer: MAX_TRACKING_OUTPUT_BYTES, killSignal: "SIGKILL", encoding: "utf8", windowsHide: true },
        (error, stdout, stderr) => {
          if (error === null) {
            resolve(stdout);
            return;
          }
          const said = `${stderr}`.trim().slice(0, 200);
          const how = error.killed ? `killed after ${options.timeoutMs ?? DEFAULT_CHRONYC_TIMEOUT_MS} ms` : `exit ${String(error.code ?? "?")}`;
          reject(new Error(`${options.chronycPath} ${args.join(" ")} failed (${how})${said === "" ? "" : `: ${said}`}${error.message.includes("maxBuffer") ? ": output too long" : ""}`));
        },
      );
    });
}

export interface ChronyTimeCardOptions {
  key: ChronyCardKey;
  /** Leaf first, then the manufacturer CA. */
  certificateChainPem: readonly string[];
  /** Runs chronyc (chronycRunner; tests give a fake). */
  runChronyc: ChronycRunner;
  /** How often chronyc runs, ms. */
  pollIntervalMs: number;
  /** Above this bound the card is degraded, ns. */
  maxBoundNs: number;
  /** The oscillator's assumed maximum frequency error (at least chronyd's maxclockerror), ppb. */
  maxClockErrorPpb: number;
  /** A reading older than this no longer counts, ms (default 3 poll intervals + the chronyc timeout). */
  maxReadingAgeMs?: number;
  /** The host clock (tests give a fake). */
  clockSources?: HostClockSources;
  /** Called with each state change (tests, logs). */
  onStateChange?: (status: CardStatus) => void;
  /**
   * A GPS reference (gpsd: gpsdClient.ts), reported beside each proof: metadata only, chrony's bound is what is
   * signed. When required (gpsRequired) the card is degraded and refuses to sign without a fix. Closed by close().
   */
  gps?: GpsReferenceSource;
}

/** The reading the bound is computed from: chrony's report, and where the card's clock stood when it was applied. */
export interface ChronyReading {
  readonly tracking: ChronyTracking;
  /** The card's clock when the reading was applied (after the chronyc run), ns since the Unix epoch. */
  readonly cardNs: bigint;
  /** Added to chrony's bound for this reading: the anchor's uncertainty plus how far the card was ahead of it, ns. */
  readonly clockExtraNs: bigint;
  /** The monotonic timer when it was applied, ns (its age). */
  readonly monotonicNs: bigint;
}

export class ChronyTimeCard implements TimeCard {
  readonly cardId: Hex;
  readonly publicKey: Hex;
  readonly certificateChainPem: readonly string[];
  readonly #key: ChronyCardKey;
  readonly #options: ChronyTimeCardOptions;
  readonly #sources: HostClockSources;
  readonly #maxBoundNs: bigint;
  readonly #maxClockErrorPpb: bigint;
  readonly #maxReadingAgeMs: number;
  readonly #tamperListeners = new Set<(reason: string) => void>();
  #anchor: WallClockAnchor;
  #clockNs: () => bigint;
  #lastReadNs = 0n;
  #reading: ChronyReading | null = null;
  #pollError: string | null = null;
  #lastState: ChronyCardState | null = null;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;
  #polls = 0;
  readonly #firstPoll: Promise<void>;

  constructor(options: ChronyTimeCardOptions) {
    if (!Number.isInteger(options.pollIntervalMs) || options.pollIntervalMs < 1) throw new RangeError(`pollIntervalMs must be a positive integer, got ${options.pollIntervalMs}`);
    this.#key = options.key;
    this.#options = options;
    this.cardId = options.key.cardId;
    this.publicKey = options.key.publicKey;
    this.certificateChainPem = Object.freeze([...options.certificateChainPem]);
    this.#sources = options.clockSources ?? SYSTEM_CLOCK_SOURCES;
    this.#maxBoundNs = BigInt(options.maxBoundNs);
    this.#maxClockErrorPpb = BigInt(options.maxClockErrorPpb);
    this.#maxReadingAgeMs = options.maxReadingAgeMs ?? 3 * options.pollIntervalMs + DEFAULT_CHRONYC_TIMEOUT_MS;
    this.#anchor = tightAnchor(this.#sources, ANCHOR_EDGES, 5);
    this.#clockNs = clockFromAnchor(this.#anchor, this.#sources);
    // The first reading at once (ready() resolves with it), then one every pollIntervalMs.
    this.#firstPoll = this.#poll().finally(() => {
      if (this.#timer === null) this.#schedulePoll(this.#options.pollIntervalMs);
    });
  }

  /** Resolves once the first chronyc run has been applied, whatever it said (types.ts). */
  ready(): Promise<void> {
    return this.#firstPoll;
  }

  /** Resolves after the next chronyc run has been applied (tests; startup). */
  async pollNow(): Promise<CardStatus> {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#poll();
    if (this.#timer === null) this.#schedulePoll(this.#options.pollIntervalMs);
    return this.status();
  }

  /** How many chronyc runs have completed (tests). */
  get polls(): number {
    return this.#polls;
  }

  /** The reading the bound is computed from now, or null. */
  get reading(): ChronyReading | null {
    return this.#reading;
  }

  #schedulePoll(delayMs: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#poll().finally(() => {
        if (this.#timer === null) this.#schedulePoll(this.#options.pollIntervalMs);
      });
    }, delayMs);
    // The card never keeps the process alive on its own.
    this.#timer.unref();
  }

  #inFlight: Promise<void> | null = null;

  /** One chronyc run, applied; concurrent callers share it (never two runs at once). */
  #poll(): Promise<void> {
    this.#inFlight ??= this.#runOnce().finally(() => {
      this.#inFlight = null;
    });
    return this.#inFlight;
  }

  async #runOnce(): Promise<void> {
    let output: string;
    try {
      output = await this.#options.runChronyc();
    } catch (error) {
      this.#apply(null, error instanceof Error ? error.message : String(error));
      return;
    }
    let tracking: ChronyTracking;
    try {
      tracking = parseTracking(output);
    } catch (error) {
      this.#apply(null, error instanceof Error ? error.message : String(error));
      return;
    }
    this.#apply(tracking, null);
  }

  #apply(tracking: ChronyTracking | null, pollError: string | null): void {
    if (this.#closed) return;
    this.#polls += 1;
    this.#pollError = pollError;
    if (tracking !== null) {
      // Re-anchor after the reading (module comment); the card's clock never steps back, so whatever it is ahead
      // of the new anchor is added to this reading's bound.
      const anchor = tightAnchor(this.#sources, REANCHOR_EDGES, REANCHOR_ATTEMPTS);
      const clockNs = clockFromAnchor(anchor, this.#sources);
      const nowNs = clockNs();
      const aheadNs = this.#lastReadNs > nowNs ? this.#lastReadNs - nowNs : 0n;
      this.#anchor = anchor;
      this.#clockNs = clockNs;
      this.#reading = { tracking, cardNs: this.readTimeNs(), clockExtraNs: anchor.uncertaintyNs + aheadNs, monotonicNs: this.#sources.monotonicNs() };
    }
    const status = this.status();
    if (status.state !== this.#lastState) {
      this.#lastState = status.state;
      this.#options.onStateChange?.(status);
    }
  }

  readTimeNs(): bigint {
    const nowNs = this.#clockNs();
    if (nowNs > this.#lastReadNs) this.#lastReadNs = nowNs;
    return this.#lastReadNs;
  }

  /** chrony's bound for the card reading `atNs`, ns, or null when there is no reading (pure over the state). */
  #boundAt(atNs: bigint): bigint | null {
    const reading = this.#reading;
    if (reading === null) return null;
    // A moment read before the reading was applied is covered by the reading (its bound only grows with time).
    const elapsedNs = atNs > reading.cardNs ? atNs - reading.cardNs : 0n;
    return boundAtNs(reading.tracking, elapsedNs, this.#maxClockErrorPpb) + reading.clockExtraNs;
  }

  #state(atNs: bigint): { state: ChronyCardState; reason: string | null; boundNs: bigint | null } {
    const boundNs = this.#boundAt(atNs);
    const reading = this.#reading;
    const readingAgeMs = reading === null ? null : Number((this.#sources.monotonicNs() - reading.monotonicNs) / 1_000_000n);
    const { state, reason } = chronyCardState({
      tracking: reading?.tracking ?? null,
      pollError: this.#pollError,
      boundNs,
      maxBoundNs: this.#maxBoundNs,
      readingAgeMs,
      maxReadingAgeMs: this.#maxReadingAgeMs,
    });
    return { state, reason, boundNs };
  }

  /** The bound the card proves for its reading `atNs` while serving; null while degraded or starting. */
  accuracyBoundNs(atNs: bigint = this.readTimeNs()): number | null {
    const { state, boundNs } = this.#state(atNs);
    return state === "serving" && boundNs !== null ? Number(boundNs) : null;
  }

  /** Why the card must not sign although chrony's bound may hold: a required GPS reference without a fix (types.ts). */
  signingRefusal(): string | null {
    return this.#options.gps === undefined ? null : gpsSigningRefusal(this.#options.gps, this.readTimeNs());
  }

  status(): CardStatus {
    const chrony = this.#state(this.readTimeNs());
    // A serving chrony card without its required GPS fix is degraded (signingRefusal), and its bound is not signed.
    const gpsRefusal = chrony.state === "serving" ? this.signingRefusal() : null;
    const { state, reason, boundNs } = gpsRefusal === null ? chrony : { state: "degraded" as const, reason: gpsRefusal, boundNs: null };
    const tracking = this.#reading?.tracking ?? null;
    return {
      driver: "chrony",
      state,
      reason,
      accuracyBoundNs: state === "serving" && boundNs !== null ? Number(boundNs) : null,
      offsetNs: tracking === null ? null : Number(tracking.systemTimeOffsetNs),
      source:
        tracking === null
          ? null
          : `chrony ${tracking.referenceId}${tracking.referenceName === "" ? "" : ` ${tracking.referenceName}`} stratum ${tracking.stratum}, leap status ${tracking.leapStatus}`,
      evidence: this.#evidence(),
    };
  }

  /** What accuracyBoundNs computes from (CardStatus.evidence), or null before the first reading. */
  #evidence(): CardBoundEvidence | null {
    const reading = this.#reading;
    if (reading === null) return null;
    return {
      report: reading.tracking.line,
      readAtNs: reading.cardNs.toString(),
      clockExtraNs: Number(reading.clockExtraNs),
      growthPpb: Number(frequencyErrorPpb(reading.tracking, this.#maxClockErrorPpb)),
    };
  }

  signHardware(nanoMoment: bigint): Hex {
    return this.#key.signHardware(nanoMoment);
  }

  /** chrony cannot be tampered with in the card's sense: a host clock has no enclosure. */
  tamperState(): TamperState {
    return { tampered: false, reason: null };
  }

  onTamper(listener: (reason: string) => void): () => void {
    this.#tamperListeners.add(listener);
    return () => this.#tamperListeners.delete(listener);
  }

  /**
   * |chrony's measured offset| of the last reading, ns (the node's drift metric); before any, NO_READING_ERROR_NS:
   * unknown is not small, and a finite number keeps health's JSON valid.
   */
  measuredErrorNs(): number {
    const tracking = this.#reading?.tracking;
    if (tracking === undefined) return NO_READING_ERROR_NS;
    const offsetNs = tracking.systemTimeOffsetNs;
    return Number(offsetNs < 0n ? -offsetNs : offsetNs);
  }

  /**
   * chrony's source, from the last reading: chronyc reports this host's stratum (the source's + 1) and the source's
   * reference id. Null before a reading, and for a host chrony runs as a local reference (stratum 1, no source).
   */
  ntpUpstream(): NtpUpstream | null {
    const tracking = this.#reading?.tracking;
    if (tracking === undefined || tracking.stratum < 2) return null;
    return { stratum: tracking.stratum - 1, referenceId: Number.parseInt(tracking.referenceId, 16) };
  }

  /** gpsd's reference when one is configured; else none (chrony's reference is an NTP server, reported in status()). */
  gpsReference(): GpsReference | null {
    return this.#options.gps?.read(this.readTimeNs()).reference ?? null;
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#tamperListeners.clear();
    this.#options.gps?.close();
  }

  toJSON(): { cardId: Hex; driver: "chrony" } {
    return { cardId: this.cardId, driver: "chrony" };
  }
}
