/**
 * The chain behind the gateway over HTTP JSON-RPC: one call per request, at most MAX_UPSTREAM_IN_FLIGHT at a time
 * (the rest wait their turn in order), each bounded by UPSTREAM_TIMEOUT_MS and by the caller's signal (a batch's time
 * budget). A batch of 1,000 forwarded items thus reuses a few keep-alive connections instead of opening 1,000 to the
 * chain, and items still waiting when their batch's budget runs out never reach it. Errors come back as the chain
 * gave them; a call that never got an answer is -32000 "Upstream unavailable".
 */
import { JSON_RPC_ERRORS, JsonRpcError } from "./jsonrpc";
import type { Upstream } from "./methods";
import type { UpstreamOutcome } from "./metrics";

/** Upstream calls that take longer fail with -32000, ms. */
export const UPSTREAM_TIMEOUT_MS = 10_000;
/** Calls on their way to the chain at once; Hardhat and anvil answer one at a time anyway. */
export const MAX_UPSTREAM_IN_FLIGHT = 16;

/** Waits for a turn among at most `limit` holders, in arrival order; a waiter whose signal aborts leaves the line. */
class Turns {
  #held = 0;
  readonly #waiting: { grant: () => void }[] = [];

  constructor(private readonly limit: number) {}

  async take(signal: AbortSignal | undefined): Promise<void> {
    signal?.throwIfAborted();
    if (this.#held < this.limit) {
      this.#held += 1;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next === undefined) this.#held -= 1;
    else next.grant(); // the turn passes on: #held stays
  }
}

/**
 * `observe` gets each call's time at the chain (from its turn to its answer, seconds) and how it ended (metrics); a
 * call that never got a turn (its batch's budget ran out while it waited) is not observed.
 */
export function httpUpstream(url: string, observe: (seconds: number, outcome: UpstreamOutcome) => void = () => undefined): Upstream {
  let nextId = 1;
  const turns = new Turns(MAX_UPSTREAM_IN_FLIGHT);
  return {
    async call(method, params, signal) {
      let answer: { result?: unknown; error?: { code: number; message: string; data?: unknown } };
      try {
        await turns.take(signal);
      } catch (error) {
        throw new JsonRpcError(JSON_RPC_ERRORS.UPSTREAM_ERROR, "Upstream unavailable", (error as Error).name);
      }
      const startedMs = performance.now();
      const observed = (outcome: UpstreamOutcome) => observe((performance.now() - startedMs) / 1_000, outcome);
      try {
        const timeout = AbortSignal.timeout(UPSTREAM_TIMEOUT_MS);
        const response = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
          signal: signal === undefined ? timeout : AbortSignal.any([timeout, signal]),
        });
        answer = (await response.json()) as typeof answer;
      } catch (error) {
        observed("unavailable");
        throw new JsonRpcError(JSON_RPC_ERRORS.UPSTREAM_ERROR, "Upstream unavailable", (error as Error).name);
      } finally {
        turns.release();
      }
      observed(answer.error === undefined ? "ok" : "error");
      if (answer.error !== undefined) throw new JsonRpcError(answer.error.code, answer.error.message, answer.error.data);
      return answer.result ?? null;
    },
  };
}
