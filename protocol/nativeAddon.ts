/**
 * How the protocol loads an optional native addon (libsecp256k1 in protocol/secp256k1.ts, XKCP keccak in
 * protocol/keccak.ts): load it, wrap it, and make the wrapper reproduce a known answer before anything uses it.
 * Never throws: a failure is reported as text and the caller keeps its pure-JS backend.
 */
import { isMainThread } from "node:worker_threads";

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
  /**
   * Refuse to load outside the main thread. A worker that loaded an N-API addon can abort the whole process when
   * it is terminated (seen with libsecp256k1: "terminate called after throwing an instance of 'Napi::Error'").
   */
  mainThreadOnly: boolean;
}

export function loadNativeAddon<T>(parameters: LoadNativeAddonParameters<T>): NativeAddonLoad<T> {
  if (parameters.mainThreadOnly && !isMainThread) {
    return { implementation: null, modulePath: null, failure: "not loaded in a worker thread" };
  }
  try {
    const { implementation, modulePath } = parameters.load();
    parameters.assertKnownAnswer(implementation);
    return { implementation, modulePath, failure: null };
  } catch (error) {
    return { implementation: null, modulePath: null, failure: error instanceof Error ? error.message : String(error) };
  }
}
