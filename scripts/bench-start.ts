/**
 * `npm run bench:start`: how long `npm start` takes to bring the local network up, as a user sees it. Each run is
 * `npm start` itself (npm, the build checks, scripts/start.ts) in a fresh state folder (ATS_NETWORK_DIR, a
 * temporary one; the programs pick free ports on 127.0.0.1), timed from the spawn to each progress line it prints,
 * then stopped as a terminal's Ctrl-C stops it: SIGINT to its whole process group, timed to its exit. A run that
 * does not end with "Stopped:" (every program stopped) and npm's exit (0, or by the SIGINT, as npm re-raises it)
 * fails the benchmark.
 *
 *   BENCH_START_RUNS   runs (default 3); the table gives each step's median and range over the runs
 *
 * dist/, the explorer's bundle and the contracts are brought up to date once before the first run, so that every
 * run measures the start of a checkout that is already built (what a user sees from the second `npm start` on);
 * a first start after a change also rebuilds what changed, and says so.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fmt, fmtRange, percentile } from "./benchUtil";

const ROOT = join(__dirname, "..");
const RUNS = Number(process.env.BENCH_START_RUNS ?? 3);
/** A run that takes longer is stopped (its process group killed) and fails the benchmark. */
const RUN_TIMEOUT_MS = 300_000;
/** Ctrl-C stops everything well within this; beyond it the group is killed and the run fails. */
const STOP_TIMEOUT_MS = 60_000;

/**
 * The steps of a start, each ending at the first stdout line its pattern matches (after the previous step's):
 * scripts/start.ts and scripts/network.ts print a line as each step begins, so a step runs from one line to the
 * next. A line that no longer appears (the progress lines changed) fails the run, naming the step.
 */
const STEPS: readonly { step: string; endsAt: RegExp }[] = [
  { step: "npm, dist/ and explorer checks, TypeScript loader", endsAt: /^Attested Time: a local network/ },
  { step: "the network's and the tour's code loaded (transpiled on load)", endsAt: /^\s+compiling the contracts/ },
  { step: "Hardhat loaded, contracts compiled (skipped when unchanged)", endsAt: /^\s+starting: chains/ },
  { step: "chains and attesting nodes, side by side", endsAt: /^\s+chains and nodes are up/ },
  { step: "temporal gateway", endsAt: /^\s+deploying the contracts/ },
  { step: "contracts deployed, nodes registered", endsAt: /^\s+starting the relayer/ },
  { step: "relayer", endsAt: /^\s+starting the catalog/ },
  // The catalog waits for the network's release, built in the background since the start when the sources changed.
  { step: "catalog (to every endpoint printed)", endsAt: /^\s+relayer: x-api-key/ },
  { step: "the tour (to \"The network is up\")", endsAt: /^The network is up\./ },
];
/** Printed once npm start waits for Ctrl-C: the start is over. */
const WAITING = /^Press Ctrl-C to stop\./;

interface RunResult {
  /** Each step's duration, ms, in STEPS order. */
  stepMs: number[];
  /** Spawn to every endpoint printed (the programs up, before the tour), ms. */
  programsUpMs: number;
  /** Spawn to "The network is up" (after the tour), ms. */
  networkUpMs: number;
  /** SIGINT to the exit of npm start, ms. */
  stopMs: number;
}

/** Sends `signal` to the run's whole process group (npm, scripts/start.ts and every program it started). */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is gone already
  }
}

