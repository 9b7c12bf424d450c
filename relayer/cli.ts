/**
 * `ats-relayer`, the relayer's command line (bin/ats-relayer.js runs it from dist/):
 *
 *   ats-relayer start [--config <file>] [--pretty]   runs until SIGINT/SIGTERM; prints {"api": …, "signer": …}
 *                                                    on stdout once it serves
 *   ats-relayer settings [--json]                    the settings table (name, env variable, default, description)
 *   ats-relayer --help | --version
 *
 * Exit codes: 0 stopped cleanly, 1 start-up failure (bad config, unreachable chain, wrong chain id, a contract
 * that is not what the network file says: the reason on stderr), 2 bad usage.
 */
import { parseArgs } from "node:util";
import type { Logger } from "pino";
import { createCliLogger } from "../lib/logFormat";
import { runProgramCommand } from "../lib/programCli";
import { waitForSignal } from "../lib/signals";
import { describeRelayerSettings, loadRelayerConfig, redactedRelayerConfig } from "./config";
import { startRelayer } from "./relayer";

const USAGE = `Usage:
  ats-relayer start [--config <file>] [--pretty]
  ats-relayer settings [--json]
  ats-relayer --help | --version
Settings come from the config file (JSON, keys = setting names) and ATS_RELAYER_* variables; see 'ats-relayer settings'.`;

export interface RelayerCliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Resolves when the relayer should stop (default: SIGINT/SIGTERM). */
  untilStopped?: () => Promise<unknown>;
}

const DEFAULT_IO: RelayerCliIo = {
  stdout: (text) => process.stdout.write(`${text}\n`),
  stderr: (text) => process.stderr.write(`${text}\n`),
};

async function start(args: string[], io: RelayerCliIo): Promise<number> {
  const { values } = parseArgs({ args, options: { config: { type: "string" }, pretty: { type: "boolean", default: false } } });
  let log: Logger | undefined;
  try {
    const config = loadRelayerConfig({ ...(values.config !== undefined ? { file: values.config } : {}), ...(values.pretty ? { overrides: { logFormat: "pretty" } } : {}) });
    log = createCliLogger({ name: "ats-relayer", level: config.logLevel as "info", format: config.logFormat as "json", writeLine: io.stderr });
    log.info({ config: redactedRelayerConfig(config) }, "starting");
    const relayer = await startRelayer(config, { log });
    io.stdout(JSON.stringify({ api: relayer.apiUrl, signer: relayer.signer }, null, 2));
    await (io.untilStopped ?? waitForSignal)();
    await relayer.stop();
    return 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    io.stderr(`ats-relayer: ${message}`);
    return 1;
  }
}

export async function main(argv: string[], io: RelayerCliIo = DEFAULT_IO): Promise<number> {
  return runProgramCommand(argv, io, { usage: USAGE, start, describeSettings: describeRelayerSettings });
}
