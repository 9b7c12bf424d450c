import { expect } from "chai";
import { GPSD_WATCH_COMMAND, MAX_GPSD_LINE_BYTES, parseGpsdLine, type GpsdReport } from "../../../node/card/gpsdReports";
import { EMPTY_GPSD_STATE, GpsdLineSplitter, gpsReadingAt, type GpsdState } from "../../../node/card/gpsdClient";
import { parseGpsReference } from "../../../protocol/json";

// Recorded from gpsd 3.22 fed by gpsfake with test-system/fixtures/gps-3d-fix.nmea (trimmed where marked).
const VERSION = '{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}';
const WATCH = '{"class":"WATCH","enable":true,"json":true,"nmea":false,"raw":0,"scaled":false,"timing":false,"split24":false,"pps":true}';
const TPV_3D =
  '{"class":"TPV","device":"/dev/pts/1","mode":3,"time":"2026-11-27T09:35:14.000Z","ept":0.005,"lat":48.117305000,"lon":11.516706667,"altHAE":592.3000,"altMSL":545.4000,"alt":545.4000,"epv":29.900,"track":84.4000,"magtrack":87.7264,"magvar":3.3,"speed":0.010,"geoidSep":46.900,"eph":17.100,"sep":30.400}';
const TPV_NO_TIME = '{"class":"TPV","device":"/dev/pts/1","mode":3,"lat":48.117305000,"lon":11.516706667,"altHAE":592.3000,"altMSL":545.4000,"alt":545.4000,"magvar":3.3,"geoidSep":46.900,"eph":17.100}';
const TPV_NO_FIX = '{"class":"TPV","device":"/dev/pts/1","mode":1,"time":"2026-11-27T09:35:10.000Z","ept":0.005}';
/** 10 in view, 8 used (satellites list trimmed to three: uSat/nSat are what is read). */
const SKY =
  '{"class":"SKY","device":"/dev/pts/1","hdop":0.90,"pdop":1.60,"nSat":10,"uSat":8,"satellites":[{"PRN":2,"el":67.0,"az":45.0,"ss":44.0,"used":true,"gnssid":0,"svid":2},{"PRN":30,"el":8.0,"az":35.0,"ss":0.0,"used":false,"gnssid":0,"svid":30},{"PRN":31,"el":5.0,"az":262.0,"ss":0.0,"used":false,"gnssid":0,"svid":31}]}';
/** gpsd before 3.20 (no uSat/nSat): the satellites marked used are counted. */
const SKY_OLD = '{"class":"SKY","device":"/dev/ttyS0","satellites":[{"PRN":2,"used":true},{"PRN":5,"used":true},{"PRN":7,"used":false}]}';
const TOFF = '{"class":"TOFF","device":"/dev/pts/1","real_sec":1795772114, "real_nsec":0,"clock_sec":1795838741,"clock_nsec":44847714}';
/** A PPS edge the host clock timed 1.234 µs after the GPS second. */
const PPS_LATE = '{"class":"PPS","device":"/dev/pps0","real_sec":1795838741,"real_nsec":0,"clock_sec":1795838741,"clock_nsec":1234,"precision":-20,"shm":"NTP0","qErr":0}';
/** ... and one timed 500 ns before it (the host clock's second had not ended yet). */
const PPS_EARLY = '{"class":"PPS","device":"/dev/pps0","real_sec":1795838742,"real_nsec":0,"clock_sec":1795838741,"clock_nsec":999999500,"precision":-20}';

function report(line: string): GpsdReport {
  const parsed = parseGpsdLine(line);
  if (!parsed.ok) throw new Error(`expected a report, got: ${parsed.error}`);
  return parsed.report;
}

function malformed(line: string): string {
  const parsed = parseGpsdLine(line);
  if (parsed.ok) throw new Error(`expected malformed, got ${JSON.stringify(parsed.report)}`);
  return parsed.error;
}

