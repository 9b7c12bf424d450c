/**
 * `ats-node`: the attesting node's command line.
 *
 * Detail: docs/node.md "Node configuration" (`ats-node --help` prints the usage).
 */
import { closeSync, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Logger } from "pino";
import { HW_MESSAGE_TAG_ASCII } from "../protocol/constants";
import { createDevIdentity } from "../protocol/devca";
import { AtsError, rootCauseMessage } from "../protocol/errors";
import { checkEvidenceText, MAX_CONTRADICTION_EVIDENCE_BYTES, type CheckEvidenceReturnType } from "../protocol/evidence";
import { KEY_FILES, saveKeyDir } from "../protocol/keystore";
import { describeSettings, loadConfig, redactedConfig, type NodeConfig, type SettingDescription, type SettingName } from "./config";
import { createCliLogger } from "../lib/logFormat";
import { waitForSignal } from "../lib/signals";
import { loadStartNode, startDevNode, type StartDevNodeParameters, type StartNodeFunction } from "./devNode";

/*
 * Commands (USAGE below is their short form):
 *
 *   ats-node keys init <dir> [--force]   create a dev manufacturer CA, a card key + certificate and a node key
 *                                        (node keystore encrypted when ATS_KEYSTORE_PASSWORD is set); prints the
 *                                        public summary only. The folder keeps the CA's certificate (ca.pem, the
 *                                        trusted root), never its private key: that is discarded once the card
 *                                        certificate is signed (a node never needs it)
 *   ats-node keys init <dir> --pkcs11 [--config <file>]   provision a PKCS#11 token (node/keysource/provision.ts):
 *                                        the token generates the card (P-256) and node (secp256k1) keys,
 *                                        non-extractable, under the labels of the pkcs11* settings (config file +
 *                                        ATS_* environment; the PIN from the variable or file they name); <dir> gets
 *                                        the token-signed card.csr.pem, a dev-CA card.pem and ca.pem; prints cardId,
 *                                        card public key and node address
 *   ats-node start --config <file> [--pretty]   start a node from a JSON config file (+ ATS_* environment overrides)
 *   ats-node dev [--pretty] [--fresh-keys]   start a node in a temp folder on the public development card and
 *                                        node keys (protocol/devkeys.ts: the ones scripts/deploy.ts registers on a
 *                                        local chain, so a local oracle accepts its proofs), or on fresh random keys
 *                                        with --fresh-keys; prints its endpoints
 *   ats-node cluster --nodes <N> [--pretty]   start N meshed dev nodes on 127.0.0.1 (free ports, fresh keys under
 *                                        one dev CA), each in a process of its own; prints every node's id, pid and
 *                                        endpoints; Ctrl-C (or this process's death) stops them all
 *   ats-node settings [--config <file>] [--json]   the settings as a table (name, env variable, default, with
 *                                        --config the value from the file + environment, secrets redacted, short
 *                                        description); --json: the full table as JSON (with bounds)
 *   ats-node evidence check <file|url> [--json]  checks contradiction evidence (docs/protocol.md §7.8, e.g. from GET
 *                                        /mesh/state `contradictions[].evidence`): exit 0 when it proves the node
 *                                        lied, 1 when it does not, 2 on usage errors or malformed evidence
 *   ats-node --version                   package and protocol version
 *
 * Results go to stdout as JSON (one object); logs go to stderr (pino JSON lines, or readable lines with --pretty /
 * ATS_LOG_FORMAT=pretty). A listen failure (busy port …) is one line naming the setting. SIGINT/SIGTERM close the
 * node gracefully (a second signal exits at once).
 */
export interface CliIo {
  stdout: (line: string) => void;
  stderr: (line: string) => void;
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Defaults to node/server.ts startNode. */
  startNode?: StartNodeFunction;
  /** Resolves when the process should shut down; defaults to the first SIGINT/SIGTERM. */
  shutdownSignal?: () => Promise<string>;
  /** Logger factory; defaults to pino on stderr at config.logLevel, in config.logFormat. */
  logger?: (config: NodeConfig) => Logger;
}

const USAGE = `usage:
  ats-node keys init <dir> [--force]
  ats-node keys init <dir> --pkcs11 [--config <file>]
  ats-node start --config <file> [--pretty]
  ats-node dev [--pretty] [--fresh-keys]
  ats-node cluster --nodes <N> [--pretty]
  ats-node settings [--config <file>] [--json]
  ats-node manifest verify <file> [--rpc <url>]
  ats-node evidence check <file | http(s)://…/ipfs/<cid>> [--json]
  ats-node --version`;

