/**
 * The attesting nodes as an operator checks them: role, convergence state and time quality (GET /mesh/state), the
 * node and card (GET /node/info, through the browser client of client/browser.ts), and the accuracy the node signs
 * now (the `accuracyNs` inside the proof of GET /time/current: the bound a contract sees). Each poll also feeds the
 * mesh history the plot draws.
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

async function readNode(endpoint: string, client: BrowserTimeClient, onMesh: (state: MeshStateView) => void): Promise<NodeRow> {
  const row: NodeRow = { endpoint, nodeId: null, role: null, convergenceState: null, timeQuality: null, signedAccuracyNs: null, consensusOffsetNs: null, peers: null, error: null };
  const [info, mesh, proof] = await Promise.allSettled([client.info(), readJson(`${endpoint.replace(/\/+$/, "")}/mesh/state`) as Promise<MeshStateView>, client.getCurrentTime()]);
  const errors: string[] = [];
  if (info.status === "fulfilled") {
    row.nodeId = info.value.nodeId;
    row.role = info.value.role;
  } else errors.push(`info: ${errorText(info.reason)}`);
  if (mesh.status === "fulfilled") {
    row.convergenceState = mesh.value.convergenceState;
    row.timeQuality = mesh.value.timeQuality;
    row.consensusOffsetNs = mesh.value.consensusOffsetNs;
    row.peers = `${mesh.value.peerCount} of ${mesh.value.members - 1}`;
    row.role ??= mesh.value.role;
    onMesh(mesh.value);
  } else errors.push(`mesh: ${errorText(mesh.reason)}`);
  if (proof.status === "fulfilled") row.signedAccuracyNs = proof.value.proof.accuracy;
  else errors.push(`time: ${errorText(proof.reason)}`);
  row.error = errors.length === 0 ? null : errors.join("; ");
  return row;
}

function stateClass(state: string | null): string {
  return state === "Converged" ? "ok" : state === "Degraded" ? "bad" : "warn";
}

export function startNodes(endpoints: readonly string[], target: HTMLElement, onMesh: (endpoint: string, state: MeshStateView) => void): { stop(): void } {
  const clients = endpoints.map((endpoint) => createBrowserTimeClient({ endpoint, timeoutMs: 5_000, retries: 0 }));
  return every(
    POLL_MS,
    async () => {
      const rows = await Promise.all(endpoints.map((endpoint, index) => readNode(endpoint, clients[index]!, (state) => onMesh(endpoint, state))));
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
                h("td", { title: row.signedAccuracyNs === null ? "" : `${row.signedAccuracyNs} ns` }, row.signedAccuracyNs === null ? "?" : `±${durationNs(BigInt(row.signedAccuracyNs))}`),
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
