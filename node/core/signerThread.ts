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
 * Protocol (structured clone): workerData `{ nodePrivateKey: Uint8Array, cardPrivateKey?: Uint8Array,
 * nativeCallGate: SharedArrayBuffer, resultSlot: SharedArrayBuffer, threadName: string }` (32 bytes; 32 bytes, the
 * card's P-256 scalar when the card lets the thread sign: node/card/types.ts exportKeyForSignerThread; 4 bytes;
 * RESULT_SLOT_BYTES); each message `{ id, nanoMoment, hardwareSignature?, accuracy, nodeTimestampNs }` is answered
 * `{ id, entry, digest, hardwareSignature }` or `{ id, error }` (the error's text only: never a key). Without
 * `hardwareSignature` the thread signs the hardware message with the card key first (an error without one).
 * Once loaded it posts `{ ready: true, backend, signsHardware }`.
 * A signature is also written to the result slot (signerResultSlot.ts) before its reply is posted:
 * the parent can take it from there as soon as it is made, without waiting for its event loop to reach the reply.
 */
import { writeFileSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { bytesToHexString } from "../../protocol/bytes";
import { timeAttestationForProof } from "../../protocol/codec";
import { SECP256K1_BACKEND } from "../../protocol/secp256k1";
import { p256PrivateKeyObject } from "../../protocol/keys";
import { signHardware, signNodeEntryWithDigest } from "../../protocol/sign";
import type { Hex } from "../../protocol/types";
import { ResultSlot } from "./signerResultSlot";

/** What the parent posts (node/core/signerWorker.ts NodeSignRequest, plus the request id). */
interface SignMessage {
  id: number;
  nanoMoment: bigint;
  /** Absent: the thread's card key signs (workerData.cardPrivateKey). */
  hardwareSignature?: Hex;
  accuracy: number;
  nodeTimestampNs: bigint;
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
  port.on("message", (request: SignMessage) => {
    try {
      let hardwareSignature = request.hardwareSignature;
      if (hardwareSignature === undefined) {
        if (cardKey === null) throw new Error("no hardwareSignature given, and this thread holds no card key");
        hardwareSignature = signHardware(cardKey, request.nanoMoment);
      }
      const att = timeAttestationForProof({ ...request, hardwareSignature }, request.nodeTimestampNs);
      const { entry, digest } = signNodeEntryWithDigest(nodePrivateKey, att);
      const result = { entry, digest, hardwareSignature };
      resultSlot.write(request.id, result);
      port.postMessage({ id: request.id, ...result });
    } catch (error) {
      port.postMessage({ id: request.id, error: errorText(error) });
    }
  });
  port.postMessage({ ready: true, backend: SECP256K1_BACKEND, signsHardware: cardKey !== null });
}

run();