function printJson(io: CliIo, value: unknown): void {
  io.stdout(JSON.stringify(value, (_key, item: unknown) => (typeof item === "bigint" ? item.toString() : item), 2));
}

/** io.logger, else pino on stderr: JSON lines, or readable lines through io.stderr when config.logFormat is pretty. */
function loggerFactory(io: CliIo): (config: NodeConfig) => Logger {
  return io.logger ?? ((config) => createCliLogger({ name: "ats-node", level: config.logLevel, format: config.logFormat, writeLine: io.stderr }));
}

/** `--pretty` as a setting override (start, dev). */
function prettyOverride(pretty: boolean | undefined): Partial<Record<SettingName, unknown>> {
  return pretty === true ? { logFormat: "pretty" } : {};
}

async function keysInit(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { force: { type: "boolean", default: false }, pkcs11: { type: "boolean", default: false }, config: { type: "string" } },
    allowPositionals: true,
  });
  if (positionals.length !== 1) {
    io.stderr(`keys init needs exactly one directory\n${USAGE}`);
    return 2;
  }
  const dir = resolve(io.cwd, positionals[0]!);
  if (values.pkcs11) return keysInitPkcs11(dir, values.config, io);
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
  io.stderr(`ats-node: the dev CA's private key was not kept (a node never needs it): ${KEY_FILES.caCertificate} is the trusted root`);
  return 0;
}

/**
 * `keys init --pkcs11`: the token and labels from the settings (both key sources set to 'pkcs11', so the settings'
 * own rules check them), keys generated in the token, public files written (node/keysource/provision.ts).
 */
async function keysInitPkcs11(dir: string, configFile: string | undefined, io: CliIo): Promise<number> {
  if (existsSync(join(dir, KEY_FILES.cardChain))) {
    io.stderr(`${dir} already holds a card chain (${KEY_FILES.cardChain}); choose an empty folder`);
    return 1;
  }
  const config = loadConfig({
    ...(configFile === undefined ? {} : { file: resolve(io.cwd, configFile) }),
    env: io.env,
    cwd: io.cwd,
    overrides: { cardKeySource: "pkcs11", nodeKeySource: "pkcs11" },
  });
  // Loaded on use: the PKCS#11 binding is an optional native addon.
  const { provisionToken } = await import("./keysource/provision");
  const { closeSharedTokens } = await import("./keysource/pkcs11");
  try {
    printJson(io, await provisionToken(config, io.env, dir));
  } finally {
    closeSharedTokens();
  }
  io.stderr(`ats-node: keys generated in the token (non-extractable); the dev CA's private key was not kept: ${KEY_FILES.caCertificate} is the trusted root`);
  return 0;
}

async function runNode(config: NodeConfig, io: CliIo): Promise<number> {
  const logger = loggerFactory(io)(config);
  const startNode = await loadStartNode(io.startNode);
  const node = await startNode({ config, logger });
  printJson(io, { endpoints: node.endpoints });
  const signal = await (io.shutdownSignal ?? waitForSignal)();
  logger.info({ signal }, "shutting down");
  await node.close();
  return 0;
}

async function start(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: { config: { type: "string" }, pretty: { type: "boolean" } } });
  if (values.config === undefined) {
    io.stderr(`start needs --config <file>\n${USAGE}`);
    return 2;
  }
  const config = loadConfig({ file: resolve(io.cwd, values.config), env: io.env, cwd: io.cwd, overrides: prettyOverride(values.pretty) });
  return runNode(config, io);
}

async function cluster(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: { nodes: { type: "string" }, pretty: { type: "boolean" } } });
  const nodes = Number(values.nodes ?? "4");
  // Loaded on use: only `cluster` needs it.
  const { startDevCluster } = await import("./cluster");
  const devCluster = await startDevCluster({
    nodes,
    env: io.env,
    cwd: io.cwd,
    logger: loggerFactory(io),
    overrides: prettyOverride(values.pretty),
    // Each member in a process of its own, its log lines on this stderr; a test's startNode double runs in process.
    onLogLine: io.stderr,
    ...(io.startNode === undefined ? {} : { startNode: io.startNode }),
  });
  printJson(io, { nodes: devCluster.nodes, trustedRootPem: devCluster.trustedRootPem });
  await (io.shutdownSignal ?? waitForSignal)();
  await devCluster.close();
  return 0;
}

async function dev(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: { pretty: { type: "boolean" }, "fresh-keys": { type: "boolean" } } });
  const startParameters: StartDevNodeParameters = { env: io.env, cwd: io.cwd, logger: loggerFactory(io), overrides: prettyOverride(values.pretty) };
  if (values["fresh-keys"] === true) startParameters.identity = await createDevIdentity();
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

