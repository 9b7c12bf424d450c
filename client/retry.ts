/**
 * Retries of the client library: exponential backoff with full jitter, only on failures worth another attempt.
 */
import { AtsError } from "../protocol/errors";

export interface RetryPolicy {
  /** Retries after the first attempt. */
  retries: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

/** Failures worth another attempt (429, 5xx, network errors, timeouts): the node or the network may recover. */
export function isRetryable(error: unknown): boolean {
  if (error instanceof AtsError) return error.code === "RATE_LIMIT" || error.code === "UNAVAILABLE" || error.code === "INTERNAL";
  return true;
}

/** Only a 429, which the node answers before doing anything: for calls that must not run twice. */
export function isRefusedBeforeAnyEffect(error: unknown): boolean {
  return error instanceof AtsError && error.code === "RATE_LIMIT";
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Runs `attempt`, retrying per `policy` while `retryable(error)` holds. */
export async function withRetries<T>(
  policy: RetryPolicy,
  attempt: () => Promise<T>,
  retryable: (error: unknown) => boolean = isRetryable,
): Promise<T> {
  for (let index = 0; ; index += 1) {
    try {
      return await attempt();
    } catch (error) {
      if (index >= policy.retries || !retryable(error)) throw error;
      const capMs = Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** index);
      await sleep(Math.random() * capMs);
    }
  }
}
