/**
 * A node on development keys in a temporary folder: what `ats-node dev` runs, what a local cluster
 * (./cluster.ts) runs N of, and what tests and the local network start in process. Here rather than in ./cli.ts,
 * so that the cluster and the command line do not import each other.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "pino";
import { createDevIdentity, type DevIdentity } from "../protocol/devca";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS } from "../protocol/devkeys";
import { saveKeyDir } from "../protocol/keystore";
import type { Address, Hex } from "../protocol/types";
import { loadConfig, type NodeConfig, type SettingName } from "./config";

/** The part of node/server.ts the CLI needs (loaded lazily so `keys init` does not load the transports). */
export interface NodeHandle {
  /** `rpc`: the temporal JSON-RPC gateway, "" when it is off (a test double may leave it out). */
  endpoints: { rest: string; grpc: string; ws: string; rpc?: string; ntp?: string };
  close(): Promise<void>;
}
export type StartNodeFunction = (parameters: { config: NodeConfig; logger: Logger }) => Promise<NodeHandle>;

/** `startNode` when given, else node/server.ts startNode (loaded on use, so `keys init` does not load the transports). */
export async function loadStartNode(startNode?: StartNodeFunction): Promise<StartNodeFunction> {
  if (startNode !== undefined) return startNode;
  const server = (await import("./server")) as { startNode: StartNodeFunction };
  return server.startNode;
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
  /** Further settings (e.g. logFormat from `--pretty`); the keys, data folder and trusted root stay the dev ones. */
  overrides?: Partial<Record<SettingName, unknown>>;
  /**
   * The identity to run (a cluster creates all of them first, to tell each node its peers); default the public
   * development card and first node key ({publicDevIdentity}).
   */
  identity?: DevIdentity;
}

/**
 * The public development card and first development node key (protocol/devkeys.ts), certified by a fresh dev CA:
 * the keys deploy/ registers on a local chain. Public knowledge, like Hardhat's accounts: a node on them
 * is for a local chain only.
 */
export function publicDevIdentity(): Promise<DevIdentity> {
  return createDevIdentity({ cardPrivateKey: DEV_CARD_PRIVATE_KEY, nodePrivateKey: DEV_NODE_PRIVATE_KEYS[0] });
}

/**
 * Writes dev keys (a fresh CA; the public development card and node keys unless `identity` says otherwise) to a
 * temporary folder and starts a node on them, on free ports unless the environment pins them, with the dev CA as
 * trusted root. The folder is removed on close and on failure.
 */
export async function startDevNode(parameters: StartDevNodeParameters): Promise<DevNode> {
  const root = mkdtempSync(join(tmpdir(), "ats-node-dev-"));
  const cleanup = () => rmSync(root, { recursive: true, force: true });
  try {
    const identity = parameters.identity ?? (await publicDevIdentity());
    const keyDir = join(root, "keys");
    const summary = await saveKeyDir(keyDir, identity);
    const overrides: Partial<Record<SettingName, unknown>> = {
      ...parameters.overrides,
      keyDir,
      dataDir: join(root, "data"),
      trustedRootsPem: [identity.ca.certificatePem],
    };
    if (parameters.env.ATS_REST_PORT === undefined) overrides.restPort = 0;
    if (parameters.env.ATS_GRPC_PORT === undefined) overrides.grpcPort = 0;
    const config = loadConfig({ env: parameters.env, overrides, cwd: parameters.cwd });
    const startNode = await loadStartNode(parameters.startNode);
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

