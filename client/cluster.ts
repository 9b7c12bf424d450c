/**
 * A client over several nodes (docs/protocol.md §8): `createClusterClient({ endpoints })`. Each request goes to a
 * node picked at random among the five best scores (client/selection.ts) and fails over to the next ones, best
 * first, when a node fails (network error, timeout, any error answer): at most every node once per request. The
 * inputs are measured here (answer times, the last 20 outcomes) and read from each node's GET /node/info
 * (`accuracyNs`, `currentLoad`), refreshed in the background of requests every `infoRefreshMs`, with the same
 * timeout as requests.
 */
import { rootCauseMessage, UnavailableError } from "../protocol/errors";
import { createTimeClient } from "./index";
import { hardwareAccuracyOf, nodeScore, selectionOrder, type NodeScoreInputs } from "./selection";
import type { FetchedProof, TimeClient, TimeClientOptions } from "./types";

/** Answers remembered per node for recentAccuracyScore. */
export const RECENT_ANSWERS = 20;
/** Weight of the newest answer time in the moving average. */
const LATENCY_WEIGHT = 0.2;

export interface ClusterClientOptions extends Omit<TimeClientOptions, "endpoint" | "grpcEndpoint" | "wsEndpoint"> {
  /** REST base URLs of the nodes (at least one). */
  endpoints: readonly string[];
  /** A proof counts as accurate for recentAccuracyScore when its accuracyNs is at most this (default 1 ms). */
  requiredAccuracyNs?: number;
  /** How often node info (accuracy, load) is refreshed, ms (default 10,000). */
  infoRefreshMs?: number;
  /** Random source of the pick (tests); default Math.random. */
  random?: () => number;
}

/** What the client knows about one node: the §8 inputs and where they come from. */
export interface ClusterNodeState {
  endpoint: string;
  inputs: NodeScoreInputs;
  score: number;
  /** Answers counted in recentAccuracyScore. */
  answers: number;
  lastError: string | null;
}

export interface ClusterFetchedProof extends FetchedProof {
  /** The node that answered. */
  endpoint: string;
}

export interface ClusterClient {
  /** A proof from the selected node, or from the next ones when it fails; UnavailableError when all fail. */
  getCurrentTime(): Promise<ClusterFetchedProof>;
  /** Each node's inputs and score now. */
  nodes(): ClusterNodeState[];
  /** Fetches every node's info now (also done in the background every infoRefreshMs). */
  refreshInfo(): Promise<void>;
  close(): void;
}

interface NodeRecord {
  readonly endpoint: string;
  readonly client: TimeClient;
  avgLatencyMs: number | null;
  readonly recent: boolean[];
  accuracyNs: number | undefined;
  currentLoad: number | undefined;
  lastError: string | null;
}

function inputsOf(node: NodeRecord): NodeScoreInputs {
  return {
    hardwareAccuracy: hardwareAccuracyOf(node.accuracyNs),
    avgLatencyMs: node.avgLatencyMs ?? 100,
    recentAccuracyScore: node.recent.length === 0 ? 0.5 : node.recent.filter(Boolean).length / node.recent.length,
    currentLoad: node.currentLoad ?? 1,
  };
}

export function createClusterClient(options: ClusterClientOptions): ClusterClient {
  if (options.endpoints.length === 0) throw new RangeError("createClusterClient needs at least one endpoint");
  const { endpoints, requiredAccuracyNs = 1_000_000, infoRefreshMs = 10_000, random = Math.random, ...clientOptions } = options;
  // Failover replaces retries: a failing node is left for the next one at once.
  const nodes: NodeRecord[] = endpoints.map((endpoint) => ({
    endpoint,
    client: createTimeClient({ ...clientOptions, endpoint, retries: 0 }),
    avgLatencyMs: null,
    recent: [],
    accuracyNs: undefined,
    currentLoad: undefined,
    lastError: null,
  }));
  let infoFetchedAtMs = Number.NEGATIVE_INFINITY;
  let refreshing: Promise<void> | null = null;

  function remember(node: NodeRecord, accurate: boolean, latencyMs: number | null, error: unknown): void {
    node.recent.push(accurate);
    if (node.recent.length > RECENT_ANSWERS) node.recent.shift();
    if (latencyMs !== null) node.avgLatencyMs = node.avgLatencyMs === null ? latencyMs : node.avgLatencyMs + LATENCY_WEIGHT * (latencyMs - node.avgLatencyMs);
    node.lastError = error === null ? null : rootCauseMessage(error);
  }

  async function refreshInfo(): Promise<void> {
    infoFetchedAtMs = Date.now();
    await Promise.all(
      nodes.map(async (node) => {
        try {
          const info = await node.client.info();
          node.accuracyNs = info.accuracyNs;
          node.currentLoad = info.currentLoad;
        } catch (error) {
          // Unknown again: scored as the worst until it answers.
          node.accuracyNs = undefined;
          node.currentLoad = undefined;
          node.lastError = rootCauseMessage(error);
        }
      }),
    );
  }

  function refreshIfDue(): Promise<void> | null {
    if (Date.now() - infoFetchedAtMs < infoRefreshMs) return null;
    refreshing ??= refreshInfo().finally(() => {
      refreshing = null;
    });
    return refreshing;
  }

  return {
    async getCurrentTime() {
      // The first request waits for node info (nothing to score on otherwise); later ones refresh in the background.
      const due = refreshIfDue();
      if (infoFetchedAtMs === Number.NEGATIVE_INFINITY || (due !== null && nodes.every((node) => node.accuracyNs === undefined))) await due;
      const order = selectionOrder(nodes, (node) => nodeScore(inputsOf(node)), random);
      const failures: Array<{ endpoint: string; error: string }> = [];
      let lastError: unknown = null;
      for (const node of order) {
        const startedAt = performance.now();
        try {
          const fetched = await node.client.getCurrentTime();
          remember(node, fetched.proof.accuracy <= requiredAccuracyNs, performance.now() - startedAt, null);
          return { ...fetched, endpoint: node.endpoint };
        } catch (error) {
          remember(node, false, null, error);
          failures.push({ endpoint: node.endpoint, error: rootCauseMessage(error) });
          lastError = error;
        }
      }
      throw new UnavailableError(`all ${nodes.length} nodes failed: ${failures.map((f) => `${f.endpoint}: ${f.error}`).join("; ")}`, { failures }, { cause: lastError });
    },
    nodes: () =>
      nodes.map((node) => {
        const inputs = inputsOf(node);
        return { endpoint: node.endpoint, inputs, score: nodeScore(inputs), answers: node.recent.length, lastError: node.lastError };
      }),
    refreshInfo,
    close() {
      for (const node of nodes) node.client.close();
    },
  };
}
