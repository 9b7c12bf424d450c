/**
 * `ats-relayer start --config <file>` as a child process (the built CLI), for `npm start`, the relayer's
 * end-to-end tests (which SIGKILL it mid-flight) and its benchmark: started until it prints its API URL, killed on
 * a start that does not finish, stopped and awaited.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";

const BIN = join(__dirname, "..", "bin", "ats-relayer.js");

export interface RelayerProcess {
  readonly child: ChildProcess;
  /** Base URL of the operator API. */
  readonly api: string;
  /** The last lines it wrote to stderr (its log), for failure messages. */
  stderrTail(): string;
}

/** Starts the relayer; rejects (and kills the child) when it exits or has not printed its API URL within `timeoutMs`. */
export function startRelayerProcess(configFile: string, env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<RelayerProcess> {
  const child = spawn(process.execPath, [BIN, "start", "--config", configFile], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-20_000)));
  return new Promise<RelayerProcess>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`relayer did not start in ${timeoutMs} ms: ${stderr.slice(-4_000)}`));
    }, timeoutMs);
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`relayer exited with ${code}: ${stderr.slice(-4_000)}`));
    };
    child.once("exit", onExit);
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /"api":\s*"(http:\/\/127\.0\.0\.1:\d+)"/.exec(stdout);
      if (match !== null) {
        clearTimeout(timer);
        child.off("exit", onExit);
        resolve({ child, api: match[1]!, stderrTail: () => stderr.slice(-4_000) });
      }
    });
  });
}

/** Stops the relayer (SIGTERM: graceful; SIGKILL: a crash) and waits for its exit; one already gone is fine. */
export async function stopRelayerProcess(relayer: RelayerProcess | undefined, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (relayer === undefined || relayer.child.exitCode !== null || relayer.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => relayer.child.once("exit", () => resolve()));
  relayer.child.kill(signal);
  await exited;
}
