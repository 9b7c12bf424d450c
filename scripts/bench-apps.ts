/**
 * The scheduler and bridge rows of the gas benchmark (`npm run bench:gas`, scripts/bench-gas.ts calls
 * `benchApps`). Every row is a whole transaction's `gasUsed` (21,000 base and calldata included), on an oracle
 * that already holds a submitted proof (for `sendTime`). The scheduler and the bridges are deployed here, next to
 * that oracle, as scripts/deploy.ts does.
 */
import hre from "hardhat";
import { encodeFunctionData, parseEventLogs, type Hex } from "viem";
import { NS_PER_SECOND, type TimeProof } from "../protocol";

export interface AppsGasRow {
  operation: string;
  gas: number | string;
  goal: string;
  note: string;
}

/**
 * Measures scheduleCall (first, later, and the two-argument form with its defaults), executeCall, cancelCall,
 * sendTime and receiveTime, with a TimeScheduler and two TimeBridges deployed on the oracle at `oracleAddress`. `proofWith(count, nanoMoment)` signs a valid proof with `count` node entries; `nowNs` is the
 * chain clock (ns) the proofs must be fresh against; `txGas(hash)` waits and returns the gas used.
 */
export async function benchApps(
  oracleAddress: Hex,
  proofWith: (count: number, nanoMoment: bigint) => TimeProof,
  nowNs: bigint,
  txGas: (hash: Hex) => Promise<number>,
): Promise<AppsGasRow[]> {
  const publicClient = await hre.viem.getPublicClient();
  const scheduler = await hre.viem.deployContract("TimeScheduler", [oracleAddress]);
  const rows: AppsGasRow[] = [];
  const note = "tx gasUsed";

  // A contract that schedules calls back to itself; the callback writes one storage slot (ping).
  const callee = await hre.viem.deployContract("SchedulerCallee", [scheduler.address]);
  const ping = encodeFunctionData({ abi: callee.abi, functionName: "ping", args: [1n] });
  const executeAt = nowNs - NS_PER_SECOND;
  const window = 3_600n * NS_PER_SECOND;
  const bounty = 10n ** 15n;

  async function schedule(defaults = false): Promise<{ gas: number; request: unknown }> {
    const hash = defaults
      ? await scheduler.write.scheduleCall([executeAt, ping], { value: bounty })
      : await scheduler.write.scheduleCall([executeAt, window, 100_000, ping], { value: bounty });
    const gas = await txGas(hash);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    const [event] = parseEventLogs({ abi: scheduler.abi, logs: receipt.logs, eventName: "CallScheduled" });
    return { gas, request: (event as unknown as { args: { request: unknown } }).args.request };
  }
  const first = await schedule();
  const later = await schedule();
  const withDefaults = await schedule(true);
  rows.push({ operation: "scheduleCall, first ever (EOA, 36-byte data, bounty)", gas: first.gas, goal: "", note });
  rows.push({ operation: "scheduleCall, later (EOA, 36-byte data, bounty)", gas: later.gas, goal: "", note });
  rows.push({ operation: "scheduleCall(executeAt, data), defaults, later", gas: withDefaults.gas, goal: "", note });
  rows.push({
    operation: "cancelCall (bounty refunded)",
    gas: await txGas(await scheduler.write.cancelCall([later.request])),
    goal: "",
    note,
  });

  const scheduled = await publicClient.waitForTransactionReceipt({
    hash: await callee.write.schedule([executeAt, window, 100_000, ping], { value: bounty }),
  });
  const [event] = parseEventLogs({ abi: scheduler.abi, logs: scheduled.logs, eventName: "CallScheduled" });
  const request = (event as unknown as { args: { request: unknown } }).args.request;
  rows.push({
    operation: "executeCall (1 node entry, callee writes 1 slot, bounty paid)",
    gas: await txGas(await scheduler.write.executeCall([request, proofWith(1, nowNs - NS_PER_SECOND / 2n)])),
    goal: "",
    note,
  });

  // Bridge: sender and receiver on the same chain and oracle (the receiver verifies with that oracle).
  const chainId = BigInt(await publicClient.getChainId());
  const source = await hre.viem.deployContract("TimeBridge", [oracleAddress]);
  const target = await hre.viem.deployContract("TimeBridge", [oracleAddress]);
  const sendHash = await source.write.sendTime([chainId]);
  rows.push({ operation: "sendTime (1 node entry)", gas: await txGas(sendHash), goal: "", note });
  const sendReceipt = await publicClient.waitForTransactionReceipt({ hash: sendHash });
  const [sent] = parseEventLogs({ abi: source.abi, logs: sendReceipt.logs, eventName: "TimeSent" });
  const { message } = (sent as unknown as { args: { message: unknown } }).args;
  rows.push({
    operation: "receiveTime, first delivery (1 node entry)",
    gas: await txGas(await target.write.receiveTime([message])),
    goal: "",
    note,
  });
  return rows;
}
