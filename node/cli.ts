/**
 * `ats-node`: the attesting node's command line.
 *
 *   ats-node keys init <dir> [--force]   create a dev manufacturer CA, a card key + certificate and a node key
 *                                        (node keystore encrypted when ATS_KEYSTORE_PASSWORD is set); prints the
 *                                        public summary only
 *   ats-node start --config <file>       start a node from a JSON config file (+ ATS_* environment overrides)
 *   ats-node dev                         start a node with fresh dev keys in a temp folder; prints its endpoints
 *   ats-node settings                    print the settings table (name, env variable, default, bounds)
 *
 * Results go to stdout as JSON (one object); logs go to stderr (pino). SIGINT/SIGTERM close the node gracefully
 * (a second signal exits at once).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import pino, { type Logger } from "pino";
import { createDevIdentity } from "../protocol/devca";
import { AtsError } from "../protocol/errors";
import { KEY_FILES, saveKeyDir } from "../protocol/keystore";
import type { Address, Hex } from "../protocol/types";
import { describeSettings, loadConfig, type NodeConfig, type SettingName } from "./config";

/** The part of node/server.ts the CLI needs (loaded lazily so `keys init` does not load the transports). */
export interface NodeHandle {
  endpoints: { rest: string; grpc: string; ws: string };
  close(): Promise<void>;
}
export type StartNodeFunction = (parameters: { config: NodeConfig; logger: Logger }) => Promise<NodeHandle>;

export interface CliIo {
  stdout: (line: string) => void;
  stderr: (line: string) => void;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Defaults to node/server.ts startNode. */
  startNode?: StartNodeFunction;
  /** Resolves when the process should shut down; defaults to the first SIGINT/SIGTERM. */
  shutdownSignal?: () => Promise<string>;
  /** Logger factory; defaults to pino on stderr at config.logLevel. */
  logger?: (config: NodeConfig) => Logger;
}

const USAGE = `usage:
  ats-node keys init <dir> [--force]
  ats-node start --config <file>
  ats-node dev
  ats-node settings`;

function printJson(io: CliIo, value: unknown): void {
  io.stdout(JSON.stringify(value, (_key, item: unknown) => (typeof item === "bigint" ? item.toString() : item), 2));
}

function defaultLogger(config: NodeConfig): Logger {
  return pino({ level: config.logLevel, name: "ats-node" }, pino.destination(2));
}

function waitForSignal(): Promise<string> {
  return new Promise((resolveSignal) => {
    const handler = (signal: NodeJS.Signals) => {
      process.off("SIGINT", handler);
      process.off("SIGTERM", handler);
      // A second signal while closing exits at once.
      const force = () => process.exit(130);
      process.once("SIGINT", force);
      process.once("SIGTERM", force);
      resolveSignal(signal);
    };
    process.on("SIGINT", handler);
    process.on("SIGTERM", handler);
  });
}

async function loadStartNode(io: Pick<CliIo, "startNode">): Promise<StartNodeFunction> {
  if (io.startNode !== undefined) return io.startNode;
  const server = (await import("./server")) as { startNode: StartNodeFunction };
  return server.startNode;
}

async function keysInit(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({ args, options: { force: { type: "boolean", default: false } }, allowPositionals: true });
  if (positionals.length !== 1) {
    io.stderr(`keys init needs exactly one directory\n${USAGE}`);
    return 2;
  }
  const dir = resolve(io.cwd, positionals[0]!);
  if (!values.force && existsSync(join(dir, KEY_FILES.nodeKeystore))) {
    io.stderr(`${dir} already holds keys (${KEY_FILES.nodeKeystore}); pass --force to overwrite them`);
    return 1;
  }
  const password = io.env.ATS_KEYSTORE_PASSWORD;
  const identity = await createDevIdentity();
  const summary = await saveKeyDir(dir, identity, password === undefined || password === "" ? {} : { password });
  printJson(io, {
    keyDir: dir,
    cardId: summary.cardId,
    cardPublicKey: summary.cardPublicKey,
    nodeAddress: summary.nodeAddress,
    nodeKeystoreEncrypted: password !== undefined && password !== "",
    files: Object.values(KEY_FILES),
    trustedRoot: join(dir, KEY_FILES.caCertificate),
  });
  return 0;
}

async function runNode(config: NodeConfig, io: CliIo): Promise<number> {
  const logger = (io.logger ?? defaultLogger)(config);
  const startNode = await loadStartNode(io);
  const node = await startNode({ config, logger });
  printJson(io, { endpoints: node.endpoints });
  const signal = await (io.shutdownSignal ?? waitForSignal)();
  logger.info({ signal }, "shutting down");
  await node.close();
  return 0;
}

