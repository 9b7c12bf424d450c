/**
 * A dApp user's actions on the local network (scripts/network.ts), and the exactly-once counts read from the
 * chains themselves: used by the tour's tests (test/relayer/) and by bench:relayer.
 */
import { parseEther, parseEventLogs, type Hex } from "viem";
import { timeBridgeAbi, timeOracleAbi, timeSchedulerAbi } from "../abi";
import { createTimeClient } from "../client";
import type { LocalChain, LocalNetwork } from "./network";

const NS_PER_MS = 1_000_000n;

/** Polls `read` every 100 ms until it gives a value; on timeout the error names `what` and the last failure. */
export async function pollUntil<T>(read: () => Promise<T | undefined>, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await read();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms${lastError === undefined ? "" : `: ${String(lastError)}`}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The gas limit of the user's transactions (userTxFields: well above what sendTime, submitTimeProof or scheduleCall use). */
const USER_GAS_LIMIT = 1_000_000n;

/**
 * The fields that make a user's transaction go out without being run first: the user's account and chain, a gas
 * limit, the next nonce and fees (spread into writeContract, which then returns the hash without simulating).
 * anvil runs eth_estimateGas and eth_fillTransaction on the latest block's clock (Hardhat on the wall clock), which
 * an idle chain (automine, no interval) lets fall seconds behind a fresh proof: the estimate would refuse a proof the
 * block accepts. And a call sent while mining is off may depend on one still in the pool (sendTime on
 * submitTimeProof).
 */
export async function userTxFields(chain: LocalChain) {
  const account = chain.user.account!;
  const nonce = await chain.publicClient.getTransactionCount({ address: account.address, blockTag: "pending" });
  const { maxFeePerGas, maxPriorityFeePerGas } = await chain.publicClient.estimateFeesPerGas();
  return { account, chain: chain.user.chain, gas: USER_GAS_LIMIT, nonce, maxFeePerGas, maxPriorityFeePerGas };
}

/** Waits for a user transaction's receipt; a revert throws. */
export async function confirmed(chain: LocalChain, pending: Promise<Hex>) {
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash: await pending });
  if (receipt.status !== "success") throw new Error(`user transaction ${receipt.transactionHash} reverted`);
  return receipt;
}

/**
 * A user stores a fresh node proof in the source oracle, then sends the source chain's time to `target`: each
 * message carries a newer time than the last (the bridge delivers only newer times). Returns the message id.
 */
export async function sendFreshTime(network: LocalNetwork, source: LocalChain, target: LocalChain): Promise<Hex> {
  const client = createTimeClient({ endpoint: network.nodes[0]! });
  try {
    for (let attempt = 0; ; attempt++) {
      const { proof } = await client.getCurrentTime();
      try {
        await confirmed(source, source.user.writeContract({ address: source.deployment.oracle, abi: timeOracleAbi, functionName: "submitTimeProof", args: [proof], ...(await userTxFields(source)) }));
        break;
      } catch (error) {
        if (attempt >= 3) throw error; // the relayer's pusher stored a newer proof in between: fetch another
      }
    }
  } finally {
    client.close();
  }
  const receipt = await confirmed(
    source,
    source.user.writeContract({ address: source.deployment.bridge!, abi: timeBridgeAbi, functionName: "sendTime", args: [BigInt(target.chainId)], ...(await userTxFields(source)) }),
  );
  const [sent] = parseEventLogs({ abi: timeBridgeAbi, logs: receipt.logs, eventName: "TimeSent" });
  if (sent === undefined) throw new Error("sendTime emitted no TimeSent");
  return sent.args.messageId;
}

/** A user schedules a call to itself `leadMs` ahead with a small bounty; returns its id. */
export async function scheduleCall(chain: LocalChain, leadMs: number): Promise<Hex> {
  const executeAt = (BigInt(Date.now()) + BigInt(leadMs)) * NS_PER_MS;
  const receipt = await confirmed(
    chain,
    chain.user.writeContract({ address: chain.deployment.scheduler!, abi: timeSchedulerAbi, functionName: "scheduleCall", args: [executeAt, "0x"], value: parseEther("0.001"), ...(await userTxFields(chain)) }),
  );
  const [scheduled] = parseEventLogs({ abi: timeSchedulerAbi, logs: receipt.logs, eventName: "CallScheduled" });
  if (scheduled === undefined) throw new Error("scheduleCall emitted no CallScheduled");
  return scheduled.args.callId;
}

/** Every message id delivered on `target`'s canonical chain, in delivery order (repeats included). */
export async function deliveredIds(target: LocalChain): Promise<Hex[]> {
  const events = await target.publicClient.getContractEvents({ address: target.deployment.bridge!, abi: timeBridgeAbi, eventName: "TimeReceived", fromBlock: 0n });
  return events.map((event) => event.args.messageId!);
}

/** How many times each message was delivered on `target`'s canonical chain. */
export async function deliveriesOf(target: LocalChain, messageIds: readonly Hex[]): Promise<number[]> {
  const events = await target.publicClient.getContractEvents({ address: target.deployment.bridge!, abi: timeBridgeAbi, eventName: "TimeReceived", fromBlock: 0n });
  return messageIds.map((id) => events.filter((event) => event.args.messageId === id).length);
}

/** How many times each call was executed on `chain`'s canonical chain. */
export async function executionsOf(chain: LocalChain, callIds: readonly Hex[]): Promise<number[]> {
  const events = await chain.publicClient.getContractEvents({ address: chain.deployment.scheduler!, abi: timeSchedulerAbi, eventName: "CallExecuted", fromBlock: 0n });
  return callIds.map((id) => events.filter((event) => event.args.callId === id).length);
}
