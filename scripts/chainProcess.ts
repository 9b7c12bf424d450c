/**
 * A local chain as a child process, of one of two EVM implementations (CHAIN_KINDS):
 *
 * - hardhat: `hardhat node --hostname 127.0.0.1 --port <free port>` with its own chain id (ATS_CHAIN_ID, read by
 *   hardhat.config.ts) and blocks that may share a timestamp (ATS_SAME_TIMESTAMP_BLOCKS, so that a burst of
 *   transactions does not run the chain clock ahead of the wall clock);
 * - anvil: Foundry's node from the npm `@foundry-rs/anvil` package (its platform binary, not the package's launcher,
 *   so that signals reach it), `anvil --host 127.0.0.1 --port <free port> --chain-id <id>`; its blocks take the wall clock
 *   and may share a second already.
 *
 * Each runs under scripts/superviseWithParent.js, so that it stops when the process that started it dies (SIGKILL,
 * a crash); it is started until it serves, killed on a start that does not finish, stopped and awaited. Used by
 * `npm start` (scripts/network.ts), the relayer's and the gateway's tests and the benchmarks. What differs between the two
 * beyond the start (test controls, the `finalized` tag, real reorgs) is scripts/chainControl.ts.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";

const HARDHAT_CLI = require.resolve("hardhat/internal/cli/cli.js");
const ROOT = join(__dirname, "..");
const SUPERVISOR = join(__dirname, "superviseWithParent.js");

/** The EVM implementations a local chain can run on. */
export const CHAIN_KINDS = ["hardhat", "anvil"] as const;
export type ChainKind = (typeof CHAIN_KINDS)[number];

/**
 * anvil's slots per epoch: its `safe` tag is the head minus one epoch and `finalized` the head minus two (32 by
 * default, as on Ethereum: 64 one-second blocks before anything is final on a local chain). Two keeps the lag that
 * makes the tags mean something, and lets a local network finalize within seconds.
 */
export const ANVIL_SLOTS_IN_AN_EPOCH = 2;

export interface ChainProcess {
  readonly child: ChildProcess;
  readonly kind: ChainKind;
  readonly chainId: number;
  readonly rpcUrl: string;
}

export function isChainKind(value: string): value is ChainKind {
  return (CHAIN_KINDS as readonly string[]).includes(value);
}

/** A TCP port free on 127.0.0.1 now (the OS picks it). */
export function freeTcpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/** The anvil binary of the installed `@foundry-rs/anvil` (its per-platform package, as the package's own bin.mjs picks it). */
export function anvilBinary(): string {
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const name = `@foundry-rs/anvil-${process.platform}-${arch}`;
  let binary: string;
  try {
    binary = join(dirname(require.resolve(`${name}/package.json`)), "bin", process.platform === "win32" ? "anvil.exe" : "anvil");
  } catch {
    throw new Error(`anvil: the package ${name} is not installed (npm install installs it with the devDependency @foundry-rs/anvil on ${process.platform}/${process.arch})`);
  }
  if (!existsSync(binary)) throw new Error(`anvil: ${binary} is missing from ${name}`);
  return binary;
}

/** The chain's program and arguments. */
function chainCommand(kind: ChainKind, chainId: number, port: number): { program: string; args: string[]; env: NodeJS.ProcessEnv } {
  if (kind === "hardhat") {
    return {
      program: process.execPath,
      args: [HARDHAT_CLI, "node", "--hostname", "127.0.0.1", "--port", String(port)],
      env: { ...process.env, ATS_CHAIN_ID: String(chainId), ATS_SAME_TIMESTAMP_BLOCKS: "1", HARDHAT_DISABLE_TELEMETRY_PROMPT: "true" },
    };
  }
  // --silent: no line per request on stdout (the start is told by the RPC answering, see startChainProcess).
  const args = ["--host", "127.0.0.1", "--port", String(port), "--chain-id", String(chainId), "--slots-in-an-epoch", String(ANVIL_SLOTS_IN_AN_EPOCH), "--silent"];
  return { program: anvilBinary(), args, env: process.env };
}

/**
 * The chain under scripts/superviseWithParent.js, which holds an IPC channel to this process: the chain stops when
 * this process dies, however it dies. The supervisor leads a process group of its own, which the chain joins: a
 * Ctrl-C in the terminal reaches this process only (which then stops the chain once), and should the supervisor
 * itself be killed, the group is, so that the chain is not left behind.
 */
function spawnChain(kind: ChainKind, chainId: number, port: number): ChildProcess {
  const { program, args, env } = chainCommand(kind, chainId, port);
  const child = spawn(process.execPath, [SUPERVISOR, program, ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe", "ipc"], detached: true });
  child.once("exit", (_code, signal) => {
    if (signal === null || child.pid === undefined) return; // it exited as its chain did, after it
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // the group is empty: the chain went first
    }
  });
  return child;
}

/** Whether the chain answers eth_chainId with `chainId` now. */
async function serves(rpcUrl: string, chainId: number): Promise<boolean> {
  try {
    const response = await fetch(rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }), signal: AbortSignal.timeout(1_000) });
    const body = (await response.json()) as { result?: string };
    return body.result !== undefined && Number(body.result) === chainId;
  } catch {
    return false;
  }
}

/**
 * Starts a chain of `kind` on loopback; rejects (and kills the child) when it exits or does not serve within
 * `timeoutMs`. Hardhat is ready when it prints its banner; anvil (silent) when its RPC answers.
 */
export async function startChainProcess(chainId: number, kind: ChainKind = "hardhat", timeoutMs = 60_000): Promise<ChainProcess> {
  const port = await freeTcpPort();
  const rpcUrl = `http://127.0.0.1:${port}`;
  const child = spawnChain(kind, chainId, port);
  let output = "";
  const remember = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000));
  child.stderr!.on("data", remember);
  child.stdout!.on("data", remember);
  const label = `${kind} node (chain ${chainId})`;
  return new Promise<ChainProcess>((resolve, reject) => {
    let settled = false;
    const ready = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.off("exit", onExit);
      child.stdout!.removeListener("data", onStdout);
      child.stdout!.removeListener("data", remember);
      child.stdout!.resume(); // keep draining: a full pipe would block the chain
      resolve({ child, kind, chainId, rpcUrl });
    };
    const timer = setTimeout(() => {
      settled = true;
      child.kill("SIGKILL"); // never leave a half-started chain behind
      reject(new Error(`${label} did not start in ${timeoutMs} ms: ${output}`));
    }, timeoutMs);
    const onExit = (code: number | null) => {
      settled = true;
      clearTimeout(timer);
      reject(new Error(`${label} exited with ${code}: ${output}`));
    };
    child.once("exit", onExit);
    const onStdout = () => {
      if (kind === "hardhat" && output.includes("Started HTTP and WebSocket JSON-RPC server at")) ready();
    };
    child.stdout!.on("data", onStdout);
    if (kind === "anvil") {
      const poll = async () => {
        while (!settled) {
          if (await serves(rpcUrl, chainId)) return ready();
          await new Promise((resume) => setTimeout(resume, 50));
        }
      };
      void poll();
    }
  });
}

/** Stops a chain (SIGTERM) and waits for its exit; one already gone is fine. */
export async function stopChainProcess(chain: ChainProcess | undefined): Promise<void> {
  if (chain === undefined || chain.child.exitCode !== null || chain.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => chain.child.once("exit", () => resolve()));
  chain.child.kill("SIGTERM");
  await exited;
}
