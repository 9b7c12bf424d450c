/**
 * A client over several nodes (docs/protocol.md §8): `createClusterClient({ endpoints })`. Which node a request
 * tries first and in which order it fails over is client/selection.ts's; this module does the I/O: the requests,
 * what it observes of each node (answer times, the last 20 outcomes), and each node's GET /node/info (`accuracyNs`,
 * `currentLoad`), read before the first request and again by a request that finds it older than `infoRefreshMs`
 * (in the background then, one read at a time, every node in parallel, each within the request timeout). There is
 * no timer: an idle client reads nothing and keeps no process alive.
 *
 * Which failures fail over: the retryable ones of client/retry.ts (network errors, timeouts, 429, 5xx), which
 * another node may well not share, and a malformed proof in a 2xx answer, the answering node's own fault. Other
 * error answers (400, 401, 404) end the request with that error as a single-node client raises it: they say the
 * request or its credentials are wrong, which every node would repeat. No retries per node: the next node is the
 * retry, so a request makes at most one attempt per node.
 */
import { AtsError, rootCauseMessage, UnavailableError, ValidationError } from "../protocol/errors";
import { toFetched } from "./fetched";
import { createRestCaller, DEFAULT_TIMEOUT_MS, nodeInfoFromJson, restBaseOf, type RestCaller } from "./rest";
import { isRetryable, type RetryPolicy } from "./retry";
import { nextAvgLatencyMs, nodeScore, scoreInputsOf, selectionOrder, withOutcome } from "./selection";
import type { ClusterClient, ClusterClientOptions, ClusterNodeState, FetchedProof } from "./types";

const DEFAULT_REQUIRED_ACCURACY_NS = 1_000_000;
const DEFAULT_INFO_REFRESH_MS = 10_000;
const NO_RETRIES: RetryPolicy = { retries: 0, backoffBaseMs: 0, backoffMaxMs: 0 };

/** One node: its connection and what this client has observed of it (client/selection.ts NodeObservations). */
interface NodeRecord {
  readonly endpoint: string;
  readonly rest: RestCaller;
  accuracyNs: number | undefined;
  currentLoad: number | undefined;
  avgLatencyMs: number | undefined;
  recentOutcomes: boolean[];
  lastError: string | null;
}

/** One node's failure within a request: the evidence an all-failed error carries. */
interface NodeFailure {
  endpoint: string;
  code: string | null;
  message: string;
}

function checkOptions(options: ClusterClientOptions): void {
  if (!Array.isArray(options.endpoints) || options.endpoints.length === 0) {
    throw new ValidationError("endpoints", "must list at least one node URL");
  }
  const bases: string[] = [];
  options.endpoints.forEach((endpoint: unknown, index) => {
    const field = `endpoints[${index}]`;
    if (typeof endpoint !== "string" || !/^https?:\/\/[^/]/.test(endpoint) || !URL.canParse(endpoint)) {
      throw new ValidationError(field, `must be an http:// or https:// URL, got ${JSON.stringify(endpoint)}`);
    }
    const earlier = bases.indexOf(restBaseOf(endpoint));
    // A node listed twice would be picked twice as often and tried twice per request.
    if (earlier !== -1) throw new ValidationError(field, `repeats endpoints[${earlier}] (${endpoint})`);
    bases.push(restBaseOf(endpoint));
  });
  const positive = (field: string, value: number | undefined, integer: boolean): void => {
    if (value === undefined) return;
    if (!(typeof value === "number" && Number.isFinite(value) && value > 0) || (integer && !Number.isSafeInteger(value))) {
      throw new ValidationError(field, `must be a positive ${integer ? "integer" : "number"}, got ${String(value)}`);
    }
  };
  positive("requiredAccuracyNs", options.requiredAccuracyNs, true);
  positive("infoRefreshMs", options.infoRefreshMs, false);
  positive("timeoutMs", options.timeoutMs, false);
  if (options.random !== undefined && typeof options.random !== "function") throw new ValidationError("random", "must be a function");
  if (options.nowMs !== undefined && typeof options.nowMs !== "function") throw new ValidationError("nowMs", "must be a function");
}

function failureOf(node: NodeRecord, error: unknown): NodeFailure {
  return { endpoint: node.endpoint, code: error instanceof AtsError ? error.code : null, message: rootCauseMessage(error) };
}

