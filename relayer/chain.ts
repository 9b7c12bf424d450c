/**
 * One chain as the relayer sees it: viem clients over the RPC URL, the start-up checks (chain id, contracts that
 * are what the network file says), the reads the decisions need, simulation with the revert decoded by name,
 * and raw-transaction broadcast. No state: the store and the submitter hold it.
 */
import {
  createPublicClient,
  decodeEventLog,
  getAddress,
  http,
  type Abi,
  type PublicClient,
  type TransactionReceipt,
} from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { timeBridgeAbi, timeOracleAbi, timeSchedulerAbi } from "../abi";
import { decodeRevert, type DecodedRevertData } from "../lib/revert";
import { CALL_STATUS, CARD_STATUS, NODE_STATUS } from "../protocol/types";
import type { Address, CallStatusName, CardStatusName, CrossChainTime, Hex, NodeStatusName, ScheduledCall, TimeProof } from "../protocol/types";
import type { ChainConfig } from "../wire/network";

/**
 * The gas ceiling of simulation and estimation: the per-transaction cap of EIP-7825 (2^24). Without it some nodes
 * (Hardhat's EDR) estimate from the block gas limit and refuse the request as above the cap.
 */
export const TX_GAS_CAP = 16_777_216n;

/**
 * The block a transaction is simulated on: the pending one, whose clock is the next block's. Nodes differ on the
 * default: Hardhat runs eth_estimateGas and eth_call on a pending block at the wall clock, anvil and geth on the
 * latest block, whose timestamp is a block interval old on a busy chain and arbitrarily old on an idle one; a fresh
 * proof then looks like one from the future there, and a call due now looks early.
 */
export const SIMULATION_BLOCK = "pending";

/** The scheduler's request (protocol/types.ts ScheduledCall). */
export type ScheduledCallRequest = ScheduledCall;

/** A bridge message (protocol/types.ts CrossChainTime). */
export type CrossChainTimeMessage = CrossChainTime;

export type IndexedEvent =
  | { kind: "TimeSent"; blockNumber: bigint; bridge: Address; messageId: Hex; nonce: bigint; message: CrossChainTimeMessage }
  | { kind: "CallScheduled"; blockNumber: bigint; callId: Hex; request: ScheduledCallRequest };

export type Simulation = { ok: true; gas: bigint } | { ok: false; errorName: string; message: string };

/**
 * A contract call the relayer may send: its calldata, encoded by the caller with viem's encodeFunctionData against
 * the contract's generated ABI (so the function name and arguments are type-checked there), and that ABI, whose
 * errors name a revert.
 */
export interface ContractCall {
  to: Address;
  abi: Abi;
  data: Hex;
}

/** A read's block: the given one, or (nothing) the chain's head. */
function atBlock(blockNumber: bigint | undefined): { blockNumber?: bigint } {
  return blockNumber === undefined ? {} : { blockNumber };
}

function revertOf(decoded: { errorName: string; args: readonly unknown[] }): Simulation {
  return { ok: false, errorName: decoded.errorName, message: `${decoded.errorName}(${decoded.args.map(String).join(", ")})` };
}

export class StartupError extends Error {
  override name = "StartupError";
}

export class ChainClient {
  readonly client: PublicClient;

  /** `rpcTimeoutMs`: a request without an answer after this long fails (the caller's next tick retries). */
  constructor(
    readonly config: ChainConfig,
    readonly account: PrivateKeyAccount,
    rpcTimeoutMs = 10_000,
  ) {
    this.client = createPublicClient({ transport: http(config.rpcUrl, { timeout: rpcTimeoutMs, retryCount: 0 }) }) as PublicClient;
  }

