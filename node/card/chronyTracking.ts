/**
 * chrony's tracking report (`chronyc -c tracking`) parsed, and the error bound of the host clock it proves, with
 * no I/O: the chrony card driver (chrony.ts) runs chronyc and feeds the text here; tests feed recorded outputs.
 *
 * The bound is the one AWS ClockBound computes from the same report (docs/protocol.md §14.19):
 *   |system time offset| + root dispersion + root delay / 2
 * at the moment of the reading, plus the maximum frequency error times the time elapsed since then. Every figure
 * is parsed from chrony's decimal text into bigint ns (or ppb) exactly, rounded away from zero when the text has
 * more digits than that, so no float rounding can make the bound smaller than chrony's figures give.
 *
 * A report that is not exactly one well-formed line of 14 fields throws TrackingParseError naming the field and
 * quoting the line: a malformed reading never yields a bound (the driver is then degraded), let alone a small one.
 */

/** Fields of one `chronyc -c tracking` line (chrony 4.x, client.c process_cmd_tracking). */
export const TRACKING_FIELD_NAMES = [
  "referenceId",
  "referenceName",
  "stratum",
  "refTime",
  "systemTimeOffset",
  "lastOffset",
  "rmsOffset",
  "frequency",
  "residualFrequency",
  "skew",
  "rootDelay",
  "rootDispersion",
  "updateInterval",
  "leapStatus",
] as const;

/** The most text accepted from chronyc (one line is ~150 bytes); the driver also caps what it reads to this. */
export const MAX_TRACKING_OUTPUT_BYTES = 1_024;

/** chrony's leap status names (client.c). "Not synchronised": chrony has no source it trusts. */
export const LEAP_STATUSES = ["Normal", "Insert second", "Delete second", "Not synchronised"] as const;
export type ChronyLeapStatus = (typeof LEAP_STATUSES)[number];

const NS_PER_SECOND = 1_000_000_000n;

/** One tracking report. Times in ns, frequencies in ppb (chrony prints ppm with 3 decimals: exact in ppb). */
export interface ChronyTracking {
  /** chrony's reference id, 8 hex digits (an IPv4 address, or a refclock's name, as ASCII). */
  readonly referenceId: string;
  /** The source's address, or "" (a local reference, or `-n` not resolving). */
  readonly referenceName: string;
  readonly stratum: number;
  /** When chrony last updated the clock from its source (UTC, ns since the Unix epoch); 0 = never. */
  readonly refTimeNs: bigint;
  /** chrony's estimate of true time minus the system clock, ns (signed; chronyc's CSV prints the correction). */
  readonly systemTimeOffsetNs: bigint;
  readonly lastOffsetNs: bigint;
  readonly rmsOffsetNs: bigint;
  readonly frequencyPpb: bigint;
  readonly residualFrequencyPpb: bigint;
  /** chrony's estimate of the error bound of its frequency, ppb (≥ 0). */
  readonly skewPpb: bigint;
  /** Total round-trip delay to the stratum-1 reference, ns (≥ 0). */
  readonly rootDelayNs: bigint;
  /** Total dispersion to the stratum-1 reference, ns (≥ 0), grown by chrony up to the moment it answered. */
  readonly rootDispersionNs: bigint;
  readonly updateIntervalNs: bigint;
  readonly leapStatus: ChronyLeapStatus;
  /** The line parsed, for evidence in errors and reports. */
  readonly line: string;
}

/** A tracking report chrony's text does not give: the field, the value and the whole line as evidence. */
export class TrackingParseError extends Error {
  override readonly name = "TrackingParseError";
  constructor(
    message: string,
    readonly field: string | null,
    readonly value: string | null,
    readonly output: string,
  ) {
    super(`${message}; chronyc -c tracking printed ${JSON.stringify(output.length > 200 ? `${output.slice(0, 200)}…` : output)}`);
  }
}

/** A decimal number as chrony prints it: digits, an optional point and digits, an optional sign. No exponent. */
const DECIMAL = /^([+-]?)(\d{1,12})(?:\.(\d{1,12}))?$/;

/**
 * `text` × 10^scaleDigits as a bigint, exactly; extra digits round away from zero (a bound is never made smaller
 * by parsing). Throws TrackingParseError for anything but DECIMAL (NaN, inf, exponents, empty, spaces).
 */
