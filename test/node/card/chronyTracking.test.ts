import { expect } from "chai";
import {
  boundAtNs,
  boundGrowthNs,
  chronyCardState,
  frequencyErrorPpb,
  parseFixedDecimal,
  parseTracking,
  trackingBoundNs,
  TrackingParseError,
  type ChronyStateInput,
} from "../../../node/card/chronyTracking";

/** Recorded from chronyd 4.3 (`chronyc -c -n tracking`): a client synchronised to a second local chronyd. */
const SYNCED = "7F000001,127.0.0.1,2,1795836881.775814668,-0.000001752,-0.000000012,0.000000023,-0.016,-0.002,0.083,0.000006583,0.000002910,0.1,Normal\n";
/** The same client 2 s later, its source stopped: the ref time stays, chrony grows the root dispersion. */
const SOURCE_STOPPED = "7F000001,127.0.0.1,2,1795836881.775814668,-0.000001719,-0.000000012,0.000000023,-0.016,-0.002,0.083,0.000006583,0.000005128,0.1,Normal\n";
/** The source itself (`local stratum 1`): a local reference, no name. */
const LOCAL_REFERENCE = "7F7F0101,,1,1795836874.264923389,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,0.000000000,0.000000000,0.0,Normal\n";
/** A client whose only server does not answer. */
const NOT_SYNCHRONISED = "00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,1.000000000,1.000000000,0.0,Not synchronised\n";

function expectParseError(output: string, pattern: RegExp, field: string | null): TrackingParseError {
  let caught: unknown;
  try {
    parseTracking(output);
  } catch (error) {
    caught = error;
  }
  expect(caught, `no error for ${JSON.stringify(output)}`).to.be.instanceOf(TrackingParseError);
  const error = caught as TrackingParseError;
  expect(error.message).to.match(pattern);
  expect(error.field).to.equal(field);
  // The evidence: what chronyc printed, quoted in the message.
  expect(error.message).to.include(JSON.stringify(output.slice(0, 200)).slice(1, 40));
  return error;
}

