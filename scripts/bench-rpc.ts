/**
 * `npm run bench:rpc`: the temporal JSON-RPC gateway (gateway/) of a dev node in front of a Hardhat node, the node
 * in a child process pinned to core 0 (when taskset exists), autocannon from this process. For each method,
 * requests/s and p99 over 50 connections, BENCH_RPC_RUNS runs (default 3) of BENCH_RPC_S seconds (default 5):
 *
 *   eth_chainId                         the baseline: the same server forwarding a plain call upstream
 *   temporal_getConsensusTime           answered from the node
 *   temporal_getTransactionTimestamp    answered from the gateway's SQLite store (a transaction it timestamped)
 *
 * Goal: the temporal methods within 10 % of the baseline (ratio ≥ 0.9), measured in the same run.
 */
import { spawn } from "node:child_process";
import { cpus } from "node:os";
import { join } from "node:path";
import { privateKeyToAccount } from "viem/accounts";
import { fmt, pin, runAutocannonPost } from "./benchUtil";
import { startChainProcess, stopChainProcess } from "./chainProcess";
import { HARDHAT_DEV_KEYS } from "./network";

const RUNS = Number(process.env.BENCH_RPC_RUNS ?? 3);
const DURATION_S = Number(process.env.BENCH_RPC_S ?? 5);
const CONNECTIONS = 50;

async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
  return ((await response.json()) as { result: unknown }).result;
}

async function load(url: string, method: string, params: unknown[]): Promise<{ rate: number; p99Ms: number; failures: number }> {
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method, params });
  // One call first: the load is of answers, never of errors.
  const answer = (await (await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body })).json()) as { result?: unknown; error?: unknown };
  if (answer.error !== undefined || answer.result === undefined || answer.result === null) throw new Error(`${method} answered ${JSON.stringify(answer)}`);
  const result = await runAutocannonPost(url, body, CONNECTIONS, DURATION_S);
  return { rate: result.requestsPerSecond, p99Ms: result.p99Ms, failures: result.failures };
}

function range(values: number[], digits = 0): string {
  const sorted = [...values].sort((a, b) => a - b);
  return `${fmt(sorted[0]!, digits)} – ${fmt(sorted[sorted.length - 1]!, digits)}`;
}

async function main(): Promise<void> {
  const chain = await startChainProcess(31337);
  // The node in its own process: `ats-node dev` with the gateway in front of the chain, unlimited rate.
  const node = spawn(process.execPath, [join(__dirname, "..", "bin", "ats-node.js"), "dev"], {
    env: { ...process.env, ATS_RPC_UPSTREAM_URL: chain.rpcUrl, ATS_RPC_PORT: "0", ATS_RPC_REQUESTS_PER_SECOND: "0", ATS_LOG_LEVEL: "warn", ATS_GRPC_ENABLED: "false" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      node.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const match = /"rpc":\s*"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out);
        if (match !== null) resolve(match[1]!);
      });
      node.once("exit", (code) => reject(new Error(`ats-node dev exited with ${code}`)));
    });
    pin(node.pid, 0);
    pin(process.pid, 1);
    const user = privateKeyToAccount(HARDHAT_DEV_KEYS.user);
    const nonce = Number(BigInt((await rpc(url, "eth_getTransactionCount", [user.address, "pending"])) as string));
    const raw = await user.signTransaction({ type: "eip1559", chainId: 31337, nonce, to: user.address, value: 1n, gas: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n });
    const hash = (await rpc(url, "eth_sendRawTransaction", [raw])) as string;

    const methods: [string, unknown[]][] = [
      ["eth_chainId", []],
      ["temporal_getConsensusTime", []],
      ["temporal_getTransactionTimestamp", [hash]],
    ];
    const results = new Map<string, { rate: number[]; p99: number[]; failures: number }>(methods.map(([m]) => [m, { rate: [], p99: [], failures: 0 }]));
    const ratios = new Map<string, number[]>(methods.slice(1).map(([m]) => [m, []]));
    await load(url, "eth_chainId", []); // warm-up
    for (let run = 0; run < RUNS; run++) {
      const rates = new Map<string, number>();
      for (const [method, params] of methods) {
        const result = await load(url, method, params);
        const entry = results.get(method)!;
        entry.rate.push(result.rate);
        entry.p99.push(result.p99Ms);
        entry.failures += result.failures;
        rates.set(method, result.rate);
      }
      for (const [method] of methods.slice(1)) ratios.get(method)!.push(rates.get(method)! / rates.get("eth_chainId")!);
      process.stderr.write(`run ${run + 1}/${RUNS}: ${[...rates].map(([m, r]) => `${m} ${fmt(r)} req/s`).join(", ")}\n`);
    }
    console.log(`\nTemporal JSON-RPC benchmark, ${new Date().toISOString().slice(0, 16)}Z, ${cpus()[0]?.model ?? "?"}, Node ${process.version}, ${RUNS} runs × ${DURATION_S} s, ${CONNECTIONS} connections\n`);
    console.log("| method | req/s (range over runs) | p99 ms | ratio to eth_chainId (same run) | goal |");
    console.log("|---|---|---|---|---|");
    for (const [method] of methods) {
      const entry = results.get(method)!;
      const ratio = ratios.get(method);
      console.log(`| \`${method}\` | ${range(entry.rate)} | ${range(entry.p99, 1)} | ${ratio === undefined ? "baseline" : range(ratio, 2)} | ${ratio === undefined ? "—" : "≥ 0.9"} |${entry.failures > 0 ? ` (${entry.failures} failures)` : ""}`);
    }
  } finally {
    node.kill("SIGTERM");
    await new Promise((resolve) => node.once("exit", resolve));
    await stopChainProcess(chain);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench:rpc failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
