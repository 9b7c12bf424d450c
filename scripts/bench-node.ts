/**
 * Attesting-node benchmark (`npm run bench:node`, or `npx ts-node scripts/bench-node.ts`). Not a test: numbers
 * depend on the machine. Prints a markdown table with the date, Node version and CPU.
 *
 * Layout on a 2-core machine: the node under load runs in a CHILD process (one core), the load generators
 * (autocannon, the gRPC loop) in this process (the other core). Micro-benchmarks (verify, card sign) and the
 * proof-age probe run in this process after the load runs, the latter against an idle in-process node so that
 * the card clock that stamped the proof is the clock that reads the arrival time (no cross-process anchoring
 * error).
 *
 * Environment: BENCH_DURATION_S (default 10) bounds each load run; BENCH_TICK_NS sets the node's attestation tick
 * (default: the config default, 1 ms). The node signature is computed in a worker thread (node/core/signerWorker.ts);
 * the card signature and the cached proof swap stay on the node's event loop.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import Fastify from "fastify";
import pino from "pino";
import { createDevIdentity, type DevIdentity } from "../protocol/devca";
import { attest, clearNodeAddressMemo } from "../protocol/sign";
import { createVerifyContext, verifyTimeProof } from "../protocol/verify";
import { DevTimeCard } from "../node/card/dev";
import { loadConfig } from "../node/config";
import { createTimeService, type CoreTimeService } from "../node/core";
import { loadProtos, type TimeResponseMessage } from "../node/api/grpc";
import { startNode, type RunningNode } from "../node/server";

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
/** Attestation tick of the benchmarked node, ns (decimal string); empty = the configured default (1 ms). */
const TICK_NS = process.env.BENCH_TICK_NS ?? "";

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number; average: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
type Autocannon = (options: {
  url: string;
  connections: number;
  duration: number;
  pipelining?: number;
  overallRate?: number;
}) => Promise<AutocannonResult>;
// autocannon ships no TypeScript types; the shape used here is declared above.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon: Autocannon = require("autocannon");

interface Started {
  node: RunningNode;
  service: CoreTimeService;
  card: DevTimeCard;
  identity: DevIdentity;
  close(): Promise<void>;
}

