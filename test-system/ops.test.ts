/**
 * The operator files of ops/ and the programs' /metrics against the real Prometheus tools (Debian `prometheus`,
 * issue 28.7 and 30.5):
 *
 * - `promtool check rules` and `promtool test rules` on ops/prometheus/alerts.yml and its unit tests, `promtool
 *   check config` on the example scrape configuration;
 * - `promtool check metrics` on each running program's /metrics (the attesting nodes of a local mesh, the relayer
 *   and the temporal gateway; the upgrade agent exports none yet): it flags nothing but the two names the service
 *   description fixes, timerpc_accuracy_ns and timerpc_node_drift_ns (an abbreviated unit);
 * - a real `prometheus` scraping that network (127.0.0.1 on a free port, its own temporary storage, stopped in
 *   after(), also on failure), loaded with the alerting rules: every metric the dashboard and the rules name is a
 *   series it holds (a few appear only with their first event: those are declared by the programs, which Prometheus's
 *   metadata shows), every dashboard query runs without error, and every rule evaluates.
 *
 * The local network is the one `npm start` runs (scripts/network.ts) with a 3-node mesh, and the tour drives the
 * relayer's every kind of work, so its counters have something to count; a batch and a WebSocket subscription
 * give the gateway's theirs.
 */
import { expect } from "chai";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import hre from "hardhat";
import pino from "pino";
import { WebSocket } from "ws";
import { freeTcpPort } from "../scripts/chainProcess";
import { startLocalNetwork, type LocalNetwork } from "../scripts/network";
import { runTour } from "../scripts/tour";
import { dashboardQueries, metricNamesIn, OPS_FILES, PROMETHEUS_SERIES, readDashboard, ruleExpressions, withGrafanaVariables } from "../test/ops/opsFiles";

const PROMTOOL = "promtool";
const PROMETHEUS = "prometheus";
const NODE_JOB = "attested-time-node";
const RELAYER_JOB = "attested-time-relayer";
const GATEWAY_JOB = "attested-time-gateway";

/** The names promtool flags that the service description fixes (abbreviated unit): kept, and the only ones flagged. */
const FIXED_NAMES = ["timerpc_accuracy_ns", "timerpc_node_drift_ns"];

/**
 * Metrics a healthy local network shows no series of: the programs declare them (# HELP, # TYPE), and their series
 * appear with the first event. Each must still be in Prometheus's metadata of the targets.
 */
const FIRST_EVENT_SERIES: Record<string, string> = {
  timerpc_card_state: "only from a card driver that reports a state (the chrony card; the local network runs dev cards)",
  ats_relayer_failures_total: "by kind and reason, from the first failed attempt",
};

interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program without blocking this event loop (the nodes under test answer from it). */
function run(program: string, args: string[], options: { input?: string; cwd?: string } = {}): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(program, args, { cwd: options.cwd, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
      if (error !== null && typeof error.code !== "number") reject(error);
      else resolve({ code, stdout, stderr });
    });
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last === undefined ? "" : `: ${String(last)}`}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

interface MetricsUrls {
  node: string[];
  relayer: string[];
  gateway: string[];
}

/** A Prometheus server of its own: loopback, a free port, a temporary folder for its configuration and storage. */
class PrometheusServer {
  readonly dir = mkdtempSync(join(tmpdir(), "ats-prometheus-"));
  #process: ChildProcess | undefined;
  #log = "";
  url = "";

