/**
 * What the benchmarks (bench-node.ts, bench-attack.ts, bench-mesh.ts) share: pinning processes to cores, the load
 * generators (wrk when installed, else autocannon), and how numbers are summarised and printed.
 */
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { cpus } from "node:os";

/** Whether `command` can be run (its version flag answers at all). */
export function commandExists(command: string, versionFlag = "--version"): boolean {
  return spawnSync(command, [versionFlag], { stdio: "ignore" }).error === undefined;
}

/** Whether processes can be pinned: taskset present, ≥ 2 cores, not turned off (BENCH_PIN=0). */
export const PINNING = process.env.BENCH_PIN !== "0" && cpus().length >= 2 && commandExists("taskset");

/** Pins every thread of `pid` (present and future) to one core; a process that already exited is skipped. */
export function pin(pid: number | undefined, core: number): void {
  if (!PINNING || pid === undefined) return;
  try {
    execFileSync("taskset", ["-a", "-p", "-c", String(core), String(pid)], { stdio: "ignore" });
  } catch {
    // the process may have exited meanwhile
  }
}

/**
 * Gives every thread of `pid` all the machine's cores back. A child forked by a pinned process inherits its one
 * core, and a program that sizes itself by the cores it may use (the node's signerThread "auto":
 * os.availableParallelism) must start as it would on this machine; the caller pins it again once it is ready.
 */
export function unpin(pid: number | undefined): void {
  if (!PINNING || pid === undefined) return;
  try {
    execFileSync("taskset", ["-a", "-p", "-c", `0-${cpus().length - 1}`, String(pid)], { stdio: "ignore" });
  } catch {
    // the process may have exited meanwhile
  }
}

/** Thread ids of `pid` named `threadName` (Linux /proc/<pid>/task/<tid>/comm); none elsewhere or once it exited. */
export function threadsNamed(pid: number | undefined, threadName: string): string[] {
  if (pid === undefined) return [];
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return []; // not Linux, or the process exited
  }
  return tids.filter((tid) => {
    try {
      return readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim() === threadName;
    } catch {
      return false; // the thread exited meanwhile
    }
  });
}

/**
 * Pins the threads of `pid` named `threadName` to one core, leaving its other threads where they are. Returns how
 * many were pinned (0 without pinning, or when none has that name).
 */
export function pinThreadsNamed(pid: number | undefined, threadName: string, core: number): number {
  if (!PINNING) return 0;
  let pinned = 0;
  for (const tid of threadsNamed(pid, threadName)) {
    try {
      execFileSync("taskset", ["-p", "-c", String(core), tid], { stdio: "ignore" });
      pinned += 1;
    } catch {
      // the thread exited meanwhile
    }
  }
  return pinned;
}

/** The p-th percentile (0..100) of ascending `sorted` values (nearest rank); NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** A number with thousands separators and `digits` decimals; "n/a" when not finite. */
export function fmt(value: number, digits = 0): string {
  if (!Number.isFinite(value)) return "n/a";
  return value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

// ------------------------------------------------------------------------------------------------ load

/** Whether max-throughput runs use wrk (installed, not turned off). */
export const WRK = process.env.BENCH_LOAD !== "autocannon" && commandExists("wrk", "-v");


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
  method?: "POST";
  headers?: Record<string, string>;
  body?: string;
}) => Promise<AutocannonResult>;
// autocannon ships no TypeScript types; the shape used here is declared above.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon: Autocannon = require("autocannon");


export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Non-2xx answers, socket errors and timeouts. */
  failures: number;
}

/** "812.34us" / "1.20ms" / "1.01s" → ms. */
function wrkDurationMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s)$/.exec(text.trim());
  if (match === null) throw new Error(`unexpected wrk duration ${JSON.stringify(text)}`);
  const value = Number(match[1]);
  return match[2] === "us" ? value / 1000 : match[2] === "ms" ? value : value * 1000;
}

function wrkArguments(url: string, connections: number, durationS: number): string[] {
  return ["-t1", `-c${connections}`, `-d${durationS}s`, "--latency", url];
}

/** One closed-loop max-throughput run with wrk (one thread: the load core). */
export function runWrk(url: string, connections: number, durationS: number): LoadResult {
  return parseWrk(execFileSync("wrk", wrkArguments(url, connections, durationS), { encoding: "utf8" }));
}

/** runWrk without blocking this process: for loads that run at the same time. */
export function runWrkAsync(url: string, connections: number, durationS: number): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    execFile("wrk", wrkArguments(url, connections, durationS), { encoding: "utf8" }, (error, out) => {
      if (error !== null) reject(error);
      else resolve(parseWrk(out));
    });
  });
}

function parseWrk(out: string): LoadResult {
  const number = (pattern: RegExp): number => Number(pattern.exec(out)?.[1] ?? "0");
  const latency = (percent: string): number => {
    const match = new RegExp(`^\\s+${percent}%\\s+(\\S+)$`, "m").exec(out);
    if (match === null) throw new Error(`wrk printed no ${percent}% latency:\n${out}`);
    return wrkDurationMs(match[1]!);
  };
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = socketErrors === null ? 0 : socketErrors.slice(1).reduce((sum, value) => sum + Number(value), 0);
  return {
    requestsPerSecond: number(/Requests\/sec:\s+([\d.]+)/),
    p50Ms: latency("50"),
    p99Ms: latency("99"),
    failures: number(/Non-2xx or 3xx responses: (\d+)/) + errors,
  };
}

