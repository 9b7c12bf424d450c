import { expect } from "chai";
import { RESULT_SLOT_BYTES, ResultSlot } from "../../../node/core/signerResultSlot";
import type { Hex } from "../../../protocol/types";

describe("Signer result slot (node/core/signerResultSlot.ts)", () => {
  const entry = `0x${"ab".repeat(80)}` as Hex;
  const digest = `0x${"cd".repeat(32)}` as Hex;
  const hardwareSignature = `0x${"ef".repeat(96)}` as Hex;

  it("hands the reader the result of the id it asks for, through a second view of the same memory", () => {
    const writer = new ResultSlot();
    const reader = new ResultSlot(writer.buffer);
    expect(reader.idNow()).to.equal(0);
    expect(reader.read(1)).to.equal(null);
    writer.write(7, { entry, digest, hardwareSignature });
    expect(reader.idNow()).to.equal(7);
    expect(reader.read(7)).to.deep.equal({ entry, digest, hardwareSignature });
    expect(reader.read(6), "another request's result").to.equal(null);
    const entry2 = `0x${"01".repeat(80)}` as Hex;
    writer.write(8, { entry: entry2, digest, hardwareSignature });
    expect(reader.read(7)).to.equal(null);
    expect(reader.read(8)).to.deep.equal({ entry: entry2, digest, hardwareSignature });
  });

  it("refuses a wrong buffer, an id outside the positive int32 range, and results of the wrong length", () => {
    expect(() => new ResultSlot(new SharedArrayBuffer(RESULT_SLOT_BYTES - 1))).to.throw(RangeError, `${RESULT_SLOT_BYTES} bytes`);
    const slot = new ResultSlot();
    for (const id of [0, -1, 2 ** 31, 1.5]) expect(() => slot.write(id, { entry, digest, hardwareSignature })).to.throw(RangeError, "positive int32");
    expect(() => slot.write(1, { entry: `0x${"ab".repeat(79)}`, digest, hardwareSignature })).to.throw(RangeError, "the entry must be 80 bytes");
    expect(() => slot.write(1, { entry, digest: `0x${"zz".repeat(32)}`, hardwareSignature })).to.throw(RangeError, "the digest must be 32 bytes");
    expect(() => slot.write(1, { entry, digest, hardwareSignature: "0x" })).to.throw(RangeError, "the hardware signature must be 96 bytes");
    expect(slot.idNow(), "a refused write leaves the slot as it was").to.equal(0);
  });
});