  /** Start-up checks: the RPC answers with the configured chain id, and each contract is wired to the oracle. */
  async checkDeployment(): Promise<void> {
    const { name, rpcUrl, chainId } = this.config;
    let actual: number;
    try {
      actual = await this.client.getChainId();
    } catch (error) {
      throw new StartupError(`chain ${name}: no answer from ${rpcUrl}: ${(error as Error).message.split("\n")[0]}`);
    }
    if (actual !== chainId) throw new StartupError(`chain ${name}: ${rpcUrl} serves chain id ${actual}, the network file says ${chainId}`);
    if ((await this.client.getCode({ address: this.config.oracle })) === undefined) {
      throw new StartupError(`chain ${name}: no contract at oracle ${this.config.oracle}`);
    }
    for (const [label, address, abi] of [
      ["bridge", this.config.bridge, timeBridgeAbi],
      ["scheduler", this.config.scheduler, timeSchedulerAbi],
    ] as const) {
      if (address === undefined) continue;
      let oracle: Address;
      try {
        oracle = await this.client.readContract({ address, abi, functionName: "timeOracle" });
      } catch {
        throw new StartupError(`chain ${name}: ${address} is not a ${label} (timeOracle() fails)`);
      }
      if (getAddress(oracle) !== this.config.oracle) {
        throw new StartupError(`chain ${name}: the ${label} at ${address} belongs to oracle ${oracle}, not ${this.config.oracle}`);
      }
    }
    await this.checkStateAtSafeBlock();
  }

  /**
   * The worker confirms every terminal decision by reading state at the safe block (worker.ts confirmedAtSafeBlock):
   * an RPC that has pruned the state of that block (geth's default keeps the last 128 blocks' state; a "finalized"
   * safe block is ~64–95 blocks back on Ethereum, and a deep confirmation count further) would fail every such read,
   * and items would retry until their deadlines. So the start refuses such an RPC, naming the block.
   */
  private async checkStateAtSafeBlock(): Promise<void> {
    const { name, rpcUrl, confirmations } = this.config;
    let head: bigint;
    let safe: bigint;
    try {
      head = await this.headBlock();
      safe = await this.safeBlock(head);
    } catch (error) {
      throw new StartupError(`chain ${name}: ${rpcUrl} does not tell its head and safe block: ${(error as Error).message.split("\n")[0]}`);
    }
    if (safe < 0n) return; // younger than the confirmations: nothing is safe yet, every block is kept
    try {
      await this.client.getBalance({ address: this.account.address, blockNumber: safe });
    } catch (error) {
      // viem's first line is its generic wording ("Missing or invalid parameters"); `details` is the RPC's own.
      const said = (error as { details?: unknown }).details;
      const reason = typeof said === "string" && said !== "" ? said : (error as Error).message.split("\n")[0];
      throw new StartupError(
        `chain ${name}: ${rpcUrl} cannot read state at the safe block ${safe} (head ${head}, confirmations ${confirmations}): ${reason}; the relayer confirms its decisions there, so it needs an RPC that keeps that much state (an archive node, or enough recent history)`,
      );
    }
  }

  async headBlock(): Promise<bigint> {
    return this.client.getBlockNumber({ cacheTime: 0 });
  }

  /** The highest block whose events count: head − confirmations, or the finalized block. */
  async safeBlock(head: bigint): Promise<bigint> {
    if (this.config.confirmations === "finalized") return (await this.client.getBlock({ blockTag: "finalized" })).number;
    return head - BigInt(this.config.confirmations);
  }

  async blockHash(blockNumber: bigint): Promise<Hex | undefined> {
    try {
      return (await this.client.getBlock({ blockNumber })).hash;
    } catch {
      return undefined; // above the head after a reorg
    }
  }

  async blockTimestampNs(): Promise<bigint> {
    return (await this.client.getBlock({ blockTag: "latest" })).timestamp * 1_000_000_000n;
  }

  /** TimeSent and CallScheduled events of this chain's bridge and scheduler in [from, to]. */
  async events(from: bigint, to: bigint): Promise<IndexedEvent[]> {
    const addresses = [this.config.bridge, this.config.scheduler].filter((a): a is Address => a !== undefined);
    if (addresses.length === 0) return [];
    const logs = await this.client.getLogs({ address: addresses, fromBlock: from, toBlock: to });
    const events: IndexedEvent[] = [];
    for (const log of logs) {
      const address = getAddress(log.address);
      if (log.blockNumber === null) continue;
      try {
        if (address === this.config.bridge) {
          const decoded = decodeEventLog({ abi: timeBridgeAbi, data: log.data, topics: log.topics, strict: true });
          if (decoded.eventName !== "TimeSent") continue;
          const { messageId, nonce, message } = decoded.args;
          events.push({ kind: "TimeSent", blockNumber: log.blockNumber, bridge: address, messageId, nonce, message: { ...message } });
        } else {
          const decoded = decodeEventLog({ abi: timeSchedulerAbi, data: log.data, topics: log.topics, strict: true });
          if (decoded.eventName !== "CallScheduled") continue;
          const { callId, request } = decoded.args;
          events.push({ kind: "CallScheduled", blockNumber: log.blockNumber, callId, request: { ...request } });
        }
      } catch {
        continue; // another event of the same contract
      }
    }
    return events;
  }

