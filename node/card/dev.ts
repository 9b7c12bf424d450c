/**
 * The development time card: a P-256 key with an X.509 certificate issued by a development manufacturer CA
 * (protocol/devca.ts), reading the host clock at ns resolution (hostClock.ts), anchored to it at a millisecond
 * edge. Its `measuredErrorNs()` is honest about that: the anchor's uncertainty (typically 100–300 ns; the anchoring
 * is retried while it is above ANCHOR_TARGET_NS), unless a test or demo simulates another value. It does not
 * discipline itself against the host clock afterwards (a real card disciplines its oscillator to GPS/PTP): see
 * docs/protocol.md §14.16. `simulateTamper` and `simulateMeasuredError` exist for tests and demos.
 */
import { KeyObject } from "node:crypto";
import { UnavailableError } from "../../protocol/errors";
import { p256PrivateScalar, p256PublicKeyToUncompressed } from "../../protocol/keys";
import { cardIdOf, signHardware } from "../../protocol/sign";
import type { GpsReference, Hex } from "../../protocol/types";
import type { CardKey } from "../keysource/tokenKeys";
import { describeGpsReading, gpsSigningRefusal, type GpsReferenceSource } from "./gpsdClient";
import { anchorToWallClock, clockFromAnchor, refineAnchor, type WallClockAnchor } from "./hostClock";

import type { CardStatus, TamperState, TimeCard } from "./types";

/** Anchors looser than this are retried (a preempted spin), ns. */
export const ANCHOR_TARGET_NS = 500n;
const ANCHOR_ATTEMPTS = 40;
/**
 * Pause between two loose anchorings, ms: busy cores (chains and other processes starting on a two-core machine)
 * spoiled every edge of back-to-back attempts for seconds, and the card, which anchors once, then refused to sign
 * for good. Pausing lets such a spell pass and spreads the edges combined; the worst case costs ~2 s once, at
 * start, and only on a busy machine (a quiet one is within the target at the first attempt).
 */
const ANCHOR_RETRY_PAUSE_MS = 50;

/**
 * Up to ANCHOR_ATTEMPTS anchorings combined (refineAnchor), stopping once within ANCHOR_TARGET_NS: on a busy host
 * every edge's span can be widened by preemption, but where the edge falls inside each span varies, so their
 * intersection still narrows.
 */
function preciseAnchor(): WallClockAnchor {
  let best = anchorToWallClock();
  for (let attempt = 1; attempt < ANCHOR_ATTEMPTS && best.uncertaintyNs > ANCHOR_TARGET_NS; attempt += 1) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ANCHOR_RETRY_PAUSE_MS);
    best = refineAnchor(best, anchorToWallClock());
  }
  return best;
}

export interface DevTimeCardOptions {
  /**
   * The card's P-256 private key (a key file), or a signer that holds it elsewhere (a PKCS#11 token:
   * node/keysource/tokenKeys.ts). With a signer the key never enters this process, so the card offers no
   * exportKeyForSignerThread and its signatures are signHardware() calls on the serving thread.
   */
  cardKey: KeyObject | CardKey;
  /** Leaf first, then the dev manufacturer CA. */
  certificateChainPem: readonly string[];
  /** Defaults to the host clock anchored to the wall clock once, at construction. */
  clockNs?: () => bigint;
  /** Initial simulated measured error, ns (default: the anchor's uncertainty; 0 with an injected clock). */
  measuredErrorNs?: number;
  /**
   * A GPS reference (gpsd: gpsdClient.ts) reported instead of the simulated one: metadata only, the card still signs
   * its own clock. When it is required (gpsRequired) the card refuses to sign without a fix (signingRefusal).
   * The card owns it: close() closes it.
   */
  gps?: GpsReferenceSource;
}

export class DevTimeCard implements TimeCard {
  readonly cardId: Hex;
  readonly publicKey: Hex;
  readonly certificateChainPem: readonly string[];
  readonly #cardKey: KeyObject | CardKey;
  /** Only with a key file (types.ts): a token-held key cannot be copied to the signer thread. */
  readonly exportKeyForSignerThread?: () => Hex;
  readonly #clockNs: () => bigint;
  /** The host-clock anchor #clockNs follows; null with an injected clock. */
  readonly #anchor: WallClockAnchor | null;
  readonly #tamperListeners = new Set<(reason: string) => void>();
  #lastReadNs = 0n;
  #tamperReason: string | null = null;
  #measuredErrorNs: number;
  readonly #gps: GpsReferenceSource | null;
  /** Only with a GPS source (types.ts): the dev card has nothing else to report. */
  readonly status?: () => CardStatus;
  readonly signingRefusal?: () => string | null;

