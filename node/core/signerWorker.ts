/**
 * The node-key signer thread: computes the EIP-712 TimeAttestation digest and the secp256k1 node signature
 * with pure-JS noble (~0.35–1.5 ms) in a worker_thread, so the event loop that serves REST/gRPC/WS never waits
 * behind slow curve math; where libsecp256k1 is available (~0.1 ms) the attestor signs in the main thread instead. The main thread keeps everything that decides WHETHER to sign (tamper,
 * accuracy bound, card clock, card signature through the card driver) and only swaps its cached proof when a
 * result comes back (node/core/attestor.ts).
 *
 * Why the worker runs a small plain-JavaScript source (eval) instead of loading a .ts file: the package runs
 * TypeScript through a require hook (Hardhat's ts-node in tests, bin/register-ts.js for bin/ats-node.js and the
 * benchmarks), and a worker does not inherit the parent's require hooks. Registering one again in the worker
 * costs ~0.5–1 s of CPU and tens of MB per worker, and depends on how the process was started. The signer needs
 * only node:worker_threads, Buffer, the keccak module of @noble/hashes and @noble/curves' secp256k1, whose
 * absolute paths the parent resolves and passes in, so the same code starts in ~50 ms however the process was
 * launched (and from any working directory). It never loads the libsecp256k1 addon (see the worker source for
 * why). What it computes is pinned by a
 * known-answer test against protocol/sign.ts (`signNodeEntry`) before the attestor routes any tick to it, and by
 * the attestor tests.
 *
 * The private key travels once, as raw bytes in workerData (structured clone inside this process); the parent
 * zeroes its copy right after the worker is created. Neither side ever logs it: worker errors are reported as
 * messages that contain only the error text.
 */
import { Worker } from "node:worker_threads";
import { hexToByteArray } from "../../protocol/bytes";
import { timeAttestationDomainSeparator, timeAttestationTypeHash } from "../../protocol/codec";
import type { NodeKey } from "../../protocol/keys";
import type { Secp256k1Backend } from "../../protocol/secp256k1";
import type { Hex } from "../../protocol/types";

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

export interface NodeSignResult {
  /** The 80-byte node entry nodeTimestamp ‖ r ‖ yParityAndS (EIP-2098, low-S). */
  entry: Hex;
  /** The EIP-712 digest the entry signs (seeds the recovery memo). */
  digest: Hex;
}

interface WorkerReply {
  id?: number;
  ready?: true;
  backend?: Secp256k1Backend;
  entry?: Hex;
  digest?: Hex;
  error?: string;
}

/**
 * The worker's code (CommonJS, run with eval). Mirrors protocol/codec.ts timeAttestationDigest (static-word
 * EIP-712 hashing) and protocol/sign.ts signNodeEntry (RFC 6979, low-S, EIP-2098 packing) with noble (the same
 * bytes as libsecp256k1).
 */
const WORKER_SOURCE = String.raw`
"use strict";
const { parentPort, workerData } = require("node:worker_threads");
const { keccak_256 } = require(workerData.sha3Module);
// secp256k1: pure-JS @noble/curves only. libsecp256k1's addon (protocol/secp256k1.ts) is not loaded here: when a
// worker that loaded it is terminated, the addon's teardown can abort the whole process (seen in the test suite:
// "terminate called after throwing an instance of 'Napi::Error'"). With libsecp256k1 the main thread signs
// ticks itself (~0.1 ms), and this thread is only used when signing is slow pure JS (attestor.ts).
const noble = require(workerData.secp256k1Module).secp256k1;
const backend = "noble";
// Returns recovery ‖ r ‖ s (65 bytes), low-S.
function signDigest(digest) {
  return noble.sign(digest, key, { prehash: false, lowS: true, format: "recovered" });
}
const key = workerData.nodePrivateKey;
const fromHex = (hex) => Uint8Array.from(Buffer.from(hex.slice(2), "hex"));
const toHex = (bytes) => "0x" + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex");
// 0x1901 ‖ domainSeparator ‖ structHash
const outer = new Uint8Array(34);
outer[0] = 0x19;
outer[1] = 0x01;
outer.set(fromHex(workerData.domainSeparator), 2);
// typeHash ‖ cardId ‖ nanoMoment ‖ accuracy ‖ hardwareSignatureHash ‖ nodeTimestamp (six 32-byte words)
const struct = new Uint8Array(192);
struct.set(fromHex(workerData.typeHash), 0);
function putUint(target, offset, width, value, bits, name) {
  if (typeof value !== "bigint" || value < 0n || value >= 1n << BigInt(bits)) throw new RangeError(name + " is not a uint" + bits);
  const hex = value.toString(16).padStart(width * 2, "0");
  target.set(Buffer.from(hex, "hex"), offset);
}
function sign(request) {
  const hardware = fromHex(request.hardwareSignature);
  if (hardware.length !== 96) throw new RangeError("hardwareSignature must be 96 bytes");
  struct.set(hardware.subarray(0, 32), 32);
  putUint(struct, 64, 32, request.nanoMoment, 128, "nanoMoment");
  putUint(struct, 96, 32, BigInt(request.accuracy), 32, "accuracy");
  struct.set(keccak_256(hardware.subarray(32, 96)), 128);
  putUint(struct, 160, 32, request.nodeTimestampNs, 128, "nodeTimestamp");
  const message = new Uint8Array(66);
  message.set(outer, 0);
  message.set(keccak_256(struct), 34);
  const digest = keccak_256(message);
  const signature = signDigest(digest);
  const recovery = signature[0];
  if (recovery !== 0 && recovery !== 1) throw new RangeError("node signature has an unrepresentable recovery id");
  const entry = new Uint8Array(80);
  putUint(entry, 0, 16, request.nodeTimestampNs, 128, "nodeTimestamp");
  entry.set(signature.subarray(1, 65), 16);
  entry[48] |= recovery << 7; // yParity in bit 255 of s (s <= n/2 < 2^255)
  return { entry: toHex(entry), digest: toHex(digest) };
}
parentPort.on("message", (request) => {
  try {
    const result = sign(request);
    parentPort.postMessage({ id: request.id, entry: result.entry, digest: result.digest });
  } catch (error) {
    parentPort.postMessage({ id: request.id, error: String((error && error.message) || error) });
  }
});
parentPort.postMessage({ ready: true, backend });
`;

