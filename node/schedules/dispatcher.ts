/**
 * The delivery worker's clock: one timer armed for the next due row a client may take (never a busy wait, at most
 * MAX_TIMER_MS ahead), and on each wake-up one pass that claims the rows pickFairly chooses for the free slots
 * (fairness.ts) in one commit and starts their attempts (delivery.ts). The queries and pickFairly agree on who may
 * take a slot, so a due eligible row is always picked: the worker never wakes for rows it cannot deliver.
 */
import type { Logger } from "pino";
import type { CallbackDelivery } from "./delivery";
import { pickFairly, type FailingClients, type PendingCounts, type SuspectPolicy } from "./fairness";
import { StoreWriteError, type ScheduleStore } from "./store";

const NS_PER_MS = 1_000_000n;
/** The longest the worker sleeps without looking again (suspects' windows end meanwhile). */
const MAX_TIMER_MS = 60_000;
/** Due rows read per dispatch for each free slot (the fair picker chooses among them). */
const CANDIDATES_PER_SLOT = 8;
/**
 * Clients visited per dispatch, in rotation, for their earliest due row: rows in due order alone can all belong to
 * a few clients with many overdue rows, hiding every other client's row from the picker. One indexed lookup each,
 * CANDIDATES_PER_SLOT per free slot plus as many again (a dispatch runs after every delivery, mostly with one slot
 * free), at most this many; the rotation reaches every client with pending rows over successive dispatches.
 */
const MAX_CLIENTS_VISITED_PER_DISPATCH = 64;
/** How long the dispatcher waits after a failed claim (a store write) before it tries again, ms. */
const STORE_RETRY_MS = 1_000;

export interface DispatcherOptions {
  store: ScheduleStore;
  delivery: CallbackDelivery;
  pending: PendingCounts;
  suspects: FailingClients;
  maxConcurrentDeliveries: number;
  maxConcurrentDeliveriesPerClient: number;
  /** How long a claimed row stays claimed: the attempt's watchdog, ms. */
  attemptLimitMs: number;
  nowNs: () => bigint;
  /** Counts the dispatcher's passes (ScheduleStats.dispatchesTotal). */
  counters: { dispatchesTotal: number };
  logger: Logger;
}

interface InFlightAttempt {
  controller: AbortController;
  done: Promise<void>;
  clientKey: string;
}

export class DeliveryDispatcher {
  readonly #options: DispatcherOptions;
  readonly #store: ScheduleStore;
  readonly #inFlight = new Map<string, InFlightAttempt>();
  /** Set by a failed claim: the dispatcher does not run again before this moment (node clock, ns). */
  #storeRetryAtNs: bigint | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** When #timer fires, node clock ns (null while no timer is armed). */
  #wakeAtNs: bigint | null = null;
  #running = false;

  constructor(options: DispatcherOptions) {
    this.#options = options;
    this.#store = options.store;
  }

  start(): void {
    this.#running = true;
    this.#arm();
  }

  /** Stops the timer and aborts every attempt in flight (their rows stay as stored); resolves when they ended. */
  async stop(): Promise<void> {
    this.#running = false;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    const pending = [...this.#inFlight.values()];
    for (const { controller } of pending) controller.abort(new Error("node shutting down"));
    await Promise.allSettled(pending.map(({ done }) => done));
  }