  constructor(options: DevTimeCardOptions) {
    const { cardKey } = options;
    if (cardKey instanceof KeyObject) {
      if (cardKey.type !== "private") throw new UnavailableError("the dev card needs a private P-256 key", { keyType: cardKey.type });
      this.cardId = cardIdOf(cardKey);
      this.publicKey = p256PublicKeyToUncompressed(cardKey);
      this.exportKeyForSignerThread = () => {
        this.#throwIfTampered();
        return p256PrivateScalar(cardKey);
      };
    } else {
      this.cardId = cardKey.cardId;
      this.publicKey = cardKey.publicKey;
    }
    this.#cardKey = cardKey;
    this.certificateChainPem = Object.freeze([...options.certificateChainPem]);
    if (options.clockNs === undefined) {
      const anchor = preciseAnchor();
      this.#anchor = anchor;
      this.#clockNs = clockFromAnchor(anchor);
      this.#measuredErrorNs = options.measuredErrorNs ?? Number(anchor.uncertaintyNs);
    } else {
      this.#anchor = null;
      this.#clockNs = options.clockNs;
      this.#measuredErrorNs = options.measuredErrorNs ?? 0;
    }
    const gps = options.gps ?? null;
    this.#gps = gps;
    if (gps !== null) {
      this.signingRefusal = () => gpsSigningRefusal(gps, this.readTimeNs());
      this.status = () => {
        const refusal = gpsSigningRefusal(gps, this.readTimeNs());
        // accuracyBoundNs null: the dev card proves no bound of its own (it signs the configured accuracyNs).
        return { driver: "dev", state: refusal === null ? "serving" : "degraded", reason: refusal, accuracyBoundNs: null, offsetNs: null, source: describeGpsReading(gps, gps.read(this.readTimeNs())) };
      };
    }
  }

  readTimeNs(): bigint {
    // The anchored clock is monotonic already; the max() also guards an injected clock that is not.
    const nowNs = this.#clockNs();
    if (nowNs > this.#lastReadNs) this.#lastReadNs = nowNs;
    return this.#lastReadNs;
  }

  signHardware(nanoMoment: bigint): Hex {
    this.#throwIfTampered();
    const cardKey = this.#cardKey;
    return cardKey instanceof KeyObject ? signHardware(cardKey, nanoMoment) : cardKey.signHardware(nanoMoment);
  }

  #throwIfTampered(): void {
    if (this.#tamperReason !== null) {
      throw new UnavailableError(`time card tampered: ${this.#tamperReason}`, { cardId: this.cardId });
    }
  }

  /** The host-clock anchor the card reads, so the signer thread can read it too (types.ts); null with an injected clock. */
  clockAnchorForSignerThread(): WallClockAnchor | null {
    return this.#anchor;
  }

  tamperState(): TamperState {
    return { tampered: this.#tamperReason !== null, reason: this.#tamperReason };
  }

  onTamper(listener: (reason: string) => void): () => void {
    this.#tamperListeners.add(listener);
    return () => this.#tamperListeners.delete(listener);
  }

  measuredErrorNs(): number {
    return this.#measuredErrorNs;
  }

  /**
   * gpsd's reference when one is configured; otherwise the card has no receiver and says so with fixState
   * "simulated", no satellites and no PPS offset.
   */
  gpsReference(): GpsReference {
    if (this.#gps !== null) return this.#gps.read(this.readTimeNs()).reference;
    return { fixState: "simulated", satellites: 0, ppsOffsetNs: 0, observedAtNs: this.readTimeNs().toString() };
  }

  /** Latches the card into the tampered state (irreversible, like a real card) and notifies listeners once. */
  simulateTamper(reason: string): void {
    if (this.#tamperReason !== null) return;
    this.#tamperReason = reason;
    for (const listener of [...this.#tamperListeners]) listener(reason);
  }

  /** Sets the measured error the card reports, ns. */
  simulateMeasuredError(errorNs: number): void {
    this.#measuredErrorNs = errorNs;
  }

  close(): void {
    this.#tamperListeners.clear();
    this.#gps?.close();
  }

  toJSON(): { cardId: Hex } {
    return { cardId: this.cardId };
  }
}
