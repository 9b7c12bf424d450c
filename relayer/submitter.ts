/**
 * One chain's transactions: nonce claims, signing, broadcast, and the tracker that settles every open nonce.
 *
 * The rules, after the anchors' worst relayer bugs (a nonce counter that ran ahead of the chain and jammed for
 * good; one job signed with two nonces, paid twice):
 * - A job's nonce is claimed in the SQLite transaction that records its signed transaction (store.recordSigned),
 *   and only then is it broadcast. "signed" and "broadcast" are distinct states: after a crash a signed
 *   transaction is broadcast unchanged (same bytes, same hash), never signed again with another nonce.
 * - A job gets a new nonce only after its previous nonce is settled (taken by another transaction, or mined and
 *   reverted). Fee bumps re-sign the same nonce with the same call.
 * - The tracker holds the local next nonce equal to the chain's nonce plus what is in flight: a nonce below the
 *   local next with no open transaction of ours (a dropped one whose job is gone) is filled with a no-op.
 */
import { keccak256, type TransactionReceipt } from "viem";
import type { Logger } from "pino";
import type { Hex } from "../protocol/types";
import type { ChainClient } from "./chain";
import type { RelayerStore, TxRecord } from "./store";

/** Most nonces of one chain open at once; a job beyond it waits for the tracker. */
export const MAX_IN_FLIGHT = 64;
/** Fee bump factor, in parts per 100 (geth and Hardhat need ≥ 10 % to replace). */
const FEE_BUMP_PERCENT = 125n;
/** Gas above the estimate (the state may change between estimate and inclusion), in percent. */
const GAS_MARGIN_PERCENT = 125n;
const NO_OP_GAS = 21_000n;

/** Where a test may crash the process (see SubmitterOptions.crashAt). */
export const CRASH_POINTS = ["after-sign", "after-record", "after-broadcast"] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

export interface SubmitterOptions {
  feeBumpAfterMs: number;
  maxFeePerGasWei: bigint;
  nowMs: () => number;
  log: Logger;
  /**
   * Test hook: SIGKILL this process at `point` of the `submission`-th submission (after signing, before the
   * nonce claim is committed; after the commit, before the broadcast; after the broadcast, before its state is
   * recorded). The end-to-end tests prove exactly-once delivery across each; never set in production.
   */
  crashAt?: { point: CrashPoint; submission: number } | undefined;
}

/** What became of a job's transaction once its nonce settled at the required depth. */
export interface SettledTx {
  itemId: string;
  hash: Hex;
  /** The calldata it carried (which function settled the job). */
  data: Hex;
  receipt: TransactionReceipt | null;
}

export class FeeAboveCapError extends Error {
  override name = "FeeAboveCap";
}

export class InFlightFullError extends Error {
  override name = "InFlightFull";
}

export class Submitter {
  private signing: Promise<unknown> = Promise.resolve();
  /** Submissions so far (the crash hook counts them). */
  private submissions = 0;
  /** The chain's latest nonce at the last track(). */
  private latestNonceSeen = 0;
  /** The fee market as read once per tick (a bump reads it afresh). */
  private marketFees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | undefined;

  constructor(
    readonly chain: ChainClient,
    private readonly store: RelayerStore,
    private readonly options: SubmitterOptions,
  ) {}

  private get chainId(): number {
    return this.chain.config.chainId;
  }

  /** At start: the local next nonce is never below the chain's (someone else used the key, or a fresh store). */
  async init(): Promise<void> {
    const latest = await this.chain.nonceAt("latest");
    this.latestNonceSeen = latest;
    const local = this.store.nextNonce(this.chainId);
    if (local === undefined) {
      this.store.setNextNonce(this.chainId, await this.chain.nonceAt("pending"));
    } else if (local < latest) {
      this.options.log.warn({ chainId: this.chainId, local, latest }, "the chain's nonce is ahead of the store's: another sender uses this key");
      this.store.setNextNonce(this.chainId, latest);
    }
  }

