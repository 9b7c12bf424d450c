/**
 * `ats-relayer start --config <file>` as a child process (the built CLI, lib/childProgram.ts), for `npm start`, the
 * relayer's end-to-end tests (which SIGKILL it mid-flight) and its benchmark: started until it prints its API URL,
 * killed on a start that does not finish, stopped and awaited; it stops with this process however this one dies.
 */
import type { ChildProcess } from "node:child_process";
import { printedJson, startProgram, type RunningProgram } from "../lib/childProgram";

export interface RelayerProcess {
  readonly child: ChildProcess;
  /** Base URL of the operator API. */
  readonly api: string;
  /** The last lines it wrote to stderr (its log), for failure messages. */
  stderrTail(): string;
  readonly program: RunningProgram<{ api: string }>;
}

/** Starts the relayer; rejects (and kills the child) when it exits or has not printed its API URL within `timeoutMs`. */
export async function startRelayerProcess(configFile: string, env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<RelayerProcess> {
  const program = await startProgram<{ api: string }>({
    bin: "ats-relayer.js",
    args: ["start", "--config", configFile],
    env: { ...process.env, ...env },
    ready: (stdout) => printedJson(stdout),
    name: "relayer",
    timeoutMs,
  });
  return { child: program.child, api: program.printed.api, stderrTail: program.stderrTail, program };
}

/** Stops the relayer (SIGTERM: graceful; SIGKILL: a crash) and waits for its exit; one already gone is fine. */
export async function stopRelayerProcess(relayer: RelayerProcess | undefined, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  await relayer?.program.stop(signal);
}
