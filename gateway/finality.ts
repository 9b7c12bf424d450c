/**
 * The gateway's one meaning of "final" (docs/protocol.md §9.5): a block is final once `confirmations` blocks lie on
 * top of it in the chain as the gateway has observed and recorded it (./observer.ts, ./store.ts). Every view
 * derives from this one number: `chain_getFinalizedHead`, the finalized-heads and `eth_subscribe` subscriptions,
 * `temporal_getBlockTransactionTimestamps`, and the `finalized` and `safe` block tags of forwarded calls, which are
 * rewritten to that block's number before they reach the chain (chains give the tags their own meanings: Hardhat,
 * for one, answers its newest block). `safe` means the same as `finalized` here.
 *
 * The rule reads the recorded chain, never the upstream's head of the moment, so that two views asked at the same
 * time agree, and one asked later never goes back.
 */
import { JSON_RPC_ERRORS, JsonRpcError } from "./jsonrpc";
import type { TemporalStore } from "./store";

/** The tags the gateway answers by its own rule; any other tag (`latest`, `earliest`, `pending`) is the chain's. */
const FINALITY_TAGS = new Set(["finalized", "safe"]);

/** The latest final block's number, or -1n while none is (no block recorded yet, or fewer than confirmations + 1). */
export function finalizedNumber(store: TemporalStore, confirmations: number): bigint {
  const latest = store.latestBlock();
  return latest === undefined ? -1n : latest.number - BigInt(confirmations);
}

/** Where a forwarded method takes its block parameter (a tag, a number, or an EIP-1898 object). */
const BLOCK_PARAM_INDEX: Readonly<Record<string, number>> = {
  eth_call: 1,
  eth_estimateGas: 1,
  eth_feeHistory: 1,
  eth_getBalance: 1,
  eth_getBlockByNumber: 0,
  eth_getBlockTransactionCountByNumber: 0,
  eth_getCode: 1,
  eth_getStorageAt: 2,
  eth_getTransactionCount: 1,
};

function notFound(confirmations: number): JsonRpcError {
  // geth answers a tag it has no block for with "finalized block not found" (-32000) too.
  return new JsonRpcError(JSON_RPC_ERRORS.UPSTREAM_ERROR, "finalized block not found", `no block has ${confirmations} confirmations on top of it yet in the chain this gateway follows`);
}

/**
 * The params of a forwarded call with every `finalized` / `safe` tag replaced by the final block's number (hex):
 * the block parameter of the methods above (a tag, or an EIP-1898 `{ blockNumber }`), and `fromBlock` / `toBlock`
 * of `eth_getLogs`. Params without such a tag come back as they were.
 */
export function withFinalityTags(method: string, params: readonly unknown[], store: TemporalStore, confirmations: number): readonly unknown[] {
  let finalHex: string | undefined;
  const resolve = (tag: unknown): unknown => {
    if (typeof tag !== "string" || !FINALITY_TAGS.has(tag)) return tag;
    if (finalHex === undefined) {
      const final = finalizedNumber(store, confirmations);
      if (final < 0n) throw notFound(confirmations);
      finalHex = `0x${final.toString(16)}`;
    }
    return finalHex;
  };
  const replaced = [...params];
  if (method === "eth_getLogs") {
    const filter = params[0];
    if (typeof filter !== "object" || filter === null || Array.isArray(filter)) return params;
    const { fromBlock, toBlock } = filter as Record<string, unknown>;
    replaced[0] = {
      ...filter,
      ...(fromBlock === undefined ? {} : { fromBlock: resolve(fromBlock) }),
      ...(toBlock === undefined ? {} : { toBlock: resolve(toBlock) }),
    };
    return replaced;
  }
  const index = BLOCK_PARAM_INDEX[method];
  if (index === undefined || index >= params.length) return params;
  const block = params[index];
  if (typeof block === "object" && block !== null && !Array.isArray(block) && "blockNumber" in block) {
    replaced[index] = { ...block, blockNumber: resolve((block as { blockNumber: unknown }).blockNumber) };
  } else {
    replaced[index] = resolve(block);
  }
  return replaced;
}