  /** Signs, records (the nonce claim) and broadcasts a job's transaction. Serialised per chain. */
  submit(itemId: string, to: Hex, data: Hex, gasEstimate: bigint): Promise<Hex> {
    const run = this.signing.then(async () => {
      const next = this.store.nextNonce(this.chainId)!;
      // The chain's nonce as the last track() saw it: the bound is on what this relayer has open, checked each tick.
      if (next - this.latestNonceSeen >= MAX_IN_FLIGHT) throw new InFlightFullError(`${next - this.latestNonceSeen} transactions in flight on chain ${this.chainId}`);
      const fees = await this.cappedFees(1n);
      const gas = (gasEstimate * GAS_MARGIN_PERCENT) / 100n;
      const tx = await this.sign({ itemId, nonce: next, to, data, gas, ...fees });
      this.submissions += 1;
      this.crashIfAt("after-sign");
      this.store.recordSigned(tx, false);
      this.crashIfAt("after-record");
      await this.send(tx);
      return tx.hash;
    });
    this.signing = run.catch(() => undefined);
    return run;
  }

  /**
   * Settles what can be settled: every open nonce is checked for a receipt at the required depth, re-broadcast
   * when the pool lost it, fee-bumped when it waited too long; nonce gaps are filled. Returns the jobs whose
   * transaction settled (with its receipt, or null when another transaction took the nonce).
   */
  async track(): Promise<SettledTx[]> {
    const settled: SettledTx[] = [];
    const latest = await this.chain.nonceAt("latest");
    this.latestNonceSeen = latest;
    this.marketFees = undefined; // one fee reading per tick
    const head = await this.chain.headBlock();
    const safe = await this.chain.safeBlock(head);
    const byNonce = new Map<number, TxRecord[]>();
    for (const tx of this.store.openTxs(this.chainId)) byNonce.set(tx.nonce, [...(byNonce.get(tx.nonce) ?? []), tx]);

    for (const [nonce, txs] of byNonce) {
      let mined: { tx: TxRecord; receipt: TransactionReceipt } | undefined;
      for (const tx of txs) {
        const receipt = await this.chain.receipt(tx.hash);
        if (receipt !== null) mined = { tx, receipt };
      }
      if (mined !== undefined) {
        if (mined.receipt.blockNumber <= safe || (this.chain.config.confirmations === 0 && mined.receipt.blockNumber <= head)) {
          this.store.settleNonce(this.chainId, nonce, mined.tx.hash, mined.receipt.blockNumber);
          if (mined.tx.itemId !== null) settled.push({ itemId: mined.tx.itemId, hash: mined.tx.hash, data: mined.tx.data, receipt: mined.receipt });
        } else if (mined.tx.state !== "mined") {
          this.store.setTxState(mined.tx.hash, "mined", mined.receipt.blockNumber);
        }
        continue;
      }
      if (nonce < latest) {
        // Taken by a transaction we did not record (or whose receipt the node no longer has): the jobs go back.
        this.store.settleNonce(this.chainId, nonce, null, null);
        for (const tx of txs) if (tx.itemId !== null) settled.push({ itemId: tx.itemId, hash: tx.hash, data: tx.data, receipt: null });
        continue;
      }
      await this.keepAlive(txs);
    }
    await this.fillGaps(latest, byNonce);
    return settled;
  }

