/**
 * A local chain as a child process: `hardhat node --hostname 127.0.0.1 --port <free port>` with its own chain id
 * (ATS_CHAIN_ID, read by hardhat.config.ts) and blocks that may share a timestamp (ATS_SAME_TIMESTAMP_BLOCKS, so
 * that a burst of transactions does not run the chain clock ahead of the wall clock), started until it serves, killed on a start that does not finish,
 * stopped and awaited. Used by `npm start` (scripts/network.ts), the relayer's tests and its benchmark.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";

const HARDHAT_CLI = require.resolve("hardhat/internal/cli/cli.js");
const ROOT = join(__dirname, "..");

export interface ChainProcess {
  readonly child: ChildProcess;
  readonly chainId: number;
  readonly rpcUrl: string;
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

/** Starts Hardhat node on loopback; rejects (and kills the child) when it exits or does not serve within `timeoutMs`. */
export async function startChainProcess(chainId: number, timeoutMs = 60_000): Promise<ChainProcess> {
  const port = await freeTcpPort();
  const child = spawn(process.execPath, [HARDHAT_CLI, "node", "--hostname", "127.0.0.1", "--port", String(port)], {
    cwd: ROOT,
    env: { ...process.env, ATS_CHAIN_ID: String(chainId), ATS_SAME_TIMESTAMP_BLOCKS: "1", HARDHAT_DISABLE_TELEMETRY_PROMPT: "true" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const remember = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000));
  child.stderr!.on("data", remember);
  return new Promise<ChainProcess>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL"); // never leave a half-started chain behind
      reject(new Error(`Hardhat node (chain ${chainId}) did not start in ${timeoutMs} ms: ${output}`));
    }, timeoutMs);
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`Hardhat node (chain ${chainId}) exited with ${code}: ${output}`));
    };
    child.once("exit", onExit);
    child.stdout!.on("data", (chunk: Buffer) => {
      remember(chunk);
      if (output.includes("Started HTTP and WebSocket JSON-RPC server at")) {
        clearTimeout(timer);
        child.off("exit", onExit);
        child.stdout!.removeAllListeners("data");
        child.stdout!.resume(); // keep draining: a full pipe would block the chain
        resolve({ child, chainId, rpcUrl: `http://127.0.0.1:${port}` });
      }
    });
  });
}

/** Stops a chain (SIGTERM) and waits for its exit; one already gone is fine. */
export async function stopChainProcess(chain: ChainProcess | undefined): Promise<void> {
  if (chain === undefined || chain.child.exitCode !== null || chain.child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => chain.child.once("exit", () => resolve()));
  chain.child.kill("SIGTERM");
  await exited;
}
