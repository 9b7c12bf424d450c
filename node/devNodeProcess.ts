/**
 * A dev node in a process of its own (`ats-node start` on a config file in a temporary folder), as `ats-node
 * cluster` and the local network run their members: each its own failure domain, as an operator runs a mesh. The
 * same keys, data folder and settings as ./devNode.ts startDevNode gives in process; the folder is removed on close
 * and on a failed start.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv, printedJson, startProgram } from "../lib/childProgram";
import type { DevIdentity } from "../protocol/devca";
import { saveKeyDir } from "../protocol/keystore";
import type { SettingName } from "./config";
import type { DevNode, NodeHandle } from "./devNode";

/** A start that takes longer fails (a first start may compile dist/ first, which bin/ats-node.js says), ms. */
const NODE_START_TIMEOUT_MS = 120_000;

export interface StartDevNodeProcessParameters {
  identity: DevIdentity;
  /** ATS_* variables the node honours (ports pinned here are kept; otherwise free ports are taken). */
  env: NodeJS.ProcessEnv;
  /** Settings written to its config file (keys, data folder and trusted root are the dev ones). */
  overrides: Partial<Record<SettingName, unknown>>;
  /** Names the node in errors, e.g. "node 2". */
  name: string;
  /** Each line it logs (stderr); default: kept for errors only. */
  onLogLine?: (line: string) => void;
}

export interface DevNodeProcess extends DevNode {
  readonly pid: number;
  /** SIGKILL: a crash, for fault drills; close() afterwards still removes the folder. */
  kill(): Promise<void>;
}

export async function startDevNodeProcess(parameters: StartDevNodeProcessParameters): Promise<DevNodeProcess> {
  const root = mkdtempSync(join(tmpdir(), "ats-node-dev-"));
  const cleanup = () => rmSync(root, { recursive: true, force: true });
  try {
    const { identity } = parameters;
    const keyDir = join(root, "keys");
    const summary = await saveKeyDir(keyDir, identity);
    const settings: Partial<Record<SettingName, unknown>> = {
      ...parameters.overrides,
      keyDir,
      dataDir: join(root, "data"),
      trustedRootsPem: [identity.ca.certificatePem],
    };
    if (parameters.env.ATS_REST_PORT === undefined) settings.restPort = 0;
    if (parameters.env.ATS_GRPC_PORT === undefined) settings.grpcPort = 0;
    const configFile = join(root, "config.json");
    writeFileSync(configFile, `${JSON.stringify(settings, null, 2)}\n`);
    const program = await startProgram<{ endpoints: NodeHandle["endpoints"] }>({
      bin: "ats-node.js",
      args: ["start", "--config", configFile],
      env: childEnv(parameters.env),
      ready: (stdout) => printedJson(stdout),
      name: parameters.name,
      timeoutMs: NODE_START_TIMEOUT_MS,
      ...(parameters.onLogLine === undefined ? {} : { onStderrLine: parameters.onLogLine }),
    });
    let closing: Promise<void> | undefined;
    const close = (): Promise<void> => (closing ??= program.stop("SIGTERM").finally(cleanup));
    return {
      node: { endpoints: program.printed.endpoints, close },
      keyDir,
      cardId: summary.cardId,
      nodeAddress: summary.nodeAddress,
      trustedRootPem: identity.ca.certificatePem,
      pid: program.child.pid!,
      kill: () => program.stop("SIGKILL"),
      close,
    };
  } catch (error) {
    cleanup();
    throw error;
  }
}