describe("chrony tracking report (node/card/chronyTracking.ts)", () => {
  describe("parseTracking on recorded chronyd 4.3 outputs", () => {
    it("reads every field of a synchronised client exactly, in ns and ppb", () => {
      const tracking = parseTracking(SYNCED);
      expect(tracking).to.deep.include({
        referenceId: "7F000001",
        referenceName: "127.0.0.1",
        stratum: 2,
        refTimeNs: 1_795_836_881_775_814_668n,
        systemTimeOffsetNs: -1_752n,
        lastOffsetNs: -12n,
        rmsOffsetNs: 23n,
        frequencyPpb: -16n,
        residualFrequencyPpb: -2n,
        skewPpb: 83n,
        rootDelayNs: 6_583n,
        rootDispersionNs: 2_910n,
        updateIntervalNs: 100_000_000n,
        leapStatus: "Normal",
      });
      expect(tracking.line).to.equal(SYNCED.trimEnd());
    });

    it("reads a local reference (empty name) and an unsynchronised client", () => {
      expect(parseTracking(LOCAL_REFERENCE)).to.deep.include({ referenceName: "", stratum: 1, rootDelayNs: 0n, rootDispersionNs: 0n });
      expect(parseTracking(NOT_SYNCHRONISED)).to.deep.include({ leapStatus: "Not synchronised", refTimeNs: 0n, rootDispersionNs: 1_000_000_000n });
    });

    it("refuses malformed output with the field and the line, never a reading", () => {
      expectParseError("", /output is empty/, null);
      expectParseError("\n", /output is empty/, null);
      expectParseError(SYNCED.replace(",Normal", ""), /expected 14 comma-separated fields, got 13/, null);
      expectParseError(SYNCED.replace(",Normal", ",Normal,extra"), /got 15/, null);
      expectParseError(SYNCED + SYNCED, /more than one line/, null);
      expectParseError(SYNCED.replace("0.000002910", "nan"), /rootDispersion is not a decimal number: "nan"/, "rootDispersion");
      expectParseError(SYNCED.replace("0.000002910", "NaN"), /rootDispersion is not a decimal number/, "rootDispersion");
      expectParseError(SYNCED.replace("0.000002910", "-0.000002910"), /rootDispersion is negative: -0.000002910/, "rootDispersion");
      expectParseError(SYNCED.replace("0.000006583", "-0.000006583"), /rootDelay is negative/, "rootDelay");
      expectParseError(SYNCED.replace("0.083", "-0.083"), /skew is negative/, "skew");
      expectParseError(SYNCED.replace("-0.000001752", "inf"), /systemTimeOffset is not a decimal number: "inf"/, "systemTimeOffset");
      expectParseError(SYNCED.replace("-0.000001752", "-1.752e-6"), /systemTimeOffset is not a decimal number/, "systemTimeOffset");
      expectParseError(SYNCED.replace("-0.000001752", ""), /systemTimeOffset is not a decimal number: ""/, "systemTimeOffset");
      expectParseError(SYNCED.replace("-0.000001752", " -0.000001752"), /systemTimeOffset is not a decimal number/, "systemTimeOffset");
      expectParseError(SYNCED.replace("7F000001", "7f00001"), /referenceId is not 8 hex digits/, "referenceId");
      expectParseError(SYNCED.replace(",2,", ",17,"), /stratum is not an integer 0-16: "17"/, "stratum");
      expectParseError(SYNCED.replace("Normal", "Synchronised"), /leapStatus is not one of/, "leapStatus");
      expectParseError("506 Cannot talk to daemon\n", /expected 14 comma-separated fields, got 1/, null);
      expectParseError(`${"x".repeat(2_000)}\n`, /2001 bytes, more than the 1024/, null);
    });

    it("parses decimals exactly and rounds digits beyond the scale away from zero (never a smaller bound)", () => {
      expect(parseFixedDecimal("0.000000001", 9, "f", "")).to.equal(1n);
      expect(parseFixedDecimal("0.0000000001", 9, "f", "")).to.equal(1n);
      expect(parseFixedDecimal("-0.0000000011", 9, "f", "")).to.equal(-2n);
      expect(parseFixedDecimal("1.5", 9, "f", "")).to.equal(1_500_000_000n);
      expect(parseFixedDecimal("+12", 3, "f", "")).to.equal(12_000n);
      // Float arithmetic would lose the last digits of an epoch in ns; bigint does not.
      expect(parseFixedDecimal("1795836881.775814668", 9, "f", "")).to.equal(1_795_836_881_775_814_668n);
    });
  });

  describe("the bound (ClockBound's formula)", () => {
    it("is |offset| + root dispersion + root delay / 2, rounded up to whole ns", () => {
      // 1752 + 2910 + ceil(6583 / 2) = 1752 + 2910 + 3292
      expect(trackingBoundNs(parseTracking(SYNCED))).to.equal(7_954n);
      expect(trackingBoundNs(parseTracking(LOCAL_REFERENCE))).to.equal(0n);
      // An unsynchronised report has a bound (1.5 s), far above any maximum: the state, not the bound, refuses it.
      expect(trackingBoundNs(parseTracking(NOT_SYNCHRONISED))).to.equal(1_500_000_000n);
      const positive = parseTracking(SYNCED.replace("-0.000001752", "0.000001752"));
      expect(trackingBoundNs(positive)).to.equal(7_954n);
    });

    it("grows at maxclockerror + skew + |residual frequency| from the reading, rounded up", () => {
      const tracking = parseTracking(SYNCED);
      expect(frequencyErrorPpb(tracking, 15_000n)).to.equal(15_000n + 83n + 2n);
      expect(boundGrowthNs(15_085n, 1_000_000_000n)).to.equal(15_085n);
      expect(boundGrowthNs(15_085n, 1n)).to.equal(1n); // 0.000015 ns rounds up
      expect(boundGrowthNs(15_085n, 0n)).to.equal(0n);
      expect(boundAtNs(tracking, 2_000_000_000n, 15_000n)).to.equal(7_954n + 30_170n);
      expect(() => boundGrowthNs(1n, -1n)).to.throw(RangeError, /reading from the future/);
      expect(() => frequencyErrorPpb(tracking, -1n)).to.throw(RangeError);
    });

    it("grows faster than chrony's own root dispersion did between two recorded readings", () => {
      // Recorded at least 2 s apart (a 2 s sleep between chronyc runs), the source stopped: chrony grew its root
      // dispersion by 2218 ns, at most 1109 ppb (its maxclockerror of 1 ppm + skew + residual). The node's default
      // maximum clock error (15 ppm, RFC 5905's PHI) grows the bound more than ten times faster.
      const earlier = parseTracking(SYNCED);
      const later = parseTracking(SOURCE_STOPPED);
      const chronyGrowthNs = later.rootDispersionNs - earlier.rootDispersionNs;
      expect(chronyGrowthNs).to.equal(2_218n);
      const chronyRateAtMostPpb = (chronyGrowthNs * 1_000_000_000n) / 2_000_000_000n;
      expect(frequencyErrorPpb(earlier, 15_000n) > 10n * chronyRateAtMostPpb).to.equal(true);
      // And the projected bound covers the later report (its offset moved 33 ns meanwhile) by a wide margin.
      expect(boundAtNs(earlier, 2_000_000_000n, 15_000n) > trackingBoundNs(later)).to.equal(true);
    });
  });

  describe("chronyCardState", () => {
    const tracking = parseTracking(SYNCED);
    const base: ChronyStateInput = { tracking, pollError: null, boundNs: 7_954n, maxBoundNs: 100_000n, readingAgeMs: 10, maxReadingAgeMs: 3_000 };

    it("serves a fresh synchronised reading within the maximum", () => {
      expect(chronyCardState(base)).to.deep.equal({ state: "serving", reason: null });
      expect(chronyCardState({ ...base, boundNs: 100_000n })).to.deep.equal({ state: "serving", reason: null });
    });

    it("is starting before the first answer", () => {
      expect(chronyCardState({ ...base, tracking: null, boundNs: null, readingAgeMs: null })).to.deep.equal({ state: "starting", reason: "no chrony tracking reading yet" });
    });

    it("is degraded, with the reason, when not synchronised, above the maximum, stale or unreadable", () => {
      const unsynchronised = parseTracking(NOT_SYNCHRONISED);
      expect(chronyCardState({ ...base, tracking: unsynchronised, boundNs: 1_500_000_000n, maxBoundNs: 2_000_000_000n })).to.deep.equal({
        state: "degraded",
        reason: 'chrony is not synchronised (leap status "Not synchronised", reference 00000000)',
      });
      expect(chronyCardState({ ...base, boundNs: 100_001n }).reason).to.equal("chrony's error bound 100001 ns exceeds chronyMaxBoundNs 100000 ns");
      expect(chronyCardState({ ...base, readingAgeMs: 3_001 }).state).to.equal("degraded");
      expect(chronyCardState({ ...base, pollError: "chronyc exited with code 1: Could not open connection to daemon" })).to.deep.equal({
        state: "degraded",
        reason: "chrony unreadable: chronyc exited with code 1: Could not open connection to daemon",
      });
      expect(chronyCardState({ ...base, tracking: null, boundNs: null, readingAgeMs: null, pollError: "spawn chronyc ENOENT" }).state).to.equal("degraded");
    });
  });
});