async function start(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: { config: { type: "string" } } });
  if (values.config === undefined) {
    io.stderr(`start needs --config <file>\n${USAGE}`);
    return 2;
  }
  const config = loadConfig({ file: resolve(io.cwd, values.config), env: io.env, cwd: io.cwd });
  return runNode(config, io);
}

/** A node running on fresh development keys in a temporary folder (what `ats-node dev` starts). */
export interface DevNode {
  readonly node: NodeHandle;
  readonly keyDir: string;
  readonly cardId: Hex;
  readonly nodeAddress: Address;
  /** PEM of the dev manufacturer CA, the root that certifies the card. */
  readonly trustedRootPem: string;
  /** Closes the node, then removes the temporary folder. */
  close(): Promise<void>;
}

export interface StartDevNodeParameters {
  /** ATS_* variables to honour (ports pinned here are kept; otherwise free ports are taken). */
  env: NodeJS.ProcessEnv;
  cwd: string;
  logger: (config: NodeConfig) => Logger;
  startNode?: StartNodeFunction;
}

/**
 * Creates fresh dev keys (CA, card, node) in a temporary folder and starts a node on them, on free ports unless
 * the environment pins them, with the dev CA as trusted root. The folder is removed on close and on failure.
 */
export async function startDevNode(parameters: StartDevNodeParameters): Promise<DevNode> {
  const root = mkdtempSync(join(tmpdir(), "ats-node-dev-"));
  const cleanup = () => rmSync(root, { recursive: true, force: true });
  try {
    const identity = await createDevIdentity();
    const keyDir = join(root, "keys");
    const summary = await saveKeyDir(keyDir, identity);
    const overrides: Partial<Record<SettingName, unknown>> = {
      keyDir,
      dataDir: join(root, "data"),
      trustedRootsPem: [identity.ca.certificatePem],
    };
    if (parameters.env.ATS_REST_PORT === undefined) overrides.restPort = 0;
    if (parameters.env.ATS_GRPC_PORT === undefined) overrides.grpcPort = 0;
    const config = loadConfig({ env: parameters.env, overrides, cwd: parameters.cwd });
    const startNode = parameters.startNode ?? (await loadStartNode({}));
    const node = await startNode({ config, logger: parameters.logger(config) });
    return {
      node,
      keyDir,
      cardId: summary.cardId,
      nodeAddress: summary.nodeAddress,
      trustedRootPem: identity.ca.certificatePem,
      close: async () => {
        try {
          await node.close();
        } finally {
          cleanup();
        }
      },
    };
  } catch (error) {
    cleanup();
    throw error;
  }
}

async function dev(args: string[], io: CliIo): Promise<number> {
  parseArgs({ args, options: {} });
  const startParameters: StartDevNodeParameters = { env: io.env, cwd: io.cwd, logger: io.logger ?? defaultLogger };
  if (io.startNode !== undefined) startParameters.startNode = io.startNode;
  const devNode = await startDevNode(startParameters);
  printJson(io, {
    endpoints: devNode.node.endpoints,
    keyDir: devNode.keyDir,
    cardId: devNode.cardId,
    nodeAddress: devNode.nodeAddress,
  });
  await (io.shutdownSignal ?? waitForSignal)();
  await devNode.close();
  return 0;
}

function settings(io: CliIo): number {
  printJson(io, describeSettings());
  return 0;
}

/** Runs one command; returns the exit code. Errors of the package are printed as one line, not a stack. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "keys" && rest[0] === "init") return await keysInit(rest.slice(1), io);
    if (command === "start") return await start(rest, io);
    if (command === "dev") return await dev(rest, io);
    if (command === "settings") return settings(io);
    if (command === undefined || command === "--help" || command === "-h" || command === "help") {
      io.stdout(USAGE);
      return command === undefined ? 2 : 0;
    }
    io.stderr(`unknown command: ${argv.join(" ")}\n${USAGE}`);
    return 2;
  } catch (error) {
    if (error instanceof AtsError) {
      io.stderr(`ats-node: ${error.message}`);
      return 1;
    }
    if (error instanceof TypeError && "code" in error && typeof error.code === "string" && error.code.startsWith("ERR_PARSE_ARGS")) {
      io.stderr(`ats-node: ${error.message}\n${USAGE}`);
      return 2;
    }
    throw error;
  }
}

/** Entry point of bin/ats-node.js. */
export function main(argv: readonly string[]): void {
  const io: CliIo = {
    stdout: (line) => process.stdout.write(`${line}\n`),
    stderr: (line) => process.stderr.write(`${line}\n`),
    env: process.env,
    cwd: process.cwd(),
  };
  runCli(argv, io).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`ats-node: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
