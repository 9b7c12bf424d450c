import { expect } from "chai";
import { resolve } from "node:path";
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
const CLOSING = 3;

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

  it("close waits for a call in flight in another thread, gives up after its bound, and the thread never calls again", async function () {
    this.timeout(60_000); // the worker compiles the module with ts-node first
    const buffer = createNativeCallGate();
    const state = new Int32Array(buffer);
    const release = new Int32Array(new SharedArrayBuffer(4));
    // A thread whose gated "addon call" lasts until the test releases it, and then 300 ms more; afterwards it tries
    // another call and reports what happened.
    const worker = new Worker(
      `const { workerData, parentPort } = require("node:worker_threads");
       const { runGated } = require(${JSON.stringify(resolve(__dirname, "../../protocol/nativeCallGate.ts"))});
       const state = new Int32Array(workerData.gate);
       const release = new Int32Array(workerData.release);
       runGated(state, () => {
         parentPort.postMessage("inside");
         Atomics.wait(release, 0, 0);
         Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
       });
       let again = "ran";
       try { runGated(state, () => undefined); } catch (error) { again = error.name; }
       parentPort.postMessage(again);`,
      { eval: true, execArgv: ["-r", "ts-node/register/transpile-only"], workerData: { gate: buffer, release: release.buffer } },
    );
    const messages: unknown[] = [];
    worker.on("message", (message) => messages.push(message));
    try {
      await new Promise<void>((resolveInside) => worker.once("message", () => resolveInside()));
      expect(closeNativeCallGate(buffer, 50)).to.equal(false); // the call is held inside
      expect(Atomics.load(state, 0)).to.equal(CLOSING); // marked: the thread may not start another call
      const releasedMs = performance.now();
      Atomics.store(release, 0, 1);
      Atomics.notify(release, 0);
      expect(closeNativeCallGate(buffer, 30_000)).to.equal(true); // returns when the call leaves
      expect(performance.now() - releasedMs).to.be.at.least(250); // not before: the call lasted 300 ms more
      expect(Atomics.load(state, 0)).to.equal(CLOSED);
      await new Promise<void>((resolveAgain) => (messages.length > 1 ? resolveAgain() : worker.once("message", () => resolveAgain())));
      expect(messages).to.deep.equal(["inside", "NativeCallGateClosedError"]);
    } finally {
      await worker.terminate();
    }
  });
});
