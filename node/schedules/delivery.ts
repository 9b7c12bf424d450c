/**
 * One delivery attempt of a due row (docs/protocol.md §9.7): a fresh proof taken at or after executeAt, the row
 * committed `delivering` (the attempt counted) BEFORE the POST, the POST through the SSRF guard (callbackGuard.ts),
 * then `delivered`, a retry after an exponential backoff with jitter, or `failed` once maxAttempts are spent.
 *
 * Every attempt ends, whatever the proof source, resolver, transport or receiver do: the POST is aborted after
 * deliveryTimeoutMs, and a watchdog of deliveryTimeoutMs + maxProofWaitMs ends the attempt even when the proof wait
 * or a transport ignores the abort. Both are timers this module holds and clears: an AbortSignal.timeout() inside
 * AbortSignal.any() can be garbage-collected before it fires on Node 20, and a receiver that never answers would
 * then hold a delivery slot for ever.
 */
import type { Logger } from "pino";
import { blobToNs, nsToBlob } from "../../lib/sqlite";
import type { ProofJson } from "../../protocol/types";
import { timeoutReason, untilAborted } from "../core/abort";
import type { SignedTime } from "../core/types";
import { postCallback, type CallbackTransport, type ResolveHost } from "./callbackGuard";
import type { FailingClients, PendingCounts } from "./fairness";
import { errorText, StoreWriteError, truncated, type DeliveryUpdate, type ScheduleRow, type ScheduleStore } from "./store";

const NS_PER_MS = 1_000_000n;
/** A `delivering` row stays claimed this long past the POST timeout: a crash leaves it due again soon after restart. */
const IN_FLIGHT_GRACE_MS = 1_000;

/** What the callback receives (JSON). */
export interface ScheduleDeliveryBody {
  id: string;
  /** Decimal ns. */
  executeAt: string;
  /** Decimal ns: the proof's nanoMoment (≥ executeAt). */
  nanoMoment: string;
  /** docs/protocol.md §9.1 proof object. */
  proof: ProofJson["proof"];
}

/**
 * Delay before retry number `attempt` (1 = the retry after the first failure): exponential
 * base·2^(attempt−1) capped at max, with "equal jitter" (half fixed, half random) so retries of many schedules
 * spread out yet never collapse to zero. `random` returns [0, 1).
 */
export function retryDelayMs(attempt: number, baseMs: number, maxMs: number, random: () => number): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 30);
  const capped = Math.min(maxMs, baseMs * 2 ** exponent);
  return Math.round(capped / 2 + random() * (capped / 2));
}

/** Counters the attempts move (ScheduleStats). */
export interface DeliveryCounters {
  deliveredTotal: number;
  failedTotal: number;
  attemptsTotal: number;
}

export interface CallbackDeliveryOptions {
  maxAttempts: number;
  baseBackoffMs: number;
  maxBackoffMs: number;
  deliveryTimeoutMs: number;
  /** The watchdog of one attempt: the proof wait plus the POST timeout, ms. */
  attemptLimitMs: number;
  allowedCallbackHosts: readonly string[];
  nowNs: () => bigint;
  proofAtOrAfter: (executeAtNs: bigint, signal: AbortSignal) => Promise<SignedTime>;
  resolveHost: ResolveHost;
  transport: CallbackTransport;
  random: () => number;
  store: ScheduleStore;
  pending: PendingCounts;
  suspects: FailingClients;
  counters: DeliveryCounters;
  logger: Logger;
}

/** How far one attempt got: whether its POST started (else it failed taking the proof), and the POST's timer. */
interface AttemptProgress {
  /**
   * The commit of the row's `delivering` update (which counts the attempt), once queued: the attempt can end (watchdog,
   * shutdown) while that commit still waits for the end of the turn, and it must then be neither queued twice nor
   * taken for written before it is.
   */
  delivering: Promise<void> | null;
  posted: boolean;
  /** Decimal ns of the proof being delivered, once posted. */
  nanoMoment: string | null;
  postTimer: NodeJS.Timeout | undefined;
}

export class CallbackDelivery {
  readonly #options: CallbackDeliveryOptions;
  readonly #store: ScheduleStore;

  constructor(options: CallbackDeliveryOptions) {
    this.#options = options;
    this.#store = options.store;
  }

