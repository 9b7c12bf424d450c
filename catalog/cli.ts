/**
 * `ats-catalog`, the catalog's command line (bin/ats-catalog.js runs it from dist/):
 *
 *   ats-catalog start [--config <file>] [--pretty]   runs until SIGINT/SIGTERM; prints {"url": …, "services": …}
 *                                                    on stdout once it serves
 *   ats-catalog settings [--json]                    the settings table (name, env variable, default, description)
 *   ats-catalog --help | --version
 *
 * Exit codes: 0 stopped cleanly, 1 start-up failure (bad config, a faucet chain that is not the configured one:
 * the reason on stderr), 2 bad usage.
 */
import { parseArgs } from "node:util";
import { createCliLogger } from "../lib/logFormat";
import { runProgramCommand } from "../lib/programCli";
import { waitForSignal } from "../lib/signals";
import { startCatalog } from "./server";
import { describeCatalogSettings, loadCatalogConfig, redactedCatalogConfig } from "./settings";

const USAGE = `Usage:
  ats-catalog start [--config <file>] [--pretty]
  ats-catalog settings [--json]
  ats-catalog --help | --version
Settings come from the config file (JSON, keys = setting names) and ATS_CATALOG_* variables; see 'ats-catalog settings'.`;

export interface CatalogCliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Resolves when the catalog should stop (default: SIGINT/SIGTERM). */
  untilStopped?: () => Promise<unknown>;
}

const DEFAULT_IO: CatalogCliIo = {
  stdout: (text) => process.stdout.write(`${text}\n`),
  stderr: (text) => process.stderr.write(`${text}\n`),
};

async function start(args: string[], io: CatalogCliIo): Promise<number> {
  const { values } = parseArgs({ args, options: { config: { type: "string" }, pretty: { type: "boolean", default: false } } });
  try {
    const config = loadCatalogConfig({ ...(values.config !== undefined ? { file: values.config } : {}), ...(values.pretty ? { overrides: { logFormat: "pretty" } } : {}) });
    const log = createCliLogger({ name: "ats-catalog", level: config.logLevel as "info", format: config.logFormat as "json", writeLine: io.stderr });
    log.info({ config: redactedCatalogConfig(config) }, "starting");
    const catalog = await startCatalog(config, { log });
    io.stdout(JSON.stringify({ url: catalog.url, services: catalog.services }, null, 2));
    await (io.untilStopped ?? waitForSignal)();
    await catalog.close();
    return 0;
  } catch (error) {
    io.stderr(`ats-catalog: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}

export async function main(argv: string[], io: CatalogCliIo = DEFAULT_IO): Promise<number> {
  return runProgramCommand(argv, io, { usage: USAGE, start, describeSettings: describeCatalogSettings });
}
