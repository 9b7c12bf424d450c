/**
 * Scheduled attested deliveries (`POST /time/schedule`, gRPC FUTURE_SCHEDULE; docs/protocol.md §9.7): at
 * `executeAt` the node POSTs a proof taken at or after that moment to a callback URL. ScheduleService is the
 * wing's face: schedule() validates (validation.ts), applies the quotas and commits the row (store.ts) before it
 * answers; the worker (dispatcher.ts, delivery.ts) delivers at least once, each row's attempts from one node only.
 * Every option is required: the defaults live in the settings table (node/config.ts), node/compose.ts passes them.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { RateLimiter } from "../../lib/rateLimit";
import { type FileSync, isFlushFailure, isStoreFailure, WalSyncError } from "../../lib/sqlite";
import { NotFoundError, RateLimitError, UnavailableError } from "../../protocol/errors";
import type { ScheduleRecord, SignedTime } from "../core/types";
import { httpCallbackTransport, systemResolveHost, type CallbackTransport, type ResolveHost } from "./callbackGuard";
import { CallbackDelivery } from "./delivery";
import { DeliveryDispatcher } from "./dispatcher";
import { FailingClients, PendingCounts } from "./fairness";
import { ScheduleStore, storeFailedEarlier } from "./store";
import { validateCallbackUrl, validateExecuteAt } from "./validation";

/** The one key of the node-wide creation bucket. */
const NODE_WIDE = "node";
/** Default of ScheduleServiceOptions.maxProofWaitMs (not a setting: how long the node's own clock may take). */
const DEFAULT_MAX_PROOF_WAIT_MS = 10_000;

export interface ScheduleServiceOptions {
  dataDir: string;
  maxAttempts: number;
  baseBackoffMs: number;
  maxBackoffMs: number;
  deliveryTimeoutMs: number;
  maxHorizonNs: bigint;
  maxPastNs: bigint;
  maxPending: number;
  /** Pending schedules one client key may hold. */
  maxPendingPerClient: number;
  allowedCallbackHosts: readonly string[];
  /** Node clock, ns since the Unix epoch. */
  nowNs: () => bigint;
  /** A proof whose nanoMoment is ≥ executeAtNs (waits or signs as needed); gives up when `signal` aborts. */
  proofAtOrAfter: (executeAtNs: bigint, signal: AbortSignal) => Promise<SignedTime>;
  logger: Logger;
  /** Resolves callback host names at each attempt; defaults to the system resolver (dns.lookup, all addresses). */
  resolveCallbackHost?: ResolveHost;
  /**
   * Sends callback POSTs; defaults to node:http(s) pinned to the checked addresses. A replacement must connect
   * only to `request.addresses` (tests).
   */
  callbackTransport?: CallbackTransport;
  /** Flushes the store's write-ahead log and folder (default: lib/sqlite.ts datasync; tests inject failures). */
  syncFile?: FileSync;
  /** Defaults to Math.random (jitter only; not security relevant). */
  random?: () => number;
  /** Concurrent deliveries, node-wide. */
  maxConcurrentDeliveries: number;
  /**
   * Time an attempt may take for its proof, on top of the POST timeout: the watchdog ends the attempt after
   * deliveryTimeoutMs + this, and a claimed row is not due again before then (default 10 s).
   */
  maxProofWaitMs?: number;
  /** New schedules accepted per second, node-wide (0: unlimited). */
  maxCreatesPerSecond: number;
  /** Concurrent deliveries of one client (at most maxConcurrentDeliveries). */
  maxConcurrentDeliveriesPerClient: number;
}

export interface ScheduleStats {
  deliveredTotal: number;
  failedTotal: number;
  attemptsTotal: number;
  /** Passes of the dispatcher: each follows a due row, a finished delivery or a new schedule, never a spin. */
  dispatchesTotal: number;
  /**
   * Failed store writes (disk full, I/O error), each logged at error level: an attempt ended by one (StoreWriteError),
   * a dispatcher pass whose claim failed (retried later), or a new schedule not saved or saved but not flushed to
   * disk (refused 503; one count per schedule refused, so a failed commit of a batch counts each of its schedules;
   * not the refusals that follow a failed fsync, which write nothing).
   */
  storeWriteErrorsTotal: number;
  /** Pending schedules (scheduled or delivering). */
  pending: number;
  /** When the earliest pending schedule's next attempt is due, node clock ns; null with none (or once stopping). */
  earliestDueNs: bigint | null;
}

