/**
 * `npm run bench:relayer`: the relayer on the local network (scripts/network.ts: one attesting node, two
 * Hardhat node chains mining a block at least every second, confirmations 1, pollIntervalMs 100), measured as
 * a user sees it. Each run starts a fresh network; BENCH_RELAYER_RUNS (default 3) runs, ranges reported.
 *
 *   delivery latency    a message sent on alpha (its receipt) → delivered on beta (deliveredBlock ≠ 0), ms (goal:
 *                       within one block after the 1 confirmation, so p99 ≤ 2 block intervals)
 *   messages/s          a backlog of BENCH_RELAYER_MESSAGES messages emitted while the relayer is stopped, then
 *                       drained: deliveries per second, and the same messages delivered by a plain script (viem
 *                       writeContract, one after the other, no store) in the same run: the ratio is the relayer's
 *                       cost for exactly-once (goal: ≥ 50 messages/s)
 *   call lateness       calls scheduled 2–4 s ahead: the executing proof's nanoMoment − executeAt, and the
 *                       inclusion block's timestamp − executeAt (goal: p99 ≤ one block interval, 1 s)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { createWalletClient, http, type Hex } from "viem";
import { timeBridgeAbi, timeSchedulerAbi } from "../abi";
import { fmt, percentile } from "./benchUtil";
import { pollUntil, scheduleCall, sendFreshTime } from "./localUser";
import { HARDHAT_DEV_KEYS, startLocalNetwork, type LocalChain, type LocalNetwork } from "./network";
import { privateKeyToAccount } from "viem/accounts";

const RUNS = Number(process.env.BENCH_RELAYER_RUNS ?? 3);
const MESSAGES = Number(process.env.BENCH_RELAYER_MESSAGES ?? 200);
const LATENCY_SAMPLES = 10;
const CALLS = 10;
const NS_PER_MS = 1_000_000n;


interface RunResult {
  latencyMs: number[];
  relayerRate: number;
  scriptRate: number;
  proofLatenessMs: number[];
  inclusionLatenessMs: number[];
}

async function deliveredBlock(chain: LocalChain, messageId: Hex): Promise<bigint> {
  return chain.publicClient.readContract({ address: chain.deployment.bridge!, abi: timeBridgeAbi, functionName: "deliveredBlock", args: [messageId] });
}

/** Polls `check` until it holds (scripts/localUser.ts pollUntil). */
function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<true> {
  return pollUntil(async () => ((await check()) ? true : undefined), what, timeoutMs);
}

async function measureLatency(network: LocalNetwork, result: RunResult): Promise<void> {
  const [alpha, beta] = network.chains as [LocalChain, LocalChain];
  for (let i = 0; i < LATENCY_SAMPLES; i++) {
    const messageId = await sendFreshTime(network, alpha, beta);
    const sentAtMs = Date.now();
    await until(async () => (await deliveredBlock(beta, messageId)) !== 0n, 30_000, "delivery");
    result.latencyMs.push(Date.now() - sentAtMs);
  }
}

/** A backlog of messages (the relayer stopped), each newer than the last; returns their TimeSent logs. */
async function emitBacklog(network: LocalNetwork, count: number) {
  const [alpha, beta] = network.chains as [LocalChain, LocalChain];
  const ids: Hex[] = [];
  for (let i = 0; i < count; i++) ids.push(await sendFreshTime(network, alpha, beta));
  const logs = await alpha.publicClient.getContractEvents({ address: alpha.deployment.bridge!, abi: timeBridgeAbi, eventName: "TimeSent", fromBlock: 0n });
  return logs.filter((log) => ids.includes(log.args.messageId!));
}

async function measureThroughput(network: LocalNetwork, result: RunResult): Promise<void> {
  const beta = network.chains[1]!;
  // The relayer drains a backlog.
  await network.stopRelayer("SIGTERM");
  const backlog = await emitBacklog(network, MESSAGES);
  const last = backlog[backlog.length - 1]!.args.messageId!;
  const started = Date.now();
  await network.startRelayer();
  await until(async () => (await deliveredBlock(beta, last)) !== 0n, 300_000, "the relayer's drain");
  result.relayerRate = MESSAGES / ((Date.now() - started) / 1_000);

  // The same work by a plain script: a second backlog delivered with writeContract, one after the other.
  await network.stopRelayer("SIGTERM");
  const plain = await emitBacklog(network, MESSAGES);
  const wallet = createWalletClient({ account: privateKeyToAccount(HARDHAT_DEV_KEYS.deployer), chain: beta.user.chain, transport: http(beta.rpcUrl) });
  const scriptStart = Date.now();
  let lastHash: Hex | undefined;
  for (const log of plain) {
    const { message } = log.args;
    lastHash = await wallet.writeContract({ address: beta.deployment.bridge!, abi: timeBridgeAbi, functionName: "receiveTime", args: [message!], chain: beta.user.chain, gas: 300_000n });
  }
  await beta.publicClient.waitForTransactionReceipt({ hash: lastHash! });
  result.scriptRate = MESSAGES / ((Date.now() - scriptStart) / 1_000);
  await network.startRelayer();
}