/** A node with fresh dev keys, no auth, no rate limit, 1 ms ticks (the default), quiet logs. */
async function startBenchNode(): Promise<Started> {
  const dir = mkdtempSync(join(tmpdir(), "ats-bench-"));
  const identity = await createDevIdentity();
  const logger = pino({ level: "warn" });
  const config = loadConfig({
    env: {},
    cwd: dir,
    overrides: {
      restPort: 0,
      grpcPort: 0,
      dataDir: join(dir, "data"),
      keyDir: join(dir, "keys"),
      maxRequestsPerSecond: 0,
      trustedRootsPem: [identity.ca.certificatePem],
      logLevel: "warn",
      ...(TICK_NS === "" ? {} : { tickIntervalNs: TICK_NS }),
    },
  });
  const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
  const service = createTimeService({ config, card, nodeKey: identity.nodeKey, logger, ownsCard: true });
  await service.start();
  const node = await startNode({ config, logger, service });
  return {
    node,
    service,
    card,
    identity,
    async close() {
      await node.close();
      await service.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Child mode --baseline: bare fastify answering a constant body of the same size, to tell the node's own cost
 * from what the machine (and its other load) allows.
 */
async function serveBaseline(): Promise<void> {
  const app = Fastify();
  const body = JSON.stringify({
    nanoMoment: "1732268493123456789",
    proof: { hardwareSignature: `0x${"ab".repeat(96)}`, nodeSignature: `0x${"cd".repeat(80)}`, accuracyNs: 50, hardwareId: `0x${"ab".repeat(32)}`, gps: null },
  });
  app.get("/time/current", (_request, reply) => {
    void reply.type("application/json; charset=utf-8").send(body);
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  process.send?.({ endpoints: { rest: `http://127.0.0.1:${port}`, grpc: "" } });
  const stop = (): void => {
    void app.close().finally(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("disconnect", stop);
}

/** Child mode: serve until SIGTERM, report endpoints on IPC. */
async function serve(): Promise<void> {
  const started = await startBenchNode();
  process.send?.({ endpoints: started.node.endpoints });
  const stop = (): void => {
    void started.close().finally(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("disconnect", stop);
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function grpcLoop(target: string, durationS: number, concurrency: number): Promise<{ perSecond: number; p50Ms: number; p99Ms: number }> {
  const { timeClient } = loadProtos();
  const client = new timeClient(target, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    GetCurrentTime(request: unknown, callback: (error: grpc.ServiceError | null, response?: TimeResponseMessage) => void): void;
  };
  const latenciesMs: number[] = [];
  let completed = 0;
  let failed = 0;
  const endAt = performance.now() + durationS * 1000;
  const worker = async (): Promise<void> => {
    while (performance.now() < endAt) {
      const started = performance.now();
      await new Promise<void>((resolve) =>
        client.GetCurrentTime({ type: "CURRENT_TIME" }, (error) => {
          if (error === null) completed += 1;
          else failed += 1;
          latenciesMs.push(performance.now() - started);
          resolve();
        }),
      );
    }
  };
  const startedAt = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedS = (performance.now() - startedAt) / 1000;
  client.close();
  if (failed > 0) console.error(`gRPC: ${failed} failed calls`);
  latenciesMs.sort((a, b) => a - b);
  return { perSecond: completed / elapsedS, p50Ms: percentile(latenciesMs, 50), p99Ms: percentile(latenciesMs, 99) };
}

function timeIt(iterations: number, fn: () => void): number[] {
  const samplesMs: number[] = [];
  for (let i = 0; i < iterations; i += 1) {
    const start = process.hrtime.bigint();
    fn();
    samplesMs.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return samplesMs.sort((a, b) => a - b);
}

async function startChild(mode: "--server" | "--baseline"): Promise<{ child: ChildProcess; endpoints: { rest: string; grpc: string } }> {
  const child: ChildProcess = fork(__filename, [mode], {
    execArgv: ["-r", "ts-node/register/transpile-only"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const endpoints = await new Promise<{ rest: string; grpc: string }>((resolve, reject) => {
    child.once("message", (message) => resolve((message as { endpoints: { rest: string; grpc: string } }).endpoints));
    child.once("exit", (code) => reject(new Error(`bench child ${mode} exited early (${code})`)));
  });
  return { child, endpoints };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

async function main(): Promise<void> {
  const loadAtStart = loadavg();
  const rows: Array<[string, string, string]> = [];
  const fmt = (value: number, digits = 0): string => value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

  // ------------------------------------------------------------- baseline: bare fastify in a child process
  {
    const { child, endpoints } = await startChild("--baseline");
    try {
      const url = `${endpoints.rest}/time/current`;
      await autocannon({ url, connections: 20, duration: 2 });
      const baseline = await autocannon({ url, connections: 100, pipelining: 1, duration: Math.min(DURATION_S, 5) });
      rows.push(["Baseline: bare fastify, constant body of the same size (100 connections)", `${fmt(baseline.requests.average)} req/s`, "(machine ceiling)"]);
    } finally {
      await stopChild(child);
    }
  }

  // ------------------------------------------------------------- load runs against a node in a child process
  const { child, endpoints } = await startChild("--server");
  try {
    const url = `${endpoints.rest}/time/current`;
    await autocannon({ url, connections: 20, duration: 2 }); // warm-up (JIT, connections)

    const max = await autocannon({ url, connections: 100, pipelining: 1, duration: DURATION_S });
    rows.push(["GET /time/current, max throughput (100 connections)", `${fmt(max.requests.average)} req/s`, "≥ 30,000 req/s"]);
    rows.push(["GET /time/current latency at max throughput p50 / p99", `${fmt(max.latency.p50, 2)} / ${fmt(max.latency.p99, 2)} ms`, ""]);
    if (max.non2xx + max.errors + max.timeouts > 0) console.error(`autocannon: non2xx=${max.non2xx} errors=${max.errors} timeouts=${max.timeouts}`);

    const fixed = await autocannon({ url, connections: 50, overallRate: 10_000, duration: DURATION_S });
    rows.push([
      "GET /time/current at a fixed 10,000 req/s: p50 / p99",
      `${fmt(fixed.latency.p50, 2)} / ${fmt(fixed.latency.p99, 2)} ms (${fmt(fixed.requests.average)} req/s served)`,
      "p99 ≤ 3 ms",
    ]);

    const rpc = await grpcLoop(endpoints.grpc, DURATION_S, 64);
    rows.push(["gRPC GetCurrentTime (64 in flight)", `${fmt(rpc.perSecond)} req/s (p50 ${fmt(rpc.p50Ms, 2)} / p99 ${fmt(rpc.p99Ms, 2)} ms)`, ""]);
  } finally {
    await stopChild(child);
  }

  // ------------------------------------------------------------- in-process: proof age, verify, card sign
  const local = await startBenchNode();
  try {
    const agesMs: number[] = [];
    const probeUntil = performance.now() + Math.min(DURATION_S, 5) * 1000;
    while (performance.now() < probeUntil) {
      const response = await fetch(`${local.node.endpoints.rest}/time/current`);
      const body = (await response.json()) as { nanoMoment: string };
      const arrivedNs = local.card.readTimeNs(); // the clock that stamped the proof
      agesMs.push(Number(arrivedNs - BigInt(body.nanoMoment)) / 1e6);
    }
    agesMs.sort((a, b) => a - b);
    rows.push(["Proof age at response (arrival − nanoMoment), p50 / p99", `${fmt(agesMs[Math.floor(agesMs.length / 2)]!, 3)} / ${fmt(percentile(agesMs, 99), 3)} ms`, "≤ 1 ms"]);

    const proof = local.service.current().proof;
    const context = createVerifyContext({
      cards: { [local.identity.cardId]: { publicKey: local.identity.cardPublicKey, revoked: false } },
      nodes: [local.identity.nodeAddress],
      nowNs: local.card.readTimeNs(),
    });
    await local.node.close(); // stop the tick so the micro-benchmarks have the core to themselves
    await local.service.stop();
    // Memo hit: a proof this node produced (its signer seeded the recovery memo), verified again and again.
    const verifySamples = timeIt(2_000, () => {
      if (!verifyTimeProof(proof, context).valid) throw new Error("benchmark proof does not verify");
    });
    const verifyAvgMs = verifySamples.reduce((sum, value) => sum + value, 0) / verifySamples.length;
    rows.push(["Off-chain verify, proof this node signed (recovery memo hit): average, per second", `${fmt(verifyAvgMs, 3)} ms, ${fmt(1000 / verifyAvgMs)} /s`, "≤ 0.3 ms"]);
    // Fresh: distinct proofs, memo cleared, so every node entry pays a secp256k1 recovery (what a client pays).
    const freshProofs = Array.from({ length: 200 }, (_, index) =>
      attest({ card: local.identity.cardKey, nodes: [local.identity.nodeKey], nanoMoment: proof.nanoMoment - BigInt(index + 1), accuracy: proof.accuracy, nodeTimestampNs: proof.nanoMoment }),
    );
    clearNodeAddressMemo();
    let freshIndex = 0;
    const freshSamples = timeIt(freshProofs.length, () => {
      if (!verifyTimeProof(freshProofs[freshIndex++]!, context).valid) throw new Error("benchmark proof does not verify");
    });
    const freshAvgMs = freshSamples.reduce((sum, value) => sum + value, 0) / freshSamples.length;
    rows.push(["Off-chain verify, fresh proofs (1 node entry, no memo): average, per second", `${fmt(freshAvgMs, 3)} ms, ${fmt(1000 / freshAvgMs)} /s`, "≤ 0.3 ms"]);

    let moment = proof.nanoMoment;
    const signSamples = timeIt(2_000, () => {
      moment += 1n;
      local.card.signHardware(moment);
    });
    rows.push(["Card sign (P-256, dev card) p50 / p99", `${fmt(percentile(signSamples, 50), 3)} / ${fmt(percentile(signSamples, 99), 3)} ms`, ""]);
  } finally {
    await local.close().catch(() => undefined);
  }

  const cpu = cpus()[0]?.model ?? "unknown CPU";
  console.log(`\n### Attesting node benchmark — ${new Date().toISOString().slice(0, 10)}\n`);
  console.log(
    `Node ${process.version}, ${cpu} × ${cpus().length} cores, load average at start ${loadAtStart.map((value) => value.toFixed(1)).join(" / ")}; ` +
      `load generator and node share the machine (node in a child process); ${DURATION_S} s per load run; ` +
      `attestation tick ${TICK_NS === "" ? "default (1 ms)" : `${TICK_NS} ns`}.\n`,
  );
  console.log("| measure | result | goal |");
  console.log("|---|---|---|");
  for (const [measure, result, goal] of rows) console.log(`| ${measure} | ${result} | ${goal} |`);
}

if (process.argv.includes("--baseline")) {
  serveBaseline().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
} else if (process.argv.includes("--server")) {
  serve().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
