import { expect } from "chai";
import fc from "fast-check";
import {
  decodeNtpReply,
  decodeNtpTimestamp,
  encodeKissOfDeath,
  encodeNtpReply,
  encodeNtpRequest,
  encodeNtpTimestamp,
  NTP_HEADER_BYTES,
  checkNtpServerState,
  nsFromNtpShort,
  ntpShortFromNs,
  parseNtpRequest,
  type NtpRequest,
  type NtpServerState,
} from "../../../node/ntp/packet";

const NS = 1_000_000_000n;
/** 2036-02-07T06:28:16Z: NTP era 0 ends, the 32-bit seconds field wraps to 0. */
const ERA_1_START_UNIX_NS = ((1n << 32n) - 2_208_988_800n) * NS;
const NOW_2026_NS = 1_795_000_000_123_456_789n;

const STATE: NtpServerState = {
  leap: 0,
  stratum: 1,
  precisionLog2: -20,
  rootDelayNs: 0n,
  rootDispersionNs: 1_000n,
  referenceId: "GPS",
  referenceTimeNs: NOW_2026_NS - NS,
};

function timestampBytes(unixNs: bigint): Uint8Array {
  const bytes = new Uint8Array(8);
  encodeNtpTimestamp(unixNs, bytes, 0);
  return bytes;
}

function requestOf(datagram: Uint8Array): NtpRequest {
  const parsed = parseNtpRequest(datagram);
  if (!parsed.ok) throw new Error(`request dropped: ${parsed.reason}`);
  return parsed.request;
}

