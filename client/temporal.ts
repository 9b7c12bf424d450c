/**
 * The temporal client (`createTemporalClient({ url })`): the JSON-RPC methods of a node's temporal gateway
 * (docs/protocol.md §9.5), typed.
 *
 * - Lossless: answers are parsed with lossless-json, and no nanosecond value passes through a float: decimal
 *   strings and integers beyond 2^53 (the gateway's legacy mode) both become bigints.
 * - Hashes are checked (32 bytes, 0x-hex) before anything is sent.
 * - Each call has a timeout; a transport failure, HTTP 5xx, -32005 (rate limit) or -32000 (upstream) is retried
 *   with exponential backoff, a bounded number of times.
 * - Chain identity: with `expected`, the first call checks the endpoint's `eth_chainId` and genesis hash
 *   (`chain_getBlockHash(0)`) against the network manifest's, never trusting a DNS name or certificate alone; a
 *   mismatch throws, naming both values, and every later call throws the same.
 * - Degraded, typed: `getConsensusTime` answers `{ ok: false, degraded }` when the mesh is not Converged, has fewer
 *   peers than `minPeers` or a quality below `minTimeQuality`, with the state it saw.
 */
import { isLosslessNumber, parse } from "lossless-json";
import { ProtocolError, UnavailableError, ValidationError } from "../protocol/errors";
import type { Hex } from "../protocol/types";

export interface TemporalClientOptions {
  /** The gateway's URL (http or https). */
  url: string;
  /** Per request, ms (default 10,000). */
  timeoutMs?: number;
  /** Retries of a retryable failure (default 3), after 100 ms, 200 ms, 400 ms, … */
  retries?: number;
  /** The network manifest's identity of the chain behind the gateway. */
  expected?: { chainId: number; genesisHash: Hex };
  /** getConsensusTime degrades below these (defaults: Converged required, 0 peers, quality 0). */
  requireConverged?: boolean;
  minPeers?: number;
  minTimeQuality?: number;
}

export interface ConsensusTimeState {
  consensusTimeNs: bigint;
  timeQuality: number;
  convergenceState: string;
  peerCount: number;
  consensusOffsetNs: bigint | null;
}

export type ConsensusTimeResult =
  | ({ ok: true } & ConsensusTimeState)
  | { ok: false; degraded: "not-converged" | "too-few-peers" | "low-quality"; state: ConsensusTimeState };

export interface BlockTransactionTimestamp {
  nativeHash: Hex;
  ethHash: Hex;
  extrinsicIndex: number;
  timestampNs: bigint;
}

export interface FinalizedBlock {
  blockNumber: bigint;
  transactions: readonly BlockTransactionTimestamp[];
  /** A transaction's timestamp by either of its hashes; undefined when not in this block. */
  timestampOf(hash: Hex): bigint | undefined;
}

export interface TemporalClient {
  call(method: string, params?: readonly unknown[]): Promise<unknown>;
  verifyChainIdentity(): Promise<void>;
  getConsensusTime(): Promise<ConsensusTimeResult>;
  getTransactionTimestamp(hash: Hex): Promise<bigint | null>;
  getWatermarkInfo(): Promise<{ watermarkNs: bigint | null; watermarkBlock: bigint | null; latestProcessedBlock: bigint | null }>;
  getBlockTransactionTimestamps(blockNumber: bigint): Promise<BlockTransactionTimestamp[] | null>;
  /**
   * Follows finalized blocks from `fromBlock`: each one's transaction timestamps, in order, once, until `signal`
   * aborts. Polls `chain_getFinalizedHead` every `pollMs` (default 500).
   */
  followFinalized(fromBlock: bigint, onBlock: (block: FinalizedBlock) => void | Promise<void>, options: { signal: AbortSignal; pollMs?: number }): Promise<void>;
}

const HASH = /^0x[0-9a-fA-F]{64}$/;
const RETRYABLE_CODES = new Set([-32005, -32000]);

/** A 32-byte hash, checked before sending. */
export function assertHash(hash: unknown, field = "hash"): Hex {
  if (typeof hash !== "string" || !HASH.test(hash)) {
    const bytes = typeof hash === "string" && /^0x[0-9a-fA-F]*$/.test(hash) ? `${(hash.length - 2) / 2} bytes` : "not 0x-hex";
    throw new ValidationError(field, `must be 32 bytes of 0x-hex, got ${bytes}`);
  }
  return hash.toLowerCase() as Hex;
}

/** Parses an answer: safe integers stay numbers; larger integers become bigints (never a float). */
export function parseLossless(text: string): unknown {
  return parse(text, undefined, (value: string) => {
    if (/^-?\d+$/.test(value)) {
      const asNumber = Number(value);
      return Number.isSafeInteger(asNumber) ? asNumber : BigInt(value);
    }
    return Number(value); // a fraction: the gateway never sends one for a time value
  });
}

function toNs(value: unknown, field: string): bigint | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  if (typeof value === "string" && /^-?(0|[1-9][0-9]*)$/.test(value)) return BigInt(value);
  if (isLosslessNumber(value)) return BigInt(value.toString());
  throw new ProtocolError(`the gateway answered a malformed ${field}: ${String(value)}`);
}

class RetryableError extends Error {}