  /**
   * An unmined nonce: (re)broadcast the newest transaction if the pool does not have it, bump it when it waited too
   * long. When the newest belongs to an item whose source event was reorged away (`orphaned`), it is cancelled
   * instead: a no-op (a 0-value transfer to ourselves) with fees raised by a quarter replaces it at its nonce. Deciding
   * this here, from the store, makes the cancellation survive a crash between the orphaning and the broadcast.
   */
  private async keepAlive(txs: TxRecord[]): Promise<void> {
    const newest = txs[txs.length - 1]!;
    if (newest.state === "mined") this.store.setTxState(newest.hash, "broadcast"); // its block was reorged away
    if (newest.itemId !== null && this.store.item(newest.itemId)?.status === "orphaned") {
      const replaced = await this.bump({ ...newest, itemId: null, to: this.chain.account.address, data: "0x", gas: NO_OP_GAS });
      if (replaced) this.options.log.warn({ chainId: this.chainId, nonce: newest.nonce, item: newest.itemId }, "cancelled: its source event was reorged away");
      else this.options.log.warn({ chainId: this.chainId, nonce: newest.nonce, item: newest.itemId }, "cannot cancel at the fee cap: the original transaction stands");
      return;
    }
    if (this.options.nowMs() - newest.sentMs >= this.options.feeBumpAfterMs) {
      await this.bump(newest);
      return;
    }
    if (newest.state === "signed" || !(await this.chain.knows(newest.hash))) await this.send(newest);
  }

  /** Re-signs a transaction at the same nonce with fees raised by a quarter (at least the market's). */
  /**
   * Returns whether a replacement was signed and sent. At the fee cap nothing new can outbid the pool: the newest
   * transaction *recorded* at the nonce (its raw bytes, whatever `tx` changes besides) is sent again instead.
   */
  private async bump(tx: TxRecord): Promise<boolean> {
    const run = this.signing.then(async (): Promise<boolean> => {
      const market = await this.cappedFees(1n, true).catch(() => undefined);
      const bumpedPriority = (tx.maxPriorityFeePerGas * FEE_BUMP_PERCENT) / 100n + 1n;
      const bumpedMax = (tx.maxFeePerGas * FEE_BUMP_PERCENT) / 100n + 1n;
      const maxPriorityFeePerGas = market !== undefined && market.maxPriorityFeePerGas > bumpedPriority ? market.maxPriorityFeePerGas : bumpedPriority;
      let maxFeePerGas = market !== undefined && market.maxFeePerGas > bumpedMax ? market.maxFeePerGas : bumpedMax;
      if (maxFeePerGas > this.options.maxFeePerGasWei) maxFeePerGas = this.options.maxFeePerGasWei;
      if (maxFeePerGas <= tx.maxFeePerGas) {
        this.options.log.warn({ chainId: this.chainId, nonce: tx.nonce, maxFeePerGas: String(maxFeePerGas) }, "cannot bump: at the fee cap");
        await this.send(tx);
        return false;
      }
      const replacement = await this.sign({
        itemId: tx.itemId,
        nonce: tx.nonce,
        to: tx.to,
        data: tx.data,
        gas: tx.gas,
        maxFeePerGas,
        maxPriorityFeePerGas: maxPriorityFeePerGas > maxFeePerGas ? maxFeePerGas : maxPriorityFeePerGas,
      });
      this.store.recordSigned(replacement, true);
      this.options.log.info({ chainId: this.chainId, nonce: tx.nonce, hash: replacement.hash, maxFeePerGas: String(maxFeePerGas) }, "fee bumped");
      await this.send(replacement);
      return true;
    });
    this.signing = run.catch(() => undefined);
    return await run;
  }

