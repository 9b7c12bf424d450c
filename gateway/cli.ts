/**
 * `ats-gateway`, the temporal JSON-RPC gateway as a program of its own (bin/ats-gateway.js runs it from dist/):
 *
 *   ats-gateway start [--config <file>] [--pretty]   runs until SIGINT/SIGTERM; prints {"endpoints": {"rpc", "ws",
 *                                                    "metrics"}, "node"} on stdout once it serves
 *   ats-gateway settings [--json]                    the settings table (name, env variable, default, description)
 *   ats-gateway --help | --version
 *
 * Consensus time comes from attesting nodes over REST (./nodeTime.ts); a node with `rpcUpstreamUrl` runs the same
 * gateway in process instead. Exit codes: 0 stopped cleanly, 1 start-up failure (bad settings, a busy port: the
 * reason on stderr, one line), 2 bad usage.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { createCliLogger } from "../lib/logFormat";
import { waitForSignal } from "../lib/signals";
import { describeGatewaySettings, loadGatewayConfig, publishedLimits, redactedGatewayConfig, type GatewayConfig } from "./config";
import { followNodeTime } from "./nodeTime";
import { METRICS_PATH, startTemporalGateway, type RunningGateway } from "./server";

const USAGE = `Usage:
  ats-gateway start [--config <file>] [--pretty]
  ats-gateway settings [--json]
  ats-gateway --help | --version
Settings come from the config file (JSON, keys = setting names) and ATS_GATEWAY_* / ATS_RPC_* variables; see 'ats-gateway settings'.`;

export interface GatewayCliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Resolves when the gateway should stop (default: SIGINT/SIGTERM). */
  untilStopped?: () => Promise<unknown>;
}

async function start(args: string[], io: GatewayCliIo): Promise<number> {
  const { values } = parseArgs({ args, options: { config: { type: "string" }, pretty: { type: "boolean", default: false } } });
  let config: GatewayConfig;
  try {
    config = loadGatewayConfig({ ...(values.config === undefined ? {} : { file: resolve(io.cwd, values.config) }), env: io.env, cwd: io.cwd, ...(values.pretty ? { overrides: { logFormat: "pretty" } } : {}) });
  } catch (error) {
    io.stderr(`ats-gateway: ${(error as Error).message}`);
    return 1;
  }
  const logger = createCliLogger({ name: "ats-gateway", level: config.logLevel as "info", format: config.logFormat as "json", writeLine: io.stderr });
  logger.info({ config: redactedGatewayConfig(config) }, "starting");
  const time = await followNodeTime({
    nodeUrls: config.nodeUrls,
    apiKey: config.nodeApiKey,
    pollIntervalMs: config.nodePollIntervalMs,
    staleAfterMs: config.nodeStaleAfterMs,
    logger,
  });
  let gateway: RunningGateway;
  try {
    gateway = await startTemporalGateway({
      host: config.host,
      port: config.rpcPort,
      upstreamUrl: config.rpcUpstreamUrl,
      dataDir: config.dataDir,
      time,
      limits: publishedLimits(config),
      confirmations: config.rpcConfirmations,
      chainName: config.rpcChainName,
      legacyNumbers: config.rpcLegacyNumbers,
      pollIntervalMs: config.chainPollIntervalMs,
      corsAllowedOrigins: config.rpcCorsAllowedOrigins,
      logger,
    });
  } catch (error) {
    time.close();
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === "EADDRINUSE" || code === "EACCES" ? `cannot listen on ${config.host}:${config.rpcPort} (rpcPort, ATS_RPC_PORT): ${code}` : (error as Error).message;
    io.stderr(`ats-gateway: ${reason}`);
    return 1;
  }
  const endpoints = { rpc: gateway.url, ws: gateway.url.replace(/^http/, "ws"), metrics: `${gateway.url}${METRICS_PATH}` };
  io.stdout(JSON.stringify({ endpoints, node: time.currentNodeUrl() }, null, 2));
  logger.info({ endpoints }, "gateway listening");
  const signal = await (io.untilStopped ?? waitForSignal)();
  logger.info({ signal }, "shutting down");
  await gateway.close();
  time.close();
  logger.info("gateway stopped");
  return 0;
}

function settings(args: string[], io: GatewayCliIo): number {
  const rows = describeGatewaySettings();
  if (args.includes("--json")) io.stdout(JSON.stringify(rows, null, 2));
  else for (const row of rows) io.stdout(`${row.name.padEnd(24)} ${row.env.padEnd(36)} ${row.secret ? "(secret)" : row.default}\n    ${row.description}`);
  return 0;
}

/** Runs one command; returns the exit code. */
export async function runGatewayCli(argv: readonly string[], io: GatewayCliIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "start") return start(rest, io);
  if (command === "settings") return settings(rest, io);
  if (command === "--version" || command === "-v") {
    io.stdout((JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8")) as { version: string }).version);
    return 0;
  }
  if (command === "--help" || command === "-h") {
    io.stdout(USAGE);
    return 0;
  }
  io.stderr(command === undefined ? USAGE : `unknown command: ${argv.join(" ")}\n${USAGE}`);
  return 2;
}

/** Entry point of bin/ats-gateway.js. */
export function main(argv: readonly string[]): void {
  const io: GatewayCliIo = {
    stdout: (line) => process.stdout.write(`${line}\n`),
    stderr: (line) => process.stderr.write(`${line}\n`),
    env: process.env,
    cwd: process.cwd(),
  };
  runGatewayCli(argv, io).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`ats-gateway: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
