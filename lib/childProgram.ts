/**
 * One of the package's programs (bin/ats-node.js, ats-gateway.js, ats-relayer.js) as a child process, as the local
 * network and `ats-node cluster` run them: started until its stdout says it serves (`ready` finds what it
 * printed), killed on a start that does not finish, stopped and awaited. Each child is preloaded with
 * bin/stopWithParent.js and given an IPC channel, so it stops when this process dies, however it dies.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { existsSync } from "node:fs";

/** Most stderr kept for failure messages, characters. */
const STDERR_TAIL_CHARS = 20_000;
/** A child that has not exited this long after SIGTERM is killed, ms. */
const STOP_GRACE_MS = 15_000;

/** bin/<name> of this checkout or package: from lib/ in the sources, or from dist/lib/ in a build. */
export function programBin(name: string): string {
  const fromSources = join(__dirname, "..", "bin", name);
  return existsSync(fromSources) ? fromSources : join(__dirname, "..", "..", "bin", name);
}

export interface StartProgramParameters<T> {
  /** e.g. "ats-node.js" (in bin/). */
  bin: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  /** What the program printed once it serves, read from its whole stdout so far; undefined until then. */
  ready: (stdout: string) => T | undefined;
  /** Names the program in errors, e.g. "node 2". */
  name: string;
  timeoutMs: number;
  /** Each line the program writes to stderr (its log); default: only kept for errors. */
  onStderrLine?: (line: string) => void;
}

export interface RunningProgram<T> {
  readonly child: ChildProcess;
  readonly printed: T;
  /** The last part of its stderr, for failure messages. */
  stderrTail(): string;
  /** SIGTERM (graceful) or SIGKILL (a crash), then waits for its exit; SIGKILL after a grace period. Idempotent. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

export function startProgram<T>(parameters: StartProgramParameters<T>): Promise<RunningProgram<T>> {
  const child = spawn(process.execPath, ["-r", programBin("stopWithParent.js"), programBin(parameters.bin), ...parameters.args], {
    env: parameters.env,
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    // Its own process group: a Ctrl-C in the terminal reaches this process only, which then stops each child once.
    detached: true,
  });
  let stdout = "";
  let stderr = "";
  let partialLine = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    const text = chunk.toString();
    stderr = (stderr + text).slice(-STDERR_TAIL_CHARS);
    if (parameters.onStderrLine === undefined) return;
    const lines = (partialLine + text).split("\n");
    partialLine = lines.pop() ?? "";
    for (const line of lines) parameters.onStderrLine(line);
  });
  const stop = async (signal: NodeJS.Signals = "SIGTERM"): Promise<void> => {
    if (exited(child)) return;
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill(signal);
    const force = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
    await gone;
    clearTimeout(force);
  };
  return new Promise<RunningProgram<T>>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL"); // never leave a half-started program behind
      reject(new Error(`${parameters.name} did not start in ${parameters.timeoutMs} ms: ${stderr.slice(-4_000)}`));
    }, parameters.timeoutMs);
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      reject(new Error(`${parameters.name} exited with ${code ?? signal} before it served: ${stderr.slice(-4_000)}`));
    };
    child.once("exit", onExit);
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const printed = parameters.ready(stdout);
      if (printed === undefined) return;
      clearTimeout(timer);
      child.off("exit", onExit);
      resolve({ child, printed, stderrTail: () => stderr.slice(-4_000), stop });
    });
  });
}

/** A JSON object printed whole on stdout (the programs print one, pretty-printed), or undefined while incomplete. */
export function printedJson<T>(stdout: string): T | undefined {
  const start = stdout.indexOf("{");
  if (start === -1) return undefined;
  try {
    return JSON.parse(stdout.slice(start)) as T;
  } catch {
    return undefined;
  }
}

/** The environment a child program gets: this process's, without its ATS_* settings, plus `settings`. */
export function childEnv(settings: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith("ATS_")) env[name] = value;
  for (const [name, value] of Object.entries(settings)) if (value !== undefined) env[name] = value;
  return env;
}