describe("gpsd reports (node/card/gpsdReports.ts)", () => {
  it("reads the fix mode and time of TPV, the satellites used of SKY, and the PPS edge's offset, from recorded gpsd 3.22 lines", () => {
    expect(report(TPV_3D)).to.deep.equal({ kind: "tpv", mode: 3, device: "/dev/pts/1", time: "2026-11-27T09:35:14.000Z" });
    expect(report(TPV_NO_TIME)).to.deep.equal({ kind: "tpv", mode: 3, device: "/dev/pts/1", time: null });
    expect(report(TPV_NO_FIX)).to.deep.include({ kind: "tpv", mode: 1 });
    expect(report(SKY)).to.deep.equal({ kind: "sky", satellitesUsed: 8, satellitesVisible: 10, device: "/dev/pts/1" });
    expect(report(SKY_OLD)).to.deep.equal({ kind: "sky", satellitesUsed: 2, satellitesVisible: 3, device: "/dev/ttyS0" });
    expect(report(PPS_LATE)).to.deep.equal({ kind: "pps", offsetNs: 1_234, device: "/dev/pps0" });
    expect(report(PPS_EARLY)).to.deep.equal({ kind: "pps", offsetNs: -500, device: "/dev/pps0" });
  });

  it("ignores the classes it does not use (VERSION, WATCH, TOFF, unknown ones), without calling them malformed", () => {
    expect(report(VERSION)).to.deep.equal({ kind: "ignored", class: "VERSION" });
    expect(report(WATCH)).to.deep.equal({ kind: "ignored", class: "WATCH" });
    expect(report(TOFF)).to.deep.equal({ kind: "ignored", class: "TOFF" });
    expect(report('{"class":"FUTURE","x":1}')).to.deep.equal({ kind: "ignored", class: "FUTURE" });
  });

  it("calls malformed, with the evidence, what is not JSON, not a classed object, or a TPV/SKY/PPS off its schema, and never throws", () => {
    expect(malformed('{"class":"TPV","mode":3')).to.match(/^not JSON/);
    expect(malformed("")).to.equal("empty line");
    expect(malformed("[1,2]")).to.match(/^report: /);
    expect(malformed('{"mode":3}')).to.match(/^report: \/class/);
    expect(malformed('{"class":"TPV","mode":4}')).to.match(/^TPV: \/mode/);
    expect(malformed('{"class":"TPV","mode":"3"}')).to.match(/^TPV: \/mode.*"3"/);
    expect(malformed('{"class":"SKY","uSat":-1}')).to.match(/^SKY: \/uSat/);
    expect(malformed('{"class":"SKY","satellites":[{"PRN":2}]}')).to.match(/^SKY: \/satellites\/0\/used/);
    expect(malformed('{"class":"PPS","real_sec":1,"real_nsec":0,"clock_sec":1}')).to.match(/^PPS: \/clock_nsec/);
    expect(malformed('{"class":"PPS","real_sec":10,"real_nsec":0,"clock_sec":12,"clock_nsec":0}')).to.match(/^PPS: edge 12\.000000000 is not within 1 s of GPS second 10\.000000000/);
    expect(malformed("null")).to.match(/^report: /);
  });

  it("refuses a line longer than MAX_GPSD_LINE_BYTES, counted in UTF-8 bytes", () => {
    // 8192 characters of 2 bytes each fill the bound; the 31 bytes of JSON around them exceed it.
    const padding = "é".repeat(MAX_GPSD_LINE_BYTES / 2);
    expect(malformed(`{"class":"TPV","mode":3,"x":"${padding}"}`)).to.equal(`line of ${MAX_GPSD_LINE_BYTES + 31} bytes exceeds ${MAX_GPSD_LINE_BYTES}`);
    // The same length in 1-byte characters is within it.
    expect(report(`{"class":"TPV","mode":3,"x":"${"e".repeat(MAX_GPSD_LINE_BYTES / 2)}"}`)).to.deep.include({ kind: "tpv", mode: 3 });
  });

  it("asks gpsd for JSON with PPS, one command line", () => {
    expect(GPSD_WATCH_COMMAND).to.equal('?WATCH={"enable":true,"json":true,"pps":true};\n');
  });
});

