/**
 * The temporal gateway's methods (docs/protocol.md §9.5): the temporal ones, read from the node (consensus time,
 * mesh state) and from its store (canonical transaction timestamps, blocks, the watermark); a few chain ones; and
 * `eth_*` forwarded upstream from an allow-list only. Anything that would carry keys, sign or administer is
 * refused with -32601 "Method not allowed". Nanoseconds are decimal strings; `null` means unknown, never zero.
 */
import { LosslessNumber } from "lossless-json";
import type { MeshStateReport } from "../wire/meshState";
import type { Hex } from "../protocol/types";
import { JSON_RPC_ERRORS, JsonRpcError } from "./jsonrpc";
import { finalizedNumber, withFinalityTags } from "./finality";
import type { BlockRecord, TemporalStore } from "./store";

/** The node as the gateway reads it. */
export interface TemporalTimeSource {
  /** Consensus time now (this node's clock + the mesh's last median offset), ns; a lone node: its own clock. */
  consensusNowNs(): bigint;
  meshState(): MeshStateReport;
}

/** The chain behind the gateway: raw JSON-RPC calls (results as the chain gave them). */
export interface Upstream {
  /** `signal`: the caller gives up (a batch's time budget ran out); the call is abandoned with -32000. */
  call(method: string, params: readonly unknown[], signal?: AbortSignal): Promise<unknown>;
}

export interface PublishedLimits {
  maxBodyBytes: number;
  maxBatchItems: number;
  /** Time budget of one batch, ms: an item not answered by then gets -32002 (Request timed out). */
  maxBatchMs: number;
  maxResponseBytes: number;
  requestsPerSecondPerClient: number;
  maxConnections: number;
}

export interface MethodContext {
  store: TemporalStore;
  upstream: Upstream;
  time: TemporalTimeSource;
  limits: PublishedLimits;
  /** Blocks on top of a block before it counts as final here. */
  confirmations: number;
  chainName: string;
  /** Legacy mode: temporal_getWatermarkInfo and temporal_getBlockMetadata give ns as bare JSON integers. */
  legacyNumbers: boolean;
}

type Method = (params: readonly unknown[] | Record<string, unknown>, ctx: MethodContext) => Promise<unknown>;

/** Forwarded to the chain unchanged: reads, and eth_sendRawTransaction (timestamped, below). */
export const FORWARDED_METHODS = new Set([
  "eth_blockNumber",
  "eth_call",
  "eth_chainId",
  "eth_estimateGas",
  "eth_feeHistory",
  "eth_gasPrice",
  "eth_getBalance",
  "eth_getBlockByHash",
  "eth_getBlockByNumber",
  "eth_getBlockTransactionCountByNumber",
  "eth_getCode",
  "eth_getLogs",
  "eth_getStorageAt",
  "eth_getTransactionByHash",
  "eth_getTransactionCount",
  "eth_getTransactionReceipt",
  "eth_maxPriorityFeePerGas",
  "eth_syncing",
  "net_version",
  "web3_clientVersion",
]);

/** Served over WebSocket only (./ws.ts). */
export const SUBSCRIPTION_METHODS: ReadonlySet<string> = new Set(["eth_subscribe", "eth_unsubscribe", "chain_subscribeFinalizedHeads", "chain_unsubscribeFinalizedHeads"]);

/** Method families that carry keys, sign or administer: refused by name, whatever the chain would do. */
const UNSAFE = /^(eth_sign|eth_signTransaction|eth_signTypedData.*|eth_sendTransaction|eth_accounts|eth_coinbase|personal_.*|admin_.*|debug_.*|miner_.*|txpool_.*|evm_.*|hardhat_.*|anvil_.*|engine_.*|clique_.*)$/;

const HASH = /^0x[0-9a-fA-F]{64}$/;
const NS_PER_MS = 1_000_000n;

function invalidParams(message: string): JsonRpcError {
  return new JsonRpcError(JSON_RPC_ERRORS.INVALID_PARAMS, "Invalid params", message);
}