  /** A row was added: re-arms when it may move the next wake-up. */
  noteNewRow(executeAtNs: bigint, clientKey: string): void {
    if (this.#changesNextWake(executeAtNs, clientKey)) this.#arm();
  }

  /**
   * Whether a new row may move the worker's next wake-up: not when its client may take no slot now (it waits for
   * a delivery to end, which re-arms anyway) nor when the worker already wakes no later than the row is due.
   * Re-arming for every accepted row would walk the due index once per request, a quadratic cost under a flood.
   */
  #changesNextWake(executeAtNs: bigint, clientKey: string): boolean {
    const room = this.#options.maxConcurrentDeliveries - this.#inFlight.size;
    if (room <= 0) return false;
    let load = 0;
    for (const attempt of this.#inFlight.values()) if (attempt.clientKey === clientKey) load += 1;
    if (load >= room || load >= this.#options.maxConcurrentDeliveriesPerClient) return false;
    return this.#timer === null || this.#wakeAtNs === null || executeAtNs < this.#wakeAtNs;
  }

  /** Arms one timer for the earliest due row (or a MAX_TIMER_MS re-check). */
  #arm(): void {
    if (!this.#running) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#wakeAtNs = null;
    const room = this.#options.maxConcurrentDeliveries - this.#inFlight.size;
    if (room <= 0) return; // a finishing delivery re-arms
    const nowNs = this.#options.nowNs();
    // After a failed claim, not before STORE_RETRY_MS: the rows are still due, and retrying at once would spin.
    const retryAtNs = this.#storeRetryAtNs;
    if (retryAtNs !== null && retryAtNs > nowNs) {
      this.#wakeAfter(Math.max(1, Number((retryAtNs - this.#options.nowNs()) / NS_PER_MS)), retryAtNs);
      return;
    }
    const dueNs = this.#store.nextDueNs(this.#eligibility(room).excludedJson);
    // Nothing a client may take now: a finishing delivery or a new schedule re-arms (MAX_TIMER_MS at most, for
    // suspects whose window ends).
    if (dueNs === undefined) {
      if (this.#inFlight.size === 0) return;
      this.#wakeAfter(MAX_TIMER_MS, this.#options.nowNs() + BigInt(MAX_TIMER_MS) * NS_PER_MS);
      return;
    }
    const armNowNs = this.#options.nowNs();
    const waitNs = dueNs > armNowNs ? dueNs - armNowNs : 0n;
    // Round up so the timer never fires before the row is due (and never spins at 0 ms on a sub-ms remainder).
    const delayMs = Math.min(MAX_TIMER_MS, Number((waitNs + NS_PER_MS - 1n) / NS_PER_MS));
    this.#wakeAfter(delayMs, armNowNs + BigInt(delayMs) * NS_PER_MS);
  }

  #wakeAfter(delayMs: number, wakeAtNs: bigint): void {
    this.#timer = setTimeout(() => this.#dispatchDue(), delayMs);
    this.#timer.unref();
    this.#wakeAtNs = wakeAtNs;
  }

  /**
   * Who may take a slot now, with `room` slots free: the attempts in flight per client, the suspect policy, and
   * the clients pickFairly would give nothing (at the per-client cap, holding as many slots as are free, or a
   * suspect while suspects hold their share) as a JSON array for the queries.
   */
  #eligibility(room: number): { inFlightByClient: Map<string, number>; suspects: SuspectPolicy; excluded: ReadonlySet<string>; excludedJson: string } {
    const inFlightByClient = new Map<string, number>();
    for (const { clientKey } of this.#inFlight.values()) inFlightByClient.set(clientKey, (inFlightByClient.get(clientKey) ?? 0) + 1);
    const suspects = this.#options.suspects.policy(Math.max(1, Math.floor(this.#options.maxConcurrentDeliveries / 2)));
    let suspectSlots = 0;
    for (const [key, load] of inFlightByClient) if (suspects.isSuspect(key)) suspectSlots += load;
    const excluded = new Set(
      [...inFlightByClient].filter(([, load]) => load >= room || load >= this.#options.maxConcurrentDeliveriesPerClient).map(([key]) => key),
    );
    if (suspectSlots >= suspects.maxSlots) for (const key of this.#options.suspects.keys()) excluded.add(key);
    return { inFlightByClient, suspects, excluded, excludedJson: JSON.stringify([...excluded]) };
  }

  #dispatchDue(): void {
    this.#timer = null;
    this.#wakeAtNs = null;
    if (!this.#running) return;
    this.#options.counters.dispatchesTotal += 1;
    const room = this.#options.maxConcurrentDeliveries - this.#inFlight.size;
    if (room > 0) {
      const nowNs = this.#options.nowNs();
      const { inFlightByClient, suspects, excluded, excludedJson } = this.#eligibility(room);
      const rows = this.#store.due(nowNs, excludedJson, room * CANDIDATES_PER_SLOT);
      // Beside the earliest due rows, the earliest of clients taking turns: the picker then sees clients whose
      // rows the ones above would hide (all of them could belong to the clients that just freed their slots).
      const seen = new Set(rows.map((row) => row.id));
      const visits = Math.min(MAX_CLIENTS_VISITED_PER_DISPATCH, CANDIDATES_PER_SLOT * (room + 1));
      for (const clientKey of this.#options.pending.nextClients(visits)) {
        if (excluded.has(clientKey)) continue;
        const row = this.#store.dueOfClient(clientKey, nowNs);
        if (row !== undefined && !seen.has(row.id)) rows.push(row);
      }
      // pickFairly keeps each client's rows in the order given: due order.
      rows.sort((a, b) => Buffer.compare(a.next_attempt_at_ns, b.next_attempt_at_ns));
      const candidates = rows.filter((row) => !this.#inFlight.has(row.id)).map((row) => ({ id: row.id, clientKey: row.client_key, row }));
      // Claimed rows are not due again until the claim expires (a crash mid-delivery resumes them then).
      const claimUntilNs = nowNs + BigInt(this.#options.attemptLimitMs) * NS_PER_MS;
      const picked = pickFairly(candidates, inFlightByClient, room, this.#options.maxConcurrentDeliveriesPerClient, suspects);
      // One commit for the pass's claims, not one per row (each commit holds the event loop).
      try {
        this.#store.claim(picked.map(({ id }) => id), claimUntilNs);
      } catch (error) {
        // Nothing was claimed (the transaction rolled back) and nothing is sent: the pass is tried again later.
        this.#store.noteWriteFailure(error);
        this.#storeRetryAtNs = nowNs + BigInt(STORE_RETRY_MS) * NS_PER_MS;
        this.#options.logger.error({ err: error, retryInMs: STORE_RETRY_MS }, "schedule store write failed (claiming due rows); dispatch retried later");
        this.#arm();
        return;
      }
      this.#storeRetryAtNs = null;
      for (const { row, clientKey } of picked) {
        const controller = new AbortController();
        const done = this.#options.delivery
          .deliver(row, clientKey, controller.signal)
          .catch((error: unknown) => {
            // Only a failed store write gets here (StoreWriteError): logged, and the slot is freed below.
            this.#store.noteWriteFailure(error instanceof StoreWriteError ? error.cause : error);
            this.#options.logger.error({ err: error, scheduleId: row.id }, "schedule store write failed; the row keeps its stored state and is due again when its claim expires");
          })
          .finally(() => {
            this.#inFlight.delete(row.id);
            this.#arm();
          });
        this.#inFlight.set(row.id, { controller, done, clientKey });
      }
    }
    this.#arm();
  }
}
