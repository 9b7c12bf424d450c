/**
 * A native-call gate: what lets a worker thread use an N-API addon (libsecp256k1, XKCP keccak) without putting the
 * whole process at risk when the thread is stopped.
 *
 * Terminating a worker (Worker.terminate(), or the process exiting while the worker runs) while it is inside an
 * addon call aborts the process: the addon's next N-API call fails because the thread is being torn down,
 * node-addon-api throws a C++ `Napi::Error` that nothing catches, and std::terminate follows ("terminate called
 * after throwing an instance of 'Napi::Error'"; on Node 20 with secp256k1@5, 19 of 20 terminations of a thread
 * signing in a loop aborted). Terminating a thread that runs JavaScript or waits for a message is safe.
 *
 * Detail: docs/node.md "Signing, transports and limits".
 */
import { workerData } from "node:worker_threads";

/*
 * The gate: the thread's owner and the thread share one Int32 in a SharedArrayBuffer, passed in the worker's
 * `workerData[NATIVE_CALL_GATE_KEY]`: OPEN, IN_CALL, CLOSING or CLOSED. The thread enters every addon call with
 * compareExchange(OPEN → IN_CALL) and leaves with compareExchange(IN_CALL → OPEN), or, when the owner marked the
 * call CLOSING meanwhile, with a store of CLOSED; then it notifies (runGated). The owner, before it terminates the
 * thread (and when the process exits), swaps OPEN → CLOSED, or marks a call in flight CLOSING and waits with
 * Atomics.wait until the thread leaves it (closeNativeCallGate). Once CLOSING or CLOSED the thread never enters
 * an addon again (the call throws), so the termination that follows cannot land inside one, and a wait that
 * timed out does not let the thread start another call. A call is ~0.1 ms, so the owner's wait is that long at
 * most; it is bounded anyway, for an addon that never returns. Gated calls do not nest (an implementation's
 * function must not call another gated one: the inner call would find the gate IN_CALL and throw).
 *
 * protocol/nativeAddon.ts loads an addon in a worker only when the worker was given a gate, and wraps every
 * function of the addon's implementation in it.
 */
/** The workerData property that carries the gate's SharedArrayBuffer (4 bytes). */
export const NATIVE_CALL_GATE_KEY = "nativeCallGate";

const OPEN = 0;
const IN_CALL = 1;
const CLOSED = 2;
/** A call is in flight and the owner is closing: the thread stores CLOSED when it leaves. */
const CLOSING = 3;

/** How long closeNativeCallGate waits for a call in flight by default, ms (a call takes ~0.1 ms). */
export const NATIVE_CALL_GATE_CLOSE_WAIT_MS = 1_000;

/** A new, open gate: pass it to the worker as `workerData[NATIVE_CALL_GATE_KEY]`. */
export function createNativeCallGate(): SharedArrayBuffer {
  return new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
}

/**
 * Closes the gate (the owner's side; synchronous, safe in a process 'exit' listener): from now on the thread
 * enters no addon call. Waits for a call in flight to leave, up to `maxWaitMs`. Returns true when the gate is
 * closed with no call inside (terminating the thread is then safe), false when a call was still inside after the
 * wait. Idempotent.
 */
export function closeNativeCallGate(gate: SharedArrayBuffer, maxWaitMs = NATIVE_CALL_GATE_CLOSE_WAIT_MS): boolean {
  const state = new Int32Array(gate);
  const deadlineMs = performance.now() + maxWaitMs;
  for (;;) {
    const before = Atomics.compareExchange(state, 0, OPEN, CLOSED);
    if (before === OPEN || before === CLOSED) return true;
    // A call is in flight: mark it so that the thread closes the gate when it leaves (never reopens it). The
    // exchange fails when the call left meanwhile, and the next round closes the open gate.
    if (before === IN_CALL) {
      Atomics.compareExchange(state, 0, IN_CALL, CLOSING);
      continue;
    }
    const leftMs = deadlineMs - performance.now();
    if (leftMs <= 0) return false;
    Atomics.wait(state, 0, CLOSING, leftMs);
  }
}

/** The error a gated call throws once the owner has closed the gate. */
export class NativeCallGateClosedError extends Error {
  constructor() {
    super("native addon calls are closed: this thread is being stopped");
    this.name = "NativeCallGateClosedError";
  }
}

/** Runs `call` inside the gate (the thread's side). Throws NativeCallGateClosedError once the gate is closed. */
export function runGated<T>(state: Int32Array, call: () => T): T {
  if (Atomics.compareExchange(state, 0, OPEN, IN_CALL) !== OPEN) throw new NativeCallGateClosedError();
  try {
    return call();
  } finally {
    // The owner marked the call CLOSING while it ran: the gate stays shut.
    if (Atomics.compareExchange(state, 0, IN_CALL, OPEN) !== IN_CALL) Atomics.store(state, 0, CLOSED);
    Atomics.notify(state, 0);
  }
}

/**
 * A copy of `implementation` whose every function runs inside the gate (other properties copied as they are).
 * The implementations wrapped here (protocol/secp256k1.ts, protocol/keccak.ts) are frozen objects of functions
 * that do not use `this`.
 */
export function gatedImplementation<T extends object>(implementation: T, state: Int32Array): T {
  const gated: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(implementation)) {
    gated[name] = typeof value === "function" ? (...args: unknown[]) => runGated(state, () => (value as (...a: unknown[]) => unknown)(...args)) : value;
  }
  return Object.freeze(gated) as T;
}

/** This worker's gate, from workerData; null in the main thread or when the worker was given none. */
export function workerNativeCallGate(): Int32Array | null {
  const gate: unknown = (workerData as Record<string, unknown> | null | undefined)?.[NATIVE_CALL_GATE_KEY];
  if (!(gate instanceof SharedArrayBuffer) || gate.byteLength !== Int32Array.BYTES_PER_ELEMENT) return null;
  return new Int32Array(gate);
}