export function createTemporalClient(options: TemporalClientOptions): TemporalClient {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const retries = options.retries ?? 3;
  let nextId = 1;
  let identity: Promise<void> | undefined;

  async function once(method: string, params: readonly unknown[]): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(options.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value)),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new RetryableError(`${options.url}: ${(error as Error).message}`);
    }
    const text = await response.text();
    if (response.status >= 500) throw new RetryableError(`${options.url}: HTTP ${response.status}`);
    let answer: { result?: unknown; error?: { code: number; message: string; data?: unknown } };
    try {
      answer = parseLossless(text) as typeof answer;
    } catch {
      throw new ProtocolError(`${options.url}: not a JSON-RPC answer (HTTP ${response.status})`);
    }
    if (answer.error !== undefined) {
      const detail = `${method}: ${answer.error.code} ${answer.error.message}${answer.error.data === undefined ? "" : ` (${String(answer.error.data)})`}`;
      if (RETRYABLE_CODES.has(answer.error.code)) throw new RetryableError(detail);
      if (answer.error.code === -32602) throw new ValidationError("params", detail);
      throw new ProtocolError(detail, { code: answer.error.code });
    }
    return answer.result ?? null;
  }

  async function raw(method: string, params: readonly unknown[] = []): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await once(method, params);
      } catch (error) {
        if (!(error instanceof RetryableError)) throw error;
        if (attempt >= retries) throw new UnavailableError(`${error.message} (after ${attempt + 1} attempts)`);
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      }
    }
  }

  async function checkIdentity(): Promise<void> {
    const expected = options.expected;
    if (expected === undefined) return;
    const chainId = Number(BigInt((await raw("eth_chainId")) as string));
    if (chainId !== expected.chainId) throw new ProtocolError(`${options.url} serves chain id ${chainId}, the manifest says ${expected.chainId}`);
    const genesis = String(await raw("chain_getBlockHash", [0])).toLowerCase();
    if (genesis !== expected.genesisHash.toLowerCase()) throw new ProtocolError(`${options.url} has genesis ${genesis}, the manifest says ${expected.genesisHash}`);
  }

  async function call(method: string, params: readonly unknown[] = []): Promise<unknown> {
    identity ??= checkIdentity();
    await identity; // a mismatch rejects every call, with the same evidence
    return raw(method, params);
  }

  async function getBlockTransactionTimestamps(blockNumber: bigint): Promise<BlockTransactionTimestamp[] | null> {
    const rows = (await call("temporal_getBlockTransactionTimestamps", [`0x${blockNumber.toString(16)}`])) as
      | { nativeHash: Hex; ethHash: Hex; extrinsicIndex: number; timestampNs: unknown }[]
      | null;
    return rows === null ? null : rows.map((row) => ({ nativeHash: assertHash(row.nativeHash), ethHash: assertHash(row.ethHash), extrinsicIndex: row.extrinsicIndex, timestampNs: toNs(row.timestampNs, "timestampNs")! }));
  }

  async function getWatermarkInfo() {
    const answer = (await call("temporal_getWatermarkInfo")) as Record<string, unknown>;
    return {
      watermarkNs: toNs(answer.watermarkNs, "watermarkNs"),
      watermarkBlock: toNs(answer.watermarkBlock, "watermarkBlock"),
      latestProcessedBlock: toNs(answer.latestProcessedBlock, "latestProcessedBlock"),
    };
  }

  return {
    call,
    verifyChainIdentity: async () => {
      identity ??= checkIdentity();
      await identity;
    },

    async getConsensusTime() {
      const answer = (await call("temporal_getConsensusTime")) as Record<string, unknown>;
      const state: ConsensusTimeState = {
        consensusTimeNs: toNs(answer.consensusTimeNs, "consensusTimeNs")!,
        timeQuality: Number(answer.timeQuality),
        convergenceState: String(answer.convergenceState),
        peerCount: Number(answer.peerCount),
        consensusOffsetNs: toNs(answer.consensusOffsetNs, "consensusOffsetNs"),
      };
      if ((options.requireConverged ?? true) && state.convergenceState !== "Converged") return { ok: false, degraded: "not-converged", state };
      if (state.peerCount < (options.minPeers ?? 0)) return { ok: false, degraded: "too-few-peers", state };
      if (state.timeQuality < (options.minTimeQuality ?? 0)) return { ok: false, degraded: "low-quality", state };
      return { ok: true, ...state };
    },

    async getTransactionTimestamp(hash) {
      return toNs(await call("temporal_getTransactionTimestamp", [assertHash(hash)]), "timestamp");
    },

    getWatermarkInfo,

    getBlockTransactionTimestamps,

    async followFinalized(fromBlock, onBlock, { signal, pollMs = 500 }) {
      let next = fromBlock;
      while (!signal.aborted) {
        const head = (await call("chain_getFinalizedHead")) as Hex | null;
        const finalized = head === null ? -1n : BigInt(((await call("eth_getBlockByHash", [head, false])) as { number: string }).number);
        // Only what the gateway has processed: a final block it has not reached yet is not "no transactions".
        const processed = (await getWatermarkInfo()).latestProcessedBlock ?? -1n;
        const until = finalized < processed ? finalized : processed;
        for (; next <= until && !signal.aborted; next++) {
          const transactions = (await getBlockTransactionTimestamps(next)) ?? [];
          const byHash = new Map<string, bigint>();
          for (const tx of transactions) {
            byHash.set(tx.nativeHash.toLowerCase(), tx.timestampNs);
            byHash.set(tx.ethHash.toLowerCase(), tx.timestampNs);
          }
          await onBlock({ blockNumber: next, transactions, timestampOf: (hash) => byHash.get(hash.toLowerCase()) });
        }
        await new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            signal.removeEventListener("abort", wake);
            resolve();
          };
          const timer = setTimeout(wake, pollMs);
          signal.addEventListener("abort", wake, { once: true });
        });
      }
    },
  };
}