  /**
   * Whether `bridge` emitted TimeSent(`messageId`) in block `blockNumber` of the chain as it is now (the check before
   * a message's delivery is sent: worker.ts sourceOfMessage). One eth_getLogs over that block, by the indexed id.
   */
  async timeSentIn(bridge: Address, messageId: Hex, blockNumber: bigint): Promise<boolean> {
    try {
      const logs = await this.client.getContractEvents({ address: bridge, abi: timeBridgeAbi, eventName: "TimeSent", args: { messageId }, fromBlock: blockNumber, toBlock: blockNumber, strict: true });
      return logs.length > 0;
    } catch (error) {
      // Some nodes refuse a range above their head: a chain cut shorter than the block no longer holds the event.
      if ((await this.headBlock()) < blockNumber) return false;
      throw error;
    }
  }

  // The reads below answer at the chain's head, or at `blockNumber` (the worker confirms a terminal decision at the
  // safe block: worker.ts confirmedAtSafeBlock).

  async cardStatus(cardId: Hex, blockNumber?: bigint): Promise<CardStatusName> {
    const card = await this.client.readContract({ address: this.config.oracle, abi: timeOracleAbi, functionName: "getCard", args: [cardId], ...atBlock(blockNumber) });
    return CARD_STATUS[card.status] ?? "None";
  }

  async nodeStatus(node: Address, blockNumber?: bigint): Promise<NodeStatusName> {
    const info = await this.client.readContract({ address: this.config.oracle, abi: timeOracleAbi, functionName: "getNode", args: [node], ...atBlock(blockNumber) });
    return NODE_STATUS[info.status] ?? "None";
  }

  /** Whether the signer holds the oracle's GUARDIAN_ROLE (the guardian revokes with it). */
  async signerIsGuardian(): Promise<boolean> {
    const role = await this.client.readContract({ address: this.config.oracle, abi: timeOracleAbi, functionName: "GUARDIAN_ROLE" });
    return this.client.readContract({ address: this.config.oracle, abi: timeOracleAbi, functionName: "hasRole", args: [role, this.account.address] });
  }

  async deliveredBlock(messageId: Hex, blockNumber?: bigint): Promise<bigint> {
    return this.client.readContract({ address: this.requireBridge(), abi: timeBridgeAbi, functionName: "deliveredBlock", args: [messageId], ...atBlock(blockNumber) });
  }

  async latestNetworkTimeNs(blockNumber?: bigint): Promise<bigint> {
    const [, networkTime] = await this.client.readContract({ address: this.requireBridge(), abi: timeBridgeAbi, functionName: "latestDelivery", ...atBlock(blockNumber) });
    return networkTime;
  }

  async callStatus(callId: Hex, blockNumber?: bigint): Promise<CallStatusName> {
    const status = await this.client.readContract({ address: this.requireScheduler(), abi: timeSchedulerAbi, functionName: "callStatus", args: [callId], ...atBlock(blockNumber) });
    const name = CALL_STATUS[status];
    if (name === undefined) throw new Error(`scheduler answered an unknown call status ${status}`);
    return name;
  }

  /** The oracle's stored proof's nanoMoment, or null when it holds none (TimeOracleNoTime). */
  async storedNanoMomentNs(blockNumber?: bigint): Promise<bigint | null> {
    try {
      const proof = await this.client.readContract({ address: this.config.oracle, abi: timeOracleAbi, functionName: "getCurrentTime", ...atBlock(blockNumber) });
      return proof.nanoMoment;
    } catch (error) {
      if (decodeRevert(error, timeOracleAbi)?.errorName === "TimeOracleNoTime") return null;
      throw error;
    }
  }

  /**
   * Simulates the call from the signer: eth_estimateGas runs it (one request when it succeeds); when the estimate
   * fails, eth_call tells a revert (by its error name) from a node that cannot estimate (then see estimateByCalls).
   * Both run on the pending block (SIMULATION_BLOCK), as the transaction will.
   */
  async simulate(call: ContractCall): Promise<Simulation> {
    const { data } = call;
    const from = this.account.address;
    try {
      return { ok: true, gas: await this.client.estimateGas({ account: from, to: call.to, data, gas: TX_GAS_CAP, blockTag: SIMULATION_BLOCK }) };
    } catch (error) {
      const decoded = decodeRevert(error, call.abi);
      if (decoded !== undefined) return revertOf(decoded);
    }
    const reverted = await this.callRevert(call);
    if (reverted !== null) return revertOf(reverted);
    return { ok: true, gas: await this.estimateByCalls(call.to, data) };
  }

