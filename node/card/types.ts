/**
 * The time card driver interface: the only thing the node knows about the hardware that reads and signs time.
 * The development card (dev.ts) implements it over the host clock; real drivers (PCIe time cards, PTP grandmaster
 * modules with an HSM) implement the same interface.
 */
import type { GpsReference, Hex } from "../../protocol/types";
import type { WallClockAnchor } from "./hostClock";

export interface TamperState {
  tampered: boolean;
  /** Why the card considers itself tampered (enclosure opened, key zeroised, ...); null when not tampered. */
  reason: string | null;
}

/** What a card driver reports of its clock source (GET /node/info, /health, metrics): the chrony driver's state. */
export interface CardStatus {
  /** The `cardDriver` setting's name of the driver. */
  readonly driver: string;
  /** "serving": the card may sign; "degraded": it may not (reason says why); "starting": no reading yet. */
  readonly state: "starting" | "serving" | "degraded";
  readonly reason: string | null;
  /** The error bound the card proves now, ns (what the node signs); null when it proves none. */
  readonly accuracyBoundNs: number | null;
  /** The clock's offset from its reference as last measured, ns (signed); null when unknown. */
  readonly offsetNs: number | null;
  /** The card's reference, as its source names it (e.g. "chrony 7F000001 127.0.0.1 stratum 2"); null when none. */
  readonly source: string | null;
  /**
   * What the bound is computed from, so that anyone can recompute a signed accuracy (docs/protocol.md §14.19): the
   * source's raw report, the card's clock when it was applied (decimal ns), what the card adds for its own clock,
   * and the rate the bound grows at since then. Null before the first reading; absent for drivers without one.
   */
  readonly evidence?: CardBoundEvidence | null;
}

/** See CardStatus.evidence: accuracy(nanoMoment) = f(report) + clockExtraNs + ceil(growthPpb × (nanoMoment − readAtNs) / 10^9). */
export interface CardBoundEvidence {
  /** The source's report as it printed it (chrony: the `chronyc -c tracking` line). */
  readonly report: string;
  /** The card's clock when the report was applied, decimal ns since the Unix epoch. */
  readonly readAtNs: string;
  /** Added for the card's own clock (host-clock anchor uncertainty, and any lead over the new anchor), ns. */
  readonly clockExtraNs: number;
  /** How fast the bound grows after readAtNs, ppb (chrony: maximum clock error + skew + |residual frequency|). */
  readonly growthPpb: number;
}

export interface TimeCard {
  /** SHA-256 of the card's uncompressed P-256 public key (32 bytes, lowercase hex). */
  readonly cardId: Hex;
  /** The card's uncompressed P-256 public key (0x04 ‖ X ‖ Y). */
  readonly publicKey: Hex;
  /** X.509 chain, leaf (the card certificate) first, then the manufacturer CA; PEM. */
  readonly certificateChainPem: readonly string[];
  /** The card's clock: ns since the Unix epoch. Monotonic non-decreasing. */
  readTimeNs(): bigint;
  /**
   * Signs the hardware message for `nanoMoment` (docs/protocol.md §3): cardId ‖ r ‖ s, 96 bytes, low-S.
   * Throws UnavailableError when the card is tampered (a real card zeroises its key).
   */
  signHardware(nanoMoment: bigint): Hex;
  tamperState(): TamperState;
  /** Called once when the card becomes tampered; returns unsubscribe. */
  onTamper(listener: (reason: string) => void): () => void;
  /**
   * The card's current estimate of its own clock error against its reference (GPS, PTP), ns. The node refuses
   * to sign while this exceeds the accuracy it advertises.
   */
  measuredErrorNs(): number;
  /**
   * The card's GPS reference now (fix, satellites, PPS offset), or null for a card without one. Reported beside
   * each proof as unsigned metadata (docs/protocol.md §9.1).
   */
  gpsReference(): GpsReference | null;
  /**
   * Optional, for a card whose private key is process memory anyway (the development card): its P-256 private
   * scalar (32 bytes, hex), so that the node's signer thread can sign hardware messages off the serving thread
   * (node/core/signerWorker.ts). A hardware card never offers it (its key does not leave the card): its signatures
   * stay signHardware() calls. Throws UnavailableError when tampered.
   */
  exportKeyForSignerThread?(): Hex;
  /**
   * Optional, for a card whose clock is the host clock anchored to the wall clock (the development card: hostClock.ts):
   * that anchor, so that the signer thread can read the same clock itself and make whole ticks there
   * (node/core/signerThread.ts). Null when the card's clock is not such a clock (an injected one). A hardware card
   * never offers it: its clock is read through its driver.
   */
  clockAnchorForSignerThread?(): WallClockAnchor | null;
  /**
   * Optional, for a card whose accuracy is measured rather than configured (the chrony driver): the error bound it
   * proves for its clock reading `atNs` (a moment it returned from readTimeNs), whole ns rounded up, which the node
   * signs instead of the configured accuracyNs; null while it proves none (its status() says why). The node signs
   * nothing while this is null or above its signing bound (attestor.ts).
   */
  accuracyBoundNs?(atNs: bigint): number | null;
  /** Optional: the card's clock source and state, for reports. */
  status?(): CardStatus;
  /**
   * Optional, for a card that needs a first reading before it proves anything (the chrony card): resolves once it
   * has one, or knows why not (never rejects). The node waits for it before it starts attesting, so that it does
   * not begin by refusing to sign.
   */
  ready?(): Promise<void>;
  /**
   * Optional: why the card must not sign now although its clock is within its bound, or null. A card given a
   * required GPS reference (gpsRequired, gpsdClient.ts) says so while it has no fresh fix. The node signs nothing
   * while this is non-null, as when the measured error exceeds the signing bound (attestor.ts assertCanSign).
   */
  signingRefusal?(): string | null;
  /**
   * Optional, for a card whose clock follows an NTP source (the chrony driver): that source's stratum and 32-bit
   * reference id as the card last read them (null before a reading). The NTP time host serves stratum + 1 with that
   * reference id (RFC 5905 §7.3); a card that is itself the primary reference offers none.
   */
  ntpUpstream?(): NtpUpstream | null;
  /** Releases driver resources. */
  close(): void;
}

/** The NTP source a card's clock follows (TimeCard.ntpUpstream). */
export interface NtpUpstream {
  /** The source's stratum, 0–15 (chronyc's "Stratum" is the host's: source + 1). */
  readonly stratum: number;
  /** The source's 32-bit reference id (its IPv4 address, or a hash of its IPv6 one). */
  readonly referenceId: number;
}
