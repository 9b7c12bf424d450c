/**
 * Follows the chain behind the gateway, block by block from where it started (no backfill of older history): each
 * new block's transactions get their canonical timestamp (those the gateway received keep their arrival time;
 * the others get the moment the block was observed, in consensus time), and the block is recorded. A block whose
 * parent is not the recorded one is a reorg: the recorded blocks walk back to the common ancestor (at most
 * MAX_REORG_DEPTH) and are forgotten from there (TemporalStore.forgetBlocksFrom), then followed again.
 */
import type { Logger } from "pino";
import type { Hex } from "../protocol/types";
import type { TemporalStore } from "./store";
import type { Upstream } from "./methods";

/** Blocks recorded per tick (bounded work; the rest next tick). */
export const BLOCKS_PER_TICK = 50;
/** Deepest reorg walked back block by block; a deeper one forgets everything and follows from the head. */
export const MAX_REORG_DEPTH = 128;

interface UpstreamBlock {
  number: string;
  hash: Hex;
  parentHash: Hex;
  transactions: Hex[];
}

export class BlockObserver {
  reorgsTotal = 0;

  constructor(
    private readonly upstream: Upstream,
    private readonly store: TemporalStore,
    private readonly consensusNowNs: () => bigint,
    private readonly log: Logger,
  ) {}

  private async block(number: bigint): Promise<UpstreamBlock | null> {
    return (await this.upstream.call("eth_getBlockByNumber", [`0x${number.toString(16)}`, false])) as UpstreamBlock | null;
  }

  async tick(): Promise<void> {
    const head = BigInt((await this.upstream.call("eth_blockNumber", [])) as string);
    const latest = this.store.latestBlock();
    let next = latest === undefined ? head : latest.number + 1n;
    if (latest !== undefined) {
      const onChain = await this.block(latest.number);
      if (onChain?.hash !== latest.hash) {
        await this.rewind(latest.number);
        return;
      }
    }
    for (let count = 0; next <= head && count < BLOCKS_PER_TICK; count++, next++) {
      const block = await this.block(next);
      if (block === null) return;
      const parent = this.store.block(next - 1n);
      if (parent !== undefined && parent.hash !== block.parentHash) {
        await this.rewind(next - 1n);
        return;
      }
      this.store.recordBlock({ number: next, hash: block.hash, parentHash: block.parentHash, observedAtNs: this.consensusNowNs() }, block.transactions);
    }
  }

  /** Walks back from `from` to the highest recorded block the chain still has, and forgets the ones above it. */
  private async rewind(from: bigint): Promise<void> {
    let number = from;
    for (let depth = 0; depth < MAX_REORG_DEPTH && number >= 0n; depth++, number--) {
      const recorded = this.store.block(number);
      if (recorded === undefined) break;
      if ((await this.block(number))?.hash === recorded.hash) break;
    }
    const forgotten = this.store.forgetBlocksFrom(number + 1n);
    this.reorgsTotal += 1;
    this.log.warn({ from: String(from), ancestor: String(number), forgotten }, "temporal gateway: reorg; orphaned blocks forgotten");
  }
}
