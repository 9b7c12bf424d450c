import { expect } from "chai";
import {
  MAX_JSON_NESTING_DEPTH,
  ValidationError,
  exceedsJsonNestingDepth,
  parseJsonLossless,
  proofFromJson,
  proofFromJsonText,
  proofToJson,
  stringifyJsonLossless,
} from "../../protocol";
import { CARD_ID, validProof } from "./fixtures";

function expectField(fn: () => unknown, field: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught, `expected a ValidationError for ${field}`).to.be.instanceOf(ValidationError);
  if (caught instanceof ValidationError) expect(caught.field).to.equal(field);
}

describe("json", () => {
  const proof = validProof();
  const body = proofToJson(proof);

  it("writes the §9 REST shape: decimal-string ns, lowercase hex, hardwareId = cardId, gps null", () => {
    expect(body.nanoMoment).to.equal(proof.nanoMoment.toString());
    expect(body.proof.hardwareId).to.equal(CARD_ID);
    expect(body.proof.accuracyNs).to.equal(proof.accuracy);
    expect(body.proof.gps).to.equal(null);
    expect(body.proof.hardwareSignature).to.match(/^0x[0-9a-f]{192}$/);
  });

  it("round-trips through JSON text exactly", () => {
    const parsed = proofFromJsonText(JSON.stringify(body));
    expect(parsed.proof).to.deep.equal(proof);
    expect(parsed.cardId).to.equal(CARD_ID);
  });

  describe("lossless parsing", () => {
    it("keeps integers above 2^53 exact as bigint", () => {
      const value = parseJsonLossless('{"a": 9007199254740993, "b": 340282366920938463463374607431768211455, "c": 5}') as Record<string, unknown>;
      expect(value.a).to.equal(9_007_199_254_740_993n);
      expect(value.b).to.equal((1n << 128n) - 1n);
      expect(value.c).to.equal(5);
      expect(stringifyJsonLossless(value)).to.equal('{"a":9007199254740993,"b":340282366920938463463374607431768211455,"c":5}');
    });

    it("reports a syntax error as a ValidationError on $", () => {
      expectField(() => parseJsonLossless("{"), "$");
    });

    it("refuses nesting deeper than 32 levels before parsing, on the field the caller names", () => {
      expect(MAX_JSON_NESTING_DEPTH).to.equal(32);
      const nested = (depth: number): string => "[".repeat(depth) + "]".repeat(depth);
      expect(parseJsonLossless(nested(32))).to.be.an("array");
      expect(() => parseJsonLossless(nested(33), "body")).to.throw(ValidationError, "body: nesting deeper than 32 levels");
      // Unclosed, far beyond the engine's stack: the bound answers, not a RangeError.
      expect(() => parseJsonLossless("[".repeat(100_000))).to.throw(ValidationError, "$: nesting deeper than 32 levels");
      expect(() => parseJsonLossless(`{"a":${"{\"b\":".repeat(40)}1${"}".repeat(41)}`)).to.throw(ValidationError, "nesting deeper");
    });

    it("counts no brackets inside strings, escaped quotes included", () => {
      expect(exceedsJsonNestingDepth(JSON.stringify({ a: "[".repeat(100) }), 32)).to.equal(false);
      expect(exceedsJsonNestingDepth(JSON.stringify({ a: `\\"${"{".repeat(100)}` }), 32)).to.equal(false);
      // JSON text ["\\"[[[…: the string holds one escaped backslash and ends before the brackets, which count.
      expect(exceedsJsonNestingDepth(`["\\\\"${"[".repeat(40)}`, 32)).to.equal(true);
      expect(exceedsJsonNestingDepth("{}".repeat(1_000), 1)).to.equal(false);
    });
  });

  describe("strict nanoseconds", () => {
    const withNanoMoment = (raw: string): string => JSON.stringify(body).replace(`"nanoMoment":"${body.nanoMoment}"`, `"nanoMoment":${raw}`);

    for (const [label, raw] of [
      ["negative", '"-1"'],
      ["float", '"1.5"'],
      ["scientific", '"1e18"'],
      ["hex", '"0x10"'],
      ["leading zero", '"0123"'],
      ["signed", '"+5"'],
      ["empty", '""'],
      ["whitespace", '" 5"'],
      ["above uint128", '"340282366920938463463374607431768211456"'],
      ["unquoted integer", "1732268493123456789"],
      ["unquoted float", "1.5"],
      ["unquoted scientific", "1e18"],
      ["null", "null"],
    ] as const) {
      it(`rejects a ${label} nanoMoment, naming the field`, () => {
        expectField(() => proofFromJsonText(withNanoMoment(raw)), "nanoMoment");
      });
    }

    it("accepts 0 and uint128 max", () => {
      expect(proofFromJsonText(withNanoMoment('"0"')).proof.nanoMoment).to.equal(0n);
      expect(proofFromJsonText(withNanoMoment('"340282366920938463463374607431768211455"')).proof.nanoMoment).to.equal((1n << 128n) - 1n);
    });
  });

  describe("strict proof fields", () => {
    const mutate = (change: (inner: Record<string, unknown>) => void): unknown => {
      const copy = JSON.parse(JSON.stringify(body)) as { proof: Record<string, unknown> };
      change(copy.proof);
      return copy;
    };

    it("rejects uppercase, short and odd hex, naming the field", () => {
      expectField(() => proofFromJson(mutate((p) => (p.hardwareSignature = (p.hardwareSignature as string).toUpperCase().replace("0X", "0x")))), "proof.hardwareSignature");
      expectField(() => proofFromJson(mutate((p) => (p.hardwareSignature = (p.hardwareSignature as string).slice(0, -2)))), "proof.hardwareSignature");
      expectField(() => proofFromJson(mutate((p) => (p.nodeSignature = `${p.nodeSignature as string}00`))), "proof.nodeSignature");
      expectField(() => proofFromJson(mutate((p) => (p.nodeSignature = "0x"))), "proof.nodeSignature");
      expectField(() => proofFromJson(mutate((p) => (p.hardwareId = `0x${"00".repeat(32)}`))), "proof.hardwareId");
    });

    it("rejects non-integer, negative or oversized accuracyNs, and fractional numerals even when integral", () => {
      expectField(() => proofFromJson(mutate((p) => (p.accuracyNs = -1))), "proof.accuracyNs");
      expectField(() => proofFromJson(mutate((p) => (p.accuracyNs = 1.5))), "proof.accuracyNs");
      expectField(() => proofFromJson(mutate((p) => (p.accuracyNs = 2 ** 32))), "proof.accuracyNs");
      expectField(() => proofFromJson(mutate((p) => (p.accuracyNs = "50"))), "proof.accuracyNs");
      expectField(() => proofFromJsonText(JSON.stringify(body).replace('"accuracyNs":50', '"accuracyNs":50.0')), "proof.accuracyNs");
      expectField(() => proofFromJsonText(JSON.stringify(body).replace('"accuracyNs":50', '"accuracyNs":5e1')), "proof.accuracyNs");
    });

    it("rejects unknown fields, and a gps that is not exactly a GPS reference in range", () => {
      expectField(() => proofFromJson(mutate((p) => (p.extra = 1))), "proof.extra");
      expectField(() => proofFromJson(mutate((p) => (p.gps = { lat: 1 }))), "proof.gps.lat");
      const gps = { fixState: "3d", satellites: 9, ppsOffsetNs: -12, observedAtNs: "1732268493123456000" };
      expect(proofFromJson(mutate((p) => (p.gps = gps))).proof).to.deep.equal(proof); // unsigned: not in the proof
      expectField(() => proofFromJson(mutate((p) => (p.gps = { ...gps, fixState: "4d" }))), "proof.gps.fixState");
      expectField(() => proofFromJson(mutate((p) => (p.gps = { ...gps, satellites: 65 }))), "proof.gps.satellites");
      expectField(() => proofFromJson(mutate((p) => (p.gps = { ...gps, ppsOffsetNs: 1_000_000_000 }))), "proof.gps.ppsOffsetNs");
      expectField(() => proofFromJson(mutate((p) => (p.gps = { ...gps, observedAtNs: 5 }))), "proof.gps.observedAtNs");
      expect(proofToJson(proof, undefined, gps as never).proof.gps).to.deep.equal(gps);
      expectField(() => proofFromJson(null), "$");
      expectField(() => proofFromJson({ nanoMoment: body.nanoMoment }), "proof");
    });

    it("accepts a POST /time/verify body without hardwareId and gps", () => {
      const { hardwareId: _id, gps: _gps, ...inner } = body.proof;
      expect(proofFromJson({ nanoMoment: body.nanoMoment, proof: inner }).proof).to.deep.equal(proof);
    });
  });
});