/** The first sentence of a description, cut to `max` characters. */
function shortDescription(text: string, max = 64): string {
  const sentence = /^.*?\.(?=\s|$)/.exec(text)?.[0] ?? text;
  return sentence.length <= max ? sentence : `${sentence.slice(0, max - 1)}…`;
}

/** A table cell: strings without JSON quotes (the empty string stays `""`), everything else as JSON. */
function cellValue(value: unknown): string {
  if (typeof value === "string") return value === "" ? '""' : value;
  return JSON.stringify(value) ?? String(value);
}

function settingsTable(rows: readonly SettingDescription[], values: Record<string, unknown> | undefined): string {
  const header = values === undefined ? ["SETTING", "ENV", "DEFAULT", "DESCRIPTION"] : ["SETTING", "ENV", "DEFAULT", "VALUE", "DESCRIPTION"];
  const lines = rows.map((row) => {
    const defaultText = cellValue(row.default.startsWith('"') ? (JSON.parse(row.default) as unknown) : row.default);
    const cells = [row.name, [row.env, ...row.envAliases].join(", "), defaultText];
    if (values !== undefined) cells.push(cellValue(values[row.name]));
    cells.push(shortDescription(row.description));
    return cells;
  });
  const widths = header.map((title, column) => Math.max(title.length, ...lines.map((cells) => cells[column]!.length)));
  const render = (cells: readonly string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!)))
      .join("  ")
      .trimEnd();
  const footer = [
    "",
    "Environment variables override the config file. Relative paths: from the config file's folder (file) or the working directory (environment).",
    "Secret values are redacted. Full descriptions and bounds: ats-node settings --json",
  ];
  return [render(header), ...lines.map(render), ...footer].join("\n");
}

function settings(args: string[], io: CliIo): number {
  const { values } = parseArgs({ args, options: { json: { type: "boolean" }, config: { type: "string" } } });
  const rows = describeSettings();
  // With --config: the values the node would run with (file + environment), secrets redacted.
  const current =
    values.config === undefined ? undefined : redactedConfig(loadConfig({ file: resolve(io.cwd, values.config), env: io.env, cwd: io.cwd }));
  if (values.json === true) printJson(io, current === undefined ? rows : rows.map((row) => ({ ...row, value: current[row.name] })));
  else io.stdout(settingsTable(rows, current));
  return 0;
}

/**
 * `ats-node manifest verify <file> [--rpc <url>]`: the manifest passes its schema and catalog rules
 * (wire/manifest.ts), and every service it lists answers live as its name promises (node/manifestServices.ts): the
 * temporal JSON-RPC (--rpc, else the manifest's `time` service) serves the chain it names (eth_chainId and genesis
 * hash), the catalog's downloads, evidence gateway, faucet and explorer answer their own shapes, and so on. Prints
 * every service's verdict with its evidence as JSON; each failed service also on stderr, by name. Exit 0 when all
 * hold, 1 otherwise.
 */
async function manifestVerify(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({ args, options: { rpc: { type: "string" } }, allowPositionals: true });
  if (positionals.length !== 1) {
    io.stderr("usage: ats-node manifest verify <file> [--rpc <url>]");
    return 2;
  }
  const file = resolve(positionals[0]!);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    io.stderr(`manifest ${file}: ${(error as Error).message}`);
    return 1;
  }
  const { parseManifest } = await import("../wire/manifest");
  const manifest = parseManifest(json);
  const { checkManifestServices } = await import("./manifestServices");
  const services = await checkManifestServices(manifest, values.rpc === undefined ? {} : { timeUrl: values.rpc });
  const failed = Object.entries(services).filter(([, verdict]) => !verdict.ok);
  const ok = failed.length === 0;
  printJson(io, { ok, manifest: file, rpc: services.time!.url, evmChainId: manifest.chain.evmChainId, genesisHash: manifest.chain.genesisHash, services });
  for (const [name, verdict] of failed) io.stderr(`manifest ${file}: service ${name} (${verdict.url}) failed: ${verdict.ok ? "" : verdict.error}`);
  if (!ok) io.stderr(`manifest ${file}: ${failed.length} of ${Object.keys(services).length} services failed: ${failed.map(([name]) => name).join(", ")}`);
  return ok ? 0 : 1;
}

/**
 * At most `maxBytes` of a file as UTF-8, or null when it is longer: one more byte is read to tell, so an
 * oversized (or endless, e.g. /dev/zero) file costs no more than the bound.
 */
function readBoundedText(file: string, maxBytes: number): string | null {
  const buffer = Buffer.alloc(maxBytes + 1);
  const fd = openSync(file, "r");
  try {
    let length = 0;
    while (length < buffer.length) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
    }
    return length > maxBytes ? null : buffer.toString("utf8", 0, length);
  } finally {
    closeSync(fd);
  }
}