function positional(params: readonly unknown[] | Record<string, unknown>, min: number, max: number): readonly unknown[] {
  if (!Array.isArray(params)) throw invalidParams("params must be an array");
  if (params.length < min || params.length > max) throw invalidParams(`expected ${min === max ? min : `${min} to ${max}`} params, got ${params.length}`);
  return params;
}

/** A 32-byte hash, 0x-hex; anything else names what it got. */
export function hashParam(value: unknown, name = "hash"): Hex {
  if (typeof value !== "string" || !/^0x[0-9a-fA-F]*$/.test(value)) throw invalidParams(`${name} must be 0x-prefixed hex`);
  if (value.length % 2 !== 0) throw invalidParams(`${name} has an odd number of hex digits`);
  if (!HASH.test(value)) throw invalidParams(`${name} must be 32 bytes, got ${(value.length - 2) / 2}`);
  return value.toLowerCase() as Hex;
}

/** A block number: 0x-hex quantity, decimal string or safe non-negative integer. */
export function blockNumberParam(value: unknown): bigint {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === "string" && /^0x(0|[1-9a-fA-F][0-9a-fA-F]{0,15})$/.test(value)) return BigInt(value);
  if (typeof value === "string" && /^(0|[1-9][0-9]{0,18})$/.test(value)) return BigInt(value);
  throw invalidParams("block number must be a hex quantity (0x…), a decimal string or a non-negative safe integer");
}

function ns(value: bigint | null): string | null {
  return value === null ? null : value.toString();
}

/** A ns value as the legacy mode emits it (a bare JSON integer, beyond 2^53 included) or as a decimal string. */
function nsOut(value: bigint | null, legacy: boolean): string | LosslessNumber | null {
  if (value === null) return null;
  return legacy ? new LosslessNumber(value.toString()) : value.toString();
}

function blockMetadata(block: BlockRecord, legacy: boolean): Record<string, unknown> {
  return {
    number: block.number.toString(),
    hash: block.hash,
    parentHash: block.parentHash,
    observedAtNs: nsOut(block.observedAtNs, legacy),
    transactionCount: block.transactionCount,
    maxTimestampNs: nsOut(block.maxTimestampNs, legacy),
  };
}

