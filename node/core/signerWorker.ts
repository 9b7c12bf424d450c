/**
 * The node-key signer thread: computes the EIP-712 TimeAttestation digest and the secp256k1 node signature in a
 * worker_thread, so the event loop that serves REST/gRPC/WS spends none of its time on them (~0.1 ms a tick with
 * libsecp256k1, ~0.35–1.5 ms with pure-JS noble). On a machine with a core to spare the signatures run beside the
 * serving thread instead of inside it. The main thread keeps everything that decides WHETHER to sign (tamper,
 * accuracy bound) and only swaps its cached proof when a result comes back (node/core/attestor.ts).
 * Given the card's key (`cardPrivateKey`: a card whose key is process memory anyway, the dev card), the thread
 * also makes the card's P-256 signature of the moment; otherwise the card driver signs in the main thread and the
 * request carries its signature. The card key travels like the node key (below). Given also the anchors of the
 * card's and the node's clocks (`selfTicking`), the thread makes whole ticks on its own timer while the main thread
 * grants it the permit (grantTicks), and the main thread takes them with collect(): no message per tick.
 *
 * Detail: docs/node.md "Signing, transports and limits".
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import { hexToByteArray } from "../../protocol/bytes";
import type { NodeKey } from "../../protocol/keys";
import { closeNativeCallGate, createNativeCallGate, NATIVE_CALL_GATE_KEY } from "../../protocol/nativeCallGate";
import type { Secp256k1Backend } from "../../protocol/secp256k1";
import type { Hex } from "../../protocol/types";
import type { WallClockAnchor } from "../card/hostClock";
import { ResultSlot, TickPermit, type SlotRecord, type SlotResult } from "./signerResultSlot";

/*
 * The worker runs node/core/signerThread.ts, an ordinary module that signs with protocol/sign.ts. Which file the
 * worker loads depends on how this module was loaded (a worker does not inherit its parent's require hooks):
 * - compiled (dist/, what bin/ats-node.js runs): the sibling `signerThread.js`, plain Node.js (most of its start is
 *   loading protocol/codec.ts's imports, viem's EIP-712 included; ticks sign in the main thread meanwhile);
 * - TypeScript sources (Hardhat's ts-node in tests, `node -r ./bin/register-ts.js` for scripts): `signerThread.ts`
 *   with bin/register-ts.js preloaded in the worker (`-r`), which loads the TypeScript compiler and transpiles the
 *   worker's modules on load (several times the compiled start, in time, CPU and memory: docs/benchmarks.md; the
 *   built node never runs this way).
 *
 * A signature reaches the attestor by whichever comes first: the worker's reply message, or collect() finding it
 * in the shared result slot (signerResultSlot.ts) while serving a proof request.
 *
 * Native addons: the worker signs with libsecp256k1 and hashes with XKCP like the main thread, through a
 * native-call gate (protocol/nativeCallGate.ts) that this class closes before it terminates the thread, and that
 * one process 'exit' listener closes for every live thread: terminating a thread inside an addon call would abort
 * the whole process. What the worker computes is pinned by a known-answer test against protocol/sign.ts
 * (`signNodeEntry`) before the attestor routes any tick to it, and by the attestor tests.
 *
 * The private keys travel once, as raw bytes in workerData (structured clone inside this process); the parent
 * zeroes its copies right after the worker is created. Neither side ever logs it: worker errors are reported as
 * messages that contain only the error text.
 */
/** bin/register-ts.js: the transpile-on-require hook a worker needs to run the TypeScript sources. */
const REGISTER_TS = join(__dirname, "..", "..", "bin", "register-ts.js");

/** Whether the signer thread runs compiled JavaScript (this module is the dist/ build), not TypeScript sources. */
const SIGNER_THREAD_COMPILED = __filename.endsWith(".js");

/**
 * The worker's entry file and the options it needs to run: the compiled sibling when this module is compiled
 * JavaScript, else the TypeScript source behind bin/register-ts.js.
 */
export function signerThreadEntry(): { filename: string; execArgv: string[] } {
  if (SIGNER_THREAD_COMPILED) return { filename: join(__dirname, "signerThread.js"), execArgv: [] };
  if (!existsSync(REGISTER_TS)) throw new Error(`signer thread: ${REGISTER_TS} is missing (needed to run the TypeScript sources)`);
  return { filename: join(__dirname, "signerThread.ts"), execArgv: ["-r", REGISTER_TS] };
}

/** What the worker signs: exactly the inputs of timeAttestationForProof(proof, nodeTimestampNs). */
export interface NodeSignRequest {
  /** ns, uint128. */
  nanoMoment: bigint;
  /** The card's 96-byte cardId ‖ r ‖ s. */
  hardwareSignature: Hex;
  /** ns, uint32. */
  accuracy: number;
  /** The node's own timestamp, ns, uint128. */
  nodeTimestampNs: bigint;
}

