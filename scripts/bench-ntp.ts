/**
 * NTP time host benchmark (`npm run bench:ntp`, issue 26.4). Not a test: numbers depend on the machine. Prints a
 * markdown table with the date, Node version, CPU and how the cores were shared.
 *
 * What it measures: NTP requests answered per second by one core, as a ratio to a bare UDP echo server (a dgram
 * socket sending each datagram back, nothing else) on the same core: what the node's NTP path (classification,
 * rate limiting, the card clock read twice, the state, the 48-byte reply) costs over a socket that does nothing.
 *
 * Layout: each server runs in a CHILD process (`--server ntp|echo`) pinned to core 0 with `taskset` (when present
 * and ≥ 2 cores; BENCH_PIN=0 turns pinning off); the load generator runs here, on core 1. The NTP server is a whole
 * lone node (startNode with ntpEnabled, the dev card, 1 ms attestation ticks running as usual), with per-client
 * rate limiting off (ntpClientIntervalMs 0: the load comes from one address); the rate limiter's own cost is one
 * Map lookup and re-insert per request.
 *
 * The load generator keeps BENCH_NTP_WINDOW (default 64) requests in flight on each of BENCH_NTP_SOCKETS (default
 * 8) sockets, sending a new request as each reply arrives; a socket that hears nothing for 50 ms (its requests or
 * replies dropped by a full socket buffer) starts a new window. A JavaScript load generator on one core may not
 * saturate the echo server, so each row also gives the server's CPU use (its utime + stime over the run, from
 * /proc) and the replies per CPU-second of the server core: the cost ratio that does not depend on saturation
 * (the node's CPU includes its attestation ticks, measured alone in the second before the load; subtracting them
 * does not work: under load they run late and warm and cost less than idle, as bench-node.ts found).
 *
 * BENCH_RUNS (default 3) alternating pairs of BENCH_DURATION_S (default 5) s runs, NTP then echo, fresh servers each
 * time: ranges over the runs, and the ratio of each pair.
 */
import { fork, type ChildProcess } from "node:child_process";
import { createSocket, type Socket } from "node:dgram";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { createDevIdentity } from "../protocol/devca";
import { DevTimeCard } from "../node/card/dev";
import { loadConfig } from "../node/config";
import { createTimeService } from "../node/compose";
import { decodeNtpReply, encodeNtpRequest } from "../node/ntp/packet";
import { startNode } from "../node/server";
import { fmt, fmtRange, pin, PINNING } from "./benchUtil";

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
const SOCKETS = Number(process.env.BENCH_NTP_SOCKETS ?? 8);
const WINDOW = Number(process.env.BENCH_NTP_WINDOW ?? 64);
const SERVER_CORE = 0;
const LOAD_CORE = 1;
/** A socket silent this long gets a new window (its datagrams were dropped), ms. */
const STALL_MS = 50;
const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ on Linux: the unit of /proc/<pid>/stat utime and stime

type ServerKind = "ntp" | "echo";

/** Child mode: one server on 127.0.0.1, its port sent on IPC; stops on SIGTERM. */
async function serve(kind: ServerKind): Promise<void> {
  if (kind === "echo") {
    const socket = createSocket("udp4");
    socket.on("message", (message, remote) => socket.send(message, remote.port, remote.address));
    await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
    process.send!({ port: socket.address().port });
    process.once("SIGTERM", () => socket.close(() => process.exit(0)));
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "ats-bench-ntp-"));
  const identity = await createDevIdentity();
  const logger = pino({ level: "silent" });
  const config = loadConfig({
    env: {},
    cwd: dir,
    overrides: {
      host: "127.0.0.1",
      restPort: 0,
      grpcEnabled: false,
      dataDir: join(dir, "data"),
      keyDir: join(dir, "keys"),
      trustedRootsPem: [identity.ca.certificatePem],
      ntpEnabled: true,
      ntpHost: "127.0.0.1",
      ntpPort: 0,
      ntpClientIntervalMs: 0,
      logLevel: "silent",
    },
  });
  const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
  const service = createTimeService({ config, card, nodeKey: identity.nodeKey, logger, ownsCard: true });
  await service.start();
  const node = await startNode({ config, logger, service });
  process.send!({ port: Number(new URL(node.endpoints.ntp).port) });
  process.once("SIGTERM", () => {
    void node
      .close()
      .then(() => service.stop())
      .finally(() => {
        rmSync(dir, { recursive: true, force: true });
        process.exit(0);
      });
  });
}

interface Child {
  process: ChildProcess;
  port: number;
}

async function startServer(kind: ServerKind): Promise<Child> {
  const child = fork(__filename, ["--server", kind], { execArgv: ["-r", join(__dirname, "..", "bin", "register-ts.js")], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once("message", (message: { port: number }) => resolve(message.port));
    child.once("exit", (code) => reject(new Error(`the ${kind} server exited (${code}) before listening`)));
  });
  pin(child.pid, SERVER_CORE);
  // Let it settle on its core (JIT of the start-up code, the node's first ticks) before loading it.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  return { process: child, port };
}

async function stopServer(child: Child): Promise<void> {
  if (child.process.exitCode !== null) return;
  const exited = new Promise((resolve) => child.process.once("exit", resolve));
  child.process.kill("SIGTERM");
  await exited;
}

/** utime + stime of a process, seconds (Linux /proc); null elsewhere. */
function cpuSeconds(pid: number | undefined): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

interface RunResult {
  repliesPerSecond: number;
  /** Server CPU in the second before the load, as a fraction of one core (the node's attestation ticks); null without /proc. */
  idleCpu: number | null;
  /** Server CPU over the run, as a fraction of one core; null without /proc. */
  serverCpu: number | null;
  /** Replies per CPU-second of the server; null without /proc. */
  repliesPerCpuSecond: number | null;
}