function runOnce(dir: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const startedMs = performance.now();
    // detached: a process group of its own, which Ctrl-C's SIGINT reaches as a whole, as in a terminal.
    const child = spawn("npm", ["start"], { cwd: ROOT, env: { ...process.env, ATS_NETWORK_DIR: dir }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const pid = child.pid!;
    const stepEndsMs: number[] = [];
    let stdout = "";
    let pending = "";
    let stderrTail = "";
    let stopSentMs: number | undefined;
    let failure: Error | undefined;
    const fail = (error: Error) => {
      failure ??= error;
      signalGroup(pid, "SIGKILL");
    };
    const runTimer = setTimeout(() => fail(new Error(`npm start was not up within ${RUN_TIMEOUT_MS} ms; last output:\n${stdout.slice(-2_000)}\n${stderrTail}`)), RUN_TIMEOUT_MS);
    let stopTimer: NodeJS.Timeout | undefined;
    const onLine = (line: string) => {
      const nowMs = performance.now() - startedMs;
      const next = STEPS[stepEndsMs.length];
      if (next !== undefined && next.endsAt.test(line)) stepEndsMs.push(nowMs);
      if (WAITING.test(line) && stopSentMs === undefined) {
        if (stepEndsMs.length < STEPS.length) {
          fail(new Error(`npm start was up without the progress line of step "${STEPS[stepEndsMs.length]!.step}" (${STEPS[stepEndsMs.length]!.endsAt})`));
          return;
        }
        clearTimeout(runTimer);
        stopSentMs = nowMs;
        signalGroup(pid, "SIGINT");
        stopTimer = setTimeout(() => fail(new Error(`npm start did not stop within ${STOP_TIMEOUT_MS} ms of Ctrl-C`)), STOP_TIMEOUT_MS);
      }
    };
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) onLine(line);
    });
    child.stderr.on("data", (chunk: Buffer) => (stderrTail = (stderrTail + chunk.toString()).slice(-4_000)));
    child.once("error", fail);
    child.once("exit", (code, signal) => {
      const exitedMs = performance.now() - startedMs;
      clearTimeout(runTimer);
      clearTimeout(stopTimer);
      signalGroup(pid, "SIGKILL"); // nothing of the run outlives it, also when it failed
      if (failure !== undefined) return reject(failure);
      if (stopSentMs === undefined) return reject(new Error(`npm start exited (${code ?? signal}) before it was up:\n${stdout.slice(-2_000)}\n${stderrTail}`));
      // npm ends itself with the signal that stopped its script (exit by SIGINT, as in a terminal); scripts/start.ts
      // says "Stopped:" only after it stopped every program and exits 0.
      const npmStopped = code === 0 || signal === "SIGINT";
      if (!npmStopped || !/^Stopped:/m.test(stdout)) return reject(new Error(`npm start did not stop cleanly on Ctrl-C (exit ${code ?? signal}):\n${stdout.slice(-1_000)}\n${stderrTail}`));
      const stepMs = stepEndsMs.map((endMs, index) => endMs - (index === 0 ? 0 : stepEndsMs[index - 1]!));
      resolve({ stepMs, programsUpMs: stepEndsMs[STEPS.length - 2]!, networkUpMs: stepEndsMs[STEPS.length - 1]!, stopMs: exitedMs - stopSentMs });
    });
  });
}

async function main(): Promise<void> {
  if (!Number.isInteger(RUNS) || RUNS < 1) throw new RangeError(`BENCH_START_RUNS must be an integer ≥ 1, got ${process.env.BENCH_START_RUNS}`);
  // What npm start would otherwise build in the first run only (see the header).
  execFileSync(process.execPath, [join(ROOT, "bin", "build-dist.js"), "--if-stale"], { cwd: ROOT, stdio: "inherit" });
  execFileSync(process.execPath, [join(ROOT, "bin", "build-explorer.js"), "--if-stale"], { cwd: ROOT, stdio: "inherit" });
  execFileSync("npx", ["hardhat", "compile", "--quiet"], { cwd: ROOT, stdio: "inherit" });
  const runs: RunResult[] = [];
  for (let run = 0; run < RUNS; run++) {
    const dir = mkdtempSync(join(tmpdir(), "ats-bench-start-"));
    try {
      const result = await runOnce(dir);
      runs.push(result);
      process.stderr.write(`run ${run + 1}/${RUNS}: programs up in ${fmt(result.programsUpMs / 1_000, 1)} s, network up (tour done) in ${fmt(result.networkUpMs / 1_000, 1)} s, stopped in ${fmt(result.stopMs / 1_000, 1)} s\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const seconds = (values: number[]) => values.map((ms) => ms / 1_000);
  const median = (values: number[]) => percentile([...values].sort((a, b) => a - b), 50);
  const row = (what: string, valuesMs: number[]) => `| ${what} | ${fmt(median(seconds(valuesMs)), 1)} | ${fmtRange(seconds(valuesMs), 1)} |`;
  console.log(`\nnpm start, ${new Date().toISOString().slice(0, 16)}Z, ${cpus().length} × ${cpus()[0]?.model ?? "unknown CPU"}, Node ${process.version}, ${RUNS} run${RUNS === 1 ? "" : "s"} (median, range over runs)\n`);
  console.log("| step | median, s | range, s |");
  console.log("|---|---|---|");
  STEPS.forEach(({ step }, index) => console.log(row(step, runs.map((r) => r.stepMs[index]!))));
  console.log(row("**programs up** (every endpoint printed)", runs.map((r) => r.programsUpMs)));
  console.log(row("**network up** (\"The network is up\", after the tour)", runs.map((r) => r.networkUpMs)));
  console.log(row("stop (Ctrl-C to exit)", runs.map((r) => r.stopMs)));
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench:start failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