/**
 * What the thread is asked to sign: a NodeSignRequest, where the hardware signature may be left to the thread when
 * it holds the card key (NodeSignerThreadOptions.cardPrivateKey; `signsHardware`).
 */
export type ThreadSignRequest = Omit<NodeSignRequest, "hardwareSignature"> & { hardwareSignature?: Hex };

/**
 * The node entry (80 bytes: nodeTimestamp ‖ r ‖ yParityAndS, EIP-2098, low-S), the EIP-712 digest it signs (seeds
 * the recovery memo), and the hardware signature it covers (the request's, or the one the thread made).
 */
export type NodeSignResult = SlotResult;

interface WorkerReply {
  id?: number;
  ready?: true;
  backend?: Secp256k1Backend;
  signsHardware?: boolean;
  ticks?: boolean;
  tickError?: string;
  entry?: Hex;
  digest?: Hex;
  hardwareSignature?: Hex;
  error?: string;
}

/** The OS-level name the signer thread takes (Linux: at most 15 bytes), for `top -H` and benchmarks. */
export const SIGNER_THREAD_NAME = "ats-node-signer";

/** The largest request id (a positive int32, as the result slot stores it); the next one is 1 again. */
const MAX_REQUEST_ID = 0x7fffffff;

/** How long one signature may take in the worker by default (normally well under a millisecond). */
export const SIGN_TIMEOUT_MS = 1_000;

export interface NodeSignerThreadOptions {
  /** Runs once if the worker dies or errors (not after close()). */
  onFailure?: (error: Error) => void;
  /** A sign() without a reply after this many ms rejects (default SIGN_TIMEOUT_MS). */
  signTimeoutMs?: number;
  /**
   * The card's P-256 private scalar, when the card lets the thread sign hardware messages (the dev card:
   * node/card/types.ts exportKeyForSignerThread). Like the node key it travels once, in workerData.
   */
  cardPrivateKey?: Hex;
  /**
   * Makes the thread tick on its own (needs `cardPrivateKey`): it reads both clocks from their host-clock anchors
   * and signs a whole attestation every `intervalNs` while the permit is granted (grantTicks), writing each to the
   * result slot; collect() hands them over. Nothing is posted per tick.
   */
  selfTicking?: SelfTicking;
}

/** What a self-ticking thread needs besides the keys: its pace, the accuracy it signs, and the clocks' anchors. */
export interface SelfTicking {
  /** ns between ticks (the thread's timers, like the attestor's, wait at least 1 ms). */
  intervalNs: bigint;
  /** The accuracy signed into every attestation, ns. */
  accuracyNs: number;
  /** The anchor the card's clock follows (node/card/types.ts clockAnchorForSignerThread). */
  cardClock: WallClockAnchor;
  /** The anchor the node's own clock (the node timestamp) follows. */
  nodeClock: WallClockAnchor;
}

interface Pending {
  resolve(result: NodeSignResult): void;
  reject(error: Error): void;
}

/**
 * The gates of the signer threads alive in this process. Exiting the process terminates worker threads; one
 * 'exit' listener (registered with the first thread) closes every gate first, so that termination never lands
 * inside an addon call.
 */
const liveGates = new Set<SharedArrayBuffer>();
let exitListenerInstalled = false;

function trackGate(gate: SharedArrayBuffer): void {
  liveGates.add(gate);
  if (exitListenerInstalled) return;
  exitListenerInstalled = true;
  process.on("exit", () => {
    for (const live of liveGates) closeNativeCallGate(live);
  });
}

/**
 * One signer thread for one node key. `ready` settles when the worker has loaded; `sign` resolves with the
 * entry (or rejects with the worker's error text); `close` terminates the thread and rejects what is pending.
 * The worker is unref'd: it never keeps the process alive on its own.
 */
export class NodeSignerThread {
  readonly ready: Promise<void>;
  readonly #worker: Worker;
  readonly #gate = createNativeCallGate();
  /** Where the worker also writes each signature (signerResultSlot.ts): collect() takes it from there early. */
  readonly #slot = new ResultSlot();
  /** Whether the thread may sign its own ticks (self-ticking only; withheld until grantTicks(true)). */
  readonly #permit = new TickPermit();
  /** The slot version collect() last read: nothing new while the slot still shows it. */
  #seenVersion = 0;
  #selfTicking = false;
  /** When the thread was last seen writing the slot, or the permit granted (performance.now() ms): the stall watchdog's mark. */
  #aliveAtMs = 0;
  /** When ticksOverdue() last ran (performance.now() ms): a caller that was itself stalled does not judge the thread. */
  #overdueCheckedAtMs = 0;
  /** The self-ticking pace, ms (for the stall watchdog); 0 when not self-ticking. */
  readonly #tickIntervalMs: number;
  /** Set once the thread has exited: closing its gate then waits for nothing (a dead thread cannot leave a call). */
  #exited = false;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #backend: Secp256k1Backend | null = null;
  #signsHardware = false;
  #failure: Error | null = null;
  #onFailure: ((error: Error) => void) | null;
  #markFailed: (error: Error) => void = () => undefined;
  readonly #signTimeoutMs: number;