/** Closed-loop UDP load against 127.0.0.1:port for `durationS`, counting replies (NTP replies are checked once). */
async function load(child: Child, durationS: number, kind: ServerKind): Promise<RunResult> {
  const idleBefore = cpuSeconds(child.process.pid);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const idleAfter = cpuSeconds(child.process.pid);
  const idleCpu = idleBefore === null || idleAfter === null ? null : idleAfter - idleBefore;
  const request = encodeNtpRequest(BigInt(Date.now()) * 1_000_000n);
  const sockets: Socket[] = [];
  let replies = 0;
  let measuring = false;
  let checked = false;
  const lastHeardMs: number[] = [];
  for (let index = 0; index < SOCKETS; index += 1) {
    const socket = createSocket("udp4");
    socket.on("message", (message) => {
      if (measuring) replies += 1;
      lastHeardMs[index] = performance.now();
      if (!checked && kind === "ntp") {
        checked = true;
        const reply = decodeNtpReply(message, BigInt(Date.now()) * 1_000_000n);
        if (reply.mode !== 4 || reply.stratum !== 1) throw new Error(`not an NTP server reply: mode ${reply.mode}, stratum ${reply.stratum}`);
      }
      socket.send(request, child.port, "127.0.0.1");
    });
    await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
    sockets.push(socket);
  }
  const fill = (index: number): void => {
    lastHeardMs[index] = performance.now();
    for (let sent = 0; sent < WINDOW; sent += 1) sockets[index]!.send(request, child.port, "127.0.0.1");
  };
  sockets.forEach((_, index) => fill(index));
  const watchdog = setInterval(() => {
    const now = performance.now();
    sockets.forEach((_, index) => {
      if (now - lastHeardMs[index]! > STALL_MS) fill(index);
    });
  }, STALL_MS);
  await new Promise((resolve) => setTimeout(resolve, 1_000)); // warm-up
  const cpuBefore = cpuSeconds(child.process.pid);
  const startMs = performance.now();
  measuring = true;
  await new Promise((resolve) => setTimeout(resolve, durationS * 1_000));
  measuring = false;
  const elapsedS = (performance.now() - startMs) / 1_000;
  const cpuAfter = cpuSeconds(child.process.pid);
  clearInterval(watchdog);
  await Promise.all(sockets.map((socket) => new Promise<void>((resolve) => socket.close(() => resolve()))));
  const serverCpu = cpuBefore === null || cpuAfter === null ? null : (cpuAfter - cpuBefore) / elapsedS;
  const repliesPerSecond = replies / elapsedS;
  return { repliesPerSecond, idleCpu, serverCpu, repliesPerCpuSecond: serverCpu === null || serverCpu === 0 ? null : repliesPerSecond / serverCpu };
}

async function main(): Promise<void> {
  pin(process.pid, LOAD_CORE);
  const results: Record<ServerKind, RunResult[]> = { ntp: [], echo: [] };
  for (let run = 0; run < RUNS; run += 1) {
    for (const kind of ["ntp", "echo"] as const) {
      const child = await startServer(kind);
      try {
        results[kind].push(await load(child, DURATION_S, kind));
      } finally {
        await stopServer(child);
      }
    }
  }
  const rate = (kind: ServerKind) => results[kind].map((result) => result.repliesPerSecond);
  const cpu = (kind: ServerKind) => results[kind].map((result) => (result.serverCpu ?? Number.NaN) * 100);
  const perCpu = (kind: ServerKind) => results[kind].map((result) => result.repliesPerCpuSecond ?? Number.NaN);
  const ratios = results.ntp.map((result, index) => result.repliesPerSecond / results.echo[index]!.repliesPerSecond);
  const cpuRatios = results.ntp.map((result, index) => (result.repliesPerCpuSecond ?? Number.NaN) / (results.echo[index]!.repliesPerCpuSecond ?? Number.NaN));

  const model = cpus()[0]?.model ?? "unknown CPU";
  console.log(
    `\nbench:ntp — ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${cpus().length} × ${model}, Node ${process.version}, ${
      PINNING ? `server pinned to core ${SERVER_CORE}, load generator to core ${LOAD_CORE} (taskset)` : "not pinned"
    }; ${RUNS} alternating runs of ${DURATION_S} s, ${SOCKETS} sockets × ${WINDOW} in flight\n`,
  );
  console.log("| measure | NTP time host (node) | bare UDP echo | NTP ÷ echo |");
  console.log("|---|---|---|---|");
  console.log(`| replies/s | ${fmtRange(rate("ntp"))} | ${fmtRange(rate("echo"))} | ${fmtRange(ratios, 2)} |`);
  const idle = (kind: ServerKind) => results[kind].map((result) => (result.idleCpu ?? Number.NaN) * 100);
  console.log(`| server CPU idle, the second before the load (% of its core) | ${fmtRange(idle("ntp"))} | ${fmtRange(idle("echo"))} | |`);
  console.log(`| server CPU (% of its core) | ${fmtRange(cpu("ntp"))} | ${fmtRange(cpu("echo"))} | |`);
  console.log(`| replies per server CPU-second | ${fmtRange(perCpu("ntp"))} | ${fmtRange(perCpu("echo"))} | ${fmtRange(cpuRatios, 2)} |`);
  console.log(`\nper run (NTP / echo replies/s): ${results.ntp.map((result, index) => `${fmt(result.repliesPerSecond)} / ${fmt(results.echo[index]!.repliesPerSecond)}`).join("; ")}`);
}

if (process.argv[2] === "--server") {
  serve(process.argv[3] as ServerKind).catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
} else {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
