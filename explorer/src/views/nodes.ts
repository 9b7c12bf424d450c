/**
 * The attesting nodes as an operator checks them: role, convergence state and time quality (GET /mesh/state), the
 * node (GET /node/info, through the browser client of client/browser.ts), and the accuracy the node signs now (the
 * `accuracyNs` of its stream's signed updates: the bound a contract sees). Each poll also feeds the mesh history
 * the plot draws.
 */
import { createBrowserTimeClient, type BrowserTimeClient } from "../../../client/browser";
import { durationNs, shortHex } from "../format";
import { h, render } from "../dom";
import { errorText, every } from "../poll";
import type { MeshStateView } from "../types";

const POLL_MS = 2_000;

export interface NodeRow {
  endpoint: string;
  nodeId: string | null;
  role: string | null;
  convergenceState: string | null;
  timeQuality: number | null;
  signedAccuracyNs: number | null;
  consensusOffsetNs: string | null;
  peers: string | null;
  error: string | null;
}

async function readJson(url: string): Promise<unknown> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

/** A signed accuracy older than this reads as "not signing", ms. */
const SIGNED_STALE_MS = 5_000;

/**
 * The accuracy a node signs, live: its `/v1/stream` (one update a second). A stream, not GET /time/current: a node
 * refuses a proof with 503 while it cannot sign (starting, converging, over its bound), and a page's failed
 * request is logged by the browser as an error, while a stream just sends nothing meanwhile.
 */
class SignedAccuracy {
  #latest: { accuracyNs: number; atMs: number } | null = null;
  #open = false;

  constructor(private readonly client: BrowserTimeClient) {}

  /** Opens the stream when none is open (the first poll, or after it closed). */
  ensureOpen(): void {
    if (this.#open) return;
    this.#open = true;
    this.client
      .stream({
        intervalNs: 1_000_000_000n,
        onUpdate: (update) => (this.#latest = { accuracyNs: update.accuracyNs, atMs: Date.now() }),
        onClose: () => (this.#open = false),
      })
      .catch(() => (this.#open = false));
  }

  /** The latest signed accuracy, ns; null when none came in the last SIGNED_STALE_MS. */
  current(nowMs: number): number | null {
    return this.#latest !== null && nowMs - this.#latest.atMs <= SIGNED_STALE_MS ? this.#latest.accuracyNs : null;
  }
}

async function readNode(endpoint: string, client: BrowserTimeClient, signed: SignedAccuracy, onMesh: (state: MeshStateView) => void): Promise<NodeRow> {
  const row: NodeRow = { endpoint, nodeId: null, role: null, convergenceState: null, timeQuality: null, signedAccuracyNs: null, consensusOffsetNs: null, peers: null, error: null };
  const [info, mesh] = await Promise.allSettled([client.info(), readJson(`${endpoint.replace(/\/+$/, "")}/mesh/state`) as Promise<MeshStateView>]);
  const errors: string[] = [];
  if (info.status === "fulfilled") {
    row.nodeId = info.value.nodeId;
    row.role = info.value.role;
    signed.ensureOpen();
  } else errors.push(`info: ${errorText(info.reason)}`);
  if (mesh.status === "fulfilled") {
    row.convergenceState = mesh.value.convergenceState;
    row.timeQuality = mesh.value.timeQuality;
    row.consensusOffsetNs = mesh.value.consensusOffsetNs;
    row.peers = `${mesh.value.peerCount} of ${mesh.value.members - 1}`;
    row.role ??= mesh.value.role;
    onMesh(mesh.value);
  } else errors.push(`mesh: ${errorText(mesh.reason)}`);
  row.signedAccuracyNs = signed.current(Date.now());
  row.error = errors.length === 0 ? null : errors.join("; ");
  return row;
}

function stateClass(state: string | null): string {
  return state === "Converged" ? "ok" : state === "Degraded" ? "bad" : "warn";
}

export function startNodes(endpoints: readonly string[], target: HTMLElement, onMesh: (endpoint: string, state: MeshStateView) => void): { stop(): void } {
  const clients = endpoints.map((endpoint) => createBrowserTimeClient({ endpoint, timeoutMs: 5_000, retries: 0 }));
  const signed = clients.map((client) => new SignedAccuracy(client));
  return every(
    POLL_MS,
    async () => {
      const rows = await Promise.all(endpoints.map((endpoint, index) => readNode(endpoint, clients[index]!, signed[index]!, (state) => onMesh(endpoint, state))));
      render(
        target,
        h(
          "table",
          { class: "nodes" },
          h("thead", {}, h("tr", {}, ...["node", "role", "convergence", "time quality", "signed accuracy", "consensus offset", "peers reachable"].map((title) => h("th", {}, title)))),
          h(
            "tbody",
            {},
            ...rows.map((row) =>
              h(
                "tr",
                { "data-testid": "node-row" },
                h("td", {}, h("code", { title: row.nodeId ?? "" }, row.nodeId === null ? "?" : shortHex(row.nodeId, 4)), h("div", { class: "muted small" }, row.endpoint), row.error === null ? null : h("div", { class: "error small" }, row.error)),
                h("td", {}, row.role ?? "?"),
                h("td", {}, h("span", { class: `badge ${stateClass(row.convergenceState)}`, "data-testid": "node-convergence" }, row.convergenceState ?? "?")),
                h("td", { title: "0–10,000 (docs/protocol.md §7.4)" }, row.timeQuality === null ? "?" : row.timeQuality.toLocaleString("en-US")),
                h("td", { title: row.signedAccuracyNs === null ? "" : `${row.signedAccuracyNs} ns` }, row.signedAccuracyNs === null ? h("span", { class: "muted" }, "not signing") : `±${durationNs(BigInt(row.signedAccuracyNs))}`),
                h("td", { title: row.consensusOffsetNs === null ? "" : `${row.consensusOffsetNs} ns` }, row.consensusOffsetNs === null ? "—" : durationNs(row.consensusOffsetNs)),
                h("td", {}, row.peers ?? "?"),
              ),
            ),
          ),
        ),
      );
    },
    (error) => render(target, h("p", { class: "error" }, errorText(error))),
  );
}
