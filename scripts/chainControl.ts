/**
 * What tells the two local EVM implementations (scripts/chainProcess.ts CHAIN_KINDS) apart, declared once:
 *
 * - their development controls under one interface (ChainControl): mining on interval or per transaction, a block
 *   on demand, snapshots, dropping a pooled transaction, the next block's base fee, the clock; Hardhat takes interval
 *   mining in milliseconds and names its own methods `hardhat_*`, anvil takes whole seconds and names them `anvil_*`;
 * - their mining modes: Hardhat mines a block per transaction (automine) and one per interval at once; anvil's modes
 *   exclude each other over RPC (evm_setIntervalMining(0) stops mining altogether, evm_setAutomine(true) ends the
 *   interval), so on anvil an interval wins: transactions then wait for the next interval block, as on a real chain;
 * - what their block tags mean (CHAIN_TRAITS): Hardhat answers `safe` and `finalized` with the head, anvil lags them
 *   one and two epochs behind it (ANVIL_SLOTS_IN_AN_EPOCH blocks each), as a proof-of-stake chain does;
 * - the clock after history is rewritten: anvil's evm_revert (and its reorgs) set the chain clock back to the
 *   kept head's timestamp and count on from there, so that every later block lags the wall clock by the time
 *   taken back (a fresh proof then looks like one from the future); Hardhat keeps its blocks on the wall clock.
 *   The control puts anvil's clock back on the wall clock after each (realignClock);
 * - real reorgs: anvil builds a competing chain (`anvil_reorg`: new blocks from the common ancestor back to the old
 *   height, with the transactions it is given; `anvil_rollback`: the chain cut back, the cut transactions gone),
 *   Hardhat only restores a snapshot (`evm_revert`), which shortens the chain.
 *
 * The relayer and the gateway use none of this: they read any chain through standard eth_* methods and the block
 * tags (relayer/chain.ts). This is for `npm start`, tests and benchmarks.
 */
import type { Hex } from "viem";
import { ANVIL_SLOTS_IN_AN_EPOCH, type ChainKind } from "./chainProcess";

export interface ChainTraits {
  /** The unit of evm_setIntervalMining's interval, ms (anvil's is whole seconds). */
  intervalMiningUnitMs: number;
  dropTransactionMethod: "hardhat_dropTransaction" | "anvil_dropTransaction";
  setNextBlockBaseFeeMethod: "hardhat_setNextBlockBaseFeePerGas" | "anvil_setNextBlockBaseFeePerGas";
  /** How far the `safe` and `finalized` tags lag the head, blocks (0: they are the head). */
  safeLagBlocks: number;
  finalizedLagBlocks: number;
  /** Whether the chain can be reorganised into a competing history (anvil_reorg, anvil_rollback). */
  realReorgs: boolean;
  /** Whether automine and interval mining run together (else with an interval, transactions wait for its blocks). */
  automineWithInterval: boolean;
  /** Whether evm_revert and reorgs leave the chain clock behind the wall clock (realigned by the control). */
  rewritesRewindClock: boolean;
}

export const CHAIN_TRAITS: Readonly<Record<ChainKind, ChainTraits>> = {
  hardhat: {
    intervalMiningUnitMs: 1,
    dropTransactionMethod: "hardhat_dropTransaction",
    setNextBlockBaseFeeMethod: "hardhat_setNextBlockBaseFeePerGas",
    safeLagBlocks: 0,
    finalizedLagBlocks: 0,
    realReorgs: false,
    automineWithInterval: true,
    rewritesRewindClock: false,
  },
  anvil: {
    intervalMiningUnitMs: 1_000,
    dropTransactionMethod: "anvil_dropTransaction",
    setNextBlockBaseFeeMethod: "anvil_setNextBlockBaseFeePerGas",
    safeLagBlocks: ANVIL_SLOTS_IN_AN_EPOCH,
    finalizedLagBlocks: 2 * ANVIL_SLOTS_IN_AN_EPOCH,
    realReorgs: true,
    automineWithInterval: false,
    rewritesRewindClock: true,
  },
};

/** A transaction for a block of anvil_reorg's new history: its signed bytes and the block, counted from 0 at the common ancestor's child. */
export interface ReorgTransaction {
  raw: Hex;
  block: number;
}

export class ChainRpcError extends Error {
  override name = "ChainRpcError";
}

/** The development controls of one local chain, by JSON-RPC over its URL. */
export class ChainControl {
  readonly traits: ChainTraits;
  /** The mining asked for (both chains start with automine and no interval). */
  private mining = { automine: true, intervalMs: 0 };

