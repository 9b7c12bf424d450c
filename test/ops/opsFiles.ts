/**
 * What the operator files in ops/ ask of the programs' metrics: the Grafana dashboard's queries and the metric names
 * the dashboard and the Prometheus rules use, and the names the code defines. Shared by test/ops/metricNames.test.ts
 * (nothing drifts) and test-system/ops.test.ts (a real Prometheus finds every one on a running network).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Registry } from "prom-client";
import { createGatewayMetrics } from "../../gateway/metrics";
import { createNodeMetrics } from "../../node/api/metrics";
import { createRelayerMetrics } from "../../relayer/metrics";

const ROOT = join(__dirname, "..", "..");
export const OPS_FILES = {
  dashboard: join(ROOT, "ops", "grafana", "attested-time.json"),
  alerts: join(ROOT, "ops", "prometheus", "alerts.yml"),
  alertTests: join(ROOT, "ops", "prometheus", "alerts.test.yml"),
  prometheusExample: join(ROOT, "ops", "prometheus", "prometheus.example.yml"),
} as const;

/** The prefixes of every metric the programs export (the node's own, the relayer's, the gateway's, prom-client's process metrics). */
const METRIC_NAME = /\b(?:timerpc|ats_relayer|ats_gateway|process|nodejs)_[a-zA-Z0-9_]*[a-zA-Z0-9]\b/g;
/** Prometheus' own series, which no program defines. */
export const PROMETHEUS_SERIES = ["up"] as const;

/** Every metric name a text names (PromQL, YAML or JSON alike), sorted, each once. */
export function metricNamesIn(text: string): string[] {
  return [...new Set(text.match(METRIC_NAME) ?? [])].sort();
}

interface DashboardPanel {
  title: string;
  type: string;
  targets?: { expr: string }[];
}
interface Dashboard {
  panels: DashboardPanel[];
  templating: { list: { name: string; query?: unknown }[] };
}

export function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(OPS_FILES.dashboard, "utf8")) as Dashboard;
}

/** Each query of the dashboard: the panel it draws and its PromQL (with Grafana's variables). */
export function dashboardQueries(dashboard = readDashboard()): { panel: string; expr: string }[] {
  return dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })));
}

/**
 * A dashboard query as plain PromQL for a Prometheus without Grafana: the variables set to what Grafana would
 * substitute with every node and the default jobs selected.
 */
export function withGrafanaVariables(expr: string, values: { nodeJob: string; relayerJob: string; gatewayJob: string; rateInterval: string }): string {
  return expr
    .replaceAll("$node_job", values.nodeJob)
    .replaceAll("$relayer_job", values.relayerJob)
    .replaceAll("$gateway_job", values.gatewayJob)
    .replaceAll("$node", ".*")
    .replaceAll("$__rate_interval", values.rateInterval)
    .replaceAll("$__range", values.rateInterval);
}

/** The PromQL expression of each rule of ops/prometheus/alerts.yml (`expr: ...` on one line, or a `|` block). */
export function ruleExpressions(text = readFileSync(OPS_FILES.alerts, "utf8")): string[] {
  const expressions: string[] = [];
  const lines = text.split("\n");
  lines.forEach((line, index) => {
    const match = /^(\s*)expr:\s*(.*)$/.exec(line);
    if (match === null) return;
    if (match[2] !== "|") {
      expressions.push(match[2]!);
      return;
    }
    const block: string[] = [];
    for (const next of lines.slice(index + 1)) {
      if (next.trim() !== "" && next.search(/\S/) <= match[1]!.length) break;
      block.push(next.trim());
    }
    expressions.push(block.join(" ").trim());
  });
  return expressions;
}

/** The series names a registry exports: a histogram's `_bucket`, `_sum` and `_count`, other metrics their name. */
async function seriesNames(registry: Registry): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const metric of await registry.getMetricsAsJSON()) {
    const suffixes = String(metric.type) === "histogram" ? ["_bucket", "_sum", "_count"] : [""];
    for (const suffix of suffixes) names.set(`${metric.name}${suffix}`, String(metric.type));
  }
  return names;
}

/**
 * Every series name the node, the relayer and the gateway define, with its type, and which of them are their own
 * (not prom-client's process metrics).
 */
export async function definedMetrics(): Promise<{ all: Map<string, string>; own: string[] }> {
  const node = createNodeMetrics();
  const relayer = createRelayerMetrics(() => ({}));
  const gateway = createGatewayMetrics();
  const all = new Map([...(await seriesNames(node.registry)), ...(await seriesNames(relayer.registry)), ...(await seriesNames(gateway.registry))]);
  const bare = new Map([...(await seriesNames(createNodeMetrics({ defaultMetrics: false }).registry))]);
  const ownPrefixed = (name: string) => /^ats_(relayer|gateway)_/.test(name) && !/^ats_(relayer|gateway)_(process|nodejs)_/.test(name);
  const own = [...all.keys()].filter((name) => bare.has(name) || ownPrefixed(name));
  return { all, own: own.sort() };
}