  /**
   * Nonces below the local next that nothing of ours holds (their jobs settled elsewhere) get a no-op. One whose
   * transaction had settled but that the chain counts as unused again (a reorg deeper than `confirmations` took the
   * block back) is reopened instead (store.reopenRevertedNonce): its transaction is sent again by the next tick, so
   * the job it carried is not lost to a no-op.
   */
  private async fillGaps(latest: number, open: Map<number, TxRecord[]>): Promise<void> {
    const next = this.store.nextNonce(this.chainId)!;
    if (next < latest) {
      this.options.log.warn({ chainId: this.chainId, local: next, latest }, "the chain's nonce is ahead of the store's: another sender uses this key");
      this.store.setNextNonce(this.chainId, latest);
      return;
    }
    const limit = Math.min(next, latest + MAX_IN_FLIGHT);
    for (let nonce = latest; nonce < limit; nonce++) {
      if (open.has(nonce)) continue;
      const recorded = this.store.txsOfNonce(this.chainId, nonce);
      if (recorded.some((tx) => tx.state === "signed" || tx.state === "broadcast" || tx.state === "mined")) continue;
      const settledTx = recorded.find((tx) => tx.state === "confirmed");
      if (settledTx !== undefined) {
        // A nonce read that lags (a load-balanced RPC) also puts a settled nonce at or above `latest`: only a
        // receipt the chain no longer has means the block was taken back.
        if ((await this.chain.receipt(settledTx.hash)) !== null) continue;
        const items = this.store.reopenRevertedNonce(this.chainId, nonce);
        this.options.log.warn({ chainId: this.chainId, nonce, latest, items }, "a settled transaction was reorged away (deeper than the confirmation depth): sent again at its nonce");
        continue;
      }
      const run = this.signing.then(async () => {
        const fees = await this.cappedFees(2n);
        const noOp = await this.sign({ itemId: null, nonce, to: this.chain.account.address, data: "0x", gas: NO_OP_GAS, ...fees });
        this.store.recordSigned(noOp, true);
        this.options.log.warn({ chainId: this.chainId, nonce, hash: noOp.hash }, "nonce gap filled with a no-op");
        await this.send(noOp);
      });
      this.signing = run.catch(() => undefined);
      await run;
    }
  }

  private crashIfAt(point: CrashPoint): void {
    const crash = this.options.crashAt;
    if (crash !== undefined && crash.point === point && crash.submission === this.submissions) process.kill(process.pid, "SIGKILL");
  }

  private async cappedFees(factor: bigint, fresh = false): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
    if (fresh || this.marketFees === undefined) this.marketFees = await this.chain.fees();
    const market = this.marketFees;
    const maxFeePerGas = market.maxFeePerGas * factor;
    const maxPriorityFeePerGas = market.maxPriorityFeePerGas * factor;
    if (market.maxFeePerGas > this.options.maxFeePerGasWei) {
      throw new FeeAboveCapError(`maxFeePerGas ${market.maxFeePerGas} wei is above the cap ${this.options.maxFeePerGasWei} on chain ${this.chainId}`);
    }
    const capped = maxFeePerGas > this.options.maxFeePerGasWei ? this.options.maxFeePerGasWei : maxFeePerGas;
    return { maxFeePerGas: capped, maxPriorityFeePerGas: maxPriorityFeePerGas > capped ? capped : maxPriorityFeePerGas };
  }

  private async sign(fields: {
    itemId: string | null;
    nonce: number;
    to: Hex;
    data: Hex;
    gas: bigint;
    maxFeePerGas: bigint;
    maxPriorityFeePerGas: bigint;
  }): Promise<Omit<TxRecord, "state" | "minedBlock">> {
    const raw = await this.chain.account.signTransaction({
      type: "eip1559",
      chainId: this.chainId,
      nonce: fields.nonce,
      to: fields.to,
      data: fields.data,
      gas: fields.gas,
      value: 0n,
      maxFeePerGas: fields.maxFeePerGas,
      maxPriorityFeePerGas: fields.maxPriorityFeePerGas,
    });
    return { chainId: this.chainId, hash: keccak256(raw), raw, sentMs: this.options.nowMs(), ...fields };
  }

  /** Broadcasts; a transport failure leaves the transaction `signed`, and the tracker sends it again. */
  private async send(tx: Pick<TxRecord, "hash" | "raw" | "nonce">): Promise<void> {
    try {
      const result = await this.chain.broadcast(tx.raw);
      this.crashIfAt("after-broadcast");
      this.store.setTxState(tx.hash, "broadcast");
      if (result === "underpriced") this.options.log.warn({ chainId: this.chainId, nonce: tx.nonce }, "another transaction holds the nonce in the pool");
    } catch (error) {
      this.options.log.warn({ chainId: this.chainId, nonce: tx.nonce, hash: tx.hash, err: (error as Error).message.split("\n")[0] }, "broadcast failed");
    }
  }
}
