/**
 * How the protocol loads an optional native addon (libsecp256k1 in protocol/secp256k1.ts, XKCP keccak in
 * protocol/keccak.ts): load it, wrap it, and make the wrapper reproduce a known answer before anything uses it.
 * Never throws: a failure is reported as text and the caller keeps its pure-JS backend.
 */
import { isMainThread } from "node:worker_threads";
import { gatedImplementation, runGated, workerNativeCallGate } from "./nativeCallGate";

export interface NativeAddonLoad<T> {
  /** The wrapped addon, when it loaded and passed its known-answer test; otherwise null. */
  implementation: T | null;
  /** Absolute path of what was loaded, when `implementation` is set. */
  modulePath: string | null;
  /** Why `implementation` is null (load error, unexpected exports, failed known answer); null when it is set. */
  failure: string | null;
}

export interface LoadNativeAddonParameters<T> {
  /** Loads and wraps the addon; throws when it cannot. */
  load(): { implementation: T; modulePath: string };
  /** Throws unless `implementation` computes the expected bytes. */
  assertKnownAnswer(implementation: T): void;
}

/**
 * In the main thread: loads the addon. In a worker thread: only when the worker was given a native-call gate
 * (protocol/nativeCallGate.ts), and every function of the implementation then runs inside it; a worker that
 * used an addon without one could abort the whole process when it is terminated mid-call. `T` is an object of
 * functions (and plain values) that do not use `this`.
 */
export function loadNativeAddon<T extends object>(parameters: LoadNativeAddonParameters<T>): NativeAddonLoad<T> {
  const gate = isMainThread ? null : workerNativeCallGate();
  if (!isMainThread && gate === null) {
    return { implementation: null, modulePath: null, failure: "not loaded in a worker thread without a native-call gate" };
  }
  try {
    // Loading runs addon code too (its initialisation, libsecp256k1's context randomisation): inside the gate.
    const loaded = gate === null ? parameters.load() : runGated(gate, () => parameters.load());
    const implementation = gate === null ? loaded.implementation : gatedImplementation(loaded.implementation, gate);
    const modulePath = loaded.modulePath;
    parameters.assertKnownAnswer(implementation);
    return { implementation, modulePath, failure: null };
  } catch (error) {
    return { implementation: null, modulePath: null, failure: error instanceof Error ? error.message : String(error) };
  }
}