async function measureLateness(network: LocalNetwork, result: RunResult): Promise<void> {
  const alpha = network.chains[0]!;
  const fromBlock = await alpha.publicClient.getBlockNumber();
  const calls: { callId: Hex; executeAtNs: bigint }[] = [];
  for (let i = 0; i < CALLS; i++) {
    const leadMs = 2_000 + i * 200;
    const executeAtNs = (BigInt(Date.now()) + BigInt(leadMs)) * NS_PER_MS;
    calls.push({ callId: await scheduleCall(alpha, leadMs), executeAtNs });
  }
  await until(async () => {
    const logs = await alpha.publicClient.getContractEvents({ address: alpha.deployment.scheduler!, abi: timeSchedulerAbi, eventName: "CallExecuted", fromBlock });
    return calls.every((call) => logs.some((log) => log.args.callId === call.callId));
  }, 60_000, "the calls' execution");
  const logs = await alpha.publicClient.getContractEvents({ address: alpha.deployment.scheduler!, abi: timeSchedulerAbi, eventName: "CallExecuted", fromBlock });
  for (const call of calls) {
    const log = logs.find((entry) => entry.args.callId === call.callId)!;
    // executeAt is computed by the bench just before scheduleCall: within a few ms of what the helper used.
    result.proofLatenessMs.push(Number(log.args.nanoMoment! - call.executeAtNs) / 1e6);
    const block = await alpha.publicClient.getBlock({ blockNumber: log.blockNumber });
    result.inclusionLatenessMs.push(Number(block.timestamp * 1_000n - call.executeAtNs / NS_PER_MS));
  }
}

function range(values: readonly number[], digits = 0): string {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? "–" : `${fmt(sorted[0]!, digits)} – ${fmt(sorted[sorted.length - 1]!, digits)}`;
}

async function main(): Promise<void> {
  const hre = (await import("hardhat")).default;
  await hre.run("compile", { quiet: true });
  const runs: RunResult[] = [];
  for (let run = 0; run < RUNS; run++) {
    const dir = mkdtempSync(join(tmpdir(), "ats-bench-relayer-"));
    let network: LocalNetwork | undefined;
    try {
      network = await startLocalNetwork({ hre, dir, meshNodes: 1, nodeLogger: pino({ level: "silent" }), relayerSettings: { pollIntervalMs: 100, logLevel: "warn" } });
      await network.startRelayer();
      const result: RunResult = { latencyMs: [], relayerRate: 0, scriptRate: 0, proofLatenessMs: [], inclusionLatenessMs: [] };
      await measureLatency(network, result);
      await measureLateness(network, result);
      await measureThroughput(network, result);
      runs.push(result);
      process.stderr.write(`run ${run + 1}/${RUNS}: latency p50 ${fmt(percentile([...result.latencyMs].sort((a, b) => a - b), 50))} ms, ${fmt(result.relayerRate, 1)} msg/s (script ${fmt(result.scriptRate, 1)}), lateness p99 ${fmt(percentile([...result.proofLatenessMs].sort((a, b) => a - b), 99))} ms\n`);
    } finally {
      await network?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const p = (values: number[], q: number) => percentile([...values].sort((a, b) => a - b), q);
  const cpu = (await import("node:os")).cpus()[0]?.model ?? "unknown CPU";
  console.log(`\nRelayer benchmark, ${new Date().toISOString().slice(0, 16)}Z, ${cpu}, Node ${process.version}, ${RUNS} runs (range over runs)\n`);
  console.log("| measure | value (range over runs) | goal |");
  console.log("|---|---|---|");
  console.log(`| delivery latency p50 / p99, ms (source receipt → delivered) | ${range(runs.map((r) => p(r.latencyMs, 50)))} / ${range(runs.map((r) => p(r.latencyMs, 99)))} | p99 ≤ (1 confirmation + 1) × 1 s block interval = 2,000 |`);
  console.log(`| messages/s, relayer draining ${MESSAGES} | ${range(runs.map((r) => r.relayerRate), 1)} | ≥ 50 |`);
  console.log(`| messages/s, plain script (same run) | ${range(runs.map((r) => r.scriptRate), 1)} | baseline |`);
  console.log(`| ratio relayer / plain script | ${range(runs.map((r) => r.relayerRate / r.scriptRate), 2)} | — |`);
  console.log(`| call lateness p50 / p99, ms (proof nanoMoment − executeAt) | ${range(runs.map((r) => p(r.proofLatenessMs, 50)))} / ${range(runs.map((r) => p(r.proofLatenessMs, 99)))} | p99 ≤ 1,000 (one block) |`);
  console.log(`| call inclusion lateness p99, ms (block timestamp − executeAt, 1 s resolution) | ${range(runs.map((r) => p(r.inclusionLatenessMs, 99)))} | — |`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench:relayer failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
