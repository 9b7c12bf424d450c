/**
 * Abort helpers for work whose callee may not honour its signal (a third-party transport, a card driver).
 */

/**
 * Settles with `promise`, or rejects with the signal's reason as soon as `signal` aborts, whichever comes first.
 * The caller is free at the abort even when the callee ignores the signal; the callee's late result is dropped.
 */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as unknown);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as unknown);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** The abort reason of a deadline: a DOMException named "TimeoutError", like AbortSignal.timeout()'s. */
export function timeoutReason(message: string): DOMException {
  return new DOMException(message, "TimeoutError");
}
