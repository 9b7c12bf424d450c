import { expect } from "chai";
import { Worker } from "node:worker_threads";
import {
  closeNativeCallGate,
  createNativeCallGate,
  gatedImplementation,
  NativeCallGateClosedError,
  runGated,
} from "../../protocol/nativeCallGate";

const OPEN = 0;
const IN_CALL = 1;
const CLOSED = 2;

describe("Native-call gate (protocol/nativeCallGate.ts)", () => {
  it("runs calls while open, leaves the gate open after a call that throws, and refuses every call once closed", () => {
    const buffer = createNativeCallGate();
    const state = new Int32Array(buffer);
    expect(runGated(state, () => Atomics.load(state, 0))).to.equal(IN_CALL); // inside the call the gate reads IN_CALL
    expect(() =>
      runGated(state, () => {
        throw new RangeError("addon refused");
      }),
    ).to.throw(RangeError, "addon refused");
    expect(Atomics.load(state, 0)).to.equal(OPEN);
    expect(closeNativeCallGate(buffer)).to.equal(true);
    expect(Atomics.load(state, 0)).to.equal(CLOSED);
    expect(closeNativeCallGate(buffer)).to.equal(true); // idempotent
    let ran = false;
    expect(() => runGated(state, () => (ran = true))).to.throw(NativeCallGateClosedError, "being stopped");
    expect(ran).to.equal(false);
  });

  it("wraps an implementation's functions (values copied) and freezes the copy", () => {
    const state = new Int32Array(createNativeCallGate());
    const seen: number[] = [];
    const gated = gatedImplementation({ backend: "test", twice: (value: number) => (seen.push(Atomics.load(state, 0)), value * 2) }, state);
    expect(gated.backend).to.equal("test");
    expect(gated.twice(21)).to.equal(42);
    expect(seen).to.deep.equal([IN_CALL]);
    expect(Object.isFrozen(gated)).to.equal(true);
  });

  it("close waits for a call in flight in another thread, and gives up after its bound when the call never leaves", async function () {
    this.timeout(20_000);
    const buffer = createNativeCallGate();
    const state = new Int32Array(buffer);
    // A thread that enters the gate, stays inside for 300 ms, then leaves.
    const worker = new Worker(
      `const { workerData, parentPort } = require("node:worker_threads");
       const state = new Int32Array(workerData.gate);
       Atomics.compareExchange(state, 0, ${OPEN}, ${IN_CALL});
       parentPort.postMessage("inside");
       Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300); // a 300 ms "addon call"
       Atomics.store(state, 0, ${OPEN});
       Atomics.notify(state, 0);`,
      { eval: true, workerData: { gate: buffer } },
    );
    try {
      await new Promise((resolve) => worker.once("message", resolve));
      const startedMs = Date.now();
      expect(closeNativeCallGate(buffer, 50)).to.equal(false); // the call is still inside after 50 ms
      expect(Date.now() - startedMs).to.be.at.least(45);
      expect(Atomics.load(state, 0)).to.equal(IN_CALL);
      expect(closeNativeCallGate(buffer, 10_000)).to.equal(true); // returns when the call leaves, not at the bound
      expect(Date.now() - startedMs).to.be.within(250, 9_000);
      expect(Atomics.load(state, 0)).to.equal(CLOSED);
    } finally {
      await worker.terminate();
    }
  });
});