describe("gpsd line splitting (GpsdLineSplitter)", () => {
  it("joins lines split across chunks, strips CR, and keeps an unfinished line for the next chunk", () => {
    const splitter = new GpsdLineSplitter(64);
    expect(splitter.push(Buffer.from('{"class":"TPV",'))).to.deep.equal({ lines: [], overlong: 0 });
    expect(splitter.push(Buffer.from('"mode":3}\r\n{"class":"SKY"}\n{"cl'))).to.deep.equal({ lines: ['{"class":"TPV","mode":3}', '{"class":"SKY"}'], overlong: 0 });
    expect(splitter.push(Buffer.from('ass":"PPS"}\n'))).to.deep.equal({ lines: ['{"class":"PPS"}'], overlong: 0 });
  });

  it("drops an overlong line whole, counted once as soon as it passes the bound, and reads the next line normally", () => {
    const splitter = new GpsdLineSplitter(16);
    expect(splitter.push(Buffer.from("x".repeat(20)))).to.deep.equal({ lines: [], overlong: 1 });
    expect(splitter.push(Buffer.from("y".repeat(100)))).to.deep.equal({ lines: [], overlong: 0 });
    expect(splitter.push(Buffer.from('zz\n{"class":"A"}\n'))).to.deep.equal({ lines: ['{"class":"A"}'], overlong: 0 });
    // An overlong line that ends within one chunk.
    expect(splitter.push(Buffer.from(`${"w".repeat(17)}\nok\n`))).to.deep.equal({ lines: ["ok"], overlong: 1 });
  });
});

describe("gps reference from gpsd state (gpsReadingAt)", () => {
  const MS = 1_000_000n;
  const cardNowNs = 1_795_838_741_000_000_000n;
  const state = (atMs: bigint, mode: 0 | 1 | 2 | 3 = 3): GpsdState => ({
    tpv: { mode, time: null, device: "/dev/pts/1", atMonotonicNs: atMs * MS },
    sky: { satellitesUsed: 8, satellitesVisible: 10, atMonotonicNs: atMs * MS },
    pps: { offsetNs: -500, atMonotonicNs: atMs * MS },
  });

  it("reports a fresh 3-D fix with its satellites, PPS offset, and observedAt on the card clock (now minus the report's age)", () => {
    const reading = gpsReadingAt(state(1_000n), 1_250n * MS, 5_000, cardNowNs);
    expect(reading).to.deep.equal({ reference: { fixState: "3d", satellites: 8, ppsOffsetNs: -500, observedAtNs: (cardNowNs - 250n * MS).toString() }, noFixReason: null });
    // What the node reports must pass the protocol's own check (protocol/json.ts).
    expect(parseGpsReference(reading.reference, "gps")).to.deep.equal(reading.reference);
    expect(gpsReadingAt(state(1_000n, 2), 1_000n * MS, 5_000, cardNowNs).reference.fixState).to.equal("2d");
  });

  it("is no fix, with the mode as evidence, for TPV modes 0 and 1", () => {
    for (const mode of [0, 1] as const) {
      const reading = gpsReadingAt(state(1_000n, mode), 1_000n * MS, 5_000, cardNowNs);
      expect(reading.reference.fixState).to.equal("none");
      expect(reading.noFixReason).to.equal(`gpsd reports no fix (TPV mode ${mode} on /dev/pts/1, 8 satellites used)`);
    }
  });

  it("is no fix once the TPV is older than staleAfterMs (at the bound it still counts), and SKY and PPS report 0", () => {
    expect(gpsReadingAt(state(1_000n), 6_000n * MS, 5_000, cardNowNs).noFixReason).to.equal(null);
    const stale = gpsReadingAt(state(1_000n), 6_001n * MS, 5_000, cardNowNs, "gpsd 127.0.0.1:2947 not connected (ECONNREFUSED: refused)");
    expect(stale.reference).to.deep.equal({ fixState: "none", satellites: 0, ppsOffsetNs: 0, observedAtNs: (cardNowNs - 5_001n * MS).toString() });
    expect(stale.noFixReason).to.equal("gpsd's last TPV report (mode 3) is 5001 ms old, stale after 5000 ms; gpsd 127.0.0.1:2947 not connected (ECONNREFUSED: refused)");
  });

  it("is no fix before any TPV, observed now", () => {
    expect(gpsReadingAt(EMPTY_GPSD_STATE, 5n * MS, 5_000, cardNowNs)).to.deep.equal({
      reference: { fixState: "none", satellites: 0, ppsOffsetNs: 0, observedAtNs: cardNowNs.toString() },
      noFixReason: "no TPV report from gpsd yet",
    });
  });

  it("caps the satellites reported at 64, the protocol's maximum", () => {
    const many: GpsdState = { ...state(1_000n), sky: { satellitesUsed: 90, satellitesVisible: 120, atMonotonicNs: 1_000n * MS } };
    expect(gpsReadingAt(many, 1_000n * MS, 5_000, cardNowNs).reference.satellites).to.equal(64);
  });
});
