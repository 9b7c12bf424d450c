/**
 * `ats-node start --config <file>` as a child process of the built CLI, for tools and tests that need nodes in
 * processes of their own (bench-mesh.ts, test/mesh/processes.test.ts): started until it prints its endpoints,
 * killed on a start that does not finish, stopped and awaited.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";

const BIN = join(__dirname, "..", "bin", "ats-node.js");

export interface NodeProcess {
  readonly child: ChildProcess;
  /** The REST base URL the node printed. */
  readonly rest: string;
}

/** Starts a node; rejects (and kills the child) when it exits or has not printed its endpoints within `timeoutMs`. */
export function startNodeProcess(configFile: string, timeoutMs = 30_000): Promise<NodeProcess> {
  const child = spawn(process.execPath, [BIN, "start", "--config", configFile], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
  return new Promise<NodeProcess>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL"); // never leave a half-started node behind
      reject(new Error(`node did not start in ${timeoutMs} ms: ${stderr}`));
    }, timeoutMs);
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /"rest":\s*"(http:\/\/127\.0\.0\.1:\d+)"/.exec(stdout);
      if (match !== null) {
        clearTimeout(timer);
        resolve({ child, rest: match[1]! });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`node exited with ${code}: ${stderr}`));
    });
  });
}

/** Stops a node (SIGTERM: graceful; SIGKILL: a crash) and waits for its exit; a node already gone is fine. */
export async function stopNodeProcess(node: NodeProcess | undefined, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (node === undefined || node.child.exitCode !== null || node.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => node.child.once("exit", () => resolve()));
  node.child.kill(signal);
  await exited;
}