  constructor(
    readonly kind: ChainKind,
    readonly rpcUrl: string,
  ) {
    this.traits = CHAIN_TRAITS[kind];
  }

  /** One JSON-RPC call; an error answer throws with the method, the code and the chain's message. */
  async call(method: string, params: unknown[] = []): Promise<unknown> {
    const response = await fetch(this.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
    const body = (await response.json()) as { result?: unknown; error?: { code: number; message: string } };
    if (body.error !== undefined) throw new ChainRpcError(`${this.kind} ${method}: ${body.error.code} ${body.error.message}`);
    return body.result;
  }

  /** A block every `intervalMs` (0: none) besides automine's where the chain can (anvil: whole seconds, rounded up). */
  async setIntervalMining(intervalMs: number): Promise<void> {
    this.mining.intervalMs = intervalMs;
    if (this.traits.automineWithInterval) await this.call("evm_setIntervalMining", [this.intervalParam()]);
    else await this.applyExclusiveMining();
  }

  /** A block per transaction as it arrives (on) or transactions wait in the pool (off). */
  async setAutomine(on: boolean): Promise<void> {
    this.mining.automine = on;
    if (this.traits.automineWithInterval) await this.call("evm_setAutomine", [on]);
    else await this.applyExclusiveMining();
  }

  private intervalParam(): number {
    const { intervalMs } = this.mining;
    return intervalMs === 0 ? 0 : Math.max(1, Math.ceil(intervalMs / this.traits.intervalMiningUnitMs));
  }

  /** anvil: an interval if one is asked for, else automine if asked for, else no mining (blocks on demand only). */
  private async applyExclusiveMining(): Promise<void> {
    if (this.mining.intervalMs > 0) await this.call("evm_setIntervalMining", [this.intervalParam()]);
    else if (this.mining.automine) await this.call("evm_setAutomine", [true]);
    else await this.call("evm_setIntervalMining", [0]);
  }

  async mine(count = 1): Promise<void> {
    for (let i = 0; i < count; i++) await this.call("evm_mine");
  }

  async snapshot(): Promise<string> {
    return String(await this.call("evm_snapshot"));
  }

  /** Back to a snapshot: the chain is cut to its height (no competing blocks). */
  async revert(snapshot: string): Promise<boolean> {
    const reverted = (await this.call("evm_revert", [snapshot])) === true;
    await this.realignClock();
    return reverted;
  }

  /** The next blocks on the wall clock again (never before the head's timestamp), where a rewrite took the clock back. */
  private async realignClock(): Promise<void> {
    if (!this.traits.rewritesRewindClock) return;
    const head = (await this.call("eth_getBlockByNumber", ["latest", false])) as { timestamp: string };
    const nowSeconds = Math.floor(Date.now() / 1_000);
    await this.call("evm_setTime", [Math.max(nowSeconds, Number(BigInt(head.timestamp)))]);
  }

  /** Removes a transaction from the pool; whether it was there (Hardhat answers a boolean, anvil the hash or null). */
  async dropTransaction(hash: Hex): Promise<boolean> {
    const result = await this.call(this.traits.dropTransactionMethod, [hash]);
    return result === true || (typeof result === "string" && result.toLowerCase() === hash.toLowerCase());
  }

  async setNextBlockBaseFeePerGas(wei: bigint): Promise<void> {
    await this.call(this.traits.setNextBlockBaseFeeMethod, [`0x${wei.toString(16)}`]);
  }

  /** Moves the chain clock `seconds` ahead of the wall clock for the next blocks. */
  async increaseTime(seconds: number): Promise<void> {
    await this.call("evm_increaseTime", [seconds]);
  }

  /**
   * Replaces the last `depth` blocks with as many new ones holding `transactions` (anvil only): the chain keeps
   * its height, the replaced blocks' transactions are gone unless given again (they do not return to the pool).
   */
  async reorg(depth: number, transactions: readonly ReorgTransaction[] = []): Promise<void> {
    this.requireRealReorgs("reorg");
    await this.call("anvil_reorg", [depth, transactions.map((tx) => [tx.raw, tx.block])]);
    await this.realignClock();
  }

  /** Cuts the last `depth` blocks off (anvil only); their transactions are gone. */
  async rollback(depth: number): Promise<void> {
    this.requireRealReorgs("rollback");
    await this.call("anvil_rollback", [depth]);
    await this.realignClock();
  }

  private requireRealReorgs(what: string): void {
    if (!this.traits.realReorgs) throw new ChainRpcError(`${this.kind} cannot ${what} into a competing chain (only anvil can; Hardhat restores snapshots)`);
  }
}