  /** The error name `call` reverts with at `blockNumber`, or null when it would succeed there. */
  async revertNameAt(call: ContractCall, blockNumber: bigint): Promise<string | null> {
    return (await this.callRevert(call, blockNumber))?.errorName ?? null;
  }

  /**
   * eth_call of `call` from the signer (at the head, or at `blockNumber`): the decoded revert, or null when it
   * succeeds. An RPC failure that is not a revert throws.
   */
  private async callRevert(call: ContractCall, blockNumber?: bigint): Promise<DecodedRevertData | null> {
    try {
      await this.client.call({ account: this.account.address, to: call.to, data: call.data, gas: TX_GAS_CAP, ...(blockNumber === undefined ? { blockTag: SIMULATION_BLOCK } : { blockNumber }) });
      return null;
    } catch (error) {
      const decoded = decodeRevert(error, call.abi);
      if (decoded !== undefined) return decoded;
      throw error; // not a revert: the RPC failed
    }
  }

  /**
   * The lowest gas at which eth_call succeeds, by bisection to within 1 %: for a call the node refuses to estimate
   * though eth_call runs it (Hardhat's EDR estimates calls that forward gas by the 63/64 rule from the block gas
   * limit, above the EIP-7825 cap).
   */
  private async estimateByCalls(to: Address, data: Hex): Promise<bigint> {
    const from = this.account.address;
    let low = 21_000n;
    let high = TX_GAS_CAP;
    while (high - low > high / 100n) {
      const middle = (low + high) / 2n;
      const ok = await this.client.call({ account: from, to, data, gas: middle, blockTag: SIMULATION_BLOCK }).then(
        () => true,
        () => false,
      );
      if (ok) high = middle;
      else low = middle;
    }
    return high;
  }

  async nonceAt(blockTag: "latest" | "pending"): Promise<number> {
    return this.client.getTransactionCount({ address: this.account.address, blockTag });
  }

  async fees(): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }> {
    return this.client.estimateFeesPerGas();
  }

  async receipt(hash: Hex): Promise<TransactionReceipt | null> {
    try {
      return await this.client.getTransactionReceipt({ hash });
    } catch (error) {
      if ((error as Error).name === "TransactionReceiptNotFoundError") return null;
      throw error;
    }
  }

  /** Whether the node knows the transaction (mined or in its pool). */
  async knows(hash: Hex): Promise<boolean> {
    try {
      await this.client.getTransaction({ hash });
      return true;
    } catch (error) {
      if ((error as Error).name === "TransactionNotFoundError") return false;
      throw error;
    }
  }

  /**
   * eth_sendRawTransaction. Not failures here, the tracker settles them: "already known" (sent before), "nonce too
   * low" (the nonce is taken), "replacement transaction underpriced" (another transaction holds the nonce in the
   * pool: the next fee bump outbids it).
   */
  async broadcast(raw: Hex): Promise<"sent" | "known" | "nonce-used" | "underpriced"> {
    try {
      await this.client.request({ method: "eth_sendRawTransaction", params: [raw] });
      return "sent";
    } catch (error) {
      const text = (error as Error).message.toLowerCase();
      if (text.includes("already known") || text.includes("already imported") || text.includes("known transaction")) return "known";
      if (text.includes("nonce too low")) return "nonce-used";
      if (text.includes("underpriced")) return "underpriced";
      throw error;
    }
  }

  async balance(): Promise<bigint> {
    return this.client.getBalance({ address: this.account.address });
  }

  async proofVerifies(proof: TimeProof): Promise<boolean> {
    return this.client.readContract({ address: this.config.oracle, abi: timeOracleAbi, functionName: "verifyTimeProof", args: [proof] });
  }

  private requireBridge(): Address {
    if (this.config.bridge === undefined) throw new Error(`chain ${this.config.name} has no bridge`);
    return this.config.bridge;
  }

  private requireScheduler(): Address {
    if (this.config.scheduler === undefined) throw new Error(`chain ${this.config.name} has no scheduler`);
    return this.config.scheduler;
  }
}