/** The verdict in words: the first line says it all, the numbers follow. */
function evidenceVerdictText(file: string, verdict: CheckEvidenceReturnType): string {
  if (!verdict.valid) {
    return [`${file}: NOT evidence (${verdict.reason})`, `  ${verdict.detail}`, ...(verdict.nodeId === null ? [] : [`  node: ${verdict.nodeId}`])].join("\n");
  }
  const { earlier, later, excessNs } = verdict.contradiction;
  const side = (entry: typeof earlier) => `proofs[${entry.proofIndex}] entry ${entry.entryIndex}: moment ${entry.nanoMoment} ± ${entry.accuracyNs} ns, nodeTimestamp ${entry.nodeTimestampNs}`;
  return [
    `${file}: node ${verdict.nodeId} signed contradicting entries`,
    `  signed first:  ${side(earlier)}`,
    `  signed later:  ${side(later)}`,
    `  the later reading lies wholly before the earlier one by ${excessNs} ns more than an honest node's signing delay allows`,
  ].join("\n");
}

/** Deadline of fetching evidence by URL, ms. */
const EVIDENCE_FETCH_TIMEOUT_MS = 10_000;

/** The evidence text of a file, or of an evidence-gateway URL (checked against its content identifier); null when too large. */
async function readEvidence(source: string, cwd: string): Promise<string | null> {
  if (/^https?:\/\//.test(source)) {
    // Loaded here: multiformats is needed for this command only.
    const { fetchContentById } = await import("../lib/contentId");
    return Buffer.from(await fetchContentById(source, MAX_CONTRADICTION_EVIDENCE_BYTES, EVIDENCE_FETCH_TIMEOUT_MS)).toString("utf8");
  }
  return readBoundedText(resolve(cwd, source), MAX_CONTRADICTION_EVIDENCE_BYTES);
}

/**
 * `ats-node evidence check <file | url> [--json]` (docs/protocol.md §7.8): exit 0 when the evidence proves that its
 * node signed contradicting entries, 1 when it does not (bad signature, different nodes, not contradictory), 2 on
 * usage errors and malformed evidence (unreadable, too large, not the evidence shape, a URL whose bytes are not
 * the content its identifier names). A URL is an evidence gateway's `…/ipfs/<cid>` (catalog/ipfs.ts).
 */
async function evidenceCheck(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({ args, options: { json: { type: "boolean" } }, allowPositionals: true });
  if (positionals.length !== 1) {
    io.stderr("usage: ats-node evidence check <file | http(s)://…/ipfs/<cid>> [--json]");
    return 2;
  }
  const source = positionals[0]!;
  const file = /^https?:\/\//.test(source) ? source : resolve(io.cwd, source);
  let verdict: CheckEvidenceReturnType;
  try {
    const text = await readEvidence(source, io.cwd);
    verdict =
      text === null
        ? { valid: false, reason: "malformed", detail: `the file is larger than ${MAX_CONTRADICTION_EVIDENCE_BYTES} bytes`, nodeId: null }
        : checkEvidenceText(text);
  } catch (error) {
    verdict = { valid: false, reason: "malformed", detail: `cannot read it: ${rootCauseMessage(error)}`, nodeId: null };
  }
  if (values.json === true) printJson(io, { file, ...verdict });
  else io.stdout(evidenceVerdictText(file, verdict));
  if (verdict.valid) return 0;
  return verdict.reason === "malformed" ? 2 : 1;
}

/** `ats-node 0.1.0 (protocol ATS/1)`: the package version, and the protocol's tag from protocol/constants.ts. */
function versionText(): string {
  const { version } = JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8")) as { version: string };
  return `ats-node ${version} (protocol ${HW_MESSAGE_TAG_ASCII.split(" ")[0] ?? HW_MESSAGE_TAG_ASCII})`;
}

/** Runs one command; returns the exit code. Errors of the package are printed as one line, not a stack. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "keys" && rest[0] === "init") return await keysInit(rest.slice(1), io);
    if (command === "start") return await start(rest, io);
    if (command === "dev") return await dev(rest, io);
    if (command === "cluster") return await cluster(rest, io);
    if (command === "settings") return settings(rest, io);
    if (command === "manifest" && rest[0] === "verify") return await manifestVerify(rest.slice(1), io);
    if (command === "evidence" && rest[0] === "check") return await evidenceCheck(rest.slice(1), io);
    if (command === "--version" || command === "-v" || command === "version") {
      io.stdout(versionText());
      return 0;
    }
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
