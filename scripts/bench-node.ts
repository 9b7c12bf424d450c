/**
 * Attesting-node benchmark (`npm run bench:node`). Not a test: numbers depend on the machine. Prints a markdown
 * table with the date, Node version, CPU and how the cores were shared.
 *
 * Layout: the node under load runs in a CHILD process, the load generators in this process or its children. The
 * children run this script as built into dist-bench/ (CHILD_SCRIPT: compiled as the code that ships, as bin/ats-node.js
 * runs it); this driver may run from the TypeScript sources (`node -r ./bin/register-ts.js`).
 * With `taskset` (util-linux) and ≥ 2 cores, the node is pinned to core 0 and everything else (this process, wrk,
 * autocannon, the gRPC loop) to core 1, so the node has one core to itself and the figures are per node core.
 * Max-throughput runs use `wrk` when it is installed (a C load generator that needs far less CPU than the JS
 * ones; Debian: `apt-get install wrk`), else autocannon; the fixed-rate run uses autocannon's `overallRate`.
 * Two bare servers answering a constant body of the same size (fastify, and plain node:http) in the same layout
 * show what one core of this machine allows before any node logic.
 *
 * Proof age is measured where it is defined, in the node: `timerpc_proof_age_seconds` (node clock − nanoMoment when
 * each answer is built), read from /metrics before and after a run; quantiles are interpolated inside histogram
 * buckets like Prometheus' histogram_quantile. A client-side probe adds the HTTP round trip for comparison.
 * Micro-benchmarks (verify, card sign) and the client-side probe run last, in a fresh child process on the load
 * core (no heap or timers left over from the load runs).
 *
 * The node runs three times: with the defaults, with signerThread "off" (below), and with `refreshAfterNs` = 1 ms
 * (proof age bounded under any load, at a CPU price). Each load row also gives the CPU "steal" meanwhile: on a virtual machine, time the hypervisor gave to
 * other guests, which lowers throughput and lengthens tails; compare runs with similar steal.
 *
 * The first rows are the serving ratio: the node's GET /time/current as a ratio to the bare node:http server on
 * the same pinned core, BENCH_RATIO_RUNS (default 3) alternating pairs of 5 s runs, as a range (benchUtil.ts
 * alternatingRatio): absolute req/s move with the machine's neighbours, the ratio much less; then, with wrk,
 * BENCH_SIMULTANEOUS_RUNS (default 5) rounds of 5 s with both servers loaded at once on that core
 * (simultaneousRatio), which a noisy machine moves least. With the defaults on ≥ 2 cores
 * the node's ticks are made by its self-ticking signer thread (node/core/signerWorker.ts), which is moved to the
 * load core, beside the serving thread as on a machine with a core to spare (here it shares that core with the
 * load generator); the second ratio row and the second set of load rows run the node with signerThread "off",
 * every signature in the serving thread.
 *
 * `--pkcs11` runs only the PKCS#11 section (scripts/benchPkcs11.ts: token signatures per second for both curves
 * through SoftHSM2, and an attestor's tick and proof age on token keys as signing slows down).
 *
 * Environment: BENCH_DURATION_S (default 10) bounds each load run; BENCH_TICK_NS sets the node's attestation tick
 * (default: the config default, 1 ms); BENCH_PIN=0 turns CPU pinning off; BENCH_LOAD=autocannon ignores wrk.
 * Why one file: the driver and its children are this one script (the children run its build, CHILD_SCRIPT), so a run's
 * modes and their table stay together.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import Fastify from "fastify";
import pino from "pino";
import { createDevIdentity, type DevIdentity } from "../protocol/devca";
import { attest } from "../protocol/sign";
import { createVerifyContext, verifyTimeProof } from "../protocol/verify";
import { DevTimeCard } from "../node/card/dev";
import { loadConfig } from "../node/config";
import { createTimeService } from "../node/compose";
import type { CoreTimeService } from "../node/core";
import { defaultSignInWorker } from "../node/core/attestor";
import { SIGNER_THREAD_NAME } from "../node/core/signerWorker";
import { loadProtos, type TimeResponseMessage } from "../wire/grpc";
import { startNode, type RunningNode } from "../node/server";
import { alternatingRatio, simultaneousRatio, fmt, fmtRange, maxLoad, percentile, pin, pinThreadsNamed, PINNING, reportFailures, runAutocannon, threadsNamed, unpin, WRK, type ServerForRun } from "./benchUtil";

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
/** Attestation tick of the benchmarked node, ns (decimal string); empty = the configured default (1 ms). */
const TICK_NS = process.env.BENCH_TICK_NS ?? "";
/** The --server child's refreshAfterNs (decimal string), set by the parent per configuration; empty = default. */
const REFRESH_NS = process.env.BENCH_NODE_REFRESH_NS ?? "";
/** The --server child's signerThread setting ("on" | "off" | "auto"), set by the parent per configuration; empty = default. */
const SIGNER_THREAD = process.env.BENCH_NODE_SIGNER_THREAD ?? "";
/** Alternating node / bare node:http pairs of the serving-ratio row (issue goal ≥ 0.9). */
const RATIO_RUNS = Number(process.env.BENCH_RATIO_RUNS ?? 3);
/** Rounds of the serving ratio with node and bare node:http loaded at once (benchUtil.ts simultaneousRatio). */
const SIMULTANEOUS_RUNS = Number(process.env.BENCH_SIMULTANEOUS_RUNS ?? 5);
/**
 * What the child processes run: this script compiled into dist-bench/ by `bin/build-dist.js --bench`
 * (tsconfig.bench.json: the package's compiler settings), so the benchmarked node is built code as bin/ats-node.js
 * runs it, not TypeScript transpiled on load. `npm run bench:node` builds dist-bench/ first when it is stale;
 * main() checks again. When this file is itself the compiled
 * copy, the children run it.
 */