/** How long one signature may take in the worker by default (normally well under a millisecond). */
export const SIGN_TIMEOUT_MS = 1_000;

export interface NodeSignerThreadOptions {
  /** Runs once if the worker dies or errors (not after close()). */
  onFailure?: (error: Error) => void;
  /** A sign() without a reply after this many ms rejects (default SIGN_TIMEOUT_MS). */
  signTimeoutMs?: number;
}

interface Pending {
  resolve(result: NodeSignResult): void;
  reject(error: Error): void;
}

/**
 * One signer thread for one node key. `ready` settles when the worker has loaded; `sign` resolves with the
 * entry (or rejects with the worker's error text); `close` terminates the thread and rejects what is pending.
 * The worker is unref'd: it never keeps the process alive on its own.
 */
export class NodeSignerThread {
  readonly ready: Promise<void>;
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #backend: Secp256k1Backend | null = null;
  #failure: Error | null = null;
  #onFailure: ((error: Error) => void) | null;
  #markFailed: (error: Error) => void = () => undefined;
  readonly #signTimeoutMs: number;

  constructor(nodeKey: NodeKey, options: NodeSignerThreadOptions = {}) {
    this.#onFailure = options.onFailure ?? null;
    this.#signTimeoutMs = options.signTimeoutMs ?? SIGN_TIMEOUT_MS;
    const nodePrivateKey = hexToByteArray(nodeKey.exportPrivateKey());
    try {
      this.#worker = new Worker(WORKER_SOURCE, {
        eval: true,
        name: "ats-node-signer",
        execArgv: [],
        workerData: {
          nodePrivateKey,
          domainSeparator: timeAttestationDomainSeparator(),
          typeHash: timeAttestationTypeHash(),
          secp256k1Module: require.resolve("@noble/curves/secp256k1.js"),
          sha3Module: require.resolve("@noble/hashes/sha3.js"),
        },
      });
    } finally {
      nodePrivateKey.fill(0); // the worker got its own copy (workerData is cloned at construction)
    }
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
        markReady();
        return;
      }
      const pending = reply.id === undefined ? undefined : this.#pending.get(reply.id);
      if (pending === undefined || reply.id === undefined) return;
      this.#pending.delete(reply.id);
      if (reply.error !== undefined || reply.entry === undefined || reply.digest === undefined) {
        pending.reject(new Error(`signer thread: ${reply.error ?? "malformed reply"}`));
      } else {
        pending.resolve({ entry: reply.entry, digest: reply.digest });
      }
    });
    this.#worker.on("error", (error: Error) => this.#fail(new Error(`signer thread failed: ${error.message}`)));
    this.#worker.on("exit", (code: number) => this.#fail(new Error(`signer thread exited (code ${code})`)));
  }

  /** Signs one attestation in the worker. Rejects once the thread has failed or was closed. */
  sign(request: NodeSignRequest): Promise<NodeSignResult> {
    if (this.#failure !== null) return Promise.reject(this.#failure);
    const id = this.#nextId;
    this.#nextId += 1;
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
        hardwareSignature: request.hardwareSignature,
        accuracy: request.accuracy,
        nodeTimestampNs: request.nodeTimestampNs,
      });
    });
  }

  /** The secp256k1 backend the worker signs with; null until `ready`. */
  get backend(): Secp256k1Backend | null {
    return this.#backend;
  }

  /** Pending sign requests (tests). */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /** Terminates the thread (asynchronously; the returned promise resolves when it has exited). Idempotent. */
  close(): Promise<void> {
    this.#onFailure = null;
    this.#fail(new Error("signer thread closed"));
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
