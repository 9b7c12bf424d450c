import { expect } from "chai";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { RESULT_SLOT_BYTES, ResultSlot, TICK_PERMIT_BYTES, TickPermit, type SlotRecord } from "../../../node/core/signerResultSlot";
import type { Hex } from "../../../protocol/types";

const ROOT = join(__dirname, "..", "..", "..");

describe("Signer result slot and tick permit (node/core/signerResultSlot.ts)", () => {
  const entry = `0x${"ab".repeat(80)}` as Hex;
  const digest = `0x${"cd".repeat(32)}` as Hex;
  const hardwareSignature = `0x${"ef".repeat(96)}` as Hex;
  const record: SlotRecord = { kind: "reply", id: 7, permitEpoch: 0, nanoMoment: 1_700_000_000_123_456_789n, nodeTimestampNs: 2n ** 64n - 1n, signDurationNs: 41_000n, entry, digest, hardwareSignature };

  it("hands the reader the whole record through a second view of the same memory, with a version that changes at every write", () => {
    const writer = new ResultSlot();
    const reader = new ResultSlot(writer.buffer);
    expect(reader.versionNow()).to.equal(0);
    expect(reader.read(), "never written").to.equal(null);
    writer.write(record);
    const first = reader.read();
    expect(first).to.deep.equal({ ...record, version: 2 });
    const tick: SlotRecord = { ...record, kind: "tick", id: 2 ** 31 - 1, permitEpoch: 3, entry: `0x${"01".repeat(80)}`, nanoMoment: 0n };
    writer.write(tick);
    expect(reader.versionNow()).to.equal(4);
    expect(reader.read()).to.deep.equal({ ...tick, version: 4 });
  });

  it("reads nothing while a write is under way (odd version), or when the version moved during the copy", () => {
    const slot = new ResultSlot();
    slot.write(record);
    const version = new Int32Array(slot.buffer);
    Atomics.add(version, 0, 1); // a writer between its two version stores
    expect(slot.read()).to.equal(null);
    Atomics.add(version, 0, 1);
    expect(slot.read()).to.deep.include({ id: 7, version: 4 });
  });

  it("refuses a wrong buffer, an id outside the positive int32 range, an unknown kind, fields out of range, and results of the wrong length, changing nothing", () => {
    expect(() => new ResultSlot(new SharedArrayBuffer(RESULT_SLOT_BYTES - 1))).to.throw(RangeError, `${RESULT_SLOT_BYTES} bytes`);
    const slot = new ResultSlot();
    for (const id of [0, -1, 2 ** 31, 1.5]) expect(() => slot.write({ ...record, id })).to.throw(RangeError, "positive int32");
    expect(() => slot.write({ ...record, kind: "answer" as SlotRecord["kind"] })).to.throw(RangeError, "unknown record kind answer");
    expect(() => slot.write({ ...record, nanoMoment: 2n ** 64n })).to.throw(RangeError, "nanoMoment must fit in 64 bits");
    expect(() => slot.write({ ...record, permitEpoch: -1 })).to.throw(RangeError, "the permit epoch must be an int32 ≥ 0");
    expect(() => slot.write({ ...record, signDurationNs: -1n })).to.throw(RangeError, "the signing duration must fit in 64 bits");
    expect(() => slot.write({ ...record, entry: `0x${"ab".repeat(79)}` })).to.throw(RangeError, "the entry must be 80 bytes");
    expect(() => slot.write({ ...record, digest: `0x${"zz".repeat(32)}` })).to.throw(RangeError, "the digest must be 32 bytes");
    expect(() => slot.write({ ...record, hardwareSignature: `0x${"ef".repeat(95)}0z` })).to.throw(RangeError, "the hardware signature must be 96 bytes");
    expect(slot.versionNow(), "a refused write leaves the slot as it was").to.equal(0);
  });

  it("a reader racing a writer in another thread never gets a torn record", async function () {
    this.timeout(30_000);
    const slot = new ResultSlot();
    const permit = new TickPermit(); // granted: keep writing; withdrawn: stop
    permit.set(true);
    // The writer stores records whose every field derives from the id, as fast as it can.
    const writer = new Worker(
      `const { workerData, parentPort } = require("node:worker_threads");
       const { ResultSlot, TickPermit } = require(${JSON.stringify(join(ROOT, "node", "core", "signerResultSlot.ts"))});
       const slot = new ResultSlot(workerData.slot);
       const permit = new TickPermit(workerData.permit);
       const hex = (id, bytes) => "0x" + (id % 256).toString(16).padStart(2, "0").repeat(bytes);
       let id = 0;
       parentPort.postMessage("started");
       while (permit.granted) {
         id = id >= 0x7fffffff ? 1 : id + 1;
         const n = BigInt(id);
         slot.write({ kind: id % 2 === 0 ? "tick" : "reply", id, permitEpoch: id % 1000, nanoMoment: n * 3n, nodeTimestampNs: n * 5n, signDurationNs: n * 7n, entry: hex(id, 80), digest: hex(id + 1, 32), hardwareSignature: hex(id + 2, 96) });
       }
       parentPort.postMessage(id);`,
      { eval: true, execArgv: ["-r", join(ROOT, "bin", "register-ts.js")], workerData: { slot: slot.buffer, permit: permit.buffer } },
    );
    const written = new Promise<number>((resolve, reject) => {
      writer.on("message", (message: unknown) => {
        if (typeof message === "number") resolve(message);
      });
      writer.on("error", reject);
    });
    try {
      await new Promise<void>((resolve, reject) => {
        writer.once("message", () => resolve());
        writer.once("error", reject);
      });
      const hex = (id: number, bytes: number): Hex => `0x${(id % 256).toString(16).padStart(2, "0").repeat(bytes)}`;
      let whole = 0;
      let lastVersion = 0;
      let writesBetweenReads = 0;
      const untilMs = Date.now() + 300;
      while (Date.now() < untilMs) {
        const read = slot.read();
        if (read === null || read.version === lastVersion) continue;
        if (lastVersion !== 0 && read.version - lastVersion > 2) writesBetweenReads += 1;
        lastVersion = read.version;
        const n = BigInt(read.id);
        expect(read).to.deep.equal({
          version: read.version,
          kind: read.id % 2 === 0 ? "tick" : "reply",
          id: read.id,
          permitEpoch: read.id % 1000,
          nanoMoment: n * 3n,
          nodeTimestampNs: n * 5n,
          signDurationNs: n * 7n,
          entry: hex(read.id, 80),
          digest: hex(read.id + 1, 32),
          hardwareSignature: hex(read.id + 2, 96),
        });
        whole += 1;
      }
      permit.set(false);
      expect(whole, "records read whole in 300 ms").to.be.at.least(100);
      expect(writesBetweenReads, "the writer ran concurrently (versions moved by more than one write between reads)").to.be.above(0);
      await written;
    } finally {
      permit.set(false);
      await writer.terminate();
    }
  });

  it("the tick permit starts withheld (epoch 0), opens a new epoch at each grant after a withdrawal, and is seen by every view", () => {
    expect(() => new TickPermit(new SharedArrayBuffer(TICK_PERMIT_BYTES + 4))).to.throw(RangeError, `${TICK_PERMIT_BYTES} bytes`);
    const permit = new TickPermit();
    const view = new TickPermit(permit.buffer);
    expect(view).to.include({ granted: false, epoch: 0 });
    permit.set(true);
    expect(view).to.include({ granted: true, epoch: 1 });
    permit.set(true);
    expect(view.epoch, "granted again without a withdrawal: the same epoch").to.equal(1);
    permit.set(false);
    expect(view).to.include({ granted: false, epoch: 0 });
    permit.set(true);
    expect(view.epoch).to.equal(2);
  });

  it("the version skips 0 (never written) when it wraps", () => {
    const slot = new ResultSlot();
    Atomics.store(new Int32Array(slot.buffer), 0, -2); // 2^31 writes later
    slot.write(record);
    expect(slot.read()).to.deep.include({ version: 2, id: 7 });
  });
});