export function parseFixedDecimal(text: string, scaleDigits: number, field: string, output: string): bigint {
  const match = DECIMAL.exec(text);
  if (match === null) throw new TrackingParseError(`${field} is not a decimal number: ${JSON.stringify(text)}`, field, text, output);
  const [, sign, whole, fraction = ""] = match;
  const kept = fraction.slice(0, scaleDigits).padEnd(scaleDigits, "0");
  let magnitude = BigInt(whole ?? "0") * 10n ** BigInt(scaleDigits) + BigInt(kept === "" ? "0" : kept);
  if (/[1-9]/.test(fraction.slice(scaleDigits))) magnitude += 1n;
  return sign === "-" ? -magnitude : magnitude;
}

/** Parses `chronyc -c tracking` output: exactly one line of 14 fields (a trailing newline allowed). */
export function parseTracking(output: string): ChronyTracking {
  if (output.length > MAX_TRACKING_OUTPUT_BYTES) {
    throw new TrackingParseError(`output is ${output.length} bytes, more than the ${MAX_TRACKING_OUTPUT_BYTES} one report takes`, null, null, output);
  }
  const line = output.endsWith("\n") ? output.slice(0, -1) : output;
  if (line.trim() === "") throw new TrackingParseError("output is empty (is chronyd running and its command socket reachable?)", null, null, output);
  if (line.includes("\n")) throw new TrackingParseError("output has more than one line", null, null, output);
  const fields = line.split(",");
  if (fields.length !== TRACKING_FIELD_NAMES.length) {
    throw new TrackingParseError(`expected ${TRACKING_FIELD_NAMES.length} comma-separated fields, got ${fields.length}`, null, null, output);
  }
  const field = (index: number): string => fields[index] ?? "";
  const seconds = (index: number): bigint => parseFixedDecimal(field(index), 9, TRACKING_FIELD_NAMES[index] ?? "", output);
  // ppm with 3 decimals is exactly ppb.
  const ppb = (index: number): bigint => parseFixedDecimal(field(index), 3, TRACKING_FIELD_NAMES[index] ?? "", output);
  const nonNegative = (index: number, value: bigint): bigint => {
    if (value < 0n) throw new TrackingParseError(`${TRACKING_FIELD_NAMES[index]} is negative: ${field(index)}`, TRACKING_FIELD_NAMES[index] ?? null, field(index), output);
    return value;
  };

  const referenceId = field(0);
  if (!/^[0-9A-F]{8}$/.test(referenceId)) throw new TrackingParseError(`referenceId is not 8 hex digits: ${JSON.stringify(referenceId)}`, "referenceId", referenceId, output);
  const stratumText = field(2);
  if (!/^\d{1,2}$/.test(stratumText) || Number(stratumText) > 16) {
    throw new TrackingParseError(`stratum is not an integer 0-16: ${JSON.stringify(stratumText)}`, "stratum", stratumText, output);
  }
  const leapText = field(13);
  if (!(LEAP_STATUSES as readonly string[]).includes(leapText)) {
    throw new TrackingParseError(`leapStatus is not one of ${LEAP_STATUSES.join(", ")}: ${JSON.stringify(leapText)}`, "leapStatus", leapText, output);
  }
  return {
    referenceId,
    referenceName: field(1),
    stratum: Number(stratumText),
    refTimeNs: nonNegative(3, seconds(3)),
    systemTimeOffsetNs: seconds(4),
    lastOffsetNs: seconds(5),
    rmsOffsetNs: nonNegative(6, seconds(6)),
    frequencyPpb: ppb(7),
    residualFrequencyPpb: ppb(8),
    skewPpb: nonNegative(9, ppb(9)),
    rootDelayNs: nonNegative(10, seconds(10)),
    rootDispersionNs: nonNegative(11, seconds(11)),
    updateIntervalNs: nonNegative(12, seconds(12)),
    leapStatus: leapText as ChronyLeapStatus,
    line,
  };
}

const abs = (value: bigint): bigint => (value < 0n ? -value : value);
const ceilDiv = (numerator: bigint, denominator: bigint): bigint => (numerator + denominator - 1n) / denominator;