const CHILD_SCRIPT = __filename.endsWith(".js") ? __filename : join(__dirname, "..", "dist-bench", "scripts", "bench-node.js");
/** Verifications run before the measured ones (JIT, key caches): the verify rows are the steady state. */
const VERIFY_WARMUP = 500;
const NODE_CORE = 0;
const LOAD_CORE = 1;


/** The body the bare baselines answer: a proof JSON of the same size as the node's. */
const BASELINE_BODY = JSON.stringify({
  nanoMoment: "1732268493123456789",
  proof: { hardwareSignature: `0x${"ab".repeat(96)}`, nodeSignature: `0x${"cd".repeat(80)}`, accuracyNs: 50, hardwareId: `0x${"ab".repeat(32)}`, gps: null },
});

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
      ...(REFRESH_NS === "" ? {} : { refreshAfterNs: REFRESH_NS }),
      ...(SIGNER_THREAD === "" ? {} : { signerThread: SIGNER_THREAD }),
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
 * from what the machine allows.
 */
async function serveBaseline(): Promise<void> {
  const app = Fastify();
  app.get("/time/current", (_request, reply) => {
    void reply.type("application/json; charset=utf-8").send(BASELINE_BODY);
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

/** Child mode --baseline-http: plain node:http, the floor under any framework on this machine. */
async function serveHttpBaseline(): Promise<void> {
  const body = Buffer.from(BASELINE_BODY);
  const server = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": body.length });
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  process.send?.({ endpoints: { rest: `http://127.0.0.1:${port}`, grpc: "" } });
  const stop = (): void => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("disconnect", stop);
}

/** How long the --server child waits for its signer thread to load (compiled: ~150 ms). */
const SIGNER_READY_WAIT_MS = 10_000;

/** Whether the --server child's ticks should sign in the signer thread (its setting, or what "auto" decides here). */
function expectsSignerThread(): boolean {
  if (SIGNER_THREAD === "on" || SIGNER_THREAD === "off") return SIGNER_THREAD === "on";
  // The bench node's dev card and node clock are host-clock anchors: it can self-tick, unless refreshAfterNs needs
  // the serving thread to sign (attestor.ts start()). The machine's cores, not this process's affinity: a child
  // that failed to take its cores back (serve()) would sign in the serving thread, and the parent then stops.
  return defaultSignInWorker(REFRESH_NS === "" || BigInt(REFRESH_NS) === 0n, cpus().length);
}

/**
 * Child mode: serve until SIGTERM, report endpoints on IPC. When its ticks should sign in the signer thread, the
 * report waits until they do, so the parent can place the thread.
 */
async function serve(): Promise<void> {
  // Forked by the driver, which runs pinned to the load core: start with the machine's cores, as a node started on
  // this machine would ('auto' looks at them); the driver pins this process once it reports ready.
  unpin(process.pid);
  const started = await startBenchNode();
  if (expectsSignerThread()) {
    const deadlineMs = Date.now() + SIGNER_READY_WAIT_MS;
    while (started.service.stats().attestationSigner !== "worker" && Date.now() < deadlineMs) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  process.send?.({ endpoints: started.node.endpoints, signer: started.service.stats().attestationSigner, expectsThread: expectsSignerThread() });
  const stop = (): void => {
    void started.close().finally(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("disconnect", stop);
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
        // CURRENT_TIME is RequestType 0 (the description's numbering), also what an empty request asks for.
        client.GetCurrentTime({ type: "CURRENT_TIME" }, (error, response) => {
          // A response without the NodeInfo / ConsensusProof records is from a node on an older time.proto.
          if (error === null && response?.node?.node_id && response.consensus?.responders) completed += 1;
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

type ChildMode = "--server" | "--baseline" | "--baseline-http" | "--micro";
/** One table row: measure, result, goal. */
type Row = [string, string, string];


interface ChildStarted {
  child: ChildProcess;
  endpoints: { rest: string; grpc: string };
  /** Where the child's attestation ticks sign ("" for the bare servers). */
  signer: string;
  /** Whether a signer thread was moved to the load core (beside the serving thread, not on top of it). */
  signerOnLoadCore: boolean;
}

/**
 * Starts a child pinned to the node core; a --server child's signer thread goes to the load core. A child whose
 * ticks should sign in the thread but do not, or whose thread could not be placed, fails the benchmark.
 */
async function startChild(mode: ChildMode, env: Record<string, string> = {}): Promise<ChildStarted> {
  const child: ChildProcess = fork(CHILD_SCRIPT, [mode], {
    execArgv: [],
    env: { ...process.env, ...env },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  if (child.pid !== undefined) pin(child.pid, NODE_CORE);
  type Ready = { endpoints: { rest: string; grpc: string }; signer?: string; expectsThread?: boolean };
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once("message", (message) => resolve(message as Ready));
    child.once("exit", (code) => reject(new Error(`bench child ${mode} exited early (${code})`)));
  });
  // Threads started after the first pin (gRPC, SQLite, libuv pool, the signer) inherit it; pin again to be sure.
  if (child.pid !== undefined) pin(child.pid, NODE_CORE);
  const signerOnLoadCore = ready.signer === "worker" && pinThreadsNamed(child.pid, SIGNER_THREAD_NAME, LOAD_CORE) > 0;
  if (mode === "--server" && ready.expectsThread === true && !(ready.signer === "worker" && (signerOnLoadCore || !PINNING))) {
    await stopChild(child);
    throw new Error(`the signer thread did not start or could not be placed (ticks sign in: ${ready.signer}; on the load core: ${signerOnLoadCore})`);
  }
  return { child, endpoints: ready.endpoints, signer: ready.signer ?? "", signerOnLoadCore };
}

/** A child server pinned to the node core, as one load run of alternatingRatio needs it. */
async function childForRun(mode: "--server" | "--baseline-http", env: Record<string, string> = {}): Promise<ServerForRun> {
  const { child, endpoints } = await startChild(mode, env);
  return { url: `${endpoints.rest}/time/current`, stop: () => stopChild(child) };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
}

/** Cumulative bucket counts of timerpc_proof_age_seconds{transport="rest"} (le in ns → count), from /metrics. */
async function proofAgeBuckets(rest: string): Promise<Map<number, number>> {
  const text = await (await fetch(`${rest}/metrics`)).text();
  const buckets = new Map<number, number>();
  for (const match of text.matchAll(/^timerpc_proof_age_seconds_bucket\{le="([^"]+)",transport="rest"\} (\d+)$/gm)) {
    buckets.set(match[1] === "+Inf" ? Number.POSITIVE_INFINITY : Math.round(Number(match[1]) * 1e9), Number(match[2]));
  }
  return buckets;
}

/**
 * Quantile q of the observations between two scrapes, interpolated linearly inside its bucket (Prometheus'
 * histogram_quantile), in ms. The answer is exact to the bucket: docs/benchmarks.md quotes the bucket bounds too.
 */
function ageQuantileMs(before: Map<number, number>, after: Map<number, number>, q: number): number {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((bound) => after.get(bound)! - (before.get(bound) ?? 0));
  const total = counts[counts.length - 1] ?? 0;
  if (total === 0) return Number.NaN;
  const rank = q * total;
  for (let i = 0; i < bounds.length; i += 1) {
    if (counts[i]! >= rank) {
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      const upper = bounds[i]!;
      if (!Number.isFinite(upper)) return lower / 1e6;
      const below = i === 0 ? 0 : counts[i - 1]!;
      const inBucket = counts[i]! - below;
      return (lower + ((upper - lower) * (rank - below)) / Math.max(inBucket, 1)) / 1e6;
    }
  }
  return Number.NaN;
}

/**
 * Child mode --micro: client-side proof age against an idle in-process node (the card clock that stamped the
 * proof reads the arrival time: no cross-process anchoring error), then verify and card-sign micro-benchmarks,
 * in a fresh process (no heap or timers left over from the load runs). Sends its rows on IPC.
 */
async function micro(): Promise<void> {
  const rows: Row[] = [];
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
    rows.push([
      "Proof age at arrival in a client (fetch, one at a time; includes the HTTP round trip), p50 / p99",
      `${fmt(percentile(agesMs, 50), 3)} / ${fmt(percentile(agesMs, 99), 3)} ms`,
      "",
    ]);

    const proof = local.service.current().proof;
    const context = createVerifyContext({
      cards: { [local.identity.cardId]: { publicKey: local.identity.cardPublicKey, revoked: false } },
      nodes: [local.identity.nodeAddress],
      nowNs: local.card.readTimeNs(),
    });
    await local.node.close(); // stop the tick so the micro-benchmarks have the core to themselves
    await local.service.stop();
    // Fresh: distinct proofs, unknown to the context's recovery memo (attest() is given none to seed), so every
    // node entry pays a secp256k1 recovery (what a client pays).
    // The first VERIFY_WARMUP verifications (JIT, caches) are not measured: the row is the steady state.
    const freshProofs = Array.from({ length: VERIFY_WARMUP + 3_000 }, (_, index) =>
      attest({ card: local.identity.cardKey, nodes: [local.identity.nodeKey], nanoMoment: proof.nanoMoment - BigInt(index + 1), accuracy: proof.accuracy, nodeTimestampNs: proof.nanoMoment }),
    );
    context.recoveryMemo?.clear();
    let freshIndex = 0;
    const verifyNextFresh = (): void => {
      if (!verifyTimeProof(freshProofs[freshIndex++]!, context).valid) throw new Error("benchmark proof does not verify");
    };
    for (let i = 0; i < VERIFY_WARMUP; i += 1) verifyNextFresh();
    const freshSamples = timeIt(freshProofs.length - VERIFY_WARMUP, verifyNextFresh);
    const freshAvgMs = freshSamples.reduce((sum, value) => sum + value, 0) / freshSamples.length;
    rows.push(["Off-chain verify, fresh proofs (1 node entry, no memo): average, per second", `${fmt(freshAvgMs, 3)} ms, ${fmt(1000 / freshAvgMs)} /s`, "≤ 0.3 ms"]);
    // Memo hit: a proof verified again and again (every client, relay and the node itself re-check proofs).
    const verifySamples = timeIt(2_000, () => {
      if (!verifyTimeProof(proof, context).valid) throw new Error("benchmark proof does not verify");
    });
    const verifyAvgMs = verifySamples.reduce((sum, value) => sum + value, 0) / verifySamples.length;
    rows.push(["Off-chain verify, a proof seen before (recovery memo hit): average, per second", `${fmt(verifyAvgMs, 3)} ms, ${fmt(1000 / verifyAvgMs)} /s`, "≤ 0.3 ms"]);

    let moment = proof.nanoMoment;
    const signSamples = timeIt(2_000, () => {
      moment += 1n;
      local.card.signHardware(moment);
    });
    rows.push(["Card sign (P-256, dev card) p50 / p99", `${fmt(percentile(signSamples, 50), 3)} / ${fmt(percentile(signSamples, 99), 3)} ms`, ""]);
  } finally {
    await local.close().catch(() => undefined);
  }

  process.send?.({ rows });
}

/** Runs --micro pinned to the load core and returns its rows. */
async function microChild(): Promise<Row[]> {
  const child: ChildProcess = fork(CHILD_SCRIPT, ["--micro"], { execArgv: [], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  if (child.pid !== undefined) pin(child.pid, LOAD_CORE);
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const rows = await new Promise<Row[]>((resolve, reject) => {
    child.once("message", (message) => resolve((message as { rows: Row[] }).rows));
    void exited.then((code) => reject(new Error(`bench child --micro exited early (${code})`)));
  });
  await exited;
  return rows;
}

/** One configuration of the benchmarked node: its label in the table and the --server child's environment. */
interface NodeConfiguration {
  label: string;
  env: Record<string, string>;
}

const NODE_DEFAULTS: NodeConfiguration = { label: "node (defaults)", env: {} };
/** signerThread "off": every tick signed in the serving thread (the default before the self-ticking thread). */
const NODE_SIGNER_THREAD_OFF: NodeConfiguration = { label: "node, signerThread off", env: { BENCH_NODE_SIGNER_THREAD: "off" } };
/** refreshAfterNs 1 ms: the setting that bounds proof age under saturation. */
const NODE_REFRESH: NodeConfiguration = { label: "node, refreshAfterNs 1 ms", env: { BENCH_NODE_REFRESH_NS: "1000000" } };

/** Where a node's ticks sign, for a row label. */
function signerLabel(signer: string): string {
  return signer === "worker" ? `signer thread, on core ${LOAD_CORE}` : "serving thread";
}

/** The load rows of one node configuration; the gRPC row with `withGrpc`. */
async function nodeRuns(nodeConfig: NodeConfiguration, withGrpc: boolean): Promise<Row[]> {
  const rows: Row[] = [];
  const { child, endpoints, signer } = await startChild("--server", nodeConfig.env);
  const config = `${nodeConfig.label} (ticks signed in the ${signerLabel(signer)})`;
  try {
    const url = `${endpoints.rest}/time/current`;
    const beforeMax = await proofAgeBuckets(endpoints.rest);
    const max = await withSteal(() => maxLoad(url, DURATION_S));
    const afterMax = await proofAgeBuckets(endpoints.rest);
    reportFailures(`${config}, max throughput`, max.result);
    rows.push([`${config}: GET /time/current, max throughput (${WRK ? "wrk" : "autocannon"}, 100 connections)`, `${fmt(max.result.requestsPerSecond)} req/s (steal ${fmt(max.stealPercent)} %)`, "(see the ratio row)"]);
    rows.push([`${config}: latency at max throughput, p50 / p99`, `${fmt(max.result.p50Ms, 2)} / ${fmt(max.result.p99Ms, 2)} ms`, ""]);
    rows.push([
      `${config}: proof age when served (timerpc_proof_age_seconds) at max throughput, p50 / p99`,
      `${fmt(ageQuantileMs(beforeMax, afterMax, 0.5), 3)} / ${fmt(ageQuantileMs(beforeMax, afterMax, 0.99), 3)} ms`,
      "≤ 1 ms",
    ]);

    const beforeFixed = await proofAgeBuckets(endpoints.rest);
    const fixed = await withSteal(() => runAutocannon(url, 50, DURATION_S, 10_000));
    const afterFixed = await proofAgeBuckets(endpoints.rest);
    reportFailures(`${config}, fixed rate`, fixed.result);
    rows.push([
      `${config}: GET /time/current at a fixed 10,000 req/s (autocannon, 50 connections), p50 / p99`,
      `${fmt(fixed.result.p50Ms, 2)} / ${fmt(fixed.result.p99Ms, 2)} ms (${fmt(fixed.result.requestsPerSecond)} req/s served, steal ${fmt(fixed.stealPercent)} %)`,
      "p99 ≤ 3 ms",
    ]);
    rows.push([
      `${config}: proof age when served at 10,000 req/s, p50 / p99`,
      `${fmt(ageQuantileMs(beforeFixed, afterFixed, 0.5), 3)} / ${fmt(ageQuantileMs(beforeFixed, afterFixed, 0.99), 3)} ms`,
      "≤ 1 ms",
    ]);

    if (signer === "worker" && threadsNamed(child.pid, SIGNER_THREAD_NAME).length === 0) {
      throw new Error("the signer thread is gone after the load runs (the node fell back to signing in the serving thread): these rows are not valid");
    }
    if (withGrpc) {
      const rpc = await grpcLoop(endpoints.grpc, DURATION_S, 64);
      rows.push([`${config}: gRPC GetCurrentTime (JS client, 64 in flight)`, `${fmt(rpc.perSecond)} req/s (p50 ${fmt(rpc.p50Ms, 2)} / p99 ${fmt(rpc.p99Ms, 2)} ms)`, ""]);
    }
  } finally {
    await stopChild(child);
  }
  return rows;
}

/** CPU time the hypervisor gave to other guests (/proc/stat "steal"), as a % of all CPU time; NaN elsewhere. */
function readCpuTimes(): { steal: number; total: number } | null {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    return { steal: fields[7] ?? 0, total: fields.reduce((sum, value) => sum + value, 0) };
  } catch {
    return null;
  }
}

/** Runs a load and reports the share of CPU time stolen by the hypervisor meanwhile (a noisy neighbour). */
async function withSteal<T>(run: () => Promise<T> | T): Promise<{ result: T; stealPercent: number }> {
  const before = readCpuTimes();
  const result = await run();
  const after = readCpuTimes();
  const stealPercent = before === null || after === null || after.total === before.total ? Number.NaN : (100 * (after.steal - before.steal)) / (after.total - before.total);
  return { result, stealPercent };
}

/** Builds dist-bench/ when it is missing or older than the sources (bin/build-dist.js), so the children run today's code. */
function ensureChildBuilt(): void {
  if (__filename.endsWith(".js")) return;
  // A plain-JavaScript build helper of this package (bin/), loaded by path: no TypeScript types.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { ensureBuilt, TARGETS } = require(join(__dirname, "..", "bin", "build-dist.js")) as { ensureBuilt(options: { target: unknown }): boolean; TARGETS: { bench: unknown } };
  ensureBuilt({ target: TARGETS.bench });
}

async function main(): Promise<void> {
  ensureChildBuilt();
  const loadAtStart = loadavg();
  pin(process.pid, LOAD_CORE);
  const rows: Row[] = [];
  const loadTool = WRK ? "wrk" : "autocannon";

  // ------------------------------------------------------------- baselines: bare servers in a child process
  for (const [mode, label] of [
    ["--baseline-http", "Baseline: bare node:http, constant body of the same size"],
    ["--baseline", "Baseline: bare fastify, constant body of the same size"],
  ] as const) {
    const { child, endpoints } = await startChild(mode);
    try {
      const { result, stealPercent } = await withSteal(() => maxLoad(`${endpoints.rest}/time/current`, Math.min(DURATION_S, 5)));
      reportFailures(mode, result);
      rows.push([`${label} (${loadTool}, 100 connections)`, `${fmt(result.requestsPerSecond)} req/s (steal ${fmt(stealPercent)} %)`, "(ceiling of one core)"]);
      if (mode === "--baseline-http") {
        // What the fixed-rate generator itself measures against a server that does nothing: the floor of the
        // node's fixed-rate row (autocannon sends each connection's share in bursts).
        const fixed = await runAutocannon(`${endpoints.rest}/time/current`, 50, DURATION_S, 10_000);
        reportFailures(`${mode} fixed rate`, fixed);
        rows.push([
          "Baseline: bare node:http at a fixed 10,000 req/s (autocannon, 50 connections): p50 / p99",
          `${fmt(fixed.p50Ms, 2)} / ${fmt(fixed.p99Ms, 2)} ms (${fmt(fixed.requestsPerSecond)} req/s served)`,
          "(floor of this measure)",
        ]);
      }
    } finally {
      await stopChild(child);
    }
  }

  // ------------------------------------------------------------- the serving ratio: node vs bare node:http
  // The defaults (on ≥ 2 cores: the self-ticking signer thread, moved to the load core, beside the serving thread as
  // on a machine with a core to spare), and signerThread "off" (every signature in the serving thread); alternating
  // runs, then (with wrk) both servers loaded at once (benchUtil.ts simultaneousRatio).
  const ratioRows: Row[] = [];
  const designs = [
    { measure: alternatingRatio, runs: RATIO_RUNS, how: `${RATIO_RUNS} alternating runs` },
    ...(WRK ? [{ measure: simultaneousRatio, runs: SIMULTANEOUS_RUNS, how: `both loaded at once by two wrk, ${SIMULTANEOUS_RUNS} rounds` }] : []),
  ];
  for (const design of designs) {
    for (const nodeConfig of [NODE_DEFAULTS, NODE_SIGNER_THREAD_OFF]) {
      const signedIn = new Set<string>();
      const serving = await design.measure({
        runs: design.runs,
        durationS: Math.min(DURATION_S, 5),
        startSubject: async () => {
          const { child, endpoints, signer } = await startChild("--server", nodeConfig.env);
          signedIn.add(signerLabel(signer));
          return { url: `${endpoints.rest}/time/current`, stop: () => stopChild(child) };
        },
        startBaseline: () => childForRun("--baseline-http"),
      });
      ratioRows.push([
        `${nodeConfig.label} (ticks signed in the ${[...signedIn].join(" / ")}) ÷ bare node:http: GET /time/current, serving thread and bare server on the same pinned core (${loadTool}, 100 connections, ${design.how})`,
        `${fmtRange(serving.subject)} vs ${fmtRange(serving.baseline)} req/s: ratio **${fmtRange(serving.ratios, 2)}**`,
        "≥ 0.9",
      ]);
    }
  }
  rows.unshift(...ratioRows);

  // ------------------------------------------------------------- load runs against a node in a child process
  rows.push(...(await nodeRuns(NODE_DEFAULTS, true)));
  rows.push(...(await nodeRuns(NODE_SIGNER_THREAD_OFF, false)));
  rows.push(...(await nodeRuns(NODE_REFRESH, false)));

  // ------------------------------------------------------------- micro-benchmarks in a fresh process
  rows.push(...(await microChild()));

  const cpu = cpus()[0]?.model ?? "unknown CPU";
  const layout = PINNING
    ? `node pinned to core ${NODE_CORE} (its signer thread to core ${LOAD_CORE} where a row says so), load generators and micro-benchmarks to core ${LOAD_CORE} (taskset)`
    : "node and load generators share all cores (no pinning)";
  console.log(`\n### Attesting node benchmark — ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC\n`);
  console.log(
    `Node ${process.version}, ${cpu} × ${cpus().length} cores, load average at start ${loadAtStart.map((value) => value.toFixed(1)).join(" / ")}; ` +
      `${layout}; max-throughput load by ${loadTool}; ${DURATION_S} s per load run; ` +
      `attestation tick ${TICK_NS === "" ? "default (1 ms)" : `${TICK_NS} ns`}; ` +
      `verify rows: steady state after ${VERIFY_WARMUP} warm-up verifications.\n`,
  );
  console.log("| measure | result | goal |");
  console.log("|---|---|---|");
  for (const [measure, result, goal] of rows) console.log(`| ${measure} | ${result} | ${goal} |`);
}

const MODES: Record<ChildMode, () => Promise<void>> = {
  "--server": serve,
  "--baseline": serveBaseline,
  "--baseline-http": serveHttpBaseline,
  "--micro": async () => {
    await micro();
    process.exit(0);
  },
};
const childMode = (Object.keys(MODES) as ChildMode[]).find((mode) => process.argv.includes(mode));
if (childMode !== undefined) {
  MODES[childMode]().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
} else if (process.argv.includes("--pkcs11")) {
  // Loaded on use: the section needs the optional pkcs11js binding and SoftHSM2.
  import("./benchPkcs11")
    .then(async ({ pkcs11BenchRows }) => {
      const rows = await pkcs11BenchRows();
      console.log(`\n### PKCS#11 token benchmark — ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC\n`);
      console.log(`Node ${process.version}, ${cpus()[0]?.model ?? "unknown CPU"} × ${cpus().length} cores, load average at start ${loadavg().map((value) => value.toFixed(1)).join(" / ")}; SoftHSM2 in a temporary token folder.\n`);
      console.log("| measure | result | expectation |");
      console.log("|---|---|---|");
      for (const [measure, result, goal] of rows) console.log(`| ${measure} | ${result} | ${goal} |`);
      process.exit(0);
    })
    .catch((error: unknown) => {
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