describe("NTP packet codec (node/ntp/packet.ts)", () => {
  describe("timestamps", () => {
    it("encodes the Unix epoch as 2,208,988,800 s since 1900 and decodes it back", () => {
      const bytes = timestampBytes(0n);
      expect(Buffer.from(bytes).toString("hex")).to.equal("83aa7e8000000000");
      expect(decodeNtpTimestamp(bytes, 0, NOW_2026_NS)).to.equal(0n);
    });

    it("round-trips any instant from 1968 to 2104 within 1 ns, with the pivot up to 60 years away", () => {
      fc.assert(
        fc.property(fc.bigInt(-60n * 365n * 86_400n * NS, 134n * 365n * 86_400n * NS), fc.bigInt(-60n * 365n * 86_400n * NS, 60n * 365n * 86_400n * NS), (unixNs, pivotDistanceNs) => {
          const decoded = decodeNtpTimestamp(timestampBytes(unixNs), 0, unixNs + pivotDistanceNs);
          expect(decoded - unixNs <= 1n && unixNs - decoded <= 1n, `${unixNs} → ${decoded}`).to.equal(true);
        }),
      );
    });

    it("wraps at 2036-02-07T06:28:16Z (era 1: seconds field 0) and decodes into era 1 near that date", () => {
      const justBefore = timestampBytes(ERA_1_START_UNIX_NS - 1n);
      const atWrap = timestampBytes(ERA_1_START_UNIX_NS);
      expect(Buffer.from(justBefore.subarray(0, 4)).toString("hex")).to.equal("ffffffff");
      expect(Buffer.from(atWrap).toString("hex")).to.equal("0000000000000000");
      // A pivot in 2036 just before the wrap reads the zero timestamp as the wrap, not as 1900.
      expect(decodeNtpTimestamp(atWrap, 0, ERA_1_START_UNIX_NS - 10n * NS)).to.equal(ERA_1_START_UNIX_NS);
      expect(decodeNtpTimestamp(justBefore, 0, ERA_1_START_UNIX_NS + 10n * NS)).to.equal(ERA_1_START_UNIX_NS - 1n);
      // 2040 is era 1 with a small seconds field.
      const in2040 = ERA_1_START_UNIX_NS + 4n * 365n * 86_400n * NS + 123n;
      expect(decodeNtpTimestamp(timestampBytes(in2040), 0, NOW_2026_NS)).to.equal(in2040);
    });

    it("refuses an instant before 1900", () => {
      expect(() => timestampBytes(-2_208_988_801n * NS)).to.throw(RangeError, /start in 1900/);
    });
  });

  describe("short format (root delay, root dispersion)", () => {
    it("rounds up so that a bound is never understated, and is exact on whole units", () => {
      expect(ntpShortFromNs(0n)).to.equal(0);
      expect(ntpShortFromNs(1n)).to.equal(1); // 1 ns → one unit of 2^-16 s (15.26 µs)
      expect(ntpShortFromNs(1_000n)).to.equal(1);
      expect(ntpShortFromNs(15_258n)).to.equal(1);
      expect(ntpShortFromNs(15_259n)).to.equal(2); // one unit is 15,258.789… ns
      expect(ntpShortFromNs(NS)).to.equal(0x1_0000);
      expect(ntpShortFromNs(NS + 1n)).to.equal(0x1_0001);
      fc.assert(
        fc.property(fc.bigInt(0n, 65_535n * NS), (ns) => {
          const units = ntpShortFromNs(ns);
          expect(nsFromNtpShort(units) >= ns, `${ns} ns → ${units} units`).to.equal(true);
          // and at most one unit more than needed
          expect(units === 0 || nsFromNtpShort(units - 1) < ns).to.equal(true);
        }),
      );
    });

    it("saturates beyond 65,536 s and refuses a negative duration", () => {
      expect(ntpShortFromNs(70_000n * NS)).to.equal(0xffff_ffff);
      expect(() => ntpShortFromNs(-1n)).to.throw(RangeError, /negative/);
    });
  });

  describe("requests", () => {
    it("accepts version 4 and version 3 client requests (mode 3) and keeps poll and transmit timestamp", () => {
      for (const version of [1, 2, 3, 4]) {
        const request = requestOf(encodeNtpRequest(NOW_2026_NS, version, 10));
        expect(request.version).to.equal(version);
        expect(request.poll).to.equal(10);
        expect(Buffer.from(request.transmitTimestamp).equals(Buffer.from(timestampBytes(NOW_2026_NS)))).to.equal(true);
      }
    });

    it("drops short packets, mode 6/7 queries, other modes and versions 0 and 5–7, with the reason", () => {
      const valid = encodeNtpRequest(NOW_2026_NS);
      expect(parseNtpRequest(valid.subarray(0, NTP_HEADER_BYTES - 1))).to.deep.equal({ ok: false, reason: "short" });
      expect(parseNtpRequest(new Uint8Array(0))).to.deep.equal({ ok: false, reason: "short" });
      const withFirstByte = (first: number): Uint8Array => {
        const copy = Uint8Array.from(valid);
        copy[0] = first;
        return copy;
      };
      // ntpq (mode 6, version 2) and ntpdc's monlist (mode 7, version 2), and any version of them
      expect(parseNtpRequest(withFirstByte((2 << 3) | 6))).to.deep.equal({ ok: false, reason: "control" });
      expect(parseNtpRequest(withFirstByte((2 << 3) | 7))).to.deep.equal({ ok: false, reason: "control" });
      expect(parseNtpRequest(withFirstByte((0 << 3) | 7))).to.deep.equal({ ok: false, reason: "control" });
      for (const mode of [0, 1, 2, 4, 5]) expect(parseNtpRequest(withFirstByte((4 << 3) | mode)), `mode ${mode}`).to.deep.equal({ ok: false, reason: "mode" });
      for (const version of [0, 5, 6, 7]) expect(parseNtpRequest(withFirstByte((version << 3) | 3)), `version ${version}`).to.deep.equal({ ok: false, reason: "version" });
    });

    it("ignores bytes beyond the header (extension fields, a MAC) and classifies any datagram without throwing", () => {
      const withMac = new Uint8Array(NTP_HEADER_BYTES + 24);
      withMac.set(encodeNtpRequest(NOW_2026_NS));
      expect(parseNtpRequest(withMac).ok).to.equal(true);
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
          const parsed = parseNtpRequest(bytes);
          if (parsed.ok) expect(bytes.length >= NTP_HEADER_BYTES && (bytes[0]! & 7) === 3).to.equal(true);
        }),
      );
    });
  });

  describe("replies", () => {
    it("round-trips a reply: mode 4, the request's version and poll, origin = the client's transmit timestamp", () => {
      const clientTransmitNs = NOW_2026_NS - 5_000n;
      const request = requestOf(encodeNtpRequest(clientTransmitNs, 3, 7));
      const reply = encodeNtpReply(request, STATE, NOW_2026_NS, NOW_2026_NS + 12_345n);
      expect(reply.length).to.equal(NTP_HEADER_BYTES);
      const decoded = decodeNtpReply(reply, NOW_2026_NS);
      expect(decoded).to.deep.include({ leap: 0, version: 3, mode: 4, stratum: 1, poll: 7, precisionLog2: -20, rootDelayNs: 0n, referenceId: "GPS" });
      expect(decoded.rootDispersionNs).to.equal(nsFromNtpShort(1)); // 1 µs rounded up to one unit (15.26 µs)
      expect(Buffer.from(decoded.originTimestamp).equals(Buffer.from(timestampBytes(clientTransmitNs)))).to.equal(true);
      expect(decoded.receiveNs).to.equal(NOW_2026_NS);
      expect(decoded.transmitNs).to.equal(NOW_2026_NS + 12_345n);
      expect(decoded.referenceTimeNs).to.equal(STATE.referenceTimeNs);
    });

    it("carries LI 3 and the reference id as given, and the NTP zero timestamp for a clock never checked", () => {
      const request = requestOf(encodeNtpRequest(NOW_2026_NS));
      const decoded = decodeNtpReply(encodeNtpReply(request, { ...STATE, leap: 3, stratum: 3, referenceId: "LOCL", referenceTimeNs: 0n }, NOW_2026_NS, NOW_2026_NS), NOW_2026_NS);
      expect(decoded).to.deep.include({ leap: 3, stratum: 3, referenceId: "LOCL", referenceTimeNs: null });
    });

    it("encodes a Kiss-o'-Death RATE: LI 3, stratum 0, refid RATE, the client's timestamp in origin and nothing of the server's clock", () => {
      const clientTransmit = timestampBytes(NOW_2026_NS);
      const request = requestOf(encodeNtpRequest(NOW_2026_NS, 4, 4));
      const kod = encodeKissOfDeath(request, "RATE");
      const decoded = decodeNtpReply(kod, NOW_2026_NS);
      expect(decoded).to.deep.include({ leap: 3, version: 4, mode: 4, stratum: 0, poll: 4, referenceId: "RATE", rootDelayNs: 0n, rootDispersionNs: 0n });
      for (const offset of [24, 32, 40]) expect(Buffer.from(kod.subarray(offset, offset + 8)).equals(Buffer.from(clientTransmit)), `offset ${offset}`).to.equal(true);
    });

    it("refuses an invalid server state once, naming every problem", () => {
      checkNtpServerState(STATE);
      expect(() => checkNtpServerState({ ...STATE, stratum: 0, leap: 4, referenceId: "TOOLONG", rootDispersionNs: -1n })).to.throw(
        RangeError,
        /leap 4 is not 0–3; stratum 0 is not 1–15; rootDispersionNs -1 is negative; an NTP reference id is 1–4 printable ASCII characters, got "TOOLONG"/,
      );
    });
  });
});