export async function runAutocannon(url: string, connections: number, durationS: number, overallRate?: number): Promise<LoadResult> {
  const result = await autocannon({ url, connections, duration: durationS, pipelining: 1, ...(overallRate === undefined ? {} : { overallRate }) });
  return {
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    failures: result.non2xx + result.errors + result.timeouts,
  };
}

/** POSTs of one JSON body (a JSON-RPC call) at full speed with autocannon. */
export async function runAutocannonPost(url: string, body: string, connections: number, durationS: number): Promise<LoadResult> {
  const result = await autocannon({ url, method: "POST", headers: { "content-type": "application/json" }, body, connections, duration: durationS, pipelining: 1 });
  return { requestsPerSecond: result.requests.average, p50Ms: result.latency.p50, p99Ms: result.latency.p99, failures: result.non2xx + result.errors + result.timeouts };
}

/** Max throughput: wrk when installed, else autocannon. A short warm-up run first (JIT, connections). */
export async function maxLoad(url: string, durationS: number): Promise<LoadResult> {
  if (WRK) {
    runWrk(url, 20, 2);
    return runWrk(url, 100, durationS);
  }
  await runAutocannon(url, 20, 2);
  return runAutocannon(url, 100, durationS);
}

export function reportFailures(what: string, result: LoadResult): void {
  if (result.failures > 0) console.error(`${what}: ${result.failures} failed requests (non-2xx, errors, timeouts)`);
}

/** "a–b" of the smallest and largest value (one value: itself), formatted with fmt. */
export function fmtRange(values: readonly number[], digits = 0): string {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 1 ? fmt(sorted[0]!, digits) : `${fmt(sorted[0]!, digits)}–${fmt(sorted.at(-1)!, digits)}`;
}

/** A server started for one load run: the URL to load and how to stop it. */
export interface ServerForRun {
  readonly url: string;
  stop(): Promise<void>;
}

export interface AlternatingRatio {
  /** req/s of the server under test, per run. */
  readonly subject: number[];
  /** req/s of the baseline, per run. */
  readonly baseline: number[];
  /** subject ÷ baseline of the same run. */
  readonly ratios: number[];
}

export interface RatioParameters {
  runs: number;
  durationS: number;
  startSubject(): Promise<ServerForRun>;
  startBaseline(): Promise<ServerForRun>;
}

/**
 * Max throughput of a server as a ratio to a baseline measured in the same run: `runs` pairs, each a fresh subject
 * then a fresh baseline on the same pinned core, so a noisy neighbour that slows one run slows both halves of it
 * about alike and the ratios stay comparable where absolute req/s are not.
 */
export async function alternatingRatio(parameters: RatioParameters): Promise<AlternatingRatio> {
  const result: AlternatingRatio = { subject: [], baseline: [], ratios: [] };
  for (let run = 0; run < parameters.runs; run += 1) {
    const rates: number[] = [];
    for (const [what, start] of [["subject", parameters.startSubject], ["baseline", parameters.startBaseline]] as const) {
      const server = await start();
      try {
        const load = await maxLoad(server.url, parameters.durationS);
        reportFailures(what, load);
        rates.push(load.requestsPerSecond);
      } finally {
        await server.stop();
      }
    }
    result.subject.push(rates[0]!);
    result.baseline.push(rates[1]!);
    result.ratios.push(rates[0]! / rates[1]!);
  }
  return result;
}

/**
 * The same ratio with both servers loaded at once (wrk only): both run on the same pinned core, each under its own
 * wrk, for `runs` rounds. Each server then gets about half of the core, and a neighbour that slows the machine
 * slows both at the same moment: on this VM one configuration's ratios spread ~0.07 this way where alternating 5 s
 * runs spread 0.3–0.4 (2026-11-27). It is not quite alternatingRatio's measure: what the subject spends per second
 * whatever its load (the node's attestation ticks) comes out of half a core instead of a whole one, so it weighs
 * about twice. (Correcting for it from the subject's idle CPU does not work: idle, the node's 1 ms ticks took 20 %
 * of its core, far more than under load, where the loop runs them late and warm; 2026-11-27.)
 */
export async function simultaneousRatio(parameters: RatioParameters): Promise<AlternatingRatio> {
  if (!WRK) throw new Error("simultaneousRatio needs wrk (two load generators at once)");
  const subject = await parameters.startSubject();
  try {
    const baseline = await parameters.startBaseline();
    try {
      await Promise.all([runWrkAsync(subject.url, 20, 2), runWrkAsync(baseline.url, 20, 2)]); // warm-up
      const result: AlternatingRatio = { subject: [], baseline: [], ratios: [] };
      for (let run = 0; run < parameters.runs; run += 1) {
        const [subjectLoad, baselineLoad] = await Promise.all([runWrkAsync(subject.url, 100, parameters.durationS), runWrkAsync(baseline.url, 100, parameters.durationS)]);
        reportFailures("subject", subjectLoad);
        reportFailures("baseline", baselineLoad);
        result.subject.push(subjectLoad.requestsPerSecond);
        result.baseline.push(baselineLoad.requestsPerSecond);
        result.ratios.push(subjectLoad.requestsPerSecond / baselineLoad.requestsPerSecond);
      }
      return result;
    } finally {
      await baseline.stop();
    }
  } finally {
    await subject.stop();
  }
}
