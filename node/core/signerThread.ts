/**
 * The body of the node-key signer thread (started by node/core/signerWorker.ts, never imported by other code): it
 * signs TimeAttestations with protocol/sign.ts itself (EIP-712 digest from protocol/codec.ts, RFC 6979 low-S
 * secp256k1, EIP-2098 packing), so the worker computes exactly what the main thread would, from the same source.
 *
 * protocol/secp256k1.ts and protocol/keccak.ts load their native addons here as in the main thread, behind the
 * native-call gate the parent passes in workerData (protocol/nativeCallGate.ts: a thread terminated inside an
 * addon call would abort the whole process); without a gate they fall back to pure JS.
 *
 * The thread takes the name it is given (SIGNER_THREAD_NAME) where the OS allows it (Linux: /proc/thread-self/comm),
 * so `top -H` and `ps -L` show it and a benchmark can give it a core of its own (scripts/bench-node.ts).
 *
 * Detail: docs/node.md "Signing, transports and limits".
 */
import { writeFileSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { bytesToHexString } from "../../protocol/bytes";
import { timeAttestationForProof } from "../../protocol/codec";
import { SECP256K1_BACKEND } from "../../protocol/secp256k1";
import { clockFromAnchor, type WallClockAnchor } from "../card/hostClock";
import { p256PrivateKeyObject } from "../../protocol/keys";
import { signHardware, signNodeEntryWithDigest } from "../../protocol/sign";
import type { Hex } from "../../protocol/types";
import { nextFixedRateTick } from "./fixedRate";
import { ResultSlot, TickPermit } from "./signerResultSlot";

/*
 * Protocol (structured clone): workerData `{ nodePrivateKey: Uint8Array, cardPrivateKey?: Uint8Array,
 * nativeCallGate: SharedArrayBuffer, resultSlot: SharedArrayBuffer, threadName: string }` (32 bytes; 32 bytes, the
 * card's P-256 scalar when the card lets the thread sign: node/card/types.ts exportKeyForSignerThread; 4 bytes;
 * RESULT_SLOT_BYTES); each message `{ id, nanoMoment, hardwareSignature?, accuracy, nodeTimestampNs }` is answered
 * `{ id, entry, digest, hardwareSignature }` or `{ id, error }` (the error's text only: never a key). Without
 * `hardwareSignature` the thread signs the hardware message with the card key first (an error without one).
 * Once loaded it posts `{ ready: true, backend, signsHardware, ticks }`.
 * A signature is also written to the result slot (signerResultSlot.ts) before its reply is posted:
 * the parent can take it from there as soon as it is made, without waiting for its event loop to reach the reply.
 *
 * Self-ticking (workerData.ticks `{ intervalNs, accuracyNs, cardClock, nodeClock, permit }`, with the card key):
 * the thread makes the whole tick itself, on its own timer: it reads the card clock and the node clock (the same
 * host-clock anchors the serving thread's clocks follow: node/card/hostClock.ts; process.hrtime is one monotonic
 * clock for every thread), signs the moment with the card key and the attestation with the node key, and writes
 * the result to the slot, numbered by tick. It posts nothing per tick: the serving thread takes the newest result
 * from the slot when it serves a request or on its own check (node/core/attestor.ts). It signs only while the
 * permit (signerResultSlot.ts TickPermit) is granted: the serving thread grants it when the card's tamper state
 * and measured error allow signing and withdraws it when not. A tick that fails posts `{ tickError }` (the error's
 * text) once, and the thread stops ticking.
 */
/** What the parent posts (node/core/signerWorker.ts NodeSignRequest, plus the request id). */
interface SignMessage {
  id: number;
  nanoMoment: bigint;
  /** Absent: the thread's card key signs (workerData.cardPrivateKey). */
  hardwareSignature?: Hex;
  accuracy: number;
  nodeTimestampNs: bigint;
}

/** workerData.ticks: what a self-ticking thread needs (node/core/signerWorker.ts SelfTicking). */
interface TickSettings {
  intervalNs: bigint;
  accuracyNs: number;
  cardClock: WallClockAnchor;
  nodeClock: WallClockAnchor;
  permit: SharedArrayBuffer;
}

function isAnchor(value: unknown): value is WallClockAnchor {
  const anchor = value as Partial<WallClockAnchor> | null;
  return typeof anchor?.wallNs === "bigint" && typeof anchor.monotonicNs === "bigint" && typeof anchor.uncertaintyNs === "bigint";
}

/** workerData.ticks checked (null when absent): the thread refuses to load with a malformed one. */
function tickSettings(value: unknown): TickSettings | null {
  if (value === undefined) return null;
  const ticks = value as Partial<TickSettings> | null;
  if (
    typeof ticks?.intervalNs !== "bigint" ||
    ticks.intervalNs <= 0n ||
    !Number.isInteger(ticks.accuracyNs) ||
    !isAnchor(ticks.cardClock) ||
    !isAnchor(ticks.nodeClock) ||
    !(ticks.permit instanceof SharedArrayBuffer)
  ) {
    throw new Error("signer thread: workerData.ticks must be { intervalNs > 0, accuracyNs, cardClock, nodeClock, permit }");
  }
  return ticks as TickSettings;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Names this thread for `top -H` / `ps -L` (Linux); elsewhere, or when refused, it keeps the process's name. */
function nameThisThread(name: unknown): void {
  if (typeof name !== "string" || name === "") return;
  try {
    writeFileSync("/proc/thread-self/comm", name);
  } catch {
    // Not Linux, or /proc not mounted: only the name is lost.
  }
}

function run(): void {
  const port = parentPort;
  if (port === null) throw new Error("node/core/signerThread is the body of a worker thread: start it with node/core/signerWorker.ts");
  const data = workerData as { nodePrivateKey?: unknown; cardPrivateKey?: unknown; threadName?: unknown; resultSlot?: unknown } | null;
  if (!(data?.nodePrivateKey instanceof Uint8Array) || data.nodePrivateKey.length !== 32) {
    throw new Error("signer thread: workerData.nodePrivateKey must be 32 bytes");
  }
  const cardKeyBytes = data.cardPrivateKey;
  if (cardKeyBytes !== undefined && !(cardKeyBytes instanceof Uint8Array && cardKeyBytes.length === 32)) {
    throw new Error("signer thread: workerData.cardPrivateKey must be 32 bytes when given");
  }
  const cardKey = cardKeyBytes === undefined ? null : p256PrivateKeyObject(bytesToHexString(cardKeyBytes));
  cardKeyBytes?.fill(0); // the KeyObject is what signs from now on
  const resultSlot = new ResultSlot(data.resultSlot as SharedArrayBuffer); // checks the type and size
  const nodePrivateKey = bytesToHexString(data.nodePrivateKey);
  data.nodePrivateKey.fill(0); // the hex copy is what signs from now on
  nameThisThread(data.threadName);
  /**
   * The one signing sequence of this thread, for requests and ticks alike: the card's signature of the moment
   * (unless given), then the node timestamp (read after it, as the attestor does), then the node entry.
   */
  const signAttestation = (nanoMoment: bigint, givenHardwareSignature: Hex | undefined, accuracy: number, nodeTimestampNs: () => bigint) => {
    let hardwareSignature = givenHardwareSignature;
    if (hardwareSignature === undefined) {
      if (cardKey === null) throw new Error("no hardwareSignature given, and this thread holds no card key");
      hardwareSignature = signHardware(cardKey, nanoMoment);
    }
    const timestampNs = nodeTimestampNs();
    const { entry, digest } = signNodeEntryWithDigest(nodePrivateKey, timeAttestationForProof({ nanoMoment, hardwareSignature, accuracy }, timestampNs));
    return { entry, digest, hardwareSignature, nodeTimestampNs: timestampNs };
  };
  port.on("message", (request: SignMessage) => {
    try {
      const startedNs = process.hrtime.bigint();
      const { entry, digest, hardwareSignature } = signAttestation(request.nanoMoment, request.hardwareSignature, request.accuracy, () => request.nodeTimestampNs);
      const signDurationNs = process.hrtime.bigint() - startedNs;
      const { nanoMoment, nodeTimestampNs } = request;
      // Twice on purpose: the slot lets a proof request being served take the signature at once (collect()), a
      // turn or more before this message is read; the message delivers it when no request comes, and when a later
      // reply overwrote the slot (it holds one record) before anyone looked. Whichever arrives first resolves it.
      resultSlot.write({ kind: "reply", id: request.id, permitEpoch: 0, nanoMoment, nodeTimestampNs, signDurationNs, entry, digest, hardwareSignature });
      port.postMessage({ id: request.id, entry, digest, hardwareSignature });
    } catch (error) {
      port.postMessage({ id: request.id, error: errorText(error) });
    }
  });
  const ticks = tickSettings((data as { ticks?: unknown }).ticks);
  if (ticks !== null) {
    if (cardKey === null) throw new Error("signer thread: self-ticking needs the card key (workerData.cardPrivateKey)");
    const cardNowNs = clockFromAnchor(ticks.cardClock);
    const nodeNowNs = clockFromAnchor(ticks.nodeClock);
    let lastMomentNs = 0n;
    const tickOnce = (tick: number, permitEpoch: number) => {
      const startedNs = process.hrtime.bigint();
      const readNs = cardNowNs();
      const nanoMoment = readNs > lastMomentNs ? readNs : lastMomentNs; // the card clock never goes back (node/card/types.ts)
      lastMomentNs = nanoMoment;
      const signed = signAttestation(nanoMoment, undefined, ticks.accuracyNs, nodeNowNs);
      resultSlot.write({ kind: "tick", id: tick, permitEpoch, nanoMoment, signDurationNs: process.hrtime.bigint() - startedNs, ...signed });
    };
    const onError = (error: unknown) => port.postMessage({ tickError: errorText(error) });
    runTicks(ticks.intervalNs, new TickPermit(ticks.permit), tickOnce, onError);
  }
  port.postMessage({ ready: true, backend: SECP256K1_BACKEND, signsHardware: cardKey !== null, ticks: ticks !== null });
}

/**
 * Calls `tickOnce(n, epoch)` (n = 1, 2, … as an int32, wrapping; epoch: the permit's, read just before) every
 * `intervalNs` while the permit is granted, on the attestor's fixed-rate schedule (fixedRate.ts). The first error
 * stops the ticks and goes to `onError`.
 */
function runTicks(intervalNs: bigint, permit: TickPermit, tickOnce: (tick: number, permitEpoch: number) => void, onError: (error: unknown) => void): void {
  let tick = 0;
  let dueNs = process.hrtime.bigint();
  const loop = () => {
    const permitEpoch = permit.epoch;
    if (permitEpoch !== 0) {
      tick = tick >= 0x7fffffff ? 1 : tick + 1;
      try {
        tickOnce(tick, permitEpoch);
      } catch (error) {
        onError(error);
        return;
      }
    }
    const next = nextFixedRateTick(dueNs, intervalNs, process.hrtime.bigint());
    dueNs = next.dueNs;
    setTimeout(loop, next.delayMs);
  };
  loop();
}

run();