/**
 * ClockBound's clock error bound at the moment chrony answered, ns: |system time offset| + root dispersion +
 * ceil(root delay / 2). chrony's root dispersion already includes its growth from the last update to that moment
 * (reference.c grows it at skew + |residual frequency| + maxclockerror per second elapsed).
 */
export function trackingBoundNs(tracking: ChronyTracking): bigint {
  return abs(tracking.systemTimeOffsetNs) + tracking.rootDispersionNs + ceilDiv(tracking.rootDelayNs, 2n);
}

/**
 * The most the host clock's frequency can be off while no new reading comes, ppb: the oscillator's assumed
 * maximum error (`maxClockErrorPpb`, at least chronyd's `maxclockerror`) plus chrony's skew and |residual
 * frequency|, as ClockBound grows its root dispersion (clock-bound-d/src/tracking.rs dispersion_at).
 */
export function frequencyErrorPpb(tracking: ChronyTracking, maxClockErrorPpb: bigint): bigint {
  if (maxClockErrorPpb < 0n) throw new RangeError(`maxClockErrorPpb must be ≥ 0, got ${maxClockErrorPpb}`);
  return maxClockErrorPpb + tracking.skewPpb + abs(tracking.residualFrequencyPpb);
}

/** How much the bound grows over `elapsedNs` at `ratePpb`, ns, rounded up. */
export function boundGrowthNs(ratePpb: bigint, elapsedNs: bigint): bigint {
  if (elapsedNs < 0n) throw new RangeError(`elapsed time must be ≥ 0 ns, got ${elapsedNs} (a reading from the future)`);
  return ceilDiv(ratePpb * elapsedNs, NS_PER_SECOND);
}

/** The bound `elapsedNs` after the reading, ns: trackingBoundNs + the frequency error's growth since then. */
export function boundAtNs(tracking: ChronyTracking, elapsedNs: bigint, maxClockErrorPpb: bigint): bigint {
  return trackingBoundNs(tracking) + boundGrowthNs(frequencyErrorPpb(tracking, maxClockErrorPpb), elapsedNs);
}

export type ChronyCardState = "starting" | "serving" | "degraded";

export interface ChronyStateInput {
  /** The last good reading, or null when none yet. */
  readonly tracking: ChronyTracking | null;
  /** Why the last poll failed (chronyc error, TrackingParseError), or null when it succeeded. */
  readonly pollError: string | null;
  /** The bound now, ns (null when there is no reading). */
  readonly boundNs: bigint | null;
  /** Above this bound the card is degraded, ns. */
  readonly maxBoundNs: bigint;
  /** How old the last good reading is, ms; and the age beyond which it no longer counts. */
  readonly readingAgeMs: number | null;
  readonly maxReadingAgeMs: number;
}

/**
 * The node's state from chrony's (pure): serving only with a fresh reading that is synchronised and bounds the
 * clock within maxBoundNs; a failed poll, a stale reading, "Not synchronised" or a bound above the maximum is
 * degraded (the node signs nothing), with the reason and its evidence; no poll answered yet is starting.
 */
export function chronyCardState(input: ChronyStateInput): { state: ChronyCardState; reason: string | null } {
  const { tracking } = input;
  // A failed poll says nothing about the clock: an older reading is not trusted either (chrony may have stepped).
  if (input.pollError !== null) return { state: "degraded", reason: `chrony unreadable: ${input.pollError}` };
  if (tracking === null || input.boundNs === null || input.readingAgeMs === null) return { state: "starting", reason: "no chrony tracking reading yet" };
  if (input.readingAgeMs > input.maxReadingAgeMs) {
    return { state: "degraded", reason: `the last chrony reading is ${input.readingAgeMs} ms old (more than ${input.maxReadingAgeMs} ms): chronyc is not answering` };
  }
  if (tracking.leapStatus === "Not synchronised") {
    return { state: "degraded", reason: `chrony is not synchronised (leap status "Not synchronised", reference ${tracking.referenceId})` };
  }
  if (input.boundNs > input.maxBoundNs) {
    return { state: "degraded", reason: `chrony's error bound ${input.boundNs} ns exceeds chronyMaxBoundNs ${input.maxBoundNs} ns` };
  }
  return { state: "serving", reason: null };
}