export const METHODS: Readonly<Record<string, Method>> = {
  async temporal_getConsensusTime(params, ctx) {
    positional(params, 0, 0);
    const state = ctx.time.meshState();
    return {
      consensusTimeNs: ctx.time.consensusNowNs().toString(),
      timeQuality: state.timeQuality,
      convergenceState: state.convergenceState,
      peerCount: state.peerCount,
      consensusOffsetNs: state.consensusOffsetNs,
    };
  },

  async temporal_getMeshState(params, ctx) {
    positional(params, 0, 0);
    return ctx.time.meshState();
  },

  async temporal_getWatermarkInfo(params, ctx) {
    positional(params, 0, 0);
    const watermark = ctx.store.watermark();
    const latest = ctx.store.latestBlock();
    return {
      watermarkNs: nsOut(watermark?.watermarkNs ?? null, ctx.legacyNumbers),
      watermarkBlock: watermark === null ? null : watermark.blockNumber.toString(),
      latestProcessedBlock: latest === undefined ? null : latest.number.toString(),
      latestProcessedAtNs: nsOut(latest?.observedAtNs ?? null, ctx.legacyNumbers),
    };
  },

  async temporal_getTransactionTimestamp(params, ctx) {
    const [hash] = positional(params, 1, 1);
    return ns(ctx.store.transaction(hashParam(hash))?.timestampNs ?? null);
  },

  async temporal_getBlockMetadata(params, ctx) {
    const [number] = positional(params, 1, 1);
    const block = ctx.store.block(blockNumberParam(number));
    return block === undefined ? null : blockMetadata(block, ctx.legacyNumbers);
  },

  async temporal_getBlockTransactionTimestamps(params, ctx) {
    const [raw] = positional(params, 1, 1);
    const number = blockNumberParam(raw);
    const finalized = finalizedNumber(ctx.store, ctx.confirmations);
    if (number > finalized) throw invalidParams(`block ${number} is not final yet (final up to ${finalized}, ${ctx.confirmations} confirmations)`);
    if (ctx.store.block(number) === undefined) return null; // before the gateway started following the chain
    // On an EVM chain the native hash is the Ethereum hash and the extrinsic index the transaction index.
    return ctx.store.blockTransactions(number).map((tx) => ({ nativeHash: tx.hash, ethHash: tx.hash, extrinsicIndex: tx.txIndex, timestampNs: tx.timestampNs.toString() }));
  },

  async temporal_getQueueStats(params, ctx) {
    positional(params, 0, 0);
    const nowNs = ctx.time.consensusNowNs();
    const pending = ctx.store.pendingReceived(1_000);
    const oldest = pending.reduce<bigint | null>((min, tx) => (min === null || tx.timestampNs < min ? tx.timestampNs : min), null);
    return {
      scope: "node-local: transactions received by this gateway and not yet seen in a block",
      pending: ctx.store.countPendingReceived(),
      oldestPendingAgeNs: oldest === null ? null : (nowNs - oldest).toString(),
      highestMaxFeePerGasWei: pending[0]?.maxFeePerGasWei?.toString() ?? null,
    };
  },

  /**
   * "Included" means what eth_getTransactionReceipt says: the chain has a receipt for it. The gateway's own record
   * lags the chain by up to a poll interval, so a transaction it has not yet seen in a block is looked up upstream,
   * and one with a receipt is included from that moment (its wait ends there, or when the gateway observed its block,
   * whichever came first).
   */
  async temporal_getTransactionWaitTime(params, ctx) {
    const [raw] = positional(params, 1, 1);
    const hash = hashParam(raw);
    let tx = ctx.store.transaction(hash);
    if (tx === undefined || tx.source !== "received") return null; // only a received transaction has a known arrival
    if (tx.includedAtNs === null) {
      const nowNs = ctx.time.consensusNowNs();
      const receipt = (await ctx.upstream.call("eth_getTransactionReceipt", [hash])) as { blockNumber?: unknown; transactionIndex?: unknown } | null;
      if (receipt === null || typeof receipt.blockNumber !== "string" || typeof receipt.transactionIndex !== "string") {
        return { included: false, waitNs: (nowNs - tx.timestampNs).toString() };
      }
      ctx.store.markIncluded(hash, BigInt(receipt.blockNumber), Number(BigInt(receipt.transactionIndex)), nowNs);
      tx = ctx.store.transaction(hash)!;
    }
    return { included: true, waitNs: (tx.includedAtNs! - tx.timestampNs).toString() };
  },

  async temporal_getRecentWaitTimes(params, ctx) {
    const [limit] = positional(params, 0, 1);
    const count = limit === undefined ? 20 : Number(limit);
    if (!Number.isSafeInteger(count) || count < 1 || count > 100) throw invalidParams("limit must be an integer from 1 to 100");
    return ctx.store.recentIncludedReceived(count).map((tx) => ({ hash: tx.hash, waitNs: (tx.includedAtNs! - tx.timestampNs).toString() }));
  },

  async temporal_getValidatorTimeQuality(params, ctx) {
    positional(params, 0, 0);
    const state = ctx.time.meshState();
    // An EVM chain behind this gateway has no validator time to report: this node's quality, and its peers' reach.
    return {
      scope: "node-local: this attesting node and its mesh peers, not the chain's validators",
      timeQuality: state.timeQuality,
      peers: state.peers.map((peer) => ({ nodeId: peer.nodeId, reachable: peer.reachable, offsetNs: peer.offsetNs, excluded: peer.excluded })),
    };
  },

  async temporal_getLimits(params, ctx) {
    positional(params, 0, 0);
    return {
      ...ctx.limits,
      rateLimitErrorCode: JSON_RPC_ERRORS.RATE_LIMITED,
      responseTooLargeErrorCode: JSON_RPC_ERRORS.RESPONSE_TOO_LARGE,
      requestTimedOutErrorCode: JSON_RPC_ERRORS.REQUEST_TIMED_OUT,
    };
  },

  async system_health(params, ctx) {
    positional(params, 0, 0);
    const state = ctx.time.meshState();
    const syncing = await ctx.upstream.call("eth_syncing", []);
    return { peers: state.peerCount, isSyncing: syncing !== false, shouldHavePeers: state.members > 1 };
  },

  async system_chain(params, ctx) {
    positional(params, 0, 0);
    return ctx.chainName;
  },

  async chain_getBlockHash(params, ctx) {
    const [raw] = positional(params, 0, 1);
    const tag = raw === undefined ? "latest" : `0x${blockNumberParam(raw).toString(16)}`;
    const block = (await ctx.upstream.call("eth_getBlockByNumber", [tag, false])) as { hash?: string } | null;
    return block?.hash ?? null;
  },

  async chain_getFinalizedHead(params, ctx) {
    positional(params, 0, 0);
    const finalized = finalizedNumber(ctx.store, ctx.confirmations);
    if (finalized < 0n) return null;
    const recorded = ctx.store.block(finalized);
    if (recorded !== undefined) return recorded.hash;
    // Final, but before this gateway's history (it follows the chain from where it started).
    const block = (await ctx.upstream.call("eth_getBlockByNumber", [`0x${finalized.toString(16)}`, false])) as { hash?: string } | null;
    return block?.hash ?? null;
  },

  /** Forwarded; its canonical timestamp is consensus time at arrival (recorded once the chain accepted it). */
  async eth_sendRawTransaction(params, ctx) {
    const [raw] = positional(params, 1, 1);
    if (typeof raw !== "string" || !/^0x([0-9a-fA-F]{2})+$/.test(raw) || raw.length > 2 + 2 * 128 * 1024) {
      throw invalidParams("a signed transaction as 0x-hex (at most 128 KiB)");
    }
    const receivedAtNs = ctx.time.consensusNowNs();
    const hash = hashParam(await ctx.upstream.call("eth_sendRawTransaction", [raw]), "result");
    ctx.store.recordReceived(hash, receivedAtNs, maxFeeOf(raw as Hex));
    return hash;
  },
};

