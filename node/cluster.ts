/**
 * A local mesh of dev nodes (`ats-node cluster --nodes N`, docs/protocol.md §7): N nodes on 127.0.0.1 with fresh
 * dev identities under one dev manufacturer CA, free ports, each listing the others as meshPeers and as trusted
 * nodes, so each serves proofs co-signed by ⌈2N/3⌉ of them. Each member runs in a process of its own
 * (./devNodeProcess.ts), started side by side; in process only for tests (`mode`). Closing stops every node and
 * removes the folders.
 *
 * The cluster settings differ from a node's defaults where loopback software cannot meet them, and say so:
 * - meshWindowNs: CLUSTER_WINDOW_NS (1 ms), not 100 ns — readings of one host clock through the kernel's loopback
 *   and Node's event loop agree to tens of microseconds when the host is idle, but to a millisecond when its cores
 *   are busy (a test suite beside it), far from the nanoseconds hardware timestamping gives;
 * - maxAcceptableDriftNs: CLUSTER_MAX_ACCEPTABLE_DRIFT_NS, so that each node's own verify() accepts the mesh's
 *   honest accuracy bound: tens of µs on an idle loopback, but half a round trip grows to milliseconds when the
 *   host's cores are busy (the bound is honest, so it grows with the delay).
 */
import { createSocket } from "node:dgram";
import type { Logger } from "pino";
import { SOFTWARE_MESH_ACCURACY_NS } from "../protocol/constants";
import { createDevIdentity, createDevManufacturerCa } from "../protocol/devca";
import { ValidationError } from "../protocol/errors";
import type { Address, Hex } from "../protocol/types";
import type { NodeConfig, SettingName } from "./config";
import { startDevNode, type DevNode, type NodeHandle, type StartNodeFunction } from "./devNode";
import { startDevNodeProcess } from "./devNodeProcess";

/** Most nodes a local cluster runs (the meshPeers bound + 1). */
export const MAX_CLUSTER_NODES = 32;
/** W of a loopback cluster, ns (see the module comment). */
export const CLUSTER_WINDOW_NS = 1_000_000n;
/** The verify() accuracy bound of a loopback cluster, ns: the software-mesh tier of consumers (AccuracyTiers.sol). */
export const CLUSTER_MAX_ACCEPTABLE_DRIFT_NS = BigInt(SOFTWARE_MESH_ACCURACY_NS);

export interface ClusterNode {
  readonly nodeId: Address;
  readonly cardId: Hex;
  readonly endpoints: NodeHandle["endpoints"] & { mesh?: string };
  /** Its process id (a member in a process of its own); absent in process. */
  readonly pid?: number;
}

export interface DevCluster {
  readonly nodes: readonly ClusterNode[];
  /** The dev manufacturer CA (PEM): the trusted root of every card of the cluster. */
  readonly trustedRootPem: string;
  /** Stops one node (fault drills: a round fails once too few remain). */
  stopNode(index: number): Promise<void>;
  /** Stops every node still running and removes their folders. */
  close(): Promise<void>;
}

export interface StartDevClusterParameters {
  readonly nodes: number;
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  readonly logger: (config: NodeConfig) => Logger;
  /**
   * Where the members run. "processes" (the default): each `ats-node start` in a process of its own (its own
   * failure domain, as an operator runs a mesh), logging through `onLogLine`. "in-process": all in this process,
   * logging through `logger`; for tests that give a `startNode` double, which cannot cross a process.
   */
  readonly mode?: "processes" | "in-process";
  /** Each line a member process logs (stderr); default: dropped. */
  readonly onLogLine?: (line: string) => void;
  readonly startNode?: StartNodeFunction;
  /** Settings every node gets (e.g. logFormat, meshRoundIntervalMs); ports, keys and peers are the cluster's. */
  readonly overrides?: Partial<Record<SettingName, unknown>>;
}

/** `count` UDP ports free on 127.0.0.1 right now (bound together, then released). */
export async function freeUdpPorts(count: number): Promise<number[]> {
  const sockets = Array.from({ length: count }, () => createSocket("udp4"));
  try {
    await Promise.all(sockets.map((socket) => new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind(0, "127.0.0.1", () => resolve());
    })));
    return sockets.map((socket) => socket.address().port);
  } finally {
    await Promise.all(sockets.map((socket) => new Promise<void>((resolve) => socket.close(() => resolve())).catch(() => undefined)));
  }
}

export async function startDevCluster(parameters: StartDevClusterParameters): Promise<DevCluster> {
  const count = parameters.nodes;
  if (!Number.isInteger(count) || count < 1 || count > MAX_CLUSTER_NODES) {
    throw new ValidationError("--nodes", `must be an integer from 1 to ${MAX_CLUSTER_NODES}, got ${count}`, { nodes: count });
  }
  const ca = await createDevManufacturerCa();
  const identities = await Promise.all(Array.from({ length: count }, () => createDevIdentity({ ca })));
  const meshPorts = await freeUdpPorts(count);
  const running: Array<(DevNode & { pid?: number }) | null> = [];
  const starts: Promise<DevNode & { pid?: number }>[] = [];
  const inProcess = parameters.mode === "in-process" || parameters.startNode !== undefined;
  const closeAll = async (): Promise<void> => {
    const nodes = running.splice(0, running.length);
    await Promise.all(nodes.map((node) => node?.close()));
  };
  try {
    for (const [index, identity] of identities.entries()) {
      const peers = identities.flatMap((other, otherIndex) => (otherIndex === index ? [] : [`${other.nodeAddress}@127.0.0.1:${meshPorts[otherIndex]}`]));
      const overrides: Partial<Record<SettingName, unknown>> = {
        meshWindowNs: CLUSTER_WINDOW_NS.toString(),
        maxAcceptableDriftNs: CLUSTER_MAX_ACCEPTABLE_DRIFT_NS.toString(),
        ...parameters.overrides,
        host: "127.0.0.1",
        meshPort: meshPorts[index],
        meshPeers: count === 1 ? [] : peers,
        trustedNodeAddresses: identities.filter((_, otherIndex) => otherIndex !== index).map((other) => other.nodeAddress),
      };
      const env = { ...parameters.env, ATS_REST_PORT: undefined, ATS_GRPC_PORT: undefined };
      starts.push(
        inProcess
          ? startDevNode({ env, cwd: parameters.cwd, logger: parameters.logger, overrides, identity, ...(parameters.startNode === undefined ? {} : { startNode: parameters.startNode }) })
          : startDevNodeProcess({ env, overrides, identity, name: `node ${index + 1}`, ...(parameters.onLogLine === undefined ? {} : { onLogLine: parameters.onLogLine }) }),
      );
      // In process the members start one after another (one event loop); processes start side by side.
      if (inProcess) await starts[starts.length - 1]!.catch(() => undefined);
    }
    const settled = await Promise.allSettled(starts);
    for (const result of settled) running.push(result.status === "fulfilled" ? result.value : null);
    const failed = settled.find((result): result is PromiseRejectedResult => result.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  } catch (error) {
    await closeAll();
    throw error;
  }
  const nodes = running.map((node, index) => ({
    nodeId: identities[index]!.nodeAddress,
    cardId: identities[index]!.cardId,
    endpoints: node!.node.endpoints,
    ...(node!.pid === undefined ? {} : { pid: node!.pid }),
  }));
  return {
    nodes,
    trustedRootPem: ca.certificatePem,
    stopNode: async (index) => {
      const node = running[index];
      running[index] = null;
      await node?.close();
    },
    close: closeAll,
  };
}