  constructor(nodeKey: NodeKey, options: NodeSignerThreadOptions = {}) {
    this.#onFailure = options.onFailure ?? null;
    this.#signTimeoutMs = options.signTimeoutMs ?? SIGN_TIMEOUT_MS;
    this.#tickIntervalMs = options.selfTicking === undefined ? 0 : Number(options.selfTicking.intervalNs / 1_000_000n);
    const nodePrivateKey = hexToByteArray(nodeKey.exportPrivateKey());
    const cardPrivateKey = options.cardPrivateKey === undefined ? undefined : hexToByteArray(options.cardPrivateKey);
    try {
      if (cardPrivateKey !== undefined && cardPrivateKey.length !== 32) throw new RangeError("signer thread: cardPrivateKey must be 32 bytes");
      if (options.selfTicking !== undefined && cardPrivateKey === undefined) throw new RangeError("signer thread: selfTicking needs cardPrivateKey");
      const entry = signerThreadEntry();
      const workerData = {
        nodePrivateKey,
        ...(cardPrivateKey === undefined ? {} : { cardPrivateKey }),
        threadName: SIGNER_THREAD_NAME,
        resultSlot: this.#slot.buffer,
        ...(options.selfTicking === undefined ? {} : { ticks: { ...options.selfTicking, permit: this.#permit.buffer } }),
        [NATIVE_CALL_GATE_KEY]: this.#gate,
      };
      this.#worker = new Worker(entry.filename, { name: SIGNER_THREAD_NAME, execArgv: entry.execArgv, workerData });
    } finally {
      // The worker got its own copies (workerData is cloned at construction).
      nodePrivateKey.fill(0);
      cardPrivateKey?.fill(0);
    }
    trackGate(this.#gate);
    this.#worker.unref();
    let markReady: () => void = () => undefined;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      this.#markFailed = reject;
    });
    this.ready.catch(() => undefined); // observed through onFailure / sign() too: never an unhandled rejection
    this.#worker.on("message", (reply: WorkerReply) => {
      if (reply.ready === true) {
        this.#backend = reply.backend ?? null;
        this.#signsHardware = reply.signsHardware === true;
        this.#selfTicking = reply.ticks === true;
        markReady();
        return;
      }
      if (reply.tickError !== undefined) {
        this.#fail(new Error(`signer thread: a tick failed: ${reply.tickError}`));
        return;
      }
      const pending = reply.id === undefined ? undefined : this.#pending.get(reply.id);
      if (pending === undefined || reply.id === undefined) return;
      this.#pending.delete(reply.id);
      if (reply.error !== undefined || reply.entry === undefined || reply.digest === undefined || reply.hardwareSignature === undefined) {
        pending.reject(new Error(`signer thread: ${reply.error ?? "malformed reply"}`));
      } else {
        pending.resolve({ entry: reply.entry, digest: reply.digest, hardwareSignature: reply.hardwareSignature });
      }
    });
    this.#worker.on("error", (error: Error) => this.#fail(new Error(`signer thread failed: ${error.message}`)));
    this.#worker.on("exit", (code: number) => {
      this.#exited = true;
      liveGates.delete(this.#gate);
      this.#fail(new Error(`signer thread exited (code ${code})`));
    });
  }

  /**
   * Signs one attestation in the worker (and its hardware message first when the request has no hardware
   * signature: see `signsHardware`). Rejects once the thread has failed or was closed.
   */
  sign(request: ThreadSignRequest): Promise<NodeSignResult> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    const id = this.#nextId;
    // Ids are int32 in the result slot: wrap (after 2^31 − 1 requests, ~25 days of 1 ms ticks) instead of overflowing.
    this.#nextId = id >= MAX_REQUEST_ID ? 1 : id + 1;
    return new Promise<NodeSignResult>((resolve, reject) => {
      // A reply that never comes (a wedged thread) must not stall the attestor's ticks for good: the request
      // fails after the sign timeout, and the attestor then closes this thread and signs in the main thread. A
      // reply that comes later finds no pending entry and is dropped.
      const timer = setTimeout(() => {
        if (this.#pending.delete(id)) reject(new Error(`signer thread: no reply within ${this.#signTimeoutMs} ms`));
      }, this.#signTimeoutMs);
      timer.unref();
      this.#pending.set(id, {
        resolve: (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.#worker.postMessage({
        id,
        nanoMoment: request.nanoMoment,
        ...(request.hardwareSignature === undefined ? {} : { hardwareSignature: request.hardwareSignature }),
        accuracy: request.accuracy,
        nodeTimestampNs: request.nodeTimestampNs,
      });
    });
  }

  /**
   * Looks at the result slot (one atomic load when nothing is new). A signature the worker has finished for a
   * pending sign() resolves it now (its handlers run as microtasks, before this thread's next I/O callback) instead
   * of when this thread's event loop reaches the reply, a loop turn or more later under load. A tick of a
   * self-ticking thread not seen before, signed under the permit epoch granted now, is returned for the caller to
   * check and publish; a tick of an earlier epoch (signed before the permit was last withheld) is dropped, and a
   * tick overwritten before anyone looked is lost (the next one is an interval later). Meant to be called on every
   * proof request.
   */
  collect(): SlotRecord | null {
    if (this.#slot.versionNow() === this.#seenVersion) return null;
    if (this.#selfTicking) this.#aliveAtMs = performance.now(); // it wrote (or is writing) the slot since we looked
    const record = this.#slot.read();
    if (record === null) return null; // being written right now: the next call sees it
    this.#seenVersion = record.version;
    if (record.kind === "tick") {
      const epoch = this.#permit.epoch;
      if (epoch === 0 || record.permitEpoch !== epoch) return null;
      return record;
    }
    const pending = this.#pending.get(record.id);
    if (pending !== undefined) {
      this.#pending.delete(record.id);
      pending.resolve({ entry: record.entry, digest: record.digest, hardwareSignature: record.hardwareSignature });
    }
    return null;
  }

  /**
   * Lets a self-ticking thread sign its ticks, or holds it (it looks before every tick). Granting after a withdrawal
   * opens a new epoch: ticks signed before it are never returned by collect().
   */
  grantTicks(granted: boolean): void {
    if (granted && !this.#permit.granted) this.#aliveAtMs = performance.now();
    this.#permit.set(granted);
  }

  /**
   * Whether a self-ticking thread holding the permit has gone quiet: it has not written the slot for longer than the
   * sign timeout plus an interval (a thread stuck in a call, or whose timer stopped, posts no error). The attestor
   * asks at its tick pace and then closes it and signs in the serving thread. A caller whose previous question is
   * itself longer ago than the sign timeout (the process was paused, or its loop stalled) gives the thread a fresh
   * period instead of judging it: the thread may not have run yet either. Monotonic time (performance.now()).
   */
  ticksOverdue(): boolean {
    const nowMs = performance.now();
    const sinceLastCheckMs = nowMs - this.#overdueCheckedAtMs;
    this.#overdueCheckedAtMs = nowMs;
    if (!this.#selfTicking || !this.#permit.granted) return false;
    if (sinceLastCheckMs > this.#signTimeoutMs) {
      this.#aliveAtMs = nowMs;
      return false;
    }
    return nowMs - this.#aliveAtMs > this.#signTimeoutMs + this.#tickIntervalMs;
  }

  /** Whether the thread ticks on its own (selfTicking was given and the thread took it); false until `ready`. */
  get selfTicking(): boolean {
    return this.#selfTicking;
  }

  /** Whether the thread holds the card key (so a request may leave the hardware signature to it); false until `ready`. */
  get signsHardware(): boolean {
    return this.#signsHardware;
  }

  /** The secp256k1 backend the worker signs with; null until `ready`. */
  get backend(): Secp256k1Backend | null {
    return this.#backend;
  }

  /** Pending sign requests (tests). */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /**
   * Terminates the thread (asynchronously; the returned promise resolves when it has exited). Idempotent. The
   * native-call gate is closed first, synchronously (waiting out a signature in flight, ~0.1 ms).
   */
  close(): Promise<void> {
    this.#onFailure = null;
    this.#permit.set(false);
    this.#fail(new Error("signer thread closed"));
    closeNativeCallGate(this.#gate, this.#exited ? 0 : undefined);
    liveGates.delete(this.#gate);
    return this.#worker.terminate().then(
      () => undefined,
      () => undefined,
    );
  }

  #fail(error: Error): void {
    if (this.#failure !== null) return;
    this.#failure = error;
    this.#markFailed(error);
    this.#rejectAll(error);
    const onFailure = this.#onFailure;
    this.#onFailure = null;
    onFailure?.(error);
  }

  #rejectAll(error: Error): void {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const { reject } of pending) reject(error);
  }
}
