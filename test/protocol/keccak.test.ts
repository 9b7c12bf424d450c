import { resolve } from "node:path";
import { Worker } from "node:worker_threads";
import { expect } from "chai";
import fc from "fast-check";
import {
  KECCAK_BACKEND,
  KECCAK_NATIVE_FAILURE,
  KECCAK_NATIVE_MODULE_PATH,
  NATIVE_KECCAK,
  NOBLE_KECCAK,
  assertKeccakKnownAnswer,
  keccak256Bytes,
  type KeccakImplementation,
} from "../../protocol/keccak";
import { createNativeCallGate, NATIVE_CALL_GATE_KEY } from "../../protocol/nativeCallGate";

const IMPLEMENTATIONS: readonly KeccakImplementation[] = NATIVE_KECCAK === null ? [NOBLE_KECCAK] : [NOBLE_KECCAK, NATIVE_KECCAK];

// keccak256 (Ethereum), not SHA3-256: the empty input hashes to c5d2…a470 (SHA3-256 would give a7ff…434a).
const EMPTY_DIGEST = "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470";

describe("keccak256 backends (protocol/keccak.ts)", () => {
  it("reports which backend is active, and why native is not when it is not", () => {
    expect(KECCAK_BACKEND).to.equal(NATIVE_KECCAK === null ? "noble" : "xkcp");
    expect(KECCAK_NATIVE_FAILURE === null).to.equal(NATIVE_KECCAK !== null);
    expect(KECCAK_NATIVE_MODULE_PATH === null).to.equal(NATIVE_KECCAK === null);
    if (KECCAK_NATIVE_MODULE_PATH !== null) expect(KECCAK_NATIVE_MODULE_PATH).to.match(/keccak[\\/].*\.node$/);
  });

  it("hashes the empty input to the known answer with every backend", () => {
    for (const implementation of IMPLEMENTATIONS) {
      expect(implementation.keccak256(new Uint8Array(0)).toString("hex"), implementation.backend).to.equal(EMPTY_DIGEST);
      assertKeccakKnownAnswer(implementation);
    }
    expect(keccak256Bytes(new Uint8Array(0)).toString("hex")).to.equal(EMPTY_DIGEST);
  });

  it("refuses a backend that computes something else", () => {
    const sha3Like: KeccakImplementation = { backend: "xkcp", keccak256: (data) => Buffer.from(NOBLE_KECCAK.keccak256(Buffer.concat([data, Buffer.of(1)]))) };
    expect(() => assertKeccakKnownAnswer(sha3Like)).to.throw(/known-answer/);
  });

  it("native and noble agree on random inputs, across the 136-byte block boundary", function () {
    if (NATIVE_KECCAK === null) this.skip(); // no native addon on this platform: nothing to compare
    const native = NATIVE_KECCAK!;
    for (const length of [0, 1, 32, 64, 66, 135, 136, 137, 192, 271, 272, 273, 1_000]) {
      const input = Uint8Array.from({ length }, (_, index) => (index * 7 + 3) & 0xff);
      expect(native.keccak256(input).equals(NOBLE_KECCAK.keccak256(input)), `${length} bytes`).to.equal(true);
    }
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 600 }), (input) => {
        expect(native.keccak256(input).toString("hex")).to.equal(NOBLE_KECCAK.keccak256(input).toString("hex"));
      }),
      { numRuns: 500 },
    );
  });

  it("hashes exactly the bytes of a view (offset subarrays, plain Uint8Arrays and Buffers alike)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 400 }), fc.nat(), fc.nat(), (bytes, a, b) => {
        const start = a % bytes.length;
        const end = start + (b % (bytes.length - start + 1));
        const expected = NOBLE_KECCAK.keccak256(Uint8Array.from(bytes.subarray(start, end))).toString("hex");
        for (const implementation of IMPLEMENTATIONS) {
          expect(implementation.keccak256(bytes.subarray(start, end)).toString("hex")).to.equal(expected);
          expect(implementation.keccak256(Buffer.from(bytes).subarray(start, end)).toString("hex")).to.equal(expected);
        }
      }),
      { numRuns: 200 },
    );
  });

  it("returns a new 32-byte Buffer on each call (the native sponge is reused, its output is not)", () => {
    for (const implementation of IMPLEMENTATIONS) {
      const first = implementation.keccak256(Buffer.from("abc"));
      first.fill(0);
      const second = implementation.keccak256(Buffer.from("abc"));
      expect(second.length).to.equal(32);
      expect(second.toString("hex")).to.equal("4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45");
    }
  });

  /** What protocol/keccak.ts chose in a fresh worker thread given `workerData`. */
  async function backendInWorker(workerData: unknown): Promise<unknown> {
    const worker = new Worker(
      `const { parentPort } = require("node:worker_threads");
       const k = require(${JSON.stringify(resolve(__dirname, "../../protocol/keccak.ts"))});
       parentPort.postMessage({ backend: k.KECCAK_BACKEND, failure: k.KECCAK_NATIVE_FAILURE, empty: k.keccak256Bytes(new Uint8Array(0)).toString("hex") });`,
      { eval: true, execArgv: ["-r", "ts-node/register/transpile-only"], workerData },
    );
    try {
      return await new Promise<unknown>((resolveReply, reject) => {
        worker.once("message", resolveReply);
        worker.once("error", reject);
      });
    } finally {
      await worker.terminate();
    }
  }

  it("does not load the native addon in a worker thread without a native-call gate (noble there, with the reason)", async function () {
    this.timeout(60_000); // the worker compiles the module with ts-node first
    expect(await backendInWorker({})).to.deep.equal({ backend: "noble", failure: "not loaded in a worker thread without a native-call gate", empty: EMPTY_DIGEST });
  });

  it("loads it in a worker thread given a native-call gate (protocol/nativeCallGate.ts)", async function () {
    this.timeout(60_000);
    if (NATIVE_KECCAK === null) this.skip(); // no addon on this machine: nothing to load in the worker either
    const reply = await backendInWorker({ [NATIVE_CALL_GATE_KEY]: createNativeCallGate() });
    expect(reply).to.deep.equal({ backend: "xkcp", failure: null, empty: EMPTY_DIGEST });
  });
});
