/**
 * The relayer at work, from its operator API's read-only routes (docs/relayer.md): its chains' health (GET
 * /health), its queues by status, the dead letters and the latest deliveries (GET /items?status=…&order=newest).
 * The retry and skip actions need the operator's key and are not offered here.
 */
import { h, render } from "../dom";
import { errorText, every } from "../poll";

const POLL_MS = 2_000;
/** The most items one list read returns (the API's bound); a fuller queue shows as "500+". */
const LIST_LIMIT = 500;
const SHOWN = 10;
const QUEUES = ["pending", "submitted", "dead"] as const;

interface RelayerItem {
  id: string;
  kind: string;
  chainId: number;
  status: string;
  attempts: number;
  outcome: string | null;
  lastError: string | null;
  updatedMs: number;
}

interface Health {
  ok: boolean;
  chains: { name: string; chainId: number; lagBlocks: string; lastError: string | null }[];
}

async function readJson<T>(url: string): Promise<T> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  // /health answers 503 with its report while a chain's last tick failed: still the report to show.
  if (!response.ok && !(response.status === 503 && url.endsWith("/health"))) throw new Error(`${url}: HTTP ${response.status}`);
  return (await response.json()) as T;
}

function itemsTable(items: RelayerItem[], testId: string, empty: string): HTMLElement {
  if (items.length === 0) return h("p", { class: "muted", "data-testid": testId }, empty);
  return h(
    "table",
    { class: "items", "data-testid": testId },
    h("thead", {}, h("tr", {}, ...["item", "chain", "attempts", "outcome / last error", "updated"].map((title) => h("th", {}, title)))),
    h(
      "tbody",
      {},
      ...items.map((item) =>
        h("tr", {}, h("td", {}, h("code", {}, item.id)), h("td", {}, item.chainId), h("td", {}, item.attempts), h("td", { class: item.status === "dead" ? "error" : "" }, item.outcome ?? item.lastError ?? "—"), h("td", {}, new Date(item.updatedMs).toISOString().slice(11, 23))),
      ),
    ),
  );
}

export function startRelayer(api: string | null, target: HTMLElement): { stop(): void } {
  if (api === null) {
    render(target, h("p", { class: "muted" }, "no relayer in this network's configuration"));
    return { stop() {} };
  }
  const base = api.replace(/\/+$/, "");
  const list = (query: string) => readJson<{ items: RelayerItem[] }>(`${base}/items?${query}`).then((answer) => answer.items);
  return every(
    POLL_MS,
    async () => {
      const [health, deliveries, ...queues] = await Promise.all([readJson<Health>(`${base}/health`), list(`status=done&order=newest&limit=${SHOWN}`), ...QUEUES.map((status) => list(`status=${status}&order=newest&limit=${LIST_LIMIT}`))]);
      const counts = QUEUES.map((status, index) => ({ status, count: queues[index]!.length }));
      render(
        target,
        h(
          "div",
          { class: "relayer-health" },
          h("span", { class: `badge ${health.ok ? "ok" : "bad"}`, "data-testid": "relayer-health" }, health.ok ? "healthy" : "unhealthy"),
          ...health.chains.map((chain) => h("span", { class: "chain" }, `${chain.name} (${chain.chainId}): ${chain.lagBlocks} blocks behind`, chain.lastError === null ? null : h("span", { class: "error" }, ` — ${chain.lastError}`))),
        ),
        h("div", { class: "queues" }, ...counts.map(({ status, count }) => h("div", { class: `queue ${status}`, "data-testid": `queue-${status}` }, h("strong", {}, count >= LIST_LIMIT ? `${LIST_LIMIT}+` : String(count)), h("span", {}, status)))),
        h("h3", {}, "Recent deliveries"),
        itemsTable(deliveries, "relayer-deliveries", "nothing delivered yet"),
        h("h3", {}, "Dead letters"),
        itemsTable(queues[QUEUES.indexOf("dead")]!.slice(0, SHOWN), "relayer-dead", "no dead letters"),
      );
    },
    (error) => render(target, h("p", { class: "error" }, `relayer: ${errorText(error)}`)),
  );
}
