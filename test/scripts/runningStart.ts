/**
 * `npm start` as tests run it and leave it running (scripts/start.ts as a child process, its network in a
 * temporary ATS_NETWORK_DIR, never the .ats/ of a network the developer runs): started, awaited until it says the
 * network is up, read from the network file it wrote, stopped with a signal (Ctrl-C is SIGINT) or, when a test is
 * done or failed, SIGKILLed (its children stop with it: bin/stopWithParent.js, scripts/superviseWithParent.js).
 * Shared by test/scripts/processes.test.ts and test-system/explorer.test.ts.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NetworkFileJson } from "../../wire/network";

const ROOT = join(__dirname, "..", "..");
/** How long the network may take to come up and finish its tour, ms (a busy 2-core host is slow). */
export const START_TIMEOUT_MS = 400_000;

/** Polls `read` every 200 ms until it gives a value; throws naming `what` after `timeoutMs`. */
export async function until<T>(read: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export class RunningStart {
  readonly dir = mkdtempSync(join(tmpdir(), "ats-start-"));
  readonly child: ChildProcess;
  stdout = "";
  stderr = "";

  constructor(args: readonly string[] = []) {
    this.child = spawn(process.execPath, ["-r", "./bin/register-ts.js", "scripts/start.ts", ...args], {
      cwd: ROOT,
      env: { ...process.env, ATS_NETWORK_DIR: this.dir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child.stdout!.on("data", (chunk: Buffer) => (this.stdout += chunk.toString()));
    this.child.stderr!.on("data", (chunk: Buffer) => (this.stderr = (this.stderr + chunk.toString()).slice(-20_000)));
  }

  get networkFile(): string {
    return join(this.dir, "network.json");
  }

  get manifestFile(): string {
    return join(this.dir, "manifest.json");
  }

  /** Resolves once the network is up and the tour done ("Press Ctrl-C to stop."); rejects if npm start exits first. */
  async started(timeoutMs = START_TIMEOUT_MS): Promise<NetworkFileJson> {
    await until(
      () => (this.stdout.includes("Press Ctrl-C to stop.") ? true : this.exited() ? Promise.reject(new Error(`npm start exited:\n${this.stdout}\n${this.stderr}`)) : undefined),
      "the network",
      timeoutMs,
    );
    return this.network();
  }

  network(): NetworkFileJson {
    return JSON.parse(readFileSync(this.networkFile, "utf8")) as NetworkFileJson;
  }

  /** The endpoints of the program the network file names `name` (e.g. "catalog", "relayer"). */
  endpointsOf(name: string): Record<string, string> {
    const program = this.network().programs?.find((entry) => entry.name === name);
    if (program === undefined) throw new Error(`the network file names no program ${name}`);
    return program.endpoints;
  }

  exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Sends `signal` (SIGINT: Ctrl-C) and waits for the exit; returns the exit code. */
  async stop(signal: NodeJS.Signals): Promise<number | null> {
    if (this.exited()) return this.child.exitCode;
    const exited = new Promise<number | null>((resolve) => this.child.once("exit", (code) => resolve(code)));
    this.child.kill(signal);
    return exited;
  }

  /** SIGKILLed if still running (its children notice and stop on their own); its folder removed. */
  async cleanUp(): Promise<void> {
    await this.stop("SIGKILL");
    rmSync(this.dir, { recursive: true, force: true });
  }
}
