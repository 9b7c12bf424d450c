/**
 * The operator files in ops/ and the code cannot drift apart: every metric the Grafana dashboard or the Prometheus
 * rules (and their unit tests) name is one the node or the relayer defines, and the dashboard draws every metric of
 * their own. test-system/ops.test.ts then finds each one in a real Prometheus scraping a running network.
 */
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { dashboardQueries, definedMetrics, metricNamesIn, OPS_FILES, readDashboard, ruleExpressions } from "./opsFiles";

describe("ops/: the dashboard and alerting rules name only metrics the code defines", function () {
  let defined: Awaited<ReturnType<typeof definedMetrics>>;
  before(async () => {
    defined = await definedMetrics();
  });

  for (const [what, file] of [
    ["the Grafana dashboard", OPS_FILES.dashboard],
    ["the alerting rules", OPS_FILES.alerts],
    ["the rules' unit tests", OPS_FILES.alertTests],
  ] as const) {
    it(`${what} (${file.slice(file.indexOf("ops/"))}) names only defined metrics`, () => {
      const named = metricNamesIn(readFileSync(file, "utf8"));
      expect(named.length, "a file that names no metric would pass anything").to.be.greaterThan(0);
      expect(named.filter((name) => !defined.all.has(name))).to.deep.equal([]);
    });
  }

  it("the dashboard draws every metric the node and the relayer define themselves", () => {
    const drawn = new Set(metricNamesIn(dashboardQueries().map((query) => query.expr).join("\n")));
    // A histogram is drawn through its buckets, or its _sum and _count (a mean).
    const histogramDrawn = (name: string): boolean => {
      const base = name.replace(/_(bucket|sum|count)$/, "");
      return drawn.has(`${base}_bucket`) || drawn.has(`${base}_count`);
    };
    const missing = defined.own.filter((name) => !drawn.has(name) && !(defined.all.get(name) === "histogram" && histogramDrawn(name)));
    expect(defined.own).to.include.members(["timerpc_accuracy_ns_bucket", "timerpc_mesh_rounds_total", "ats_relayer_items", "timerpc_schedule_backlog_seconds", "ats_gateway_requests_total"]);
    expect(missing).to.deep.equal([]);
  });

  it("the rules and the dashboard read every counter over a range (rate, increase), never its raw value", () => {
    const expressions = [...ruleExpressions(), ...dashboardQueries().map((query) => query.expr)];
    expect(ruleExpressions()).to.have.length(14);
    const counters = [...defined.all].filter(([, type]) => type === "counter").map(([name]) => name);
    const raw: string[] = [];
    for (const expr of expressions) {
      for (const name of counters) {
        // The counter's name, its optional label matchers, then anything but a range selector.
        for (const match of expr.matchAll(new RegExp(`\\b${name}\\b(\\{[^}]*\\})?(?!\\{|\\[)`, "g"))) raw.push(`${match[0]} in ${expr}`);
      }
    }
    expect(raw).to.deep.equal([]);
  });

  it("the dashboard's panels each have a query, a title and a unique id; its variables are the ones the queries use", () => {
    const dashboard = readDashboard();
    const ids = dashboard.panels.map((panel) => (panel as unknown as { id: number }).id);
    expect(new Set(ids).size).to.equal(ids.length);
    for (const panel of dashboard.panels) {
      expect(panel.title, "title").to.be.a("string").with.length.greaterThan(0);
      if (panel.type !== "row") expect(panel.targets ?? [], panel.title).to.have.length.greaterThan(0);
    }
    const variables = new Set(dashboard.templating.list.map((variable) => variable.name));
    const used = new Set(dashboardQueries().flatMap((query) => [...query.expr.matchAll(/\$(\w+)/g)].map((match) => match[1]!)).filter((name) => !name.startsWith("__")));
    expect([...used].filter((name) => !variables.has(name))).to.deep.equal([]);
  });
});