  async start(targets: MetricsUrls): Promise<void> {
    const hostPort = (url: string) => new URL(url).host;
    const config = [
      "global:",
      "  scrape_interval: 1s",
      "  scrape_timeout: 1s",
      "  evaluation_interval: 1s",
      "rule_files:",
      `  - ${JSON.stringify(OPS_FILES.alerts)}`,
      "scrape_configs:",
      `  - job_name: ${NODE_JOB}`,
      "    static_configs:",
      `      - targets: ${JSON.stringify(targets.node.map(hostPort))}`,
      `  - job_name: ${RELAYER_JOB}`,
      "    static_configs:",
      `      - targets: ${JSON.stringify(targets.relayer.map(hostPort))}`,
      `  - job_name: ${GATEWAY_JOB}`,
      "    static_configs:",
      `      - targets: ${JSON.stringify(targets.gateway.map(hostPort))}`,
      "",
    ].join("\n");
    writeFileSync(join(this.dir, "prometheus.yml"), config);
    const port = await freeTcpPort();
    this.url = `http://127.0.0.1:${port}`;
    this.#process = spawn(
      PROMETHEUS,
      [
        `--config.file=${join(this.dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(this.dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    this.#process.stderr!.on("data", (chunk: Buffer) => (this.#log = (this.#log + chunk.toString()).slice(-20_000)));
    const exited = new Promise<never>((_, reject) => this.#process!.once("exit", (code) => reject(new Error(`prometheus exited (${code}): ${this.#log.slice(-2_000)}`))));
    await Promise.race([exited, until("prometheus ready", 60_000, async () => ((await fetch(`${this.url}/-/ready`)).ok ? true : undefined))]);
  }

  get log(): string {
    return this.#log;
  }

  /** GET /api/v1/<path>; its `data`, or throws with Prometheus's error. */
  async api<T>(path: string, params: Record<string, string> = {}): Promise<T> {
    const query = new URLSearchParams(params).toString();
    const response = await fetch(`${this.url}/api/v1/${path}${query === "" ? "" : `?${query}`}`);
    const body = (await response.json()) as { status: string; data: T; error?: string; errorType?: string };
    if (body.status !== "success") throw new Error(`prometheus ${path} ${JSON.stringify(params)}: ${body.errorType}: ${body.error}`);
    return body.data;
  }

  async stop(): Promise<void> {
    const child = this.#process;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Gives the gateway's metrics something to count: a batch (batch sizes; forwarded calls: the chain's answer times), a
 * WebSocket subscription (open subscriptions; it stays open while the test scrapes), and an unknown method (an
 * error outcome). Rate-limit refusals are exported at 0 from the start.
 */
async function exerciseGateway(url: string): Promise<void> {
  const batch = ["eth_chainId", "eth_blockNumber", "temporal_getLimits", "no_such_method"].map((method, id) => ({ jsonrpc: "2.0", id, method, params: [] }));
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(batch) });
  expect(response.status).to.equal(200);
  const socket = new WebSocket(url.replace(/^http/, "ws"));
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  const subscribed = new Promise((resolve) => socket.once("message", resolve));
  socket.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_subscribe", params: ["newHeads"] }));
  await subscribed;
  gatewaySockets.push(socket);
}
const gatewaySockets: WebSocket[] = [];

describe("ops/ and every program's /metrics against promtool and a real Prometheus", function () {
  this.timeout(300_000);
  let dir: string;
  let network: LocalNetwork | undefined;
  let prometheus: PrometheusServer | undefined;
  let metricsUrls: MetricsUrls;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ats-ops-"));
    network = await startLocalNetwork({ hre, dir, meshNodes: 3, nodeLogger: pino({ level: "silent" }), relayerSettings: { pollIntervalMs: 200 } });
    const relayer = await network.startRelayer();
    await runTour(network, () => undefined);
    const gateway = network.temporalRpc[0]!;
    await exerciseGateway(gateway);
    metricsUrls = { node: network.nodes.map((node) => `${node}/metrics`), relayer: [`${relayer.api}/metrics`], gateway: [`${gateway}/metrics`] };
  });

  after(async () => {
    for (const socket of gatewaySockets.splice(0)) socket.terminate();
    await prometheus?.stop();
    await network?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("promtool: the rules check, their unit tests pass, and the example configuration is valid", async () => {
    const rules = await run(PROMTOOL, ["check", "rules", OPS_FILES.alerts]);
    expect(rules.code, rules.stdout + rules.stderr).to.equal(0);
    expect(rules.stdout).to.contain(`SUCCESS: ${ruleExpressions().length} rules found`);
    const tests = await run(PROMTOOL, ["test", "rules", OPS_FILES.alertTests], { cwd: dirname(OPS_FILES.alertTests) });
    expect(tests.code, tests.stdout + tests.stderr).to.equal(0);
    expect(tests.stdout).to.contain("SUCCESS");
    const config = await run(PROMTOOL, ["check", "config", OPS_FILES.prometheusExample]);
    expect(config.code, config.stdout + config.stderr).to.equal(0);
  });

  it("promtool check metrics on each node's, the relayer's and the gateway's /metrics flags only the two names the service description fixes", async () => {
    const gatewayText = await (await fetch(metricsUrls.gateway[0]!)).text();
    // The gateway's own series are there, with what exerciseGateway gave them, before promtool reads them.
    for (const series of ["ats_gateway_requests_total{", "ats_gateway_batch_items_bucket{", "ats_gateway_upstream_duration_seconds_bucket{", "ats_gateway_subscriptions{", "ats_gateway_rate_limited_total{"]) {
      expect(gatewayText, series).to.include(series);
    }
    for (const url of [...metricsUrls.node, ...metricsUrls.relayer, ...metricsUrls.gateway]) {
      const text = await (await fetch(url)).text();
      expect(text, url).to.match(/^# TYPE /m);
      const lint = await run(PROMTOOL, ["check", "metrics"], { input: text });
      const findings = `${lint.stdout}${lint.stderr}`.split("\n").filter((line) => line.trim() !== "");
      const isNode = metricsUrls.node.includes(url);
      // The node flags exactly those two names, each for its abbreviated unit; the relayer and the gateway nothing.
      expect(findings.sort(), url).to.deep.equal(isNode ? FIXED_NAMES.map((name) => `${name} metric names should not contain abbreviated units`) : []);
      expect(lint.code, url).to.equal(isNode ? 3 : 0);
    }
  });

  it("a Prometheus scraping the network holds every metric the dashboard and the rules use, and runs every query and rule", async () => {
    prometheus = new PrometheusServer();
    await prometheus.start(metricsUrls).catch((error: Error) => {
      throw new Error(`${error.message}\n${prometheus?.log.slice(-2_000) ?? ""}`);
    });
    const server = prometheus;
    const targetCount = metricsUrls.node.length + metricsUrls.relayer.length + metricsUrls.gateway.length;
    await until("every target scraped and up", 60_000, async () => {
      const { activeTargets } = await server.api<{ activeTargets: { health: string; labels: { job: string } }[] }>("targets");
      return activeTargets.length === targetCount && activeTargets.every((target) => target.health === "up") ? true : undefined;
    });
    // Every rule evaluated at least once, without error (a rule naming a missing label or a bad function fails here).
    const rules = await until("every rule evaluated", 60_000, async () => {
      const { groups } = await server.api<{ groups: { rules: { name: string; health: string; lastError?: string; lastEvaluation: string }[] }[] }>("rules");
      const all = groups.flatMap((group) => group.rules);
      return all.length === ruleExpressions().length && all.every((rule) => !rule.lastEvaluation.startsWith("0001-")) ? all : undefined;
    });
    expect(rules.filter((rule) => rule.health !== "ok").map((rule) => `${rule.name}: ${rule.lastError}`)).to.deep.equal([]);

    const used = metricNamesIn([readFileSync(OPS_FILES.alerts, "utf8"), ...dashboardQueries(readDashboard()).map((query) => query.expr)].join("\n"));
    const missing: string[] = [];
    for (const name of [...used, ...PROMETHEUS_SERIES]) {
      const series = await server.api<unknown[]>("series", { "match[]": name, start: String(Date.now() / 1000 - 600) });
      if (series.length === 0) missing.push(name);
    }
    expect(missing.sort(), "series only a first event creates").to.deep.equal(Object.keys(FIRST_EVENT_SERIES).sort());
    for (const name of missing) {
      const metadata = await server.api<Record<string, unknown[]>>("metadata", { metric: name });
      expect(metadata, `${name} (${FIRST_EVENT_SERIES[name]}) declared by a program`).to.have.property(name);
    }

    const failed: string[] = [];
    for (const { panel, expr } of dashboardQueries()) {
      const query = withGrafanaVariables(expr, { nodeJob: NODE_JOB, relayerJob: RELAYER_JOB, gatewayJob: GATEWAY_JOB, rateInterval: "1m" });
      await server.api("query", { query }).catch((error: Error) => failed.push(`${panel}: ${error.message}`));
    }
    expect(failed).to.deep.equal([]);
  });
});