/** The max fee per gas a signed transaction offers (for the local fee-priority queue); null when it cannot tell. */
function maxFeeOf(raw: Hex): bigint | null {
  try {
    // Imported lazily: parseTransaction pulls in RLP decoding only for this method.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { parseTransaction } = require("viem") as typeof import("viem");
    const tx = parseTransaction(raw);
    return tx.maxFeePerGas ?? tx.gasPrice ?? null;
  } catch {
    return null;
  }
}

/** The method a call names: a temporal or chain one, a forwarded one, or the refusal it earns. */
export function resolveMethod(name: string): Method {
  const own = Object.prototype.hasOwnProperty.call(METHODS, name) ? METHODS[name] : undefined;
  if (own !== undefined) return own;
  if (FORWARDED_METHODS.has(name)) {
    return (params, ctx) => ctx.upstream.call(name, withFinalityTags(name, Array.isArray(params) ? params : [params], ctx.store, ctx.confirmations));
  }
  if (SUBSCRIPTION_METHODS.has(name)) {
    // geth's answer over HTTP, with the way to get them.
    throw new JsonRpcError(JSON_RPC_ERRORS.METHOD_NOT_FOUND, "notifications not supported", `${name} needs a WebSocket connection: ws:// on this same port`);
  }
  if (UNSAFE.test(name)) throw new JsonRpcError(JSON_RPC_ERRORS.METHOD_NOT_FOUND, "Method not allowed", `${name} would carry keys, sign or administer: never served`);
  throw new JsonRpcError(JSON_RPC_ERRORS.METHOD_NOT_FOUND, "Method not found", `${name} is neither a temporal method nor an allowed eth_* method (temporal_getLimits lists the limits)`);
}

export { NS_PER_MS };
