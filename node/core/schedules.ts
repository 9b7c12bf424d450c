/**
 * Scheduled attested deliveries (`POST /time/schedule`, gRPC FUTURE_SCHEDULE): at `executeAt` the node POSTs a
 * proof taken at or after that moment to a callback URL.
 *
 * Persistence: SQLite (`schedules.sqlite` in dataDir, WAL). `schedule()` returns the id only once its row is on
 * disk (rows of one event-loop turn in one commit, lib/groupCommit.ts; the commit's write-ahead log then flushed on
 * libuv's thread pool, lib/sqlite.ts WalSync, not on the event loop, where each flush took 5–12 ms on this machine:
 * `npm run bench:attack`, attack 1), so an accepted schedule survives a crash, a restart or a power loss; on start
 * the worker reloads every row still `scheduled` or `delivering` and resumes. The row is visible to the worker as
 * soon as it is committed, so a schedule already due may be delivered during that flush; if the power goes before
 * it ends, the client got no answer for a schedule that may have been delivered once (as when its connection
 * breaks before the answer), and if the flush fails, a 503 naming the id. After a failed flush (WalSync's, or one
 * of SQLite's own on this store) no new schedule is written until restart: nothing could be confirmed on disk. A
 * schedule marked `failed` commits durably too (commitDurably: a client may act on it). The rest of the delivery
 * bookkeeping (claims, `delivering`, `delivered`, retries) commits without an fsync (synchronous=NORMAL), one
 * commit per turn of deliveries. A process crash loses none of those commits. A power loss may take back those
 * made since the last sync (the next new schedule's flush, durable commit or checkpoint): a `delivered` schedule is then `delivering` again and delivered again (same id),
 * and a POST may go uncounted, so attempts can exceed maxAttempts by the ones lost; nothing accepted is lost.
 *
 * Delivery semantics: at most one delivery per successful POST, at least once overall. A row is marked
 * `delivering` (attempts + 1, the proof it carries) BEFORE the POST (committed: the POST waits for it) and
 * `delivered` after a 2xx answer; the state changes of one event-loop turn share one commit (#updates). If the
 * node crashes between the receiver's 2xx and that mark, the schedule is delivered again after restart:
 * receivers must dedupe by `id` (also sent as the `Idempotency-Key` header). Each attempt carries a fresh proof
 * (still taken at or after executeAt), so a late retry still carries a proof young enough for on-chain use.
 * Failed attempts (non-2xx, timeout, network error, redirect, refused address) are retried with exponential
 * backoff and jitter up to `maxAttempts`, then the schedule is `failed`.
 *
 * SSRF guard (callbackGuard.ts): callback URLs must be http(s) without credentials, and by default only loopback
 * hosts are allowed (localhost, 127.0.0.0/8, [::1]); `allowedCallbackHosts` lists further host names or IPs
 * exactly, or "*" for any host name and public IP literal. At every attempt the host is admitted again against
 * the current list, resolved once (all addresses), and every address checked: a wildcard-admitted name must
 * resolve to public addresses only, localhost to loopback only, while an exactly listed name is trusted to
 * resolve anywhere (internal receivers are listed on purpose); an exactly listed IP is acceptable for any name.
 * The connection is pinned to the checked addresses (no second lookup, so no DNS rebinding between check and
 * connect); TLS still checks the certificate against the host name. Redirects are not followed (a 3xx is a
 * failed attempt), so an allowed host cannot bounce the node to a forbidden one.
 *
 * The worker never busy-waits: one timer is armed for the next due row (capped at 60 s, then re-armed).
 *
 * Every attempt ends, whatever the receiver or the transport does: its POST is aborted after deliveryTimeoutMs
 * by a timer this module holds and clears (not AbortSignal.timeout() inside AbortSignal.any(): on Node 20 such a
 * timeout signal can be garbage-collected before it fires, and a receiver that accepts and never answers then
 * holds a delivery slot for ever), and a watchdog of deliveryTimeoutMs + maxProofWaitMs ends the attempt even
 * when the proof wait or a transport ignores the abort.
 *
 * Fairness: delivery slots are shared across clients (the API key's client key, else the caller's address). At
 * most maxConcurrentDeliveriesPerClient attempts of one client run at once, a free slot goes to the due row of
 * the client with the fewest attempts in flight (ties: the earliest due), and a client holding k slots takes
 * another only while more than k are free, so a client whose many callbacks hang or are overdue delays its own
 * deliveries, not everyone's (pickFairly). Clients are keyed by address: an attacker with more addresses than
 * slots can hold every slot for one attempt (deliveryTimeoutMs); after that its addresses are suspects (a failed
 * attempt in the last 10 minutes, cleared by a success), which share at most half of the slots.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { GroupCommit } from "../../lib/groupCommit";
import { UINT128_MAX } from "../../protocol/constants";
import { NotFoundError, RateLimitError, UnavailableError, ValidationError } from "../../protocol/errors";
import { RateLimiter } from "../../lib/rateLimit";
import type { ProofJson } from "../../protocol/types";
import { timeoutReason, untilAborted } from "./abort";
import {
  admitCallbackHost,
  httpCallbackTransport,
  postCallback,
  systemResolveHost,
  type CallbackTransport,
  type ResolveHost,
} from "./callbackGuard";
import {
  blobToNs,
  commitDurably,
  type FileSync,
  isFlushFailure,
  isSqliteError,
  isStoreFailure,
  nsToBlob,
  openDatabase,
  type SqliteDatabase,
  type SqliteStatement,
  WalSync,
  WalSyncError,
} from "../../lib/sqlite";
import type { ScheduleRecord, ScheduleStatus, SignedTime } from "./types";

// ---------------------------------------------------------------------------------------------------------------
// Pure validation and backoff

const DECIMAL_NS = /^(0|[1-9][0-9]{0,38})$/;
const MAX_CALLBACK_URL_LENGTH = 2_048;

/** Parses an untrusted executeAt: a decimal string of ns (or a bigint), uint128. Throws ValidationError. */
export function parseExecuteAt(value: unknown, field = "executeAt"): bigint {
  let parsed: bigint;
  if (typeof value === "bigint") parsed = value;
  else if (typeof value === "string" && DECIMAL_NS.test(value)) parsed = BigInt(value);
  else throw new ValidationError(field, "must be a decimal string of nanoseconds since the Unix epoch", { type: typeof value });
  if (parsed < 0n || parsed > UINT128_MAX) throw new ValidationError(field, "must be a uint128 of nanoseconds", {});
  return parsed;
}

