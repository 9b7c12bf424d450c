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

/** The retry options both clients take (client/types.ts TimeClientOptions, client/browser.ts). */
export interface RetryOptions {
  /** Retries after the first attempt on retryable failures (default 2). */
  retries?: number;
  /** First backoff (default 100 ms); doubles per retry, full jitter, capped by backoffMaxMs (default 2,000 ms). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

/** The policy of `options`, defaults filled in. */
export function retryPolicyOf(options: RetryOptions): RetryPolicy {
  return { retries: options.retries ?? 2, backoffBaseMs: options.backoffBaseMs ?? 100, backoffMaxMs: options.backoffMaxMs ?? 2_000 };
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