export class ScheduleService {
  readonly #options: ScheduleServiceOptions;
  readonly #logger: Logger;
  readonly #store: ScheduleStore;
  readonly #dispatcher: DeliveryDispatcher;
  /** Pending rows (scheduled or delivering), in all and per client: kept in memory, counted once at open. */
  readonly #pending = new PendingCounts();
  /** New schedules per second, node-wide (maxCreatesPerSecond). */
  readonly #creates: RateLimiter;
  readonly #counters = { deliveredTotal: 0, failedTotal: 0, attemptsTotal: 0, dispatchesTotal: 0 };
  #running = false;
  /** Set by stop(): no new schedule is written once the store is being closed. */
  #closing = false;

  constructor(options: ScheduleServiceOptions) {
    this.#options = options;
    this.#logger = options.logger.child({ component: "schedules" });
    this.#creates = new RateLimiter({ ratePerSecond: options.maxCreatesPerSecond });
    const attemptLimitMs = options.deliveryTimeoutMs + (options.maxProofWaitMs ?? DEFAULT_MAX_PROOF_WAIT_MS);
    this.#store = new ScheduleStore({
      dataDir: options.dataDir,
      logger: this.#logger,
      ...(options.syncFile === undefined ? {} : { syncFile: options.syncFile }),
    });
    // Clients whose callbacks failed lately: they share half the delivery slots (fairness.ts).
    const suspects = new FailingClients();
    const delivery = new CallbackDelivery({
      maxAttempts: options.maxAttempts,
      baseBackoffMs: options.baseBackoffMs,
      maxBackoffMs: options.maxBackoffMs,
      deliveryTimeoutMs: options.deliveryTimeoutMs,
      attemptLimitMs,
      allowedCallbackHosts: options.allowedCallbackHosts,
      nowNs: options.nowNs,
      proofAtOrAfter: options.proofAtOrAfter,
      resolveHost: options.resolveCallbackHost ?? systemResolveHost,
      transport: options.callbackTransport ?? httpCallbackTransport,
      random: options.random ?? Math.random,
      store: this.#store,
      pending: this.#pending,
      suspects,
      counters: this.#counters,
      logger: this.#logger,
    });
    this.#dispatcher = new DeliveryDispatcher({
      store: this.#store,
      delivery,
      pending: this.#pending,
      suspects,
      maxConcurrentDeliveries: options.maxConcurrentDeliveries,
      maxConcurrentDeliveriesPerClient: Math.min(options.maxConcurrentDeliveries, options.maxConcurrentDeliveriesPerClient),
      attemptLimitMs,
      nowNs: options.nowNs,
      counters: this.#counters,
      logger: this.#logger,
    });
    for (const { client_key, n } of this.#store.pendingByClient()) this.#pending.add(client_key, n);
  }

  /** Resumes every pending row and arms the worker. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    const resumed = this.#store.resumeInFlight(this.#options.nowNs());
    this.#logger.info({ pending: this.#pending.total, resumedInFlight: resumed }, "schedule worker started");
    this.#dispatcher.start();
  }

  /** Stops the worker, aborts in-flight POSTs (those rows stay `delivering` and resume at the next start), closes the database. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#closing = true;
    await this.#dispatcher.stop();
    // Schedules accepted in this turn are committed (and flushed) before the store closes; their callers then get
    // their records.
    await this.#store.close();
  }

  stats(): ScheduleStats {
    return {
      ...this.#counters,
      storeWriteErrorsTotal: this.#store.writeErrorsTotal,
      pending: this.#pending.total,
      // Rows being delivered wait for their claim's end, so only rows still waiting for a slot or a retry are due.
      earliestDueNs: this.#closing ? null : (this.#store.nextDueNs("[]") ?? null),
    };
  }

  /**
   * Validates and commits a schedule; the row is on disk when the promise resolves (schedules created in the same
   * event-loop turn share one commit: lib/groupCommit.ts). Rejects with ValidationError (bad input),
   * RateLimitError (this client's pending quota: 429 / RESOURCE_EXHAUSTED) or UnavailableError (the node-wide
   * cap: 503 / UNAVAILABLE; the store closed or closing; SQLite failed its commit, or the flush failed (the row
   * stays, and its id is in the message), both counted in storeWriteErrorsTotal; a flush failed earlier: nothing
   * written). Quotas are not field errors: the same request succeeds once schedules are delivered. Rows waiting for
   * their commit count towards the quotas.
   */
  async schedule(executeAtNs: bigint, callbackUrl: string, clientKey = ""): Promise<ScheduleRecord> {
    if (this.#closing || !this.#store.open) throw new UnavailableError("the schedule store is closed", {});
    const nowNs = this.#options.nowNs();
    const executeAt = validateExecuteAt(executeAtNs, {
      nowNs,
      maxHorizonNs: this.#options.maxHorizonNs,
      maxPastNs: this.#options.maxPastNs,
    });
    const url = validateCallbackUrl(callbackUrl, this.#options.allowedCallbackHosts);
    // Before any write: a store that failed a flush can confirm nothing any more, and a row written anyway would be
    // delivered while its client is told to try again (a duplicate per retry).
    const storeFailure = this.#store.flushFailure;
    if (storeFailure !== null) throw storeFailedEarlier(storeFailure);
    // Node-wide, before any write: accepted rows cost commits on the serving thread, and many addresses each within
    // their own rate could otherwise take the whole thread from every other client.
    if (!this.#creates.tryTake(NODE_WIDE)) {
      throw new RateLimitError(
        { retryAfterMs: Math.ceil(this.#creates.msUntilNextToken(NODE_WIDE)) },
        { message: `the node accepts at most ${this.#creates.ratePerSecond} new schedules per second` },
      );
    }
    const pending = this.#pending.total;
    if (pending >= this.#options.maxPending) {
      // The node's total is not the caller's business: the numbers stay in the details, out of the answer.
      throw new UnavailableError("node holds too many pending schedules", { pending, maxPending: this.#options.maxPending });
    }
    const maxPerClient = this.#options.maxPendingPerClient;
    const pendingForClient = this.#pending.of(clientKey);
    if (pendingForClient >= maxPerClient) {
      throw new RateLimitError(
        { pending: pendingForClient, maxPendingPerClient: maxPerClient },
        { message: `too many pending schedules for this client (${pendingForClient}, limit ${maxPerClient})` },
      );
    }
    const id = randomUUID();
    this.#pending.add(clientKey, 1);
    try {
      await this.#store.insert({ id, executeAtNs: executeAt, callbackUrl: url, createdAtNs: nowNs, clientKey });
    } catch (error) {
      // Not the store's own failure: a refusal (the store failed a flush since the check above: 503, nothing written)
      // or a bug (a 500, logged by the transport). Either way the row was not written.
      if (!isStoreFailure(error)) {
        this.#pending.add(clientKey, -1);
        throw error;
      }
      // The commit or its flush failed (disk full, I/O error): the operator's to fix, so logged and counted here;
      // the client gets 503, not a 500 that blames its request.
      this.#store.noteWriteFailure(error);
      if (error instanceof WalSyncError) {
        // Committed but not known to be on disk: the row stays (and still counts) and may be delivered; said so.
        this.#dispatcher.noteNewRow(executeAt, clientKey);
        this.#logger.error({ err: error, id }, "a new schedule was stored but could not be flushed to disk: no new schedules until the node restarts");
        throw new UnavailableError(
          `the schedule store could not confirm schedule ${id} on disk: it may still be delivered once, under that id; ` +
            "the node takes no new schedules until it restarts",
          { scheduleId: id, code: error.code },
          { cause: error },
        );
      }
      this.#pending.add(clientKey, -1);
      if (isFlushFailure(error)) {
        this.#logger.error({ err: error, id }, "a new schedule could not be stored (a failed fsync): no new schedules until the node restarts");
        throw storeFailedEarlier(error);
      }
      this.#logger.error({ err: error, id }, "a new schedule could not be stored");
      throw new UnavailableError("the schedule store could not save the schedule; try again later", { scheduleId: id, code: error.code }, { cause: error });
    }
    // Debug, not info: a client may create schedules at its full request rate, and each is its own record.
    this.#logger.debug({ id, executeAtNs: executeAt.toString(), callbackHost: new URL(url).host }, "schedule accepted");
    this.#dispatcher.noteNewRow(executeAt, clientKey);
    // The committed row as inserted, not read back: stop() may have committed it and closed the store since.
    return {
      id,
      executeAtNs: executeAt,
      callbackUrl: url,
      status: "scheduled",
      attempts: 0,
      lastError: null,
      createdAtNs: nowNs,
      deliveredAtNs: null,
      proof: null,
      nextAttemptAtNs: executeAt,
    };
  }

  /** Throws NotFoundError. */
  get(id: string): ScheduleRecord {
    const record = typeof id === "string" ? this.#store.record(id) : undefined;
    if (record === undefined) throw new NotFoundError(`schedule ${String(id)} not found`, { id: String(id) });
    return record;
  }
}
