/**
 * The body of the node-key signer thread (started by node/core/signerWorker.ts, never imported by other code): it
 * signs TimeAttestations with protocol/sign.ts itself (EIP-712 digest from protocol/codec.ts, RFC 6979 low-S
 * secp256k1, EIP-2098 packing), so the worker computes exactly what the main thread would, from the same source.
 *
 * In a worker thread protocol/secp256k1.ts signs with pure-JS @noble/curves and protocol/keccak.ts hashes with
 * @noble/hashes: their native addons are loaded in the main thread only (protocol/nativeAddon.ts), because a
 * worker that loaded libsecp256k1's addon can abort the whole process when it is terminated ("terminate called
 * after throwing an instance of 'Napi::Error'", seen in the test suite). With libsecp256k1 the main thread signs
 * ticks itself (~0.1 ms), and this thread is only used when signing is slow pure JS (attestor.ts).
 *
 * Protocol (structured clone): workerData `{ nodePrivateKey: Uint8Array }` (32 bytes); each message
 * `{ id, nanoMoment, hardwareSignature, accuracy, nodeTimestampNs }` is answered `{ id, entry, digest }` or
 * `{ id, error }` (the error's text only: never the key). Once loaded it posts `{ ready: true, backend }`.
 */
import { parentPort, workerData } from "node:worker_threads";
import { bytesToHexString } from "../../protocol/bytes";
import { timeAttestationForProof } from "../../protocol/codec";
import { SECP256K1_BACKEND } from "../../protocol/secp256k1";
import { signNodeEntryWithDigest } from "../../protocol/sign";
import type { Hex } from "../../protocol/types";

/** What the parent posts (node/core/signerWorker.ts NodeSignRequest, plus the request id). */
interface SignMessage {
  id: number;
  nanoMoment: bigint;
  hardwareSignature: Hex;
  accuracy: number;
  nodeTimestampNs: bigint;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function run(): void {
  const port = parentPort;
  if (port === null) throw new Error("node/core/signerThread is the body of a worker thread: start it with node/core/signerWorker.ts");
  const data = workerData as { nodePrivateKey?: unknown } | null;
  if (!(data?.nodePrivateKey instanceof Uint8Array) || data.nodePrivateKey.length !== 32) {
    throw new Error("signer thread: workerData.nodePrivateKey must be 32 bytes");
  }
  const nodePrivateKey = bytesToHexString(data.nodePrivateKey);
  data.nodePrivateKey.fill(0); // the hex copy is what signs from now on
  port.on("message", (request: SignMessage) => {
    try {
      const att = timeAttestationForProof(request, request.nodeTimestampNs);
      const { entry, digest } = signNodeEntryWithDigest(nodePrivateKey, att);
      port.postMessage({ id: request.id, entry, digest });
    } catch (error) {
      port.postMessage({ id: request.id, error: errorText(error) });
    }
  });
  port.postMessage({ ready: true, backend: SECP256K1_BACKEND });
}

run();