  /**
   * One attempt, bounded in time (see the header): its own controller is aborted by the POST timer, by the watchdog,
   * or by `shutdown`. Rejects only with StoreWriteError (a commit failed: nothing more is written for this attempt).
   */
  async deliver(row: ScheduleRow, clientKey: string, shutdown: AbortSignal): Promise<void> {
    const id = row.id;
    const attempt = row.attempts + 1;
    const log = this.#options.logger.child({ scheduleId: id, attempt });
    const controller = new AbortController();
    const onShutdown = (): void => controller.abort(shutdown.reason);
    if (shutdown.aborted) return;
    shutdown.addEventListener("abort", onShutdown, { once: true });
    const watchdogMs = this.#options.attemptLimitMs;
    const watchdog = setTimeout(() => controller.abort(timeoutReason(`attempt did not finish within ${watchdogMs} ms`)), watchdogMs);
    const progress: AttemptProgress = { delivering: null, posted: false, nanoMoment: null, postTimer: undefined };
    let failure: string | null;
    try {
      failure = await untilAborted(this.#attempt(row, controller, progress), controller.signal);
    } catch (error) {
      if (error instanceof StoreWriteError) throw error;
      failure = progress.posted ? errorText(error) : `no proof: ${errorText(error)}`;
    } finally {
      clearTimeout(watchdog);
      clearTimeout(progress.postTimer);
      shutdown.removeEventListener("abort", onShutdown);
    }
    // Stopping is not the schedule's fault: the row stays as it is (`delivering` rows resume at the next start;
    // an attempt stopped while its `delivering` commit waited is written by stop()'s flush: counted, never sent).
    if (!this.#store.open || (shutdown.aborted && failure !== null)) return;
    if (failure === null) {
      const delivered: DeliveryUpdate = { kind: "delivered", id, atBlob: nsToBlob(this.#options.nowNs()), changes: 0 };
      await this.#store.update(delivered);
      this.#options.pending.add(clientKey, -delivered.changes);
      this.#options.suspects.clear(clientKey);
      this.#options.counters.deliveredTotal += 1;
      // Debug like "schedule accepted": a delivery is recorded in its row; failures stay at warn.
      log.debug({ nanoMoment: progress.nanoMoment }, "schedule delivered");
      return;
    }
    // The attempt is counted by its `delivering` update before its outcome is written: the one #attempt queued
    // (it may still wait for its commit when the watchdog ended the attempt), or, when no proof was taken, one
    // queued now (no POST, still an attempt: a tampered node gives up after maxAttempts).
    await (progress.delivering ?? this.#store.update({ kind: "delivering", id, proofJson: null, untilBlob: nsToBlob(this.#options.nowNs()), changes: 0 }));
    await this.#failAttempt(id, clientKey, attempt, failure, log);
  }

  /** Takes the proof, marks the row `delivering` and POSTs; null on a 2xx, else why the attempt failed. */
  async #attempt(row: ScheduleRow, controller: AbortController, progress: AttemptProgress): Promise<string | null> {
    const { signal } = controller;
    const executeAtNs = blobToNs(row.execute_at_ns);
    const signed = await this.#options.proofAtOrAfter(executeAtNs, signal);
    // Checked right before the row is touched: an attempt ended by the watchdog or shutdown writes nothing more.
    if (signal.aborted || !this.#store.open) throw signal.reason ?? new Error("schedule store closed");
    const body: ScheduleDeliveryBody = {
      id: row.id,
      executeAt: executeAtNs.toString(),
      nanoMoment: signed.json.nanoMoment,
      proof: signed.json.proof,
    };
    const { deliveryTimeoutMs } = this.#options;
    const inFlightUntilNs = this.#options.nowNs() + BigInt(deliveryTimeoutMs + IN_FLIGHT_GRACE_MS) * NS_PER_MS;
    progress.delivering = this.#store.update({ kind: "delivering", id: row.id, proofJson: signed.body, untilBlob: nsToBlob(inFlightUntilNs), changes: 0 });
    await progress.delivering;
    // The row is committed `delivering` before anything is sent; an attempt ended meanwhile sends nothing.
    if (signal.aborted || !this.#store.open) throw signal.reason ?? new Error("schedule store closed");
    this.#options.counters.attemptsTotal += 1;
    progress.posted = true;
    progress.nanoMoment = body.nanoMoment;
    progress.postTimer = setTimeout(() => controller.abort(timeoutReason(`callback did not answer within ${deliveryTimeoutMs} ms`)), deliveryTimeoutMs);
    const attemptFailure = await postCallback({
      url: row.callback_url,
      allowedHosts: this.#options.allowedCallbackHosts,
      headers: { "content-type": "application/json", "idempotency-key": row.id, "user-agent": "ats-node" },
      body: JSON.stringify(body),
      signal,
      resolveHost: this.#options.resolveHost,
      transport: this.#options.transport,
    });
    return attemptFailure === null ? null : truncated(attemptFailure);
  }

  async #failAttempt(id: string, clientKey: string, attempt: number, failure: string, log: Logger): Promise<void> {
    this.#options.suspects.note(clientKey);
    if (attempt >= this.#options.maxAttempts) {
      const failed: DeliveryUpdate = { kind: "failed", id, error: failure, changes: 0 };
      await this.#store.update(failed);
      this.#options.pending.add(clientKey, -failed.changes);
      this.#options.counters.failedTotal += 1;
      log.warn({ error: failure }, "schedule failed: no attempts left");
      return;
    }
    const delayMs = retryDelayMs(attempt, this.#options.baseBackoffMs, this.#options.maxBackoffMs, this.#options.random);
    const nextNs = this.#options.nowNs() + BigInt(delayMs) * NS_PER_MS;
    await this.#store.update({ kind: "retry", id, error: failure, nextBlob: nsToBlob(nextNs), changes: 0 });
    log.warn({ error: failure, retryInMs: delayMs }, "schedule delivery failed; will retry");
  }
}