export function createClusterClient(options: ClusterClientOptions): ClusterClient {
  checkOptions(options);
  const {
    requiredAccuracyNs = DEFAULT_REQUIRED_ACCURACY_NS,
    infoRefreshMs = DEFAULT_INFO_REFRESH_MS,
    random = Math.random,
    nowMs = Date.now,
    timeoutMs = DEFAULT_TIMEOUT_MS,
  } = options;
  const nodes: NodeRecord[] = options.endpoints.map((endpoint) => ({
    endpoint,
    rest: createRestCaller({ base: restBaseOf(endpoint), apiKey: options.apiKey, timeoutMs, retry: NO_RETRIES, ca: options.tls?.ca }),
    accuracyNs: undefined,
    currentLoad: undefined,
    avgLatencyMs: undefined,
    recentOutcomes: [],
    lastError: null,
  }));
  let infoRead = false;
  let infoFreshUntilMs = 0;
  let refreshing: Promise<void> | null = null;

  /** One GET on one node; the answer's time feeds avgLatencyMs (failures have none worth averaging). */
  async function timedGet(node: NodeRecord, path: string): Promise<unknown> {
    const startedMs = performance.now();
    const { value } = await node.rest.request("GET", path);
    node.avgLatencyMs = nextAvgLatencyMs(node.avgLatencyMs, performance.now() - startedMs);
    return value;
  }

  /** Never rejects: a node whose info cannot be read is scored as unknown (the worst) until it can. */
  async function readInfo(node: NodeRecord): Promise<void> {
    try {
      const info = nodeInfoFromJson(await timedGet(node, "/node/info"));
      // The schema allows any integer; a negative bound means nothing, so it scores as unknown.
      node.accuracyNs = info.accuracyNs >= 0 ? info.accuracyNs : undefined;
      node.currentLoad = info.currentLoad;
      node.lastError = null;
    } catch (error) {
      node.accuracyNs = undefined;
      node.currentLoad = undefined;
      node.lastError = `node info: ${rootCauseMessage(error)}`;
    }
  }

  function refreshInfo(): Promise<void> {
    refreshing ??= Promise.all(nodes.map(readInfo))
      .then(() => {
        infoRead = true;
        infoFreshUntilMs = nowMs() + infoRefreshMs;
      })
      .finally(() => {
        refreshing = null;
      });
    return refreshing;
  }

  function remember(node: NodeRecord, accurate: boolean, error: unknown): void {
    node.recentOutcomes = withOutcome(node.recentOutcomes, accurate);
    node.lastError = error === null ? null : rootCauseMessage(error);
  }

  /** The node's proof, or its error to fail over on; throws only what must not fail over. */
  async function tryNode(node: NodeRecord): Promise<{ fetched: FetchedProof } | { error: unknown }> {
    let value: unknown;
    try {
      value = await timedGet(node, "/time/current");
    } catch (error) {
      remember(node, false, error);
      if (!isRetryable(error)) throw error;
      return { error };
    }
    let fetched: FetchedProof;
    try {
      fetched = toFetched(value);
    } catch (error) {
      // A malformed proof in a 2xx answer: this node's fault, not the request's.
      remember(node, false, error);
      return { error };
    }
    remember(node, fetched.proof.accuracy <= requiredAccuracyNs, null);
    return { fetched };
  }

  return {
    async getCurrentTime() {
      // Before the first read there is nothing to score on; afterwards a stale read never delays a request.
      if (!infoRead) await refreshInfo();
      else if (nowMs() >= infoFreshUntilMs) void refreshInfo();
      const order = selectionOrder(nodes, (node) => nodeScore(scoreInputsOf(node)), random);
      const failures: NodeFailure[] = [];
      let lastError: unknown = null;
      for (const node of order) {
        const outcome = await tryNode(node);
        if ("fetched" in outcome) return { ...outcome.fetched, endpoint: node.endpoint };
        failures.push(failureOf(node, outcome.error));
        lastError = outcome.error;
      }
      const summary = failures.map((failure) => `${failure.endpoint}: ${failure.message}`).join("; ");
      throw new UnavailableError(`all ${nodes.length} nodes failed: ${summary}`, { failures }, { cause: lastError });
    },
    nodes: (): ClusterNodeState[] =>
      nodes.map((node) => {
        const inputs = scoreInputsOf(node);
        return { endpoint: node.endpoint, inputs, score: nodeScore(inputs), answers: node.recentOutcomes.length, lastError: node.lastError };
      }),
    refreshInfo,
    close() {
      for (const node of nodes) node.rest.close();
    },
  };
}
