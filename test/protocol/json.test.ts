import { expect } from "chai";
import {
  ValidationError,
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

    it("rejects unknown fields and a non-null gps", () => {
      expectField(() => proofFromJson(mutate((p) => (p.extra = 1))), "proof.extra");
      expectField(() => proofFromJson(mutate((p) => (p.gps = { lat: 1 }))), "proof.gps");
      expectField(() => proofFromJson(null), "$");
      expectField(() => proofFromJson({ nanoMoment: body.nanoMoment }), "proof");
    });

    it("accepts a POST /time/verify body without hardwareId and gps", () => {
      const { hardwareId: _id, gps: _gps, ...inner } = body.proof;
      expect(proofFromJson({ nanoMoment: body.nanoMoment, proof: inner }).proof).to.deep.equal(proof);
    });
  });
});