export { isLoopbackHost, isNonPublicAddress, isNonPublicIpLiteral } from "./callbackGuard";

/**
 * Validates a callback URL against the SSRF guard and returns it normalised (WHATWG URL serialisation).
 * Throws ValidationError naming the problem.
 */
export function validateCallbackUrl(value: unknown, allowedHosts: readonly string[], field = "callback"): string {
  if (typeof value !== "string" || value.length === 0) throw new ValidationError(field, "must be a URL string", {});
  if (value.length > MAX_CALLBACK_URL_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_CALLBACK_URL_LENGTH} characters`, { length: value.length });
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValidationError(field, "is not a valid absolute URL", {});
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ValidationError(field, "must use http or https", { protocol: url.protocol });
  }
  if (url.username !== "" || url.password !== "") throw new ValidationError(field, "must not carry credentials", {});
  const host = url.hostname.toLowerCase();
  // Addresses are checked at delivery (they may change until then); here only the host itself.
  if (admitCallbackHost(host, allowedHosts) === null) {
    throw new ValidationError(field, `host ${host} is not allowed (loopback only unless scheduleAllowedCallbackHosts lists it)`, { host });
  }
  return url.toString();
}

export interface ScheduleWindow {
  nowNs: bigint;
  /** How far ahead executeAt may be, ns. */
  maxHorizonNs: bigint;
  /** How far behind now executeAt may be, ns. */
  maxPastNs: bigint;
}

/** Checks executeAt against the window; throws ValidationError. */
export function validateExecuteAt(executeAtNs: unknown, window: ScheduleWindow, field = "executeAt"): bigint {
  const value = parseExecuteAt(executeAtNs, field);
  if (value + window.maxPastNs < window.nowNs) {
    throw new ValidationError(field, `is more than ${window.maxPastNs} ns in the past`, { nowNs: window.nowNs.toString() });
  }
  if (value > window.nowNs + window.maxHorizonNs) {
    throw new ValidationError(field, `is more than ${window.maxHorizonNs} ns in the future`, { nowNs: window.nowNs.toString() });
  }
  return value;
}

/** A due row offered to the fair picker: its id, its client, and rows of one client in due order. */
export interface DueCandidate {
  id: string;
  clientKey: string;
}

/** Clients whose callbacks failed lately ("suspects") and the slots they may hold together. */
export interface SuspectPolicy {
  isSuspect(clientKey: string): boolean;
  /** Slots suspects may hold in all, counting those in flight. */
  maxSlots: number;
}

const NO_SUSPECTS: SuspectPolicy = { isSuspect: () => false, maxSlots: Number.POSITIVE_INFINITY };

/**
 * Chooses up to `room` rows to deliver now, sharing slots across clients: each pick goes to the client with the
 * fewest attempts in flight (counting the picks so far), never beyond `maxPerClient`; among equals a client whose
 * callbacks did not fail lately comes first, then the one whose candidate came first (`candidates` is ordered by
 * due time, so that is the earliest due). Headroom: a client with k attempts in flight takes a slot only while more
 * than k slots are free, so clients that already hold slots always leave one for a client that holds none.
 * Suspects (clients whose callbacks failed lately, say hung) hold at most `suspects.maxSlots` slots together, so
 * many addresses with hanging receivers cannot keep every slot once their first attempts have failed.
 * Pure; O(room · clients).
 */
export function pickFairly<T extends DueCandidate>(
  candidates: readonly T[],
  inFlightByClient: ReadonlyMap<string, number>,
  room: number,
  maxPerClient: number,
  suspects: SuspectPolicy = NO_SUSPECTS,
): T[] {
  const queues = new Map<string, T[]>();
  for (const candidate of candidates) {
    const queue = queues.get(candidate.clientKey);
    if (queue === undefined) queues.set(candidate.clientKey, [candidate]);
    else queue.push(candidate);
  }
  const load = new Map<string, number>();
  for (const key of queues.keys()) load.set(key, inFlightByClient.get(key) ?? 0);
  const suspect = new Set([...queues.keys()].filter((key) => suspects.isSuspect(key)));
  let suspectSlots = 0;
  for (const [key, count] of inFlightByClient) if (suspects.isSuspect(key)) suspectSlots += count;
  const picked: T[] = [];
  while (picked.length < room) {
    let best: string | undefined;
    for (const [key, queue] of queues) {
      const keyLoad = load.get(key) ?? 0;
      if (queue.length === 0 || keyLoad >= maxPerClient || keyLoad >= room - picked.length) continue;
      if (suspect.has(key) && suspectSlots >= suspects.maxSlots) continue;
      if (best === undefined) best = key;
      else {
        const bestLoad = load.get(best) ?? 0;
        if (keyLoad < bestLoad || (keyLoad === bestLoad && suspect.has(best) && !suspect.has(key))) best = key;
      }
    }
    if (best === undefined) break;
    picked.push(queues.get(best)!.shift()!);
    load.set(best, (load.get(best) ?? 0) + 1);
    if (suspect.has(best)) suspectSlots += 1;
  }
  return picked;
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

// ---------------------------------------------------------------------------------------------------------------
// Store + delivery worker

export interface ScheduleServiceOptions {
  dataDir: string;
  maxAttempts: number;
  baseBackoffMs: number;
  maxBackoffMs: number;
  deliveryTimeoutMs: number;
  maxHorizonNs: bigint;
  maxPastNs: bigint;
  maxPending: number;
  /** Pending schedules one client key may hold (default: maxPending). */
  maxPendingPerClient?: number;
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
  /** Concurrent deliveries (default 16). */
  maxConcurrentDeliveries?: number;
  /**
   * Time an attempt may take for its proof, on top of the POST timeout: the watchdog ends the attempt after
   * deliveryTimeoutMs + this, and a claimed row is not due again before then (default 10 s).
   */
  maxProofWaitMs?: number;
  /** New schedules accepted per second, node-wide (0, the default here: unlimited). */
  maxCreatesPerSecond?: number;
  /** Concurrent deliveries of one client (default a quarter of maxConcurrentDeliveries, at least 1). */
  maxConcurrentDeliveriesPerClient?: number;
}

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

interface ScheduleRow {
  id: string;
  execute_at_ns: Buffer;
  callback_url: string;
  status: ScheduleStatus;
  attempts: number;
  last_error: string | null;
  created_at_ns: Buffer;
  delivered_at_ns: Buffer | null;
  proof_json: string | null;
  next_attempt_at_ns: Buffer | null;
}

/** A new schedule's row, as schedule() queues it for the next group commit. */
interface NewRow {
  readonly id: string;
  readonly executeAtNs: bigint;
  readonly callbackUrl: string;
  readonly createdAtNs: bigint;
  readonly clientKey: string;
}

/** A pending row as the dispatcher reads it (due: its next attempt is set), with its client. */
type DueRow = ScheduleRow & { next_attempt_at_ns: Buffer; client_key: string };

const MAX_TIMER_MS = 60_000;
/** The one key of the node-wide creation bucket. */
const NODE_WIDE = "node";
/** Default of ScheduleServiceOptions.maxProofWaitMs. */
const DEFAULT_MAX_PROOF_WAIT_MS = 10_000;
/** How long a client whose delivery attempt failed counts as a suspect (unless one of its deliveries succeeds). */
const SUSPECT_WINDOW_MS = 10 * 60_000;
/** Suspects remembered at most (the oldest is forgotten first). */
const MAX_SUSPECTS = 10_000;
/** Due rows read per dispatch for each free slot (the fair picker chooses among them). */
const CANDIDATES_PER_SLOT = 8;
/**
 * Clients visited per dispatch, in rotation, for their earliest due row: rows in due order alone can all belong to
 * a few clients with many overdue rows, hiding every other client's row from the picker. One indexed lookup each,
 * CANDIDATES_PER_SLOT per free slot plus as many again (a dispatch runs after every delivery, mostly with one slot
 * free), at most this many; the rotation reaches every client with pending rows over successive dispatches.
 */
const MAX_CLIENTS_VISITED_PER_DISPATCH = 64;
const NS_PER_MS = 1_000_000n;
const MAX_ERROR_CHARS = 500;
/** How long the dispatcher waits after a failed claim (a store write) before it tries again, ms. */
const STORE_RETRY_MS = 1_000;
/** New schedules committed in one transaction at most (lib/groupCommit.ts). */
const MAX_INSERTS_PER_COMMIT = 256;

/**
 * A change of a row's delivery state, committed with the others of its event-loop turn (#updates). `changes` is
 * set by the write: rows it changed (0 when the row was no longer in the state the change expects).
 */
type DeliveryUpdate = { id: string; changes: number } & (
  | { kind: "delivering"; proofJson: string | null; untilBlob: Buffer }
  | { kind: "delivered"; atBlob: Buffer }
  | { kind: "retry"; error: string; nextBlob: Buffer }
  | { kind: "failed"; error: string }
);

/**
 * Opens schedules.sqlite for this process alone. One node per dataDir: two would both resume 'delivering' rows
 * and deliver them twice. In exclusive locking mode SQLite keeps the lock taken by the first write until close,
 * so a second node fails here (after the busy timeout) instead of sharing the rows.
 */
function openExclusively(dataDir: string): SqliteDatabase {
  let db: SqliteDatabase | undefined;
  try {
    db = openDatabase({ dataDir, fileName: "schedules.sqlite", synchronous: "NORMAL" });
    db.pragma("locking_mode = EXCLUSIVE");
    db.exec("BEGIN EXCLUSIVE; COMMIT;");
    return db;
  } catch (cause) {
    db?.close();
    if (isSqliteError(cause) && cause.code === "SQLITE_BUSY") {
      throw new UnavailableError(`dataDir ${dataDir} is in use by another node (schedules.sqlite is locked)`, {}, { cause });
    }
    throw cause;
  }
}

function rowToRecord(row: ScheduleRow): ScheduleRecord {
  return {
    id: row.id,
    executeAtNs: blobToNs(row.execute_at_ns),
    callbackUrl: row.callback_url,
    status: row.status,
    attempts: row.attempts,
    lastError: row.last_error,
    createdAtNs: blobToNs(row.created_at_ns),
    deliveredAtNs: row.delivered_at_ns === null ? null : blobToNs(row.delivered_at_ns),
    proof: row.proof_json === null ? null : (JSON.parse(row.proof_json) as ProofJson),
    nextAttemptAtNs: row.next_attempt_at_ns === null ? null : blobToNs(row.next_attempt_at_ns),
  };
}

function truncated(text: string): string {
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;
}

function errorText(error: unknown): string {
  return truncated(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
}

/** The refusal of every new schedule after the store failed an fsync: nothing of it is written (503). */
function storeFailedEarlier(failure: Error & { code: string }): UnavailableError {
  return new UnavailableError(
    `the schedule store could not flush to disk (${failure.code}): the node takes no new schedules until it restarts`,
    { code: failure.code },
    { cause: failure },
  );
}

/**
 * A write of the schedule store failed (disk full, I/O error): the node's fault, not the schedule's. The attempt
 * writes nothing more and is not counted against the schedule or its client; the row keeps its stored state and is
 * due again when its claim expires.
 */
class StoreWriteError extends Error {
  constructor(cause: unknown) {
    super(`schedule store write failed: ${errorText(cause)}`, { cause });
    this.name = "StoreWriteError";
  }
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

/**
 * Pending schedules per client and in all. The quota checks run on every schedule request: counting rows in
 * SQLite there cost a scan of up to maxPending index entries per request.
 */
class PendingCounts {
  readonly #byClient = new Map<string, number>();
  #total = 0;

  get total(): number {
    return this.#total;
  }

  of(clientKey: string): number {
    return this.#byClient.get(clientKey) ?? 0;
  }

  add(clientKey: string, delta: number): void {
    if (delta === 0) return;
    const next = this.of(clientKey) + delta;
    if (next <= 0) this.#byClient.delete(clientKey);
    else this.#byClient.set(clientKey, next);
    this.#total += delta;
  }

  /**
   * Up to `count` clients with pending rows, taking turns: each call goes on where the previous one stopped (a live
   * iterator over the map, so no copy of every key per call), so over successive calls every client is visited
   * whatever the count of clients.
   */
  #rotation: IterableIterator<string> | null = null;
  nextClients(count: number): string[] {
    const wanted = Math.min(count, this.#byClient.size);
    const clients: string[] = [];
    let wrapped = false;
    while (clients.length < wanted) {
      this.#rotation ??= this.#byClient.keys();
      const next = this.#rotation.next();
      if (next.done === true) {
        this.#rotation = null;
        if (wrapped) break; // every key seen in this call (the map shrank meanwhile)
        wrapped = true;
        continue;
      }
      clients.push(next.value);
    }
    return clients;
  }
}

/**
 * Clients whose latest delivery attempt failed within SUSPECT_WINDOW_MS (a success clears them). Bounded: at most
 * MAX_SUSPECTS entries, the oldest dropped (insertion order).
 */
class FailingClients {
  readonly #failedAtMs = new Map<string, number>();

  note(clientKey: string): void {
    this.#failedAtMs.delete(clientKey);
    if (this.#failedAtMs.size >= MAX_SUSPECTS) {
      const oldest = this.#failedAtMs.keys().next();
      if (oldest.done !== true) this.#failedAtMs.delete(oldest.value);
    }
    this.#failedAtMs.set(clientKey, performance.now());
  }

  clear(clientKey: string): void {
    this.#failedAtMs.delete(clientKey);
  }

  /** Current suspects (expired entries are dropped here). */
  keys(): string[] {
    const nowMs = performance.now();
    for (const [key, atMs] of this.#failedAtMs) if (nowMs - atMs > SUSPECT_WINDOW_MS) this.#failedAtMs.delete(key);
    return [...this.#failedAtMs.keys()];
  }

  policy(maxSlots: number): SuspectPolicy {
    const nowMs = performance.now();
    return {
      isSuspect: (clientKey) => {
        const atMs = this.#failedAtMs.get(clientKey);
        return atMs !== undefined && nowMs - atMs <= SUSPECT_WINDOW_MS;
      },
      maxSlots,
    };
  }
}

export interface ScheduleStats {
  deliveredTotal: number;
  failedTotal: number;
  attemptsTotal: number;
  /** Passes of the dispatcher: each follows a due row, a finished delivery or a new schedule, never a spin. */
  dispatchesTotal: number;
  /**
   * Failed store writes (disk full, I/O error), each logged at error level: an attempt ended by one (StoreWriteError),
   * a dispatcher pass whose claim failed (retried STORE_RETRY_MS later), or a new schedule not saved or saved but not
   * flushed to disk (refused 503; one count per schedule refused, so a failed commit of a batch counts each of its
   * schedules; not the refusals that follow a failed fsync, which write nothing).
   */
  storeWriteErrorsTotal: number;
}

export class ScheduleService {
  readonly #options: ScheduleServiceOptions;
  readonly #logger: Logger;
  readonly #db: SqliteDatabase;
  readonly #resolveHost: ResolveHost;
  readonly #transport: CallbackTransport;
  readonly #random: () => number;
  readonly #maxConcurrent: number;
  readonly #maxConcurrentPerClient: number;
  /** The watchdog of one attempt: the proof wait plus the POST timeout. */
  readonly #attemptLimitMs: number;
  readonly #statements: Record<
    "insert" | "get" | "nextDue" | "due" | "dueOfClient" | "pendingByClient" | "claim" | "markDelivering" | "markDelivered" | "markRetry" | "markFailed" | "resumeInFlight",
    SqliteStatement
  >;
  /** Pending rows (scheduled or delivering), in all and per client: kept in memory, counted once at open. */
  readonly #pending = new PendingCounts();
  /** Claims a dispatch pass's rows (next attempt moved to the claim's end) in one transaction. */
  readonly #claimAll: (ids: readonly string[], untilBlob: Buffer) => void;
  /** New rows, committed together once per event-loop turn (schedule() answers after its row's commit and flush). */
  readonly #inserts: GroupCommit<NewRow>;
  /** Flushes the write-ahead log after the inserts' commits, off the event loop. */
  readonly #walSync: WalSync;
  #checkpointScheduled = false;
  /**
   * Delivery state changes, committed together once per event-loop turn: each was its own durable commit (~0.5 ms
   * of event loop, two per delivery), which bounded deliveries to about a thousand a second and held every other
   * request meanwhile. An attempt still waits for its `delivering` commit before it POSTs.
   */
  readonly #updates: GroupCommit<DeliveryUpdate>;
  /** New schedules per second, node-wide (maxCreatesPerSecond). */
  readonly #creates: RateLimiter;
  /** Clients whose callbacks failed lately: they share half the delivery slots (pickFairly). */
  readonly #suspects = new FailingClients();
  readonly #inFlight = new Map<string, { controller: AbortController; done: Promise<void>; clientKey: string }>();
  /** Set by a failed claim: the dispatcher does not run again before this moment (node clock, ns). */
  #storeRetryAtNs: bigint | null = null;
  readonly #stats: ScheduleStats = { deliveredTotal: 0, failedTotal: 0, attemptsTotal: 0, dispatchesTotal: 0, storeWriteErrorsTotal: 0 };
  #timer: NodeJS.Timeout | null = null;
  /** When #timer fires, node clock ns (null while no timer is armed). */
  #wakeAtNs: bigint | null = null;
  #running = false;
  /** Set by stop(): no new schedule is written once the store is being closed. */
  #closing = false;

  constructor(options: ScheduleServiceOptions) {
    this.#options = options;
    this.#logger = options.logger.child({ component: "schedules" });
    this.#resolveHost = options.resolveCallbackHost ?? systemResolveHost;
    this.#transport = options.callbackTransport ?? httpCallbackTransport;
    this.#random = options.random ?? Math.random;
    this.#maxConcurrent = options.maxConcurrentDeliveries ?? 16;
    this.#creates = new RateLimiter({ ratePerSecond: options.maxCreatesPerSecond ?? 0 });
    this.#attemptLimitMs = options.deliveryTimeoutMs + (options.maxProofWaitMs ?? DEFAULT_MAX_PROOF_WAIT_MS);
    this.#maxConcurrentPerClient = Math.min(
      this.#maxConcurrent,
      options.maxConcurrentDeliveriesPerClient ?? Math.max(1, Math.floor(this.#maxConcurrent / 4)),
    );
    this.#db = openExclusively(options.dataDir);
    this.#db.exec(`
      CREATE TABLE IF NOT EXISTS schedules (
        id TEXT PRIMARY KEY,
        execute_at_ns BLOB NOT NULL,
        callback_url TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('scheduled', 'delivering', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        created_at_ns BLOB NOT NULL,
        delivered_at_ns BLOB,
        proof_json TEXT,
        next_attempt_at_ns BLOB,
        CHECK ((status IN ('scheduled', 'delivering')) = (next_attempt_at_ns IS NOT NULL))
      );
      CREATE INDEX IF NOT EXISTS schedules_due ON schedules (next_attempt_at_ns) WHERE next_attempt_at_ns IS NOT NULL;
    `);
    // Added after the first release: older files get the column (existing rows belong to no client, '').
    const hasClientKey = (this.#db.prepare("PRAGMA table_info(schedules)").all() as { name: string }[]).some((column) => column.name === "client_key");
    if (!hasClientKey) this.#db.exec("ALTER TABLE schedules ADD COLUMN client_key TEXT NOT NULL DEFAULT ''");
    // A client's pending rows in due order (dueOfClient; pendingByClient uses its prefix). It replaces the index on
    // client_key alone of earlier versions.
    this.#db.exec(`
      CREATE INDEX IF NOT EXISTS schedules_due_by_client ON schedules (client_key, next_attempt_at_ns) WHERE next_attempt_at_ns IS NOT NULL;
      DROP INDEX IF EXISTS schedules_pending_by_client;
    `);
    const columns =
      "id, execute_at_ns, callback_url, status, attempts, last_error, created_at_ns, delivered_at_ns, proof_json, next_attempt_at_ns";
    this.#statements = {
      insert: this.#db.prepare(
        "INSERT INTO schedules (id, execute_at_ns, callback_url, status, attempts, created_at_ns, next_attempt_at_ns, client_key) VALUES (?, ?, ?, 'scheduled', 0, ?, ?, ?)",
      ),
      get: this.#db.prepare(`SELECT ${columns} FROM schedules WHERE id = ?`),
      // Both walk the schedules_due index in due order, leaving out the clients (a JSON array) that may take no
      // slot now: their rows neither wake the worker (no busy loop while they wait) nor fill the LIMIT (hiding the
      // row of a client that may). The cost is the excluded clients' rows ahead of the first eligible one, at most
      // their pending quota each, not every due row.
      nextDue: this.#db.prepare(
        `SELECT next_attempt_at_ns FROM schedules WHERE next_attempt_at_ns IS NOT NULL
           AND client_key NOT IN (SELECT value FROM json_each(?)) ORDER BY next_attempt_at_ns LIMIT 1`,
      ),
      due: this.#db.prepare(
        `SELECT ${columns}, client_key FROM schedules WHERE next_attempt_at_ns IS NOT NULL AND next_attempt_at_ns <= ?
           AND client_key NOT IN (SELECT value FROM json_each(?)) ORDER BY next_attempt_at_ns LIMIT ?`,
      ),
      dueOfClient: this.#db.prepare(
        `SELECT ${columns}, client_key FROM schedules WHERE client_key = ? AND next_attempt_at_ns IS NOT NULL
           AND next_attempt_at_ns <= ? ORDER BY next_attempt_at_ns LIMIT 1`,
      ),
      pendingByClient: this.#db.prepare(
        "SELECT client_key, COUNT(*) AS n FROM schedules WHERE next_attempt_at_ns IS NOT NULL GROUP BY client_key",
      ),
      claim: this.#db.prepare("UPDATE schedules SET next_attempt_at_ns = ? WHERE id = ? AND next_attempt_at_ns IS NOT NULL"),
      markDelivering: this.#db.prepare(
        "UPDATE schedules SET status = 'delivering', attempts = attempts + 1, proof_json = ?, next_attempt_at_ns = ? WHERE id = ? AND status IN ('scheduled', 'delivering')",
      ),
      markDelivered: this.#db.prepare(
        "UPDATE schedules SET status = 'delivered', delivered_at_ns = ?, last_error = NULL, next_attempt_at_ns = NULL WHERE id = ? AND status = 'delivering'",
      ),
      markRetry: this.#db.prepare(
        "UPDATE schedules SET status = 'scheduled', last_error = ?, next_attempt_at_ns = ? WHERE id = ? AND status IN ('scheduled', 'delivering')",
      ),
      markFailed: this.#db.prepare(
        "UPDATE schedules SET status = 'failed', last_error = ?, next_attempt_at_ns = NULL WHERE id = ? AND status IN ('scheduled', 'delivering')",
      ),
      // After a restart nothing is in flight: rows left `delivering` (crash mid-POST) are due again at once.
      resumeInFlight: this.#db.prepare("UPDATE schedules SET next_attempt_at_ns = ? WHERE status = 'delivering'"),
    };
    const insertAll = this.#db.transaction((rows: readonly NewRow[]) => {
      for (const row of rows) {
        this.#statements.insert.run(row.id, nsToBlob(row.executeAtNs), row.callbackUrl, nsToBlob(row.createdAtNs), nsToBlob(row.executeAtNs), row.clientKey);
      }
    });
    this.#claimAll = this.#db.transaction((ids: readonly string[], untilBlob: Buffer) => {
      for (const id of ids) this.#statements.claim.run(untilBlob, id);
    });
    // An accepted schedule is a promise to its client: on disk before the id is returned.
    this.#walSync = new WalSync(this.#db, options.syncFile === undefined ? {} : { syncFile: options.syncFile });
    this.#inserts = new GroupCommit({
      write: (rows) => {
        // Checked again here, at the write: a flush may have failed since schedule() checked (same turn).
        const failure = this.#walSync.failure;
        if (failure !== null) throw storeFailedEarlier(failure);
        insertAll(rows);
        this.#checkpointSoon();
      },
      sync: () => this.#walSync.sync(),
      maxBatch: MAX_INSERTS_PER_COMMIT,
    });
    const updateAll = this.#db.transaction((updates: readonly DeliveryUpdate[]) => {
      for (const update of updates) update.changes = this.#runUpdate(update);
    });
    // A failure is final news for the client (it may schedule again): durable; the rest is bookkeeping (header).
    this.#updates = new GroupCommit({
      write: (updates) => {
        if (updates.some((update) => update.kind === "failed")) commitDurably(this.#db, () => updateAll(updates));
        else updateAll(updates);
        this.#checkpointSoon();
      },
      maxBatch: MAX_INSERTS_PER_COMMIT,
    });
    for (const { client_key, n } of this.#statements.pendingByClient.all() as { client_key: string; n: number }[]) {
      this.#pending.add(client_key, n);
    }
  }

  /** Resumes every pending row and arms the worker. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    const resumed = this.#statements.resumeInFlight.run(nsToBlob(this.#options.nowNs())).changes;
    this.#logger.info({ pending: this.#pending.total, resumedInFlight: resumed }, "schedule worker started");
    this.#arm();
  }

  /** Stops the worker, aborts in-flight POSTs (those rows stay `delivering` and resume at the next start), closes the database. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#closing = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    const pending = [...this.#inFlight.values()];
    for (const { controller } of pending) controller.abort(new Error("node shutting down"));
    await Promise.allSettled(pending.map(({ done }) => done));
    // Schedules accepted in this turn are committed (and flushed) before the store closes; their callers then get
    // their records.
    if (this.#db.open) this.#inserts.flush();
    if (this.#db.open) this.#updates.flush();
    // Unbounded on purpose: a disk that hangs an fsync would hang the close's own checkpoint the same way.
    await this.#walSync.idle();
    if (this.#db.open) this.#db.close();
  }

  stats(): ScheduleStats {
    return { ...this.#stats };
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
    if (this.#closing || !this.#db.open) throw new UnavailableError("the schedule store is closed", {});
    const nowNs = this.#options.nowNs();
    const executeAt = validateExecuteAt(executeAtNs, {
      nowNs,
      maxHorizonNs: this.#options.maxHorizonNs,
      maxPastNs: this.#options.maxPastNs,
    });
    const url = validateCallbackUrl(callbackUrl, this.#options.allowedCallbackHosts);
    // Before any write: a store that failed a flush can confirm nothing any more, and a row written anyway would be
    // delivered while its client is told to try again (a duplicate per retry).
    const storeFailure = this.#walSync.failure;
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
    const maxPerClient = this.#options.maxPendingPerClient ?? this.#options.maxPending;
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
      await this.#inserts.add({ id, executeAtNs: executeAt, callbackUrl: url, createdAtNs: nowNs, clientKey });
    } catch (error) {
      // Not the store's own failure: a refusal (the store failed a flush since the check above: 503, nothing written)
      // or a bug (a 500, logged by the transport). Either way the row was not written.
      if (!isStoreFailure(error)) {
        this.#pending.add(clientKey, -1);
        throw error;
      }
      // The commit or its flush failed (disk full, I/O error): the operator's to fix, so logged and counted here;
      // the client gets 503, not a 500 that blames its request.
      this.#noteStoreWriteFailure(error);
      if (error instanceof WalSyncError) {
        // Committed but not known to be on disk: the row stays (and still counts) and may be delivered; said so.
        if (this.#changesNextWake(executeAt, clientKey)) this.#arm();
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
    if (this.#changesNextWake(executeAt, clientKey)) this.#arm();
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
    const row = typeof id === "string" ? (this.#statements.get.get(id) as ScheduleRow | undefined) : undefined;
    if (row === undefined) throw new NotFoundError(`schedule ${String(id)} not found`, { id: String(id) });
    return rowToRecord(row);
  }

  /** Arms one timer for the earliest due row (or a 60 s re-check). */
  #arm(): void {
    if (!this.#running) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#wakeAtNs = null;
    const room = this.#maxConcurrent - this.#inFlight.size;
    if (room <= 0) return; // a finishing delivery re-arms
    // After a failed claim, not before STORE_RETRY_MS: the rows are still due, and retrying at once would spin.
    const retryAtNs = this.#storeRetryAtNs;
    if (retryAtNs !== null && retryAtNs > this.#options.nowNs()) {
      const delayMs = Math.max(1, Number((retryAtNs - this.#options.nowNs()) / NS_PER_MS));
      this.#timer = setTimeout(() => this.#dispatchDue(), delayMs);
      this.#timer.unref();
      this.#wakeAtNs = retryAtNs;
      return;
    }
    const next = this.#statements.nextDue.get(this.#eligibility(room).excludedJson) as { next_attempt_at_ns: Buffer } | undefined;
    // Nothing a client may take now: a finishing delivery or a new schedule re-arms (60 s at most, for suspects
    // whose window ends).
    if (next === undefined) {
      if (this.#inFlight.size === 0) return;
      this.#timer = setTimeout(() => this.#dispatchDue(), MAX_TIMER_MS);
      this.#timer.unref();
      this.#wakeAtNs = this.#options.nowNs() + BigInt(MAX_TIMER_MS) * NS_PER_MS;
      return;
    }
    const dueNs = blobToNs(next.next_attempt_at_ns);
    const nowNs = this.#options.nowNs();
    const waitNs = dueNs > nowNs ? dueNs - nowNs : 0n;
    // Round up so the timer never fires before the row is due (and never spins at 0 ms on a sub-ms remainder).
    const delayMs = Math.min(MAX_TIMER_MS, Number((waitNs + NS_PER_MS - 1n) / NS_PER_MS));
    this.#timer = setTimeout(() => this.#dispatchDue(), delayMs);
    this.#timer.unref();
    this.#wakeAtNs = nowNs + BigInt(delayMs) * NS_PER_MS;
  }

  /**
   * Whether a new row may move the worker's next wake-up: not when its client may take no slot now (it waits for
   * a delivery to end, which re-arms anyway) nor when the worker already wakes no later than the row is due.
   * Re-arming for every accepted row would walk the due index once per request, a quadratic cost under a flood.
   */
  #changesNextWake(executeAtNs: bigint, clientKey: string): boolean {
    const room = this.#maxConcurrent - this.#inFlight.size;
    if (room <= 0) return false;
    let load = 0;
    for (const attempt of this.#inFlight.values()) if (attempt.clientKey === clientKey) load += 1;
    if (load >= room || load >= this.#maxConcurrentPerClient) return false;
    return this.#timer === null || this.#wakeAtNs === null || executeAtNs < this.#wakeAtNs;
  }

  /**
   * Who may take a slot now, with `room` slots free: the attempts in flight per client, the suspect policy, and
   * the clients pickFairly would give nothing (at the per-client cap, holding as many slots as are free, or a
   * suspect while suspects hold their share) as a JSON array for the queries. The queries and pickFairly agree,
   * so a due eligible row is always picked: the worker never wakes for rows it cannot deliver.
   */
  #eligibility(room: number): { inFlightByClient: Map<string, number>; suspects: SuspectPolicy; excluded: ReadonlySet<string>; excludedJson: string } {
    const inFlightByClient = new Map<string, number>();
    for (const { clientKey } of this.#inFlight.values()) inFlightByClient.set(clientKey, (inFlightByClient.get(clientKey) ?? 0) + 1);
    const suspects = this.#suspects.policy(Math.max(1, Math.floor(this.#maxConcurrent / 2)));
    let suspectSlots = 0;
    for (const [key, load] of inFlightByClient) if (suspects.isSuspect(key)) suspectSlots += load;
    const excluded = new Set(
      [...inFlightByClient].filter(([, load]) => load >= room || load >= this.#maxConcurrentPerClient).map(([key]) => key),
    );
    if (suspectSlots >= suspects.maxSlots) for (const key of this.#suspects.keys()) excluded.add(key);
    return { inFlightByClient, suspects, excluded, excludedJson: JSON.stringify([...excluded]) };
  }

  #dispatchDue(): void {
    this.#timer = null;
    this.#wakeAtNs = null;
    if (!this.#running) return;
    this.#stats.dispatchesTotal += 1;
    const room = this.#maxConcurrent - this.#inFlight.size;
    if (room > 0) {
      const nowNs = this.#options.nowNs();
      const { inFlightByClient, suspects, excluded, excludedJson } = this.#eligibility(room);
      const nowBlob = nsToBlob(nowNs);
      const rows = this.#statements.due.all(nowBlob, excludedJson, room * CANDIDATES_PER_SLOT) as DueRow[];
      // Beside the earliest due rows, the earliest of clients taking turns: the picker then sees clients whose
      // rows the ones above would hide (all of them could belong to the clients that just freed their slots).
      const seen = new Set(rows.map((row) => row.id));
      const visits = Math.min(MAX_CLIENTS_VISITED_PER_DISPATCH, CANDIDATES_PER_SLOT * (room + 1));
      for (const clientKey of this.#pending.nextClients(visits)) {
        if (excluded.has(clientKey)) continue;
        const row = this.#statements.dueOfClient.get(clientKey, nowBlob) as DueRow | undefined;
        if (row !== undefined && !seen.has(row.id)) rows.push(row);
      }
      // pickFairly keeps each client's rows in the order given: due order.
      rows.sort((a, b) => Buffer.compare(a.next_attempt_at_ns, b.next_attempt_at_ns));
      const candidates = rows.filter((row) => !this.#inFlight.has(row.id)).map((row) => ({ id: row.id, clientKey: row.client_key, row }));
      // Claimed rows are not due again until the claim expires (a crash mid-delivery resumes them then).
      const claimUntilNs = nowNs + BigInt(this.#attemptLimitMs) * NS_PER_MS;
      const picked = pickFairly(candidates, inFlightByClient, room, this.#maxConcurrentPerClient, suspects);
      // One commit for the pass's claims, not one per row (each commit holds the event loop).
      try {
        this.#claimAll(picked.map(({ id }) => id), nsToBlob(claimUntilNs));
      } catch (error) {
        // Nothing was claimed (the transaction rolled back) and nothing is sent: the pass is tried again later.
        this.#noteStoreWriteFailure(error);
        this.#storeRetryAtNs = nowNs + BigInt(STORE_RETRY_MS) * NS_PER_MS;
        this.#logger.error({ err: error, retryInMs: STORE_RETRY_MS }, "schedule store write failed (claiming due rows); dispatch retried later");
        this.#arm();
        return;
      }
      this.#storeRetryAtNs = null;
      for (const { row, clientKey } of picked) {
        const controller = new AbortController();
        const done = this.#deliver(row, clientKey, controller.signal)
          .catch((error: unknown) => {
            // Only a failed store write gets here (StoreWriteError): logged, and the slot is freed below.
            this.#noteStoreWriteFailure(error instanceof StoreWriteError ? error.cause : error);
            this.#logger.error({ err: error, scheduleId: row.id }, "schedule store write failed; the row keeps its stored state and is due again when its claim expires");
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

  /**
   * One attempt, bounded in time whatever the proof source, resolver, transport or receiver do (see the header):
   * the attempt's own controller is aborted by the POST timer, by the watchdog, or by shutdown. Rejects only with
   * StoreWriteError (a commit failed: nothing more is written for this attempt).
   */
  async #deliver(row: ScheduleRow, clientKey: string, shutdown: AbortSignal): Promise<void> {
    const id = row.id;
    const attempt = row.attempts + 1;
    const log = this.#logger.child({ scheduleId: id, attempt });
    const controller = new AbortController();
    const onShutdown = (): void => controller.abort(shutdown.reason);
    if (shutdown.aborted) return;
    shutdown.addEventListener("abort", onShutdown, { once: true });
    const watchdogMs = this.#attemptLimitMs;
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
    if (!this.#db.open || (shutdown.aborted && failure !== null)) return;
    if (failure === null) {
      const delivered: DeliveryUpdate = { kind: "delivered", id, atBlob: nsToBlob(this.#options.nowNs()), changes: 0 };
      await this.#commit(delivered);
      this.#pending.add(clientKey, -delivered.changes);
      this.#suspects.clear(clientKey);
      this.#stats.deliveredTotal += 1;
      // Debug like "schedule accepted": a delivery is recorded in its row; failures stay at warn.
      log.debug({ nanoMoment: progress.nanoMoment }, "schedule delivered");
      return;
    }
    // The attempt is counted by its `delivering` update before its outcome is written: the one #attempt queued
    // (it may still wait for its commit when the watchdog ended the attempt), or, when no proof was taken, one
    // queued now (no POST, still an attempt: a tampered node gives up after maxAttempts).
    await (progress.delivering ?? this.#commit({ kind: "delivering", id, proofJson: null, untilBlob: nsToBlob(this.#options.nowNs()), changes: 0 }));
    await this.#failAttempt(id, clientKey, attempt, failure, log);
  }

  /**
   * Checkpoints the log, when due, after this turn's commits (WalSync takes SQLite's automatic checkpoints over so
   * that their fsync errors are seen): outside any caller's write, so that a failed checkpoint fails no write that
   * already committed, and ends new schedules instead (#noteStoreWriteFailure).
   */
  #checkpointSoon(): void {
    if (this.#checkpointScheduled) return;
    this.#checkpointScheduled = true;
    setImmediate(() => {
      this.#checkpointScheduled = false;
      if (!this.#db.open) return;
      try {
        this.#walSync.checkpointIfDue();
      } catch (error) {
        this.#noteStoreWriteFailure(error);
        this.#logger.error({ err: (error as Error).message, code: (error as { code?: unknown }).code }, "schedule store: checkpoint failed");
      }
    });
  }

  /**
   * Counts a failed store write; a failed flush of SQLite's own (its fsync, e.g. a `failed` mark's durable commit or
   * a checkpoint) also ends new schedules until restart, as a failed flush of a new schedule's log does (WalSync).
   */
  #noteStoreWriteFailure(error: unknown): void {
    this.#stats.storeWriteErrorsTotal += 1;
    if (isFlushFailure(error)) this.#walSync.noteFailure(error);
  }

  /** Queues a delivery state change for this turn's commit; rejects with StoreWriteError when that commit fails. */
  #commit(update: DeliveryUpdate): Promise<void> {
    return this.#updates.add(update).catch((error: unknown) => {
      throw new StoreWriteError(error);
    });
  }

  /** Takes the proof, marks the row `delivering` and POSTs; null on a 2xx, else why the attempt failed. */
  async #attempt(row: ScheduleRow, controller: AbortController, progress: AttemptProgress): Promise<string | null> {
    const { signal } = controller;
    const executeAtNs = blobToNs(row.execute_at_ns);
    const signed = await this.#options.proofAtOrAfter(executeAtNs, signal);
    // Checked right before the row is touched: an attempt ended by the watchdog or shutdown writes nothing more.
    if (signal.aborted || !this.#db.open) throw signal.reason ?? new Error("schedule store closed");
    const body: ScheduleDeliveryBody = {
      id: row.id,
      executeAt: executeAtNs.toString(),
      nanoMoment: signed.json.nanoMoment,
      proof: signed.json.proof,
    };
    const { deliveryTimeoutMs } = this.#options;
    // In flight until the POST times out (+1 s): a crash leaves the row due again soon after restart.
    const inFlightUntilNs = this.#options.nowNs() + BigInt(deliveryTimeoutMs + 1_000) * NS_PER_MS;
    progress.delivering = this.#commit({ kind: "delivering", id: row.id, proofJson: signed.body, untilBlob: nsToBlob(inFlightUntilNs), changes: 0 });
    await progress.delivering;
    // The row is committed `delivering` before anything is sent; an attempt ended meanwhile sends nothing.
    if (signal.aborted || !this.#db.open) throw signal.reason ?? new Error("schedule store closed");
    this.#stats.attemptsTotal += 1;
    progress.posted = true;
    progress.nanoMoment = body.nanoMoment;
    progress.postTimer = setTimeout(() => controller.abort(timeoutReason(`callback did not answer within ${deliveryTimeoutMs} ms`)), deliveryTimeoutMs);
    const attemptFailure = await postCallback({
      url: row.callback_url,
      allowedHosts: this.#options.allowedCallbackHosts,
      headers: { "content-type": "application/json", "idempotency-key": row.id, "user-agent": "ats-node" },
      body: JSON.stringify(body),
      signal,
      resolveHost: this.#resolveHost,
      transport: this.#transport,
    });
    return attemptFailure === null ? null : truncated(attemptFailure);
  }

  async #failAttempt(id: string, clientKey: string, attempt: number, failure: string, log: Logger): Promise<void> {
    this.#suspects.note(clientKey);
    if (attempt >= this.#options.maxAttempts) {
      const failed: DeliveryUpdate = { kind: "failed", id, error: failure, changes: 0 };
      await this.#commit(failed);
      this.#pending.add(clientKey, -failed.changes);
      this.#stats.failedTotal += 1;
      log.warn({ error: failure }, "schedule failed: no attempts left");
      return;
    }
    const delayMs = retryDelayMs(attempt, this.#options.baseBackoffMs, this.#options.maxBackoffMs, this.#random);
    const nextNs = this.#options.nowNs() + BigInt(delayMs) * NS_PER_MS;
    await this.#commit({ kind: "retry", id, error: failure, nextBlob: nsToBlob(nextNs), changes: 0 });
    log.warn({ error: failure, retryInMs: delayMs }, "schedule delivery failed; will retry");
  }

  /** Writes one delivery state change (inside #updates' transaction); returns the rows it changed. */
  #runUpdate(update: DeliveryUpdate): number {
    switch (update.kind) {
      case "delivering":
        return this.#statements.markDelivering.run(update.proofJson, update.untilBlob, update.id).changes;
      case "delivered":
        return this.#statements.markDelivered.run(update.atBlob, update.id).changes;
      case "retry":
        return this.#statements.markRetry.run(update.error, update.nextBlob, update.id).changes;
      case "failed":
        return this.#statements.markFailed.run(update.error, update.id).changes;
    }
  }
}
