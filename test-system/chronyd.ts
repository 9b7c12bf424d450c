/**
 * A real chronyd pair on loopback for the system tests: a source (`local stratum 1`) and a client synchronised to
 * it, both unprivileged-safe (`-x`: neither ever touches the system clock), each with its own temporary config,
 * command socket, pid and drift file. Also the independent recomputation of a chrony card's signed accuracy from
 * the `chronyc -c tracking` line the card reports.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createSocket } from "node:dgram";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect } from "chai";
import type { CardStatus } from "../node/card/types";

const execFileAsync = promisify(execFile);
export const CHRONYD = "/usr/sbin/chronyd";
export const CHRONYC = "/usr/bin/chronyc";
/** The client chronyd's maxclockerror, ppm: large, so that its root dispersion grows fast once the source stops. */
export const CLIENT_MAX_CLOCK_ERROR_PPM = 100;

/** A free UDP port on 127.0.0.1 (the kernel's pick, released for chronyd to bind). */
export async function freeUdpPort(): Promise<number> {
  const socket = createSocket("udp4");
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(0, "127.0.0.1", () => resolve());
  });
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

/** chronyd in the foreground (-d), never controlling the clock (-x), exiting on its own after 10 min at most (-t). */
function startChronyd(configPath: string, logLines: string[]): ChildProcess {
  // As root chronyd would drop to its _chrony user, which cannot open our private folder: stay root. Otherwise -U.
  const user = process.getuid?.() === 0 ? ["-u", "root"] : ["-U"];
  const child = spawn(CHRONYD, ["-x", "-d", ...user, "-t", "600", "-f", configPath], { stdio: ["ignore", "ignore", "pipe"] });
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => logLines.push(...chunk.trimEnd().split("\n")));
  return child;
}

export async function stopProcess(child: ChildProcess | null): Promise<void> {
  if (child === null || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
}

export async function tracking(socketPath: string): Promise<string> {
  const { stdout } = await execFileAsync(CHRONYC, ["-h", socketPath, "-c", "-n", "tracking"], { timeout: 2_000 });
  return stdout.trim();
}

export async function waitUntil<T>(what: string, timeoutMs: number, probe: () => Promise<T | null> | T | null): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export interface ChronydPair {
  /** The client chronyd's command socket: what the node's chronySocketPath names. */
  readonly clientSocket: string;
  /** Stops the source: the client's root dispersion then grows. */
  stopSource(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the pair in `dir` (made private: chronyd refuses a command socket others can reach) and waits for sync. */
export async function startChronydPair(dir: string): Promise<ChronydPair> {
  chmodSync(dir, 0o700);
  const port = await freeUdpPort();
  const common = (name: string) => [`bindcmdaddress ${join(dir, `${name}.sock`)}`, "cmdport 0", `pidfile ${join(dir, `${name}.pid`)}`, `driftfile ${join(dir, `${name}.drift`)}`];
  writeFileSync(join(dir, "source.conf"), [...common("source"), "local stratum 1", "allow 127.0.0.1", `port ${port}`, "bindaddress 127.0.0.1", ""].join("\n"));
  writeFileSync(
    join(dir, "client.conf"),
    [...common("client"), `server 127.0.0.1 port ${port} iburst minpoll -4 maxpoll -4`, "port 0", `maxclockerror ${CLIENT_MAX_CLOCK_ERROR_PPM}`, ""].join("\n"),
  );
  const sourceLog: string[] = [];
  const clientLog: string[] = [];
  let source: ChildProcess | null = startChronyd(join(dir, "source.conf"), sourceLog);
  const client = startChronyd(join(dir, "client.conf"), clientLog);
  const clientSocket = join(dir, "client.sock");
  const pair: ChronydPair = {
    clientSocket,
    async stopSource() {
      await stopProcess(source);
      source = null;
    },
    async stop() {
      await stopProcess(client);
      await stopProcess(source);
    },
  };
  try {
    // Synchronised: the client follows the source at stratum 2 with a normal leap status.
    await waitUntil("the client chronyd to synchronise to the source", 60_000, async () => {
      const line = await tracking(clientSocket).catch(() => "");
      return /^7F000001,[^,]*,2,.*,Normal$/.test(line) ? line : null;
    });
  } catch (error) {
    await pair.stop();
    throw new Error(`${(error as Error).message}\nsource chronyd:\n${sourceLog.join("\n")}\nclient chronyd:\n${clientLog.join("\n")}`);
  }
  return pair;
}

/**
 * The accuracy chrony's figures give for a card moment, recomputed here independently of node/card (floats, then
 * rounded up): ClockBound's |system time offset| + root dispersion + root delay / 2 from the reported line, plus
 * the card's clock allowance, plus the growth rate the card reports times the time since the reading.
 */
export function accuracyFromChrony(status: CardStatus, nanoMoment: bigint): { accuracyNs: number; growthPpb: number } {
  const evidence = status.evidence!;
  const fields = evidence.report.split(",");
  expect(fields).to.have.length(14);
  const seconds = (index: number) => Number(fields[index]);
  const chronyBoundNs = Math.ceil((Math.abs(seconds(4)) + seconds(11) + seconds(10) / 2) * 1e9 - 1e-3);
  const growthPpb = CLIENT_MAX_CLOCK_ERROR_PPM * 1_000 + Math.round(Number(fields[9]) * 1_000) + Math.round(Math.abs(Number(fields[8])) * 1_000);
  const elapsedNs = Number(nanoMoment - BigInt(evidence.readAtNs));
  return { accuracyNs: chronyBoundNs + evidence.clockExtraNs + Math.ceil((growthPpb * elapsedNs) / 1e9), growthPpb };
}
