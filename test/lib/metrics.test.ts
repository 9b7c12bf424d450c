import { expect } from "chai";
import { Histogram, Registry } from "prom-client";
import { collectProcessMetrics, copiedCounter, HotHistogram, OMITTED_DEFAULT_METRICS, ScrapedMetric } from "../../lib/metrics";

describe("HotHistogram (lib/metrics.ts)", () => {
  const buckets = [10, 100, 1_000, 60_000_000_000];
  const values: [string, number][] = [
    ["rest", 5],
    ["rest", 10],
    ["rest", 11],
    ["ws", 999],
    ["rest", 70_000_000_000],
    ["ws", 0],
    ["rest", 1_000],
  ];

  it("renders exactly what prom-client's Histogram renders for the same observations", async () => {
    const hot = new Registry();
    const reference = new Registry();
    const hotHistogram = new HotHistogram({ name: "x_age_ns", help: "Age, ns", labelName: "transport", buckets, registry: hot });
    const referenceHistogram = new Histogram({ name: "x_age_ns", help: "Age, ns", labelNames: ["transport"] as const, buckets, registers: [reference] });
    for (const [transport, value] of values) {
      hotHistogram.labels(transport).observe(value);
      referenceHistogram.labels(transport).observe(value);
    }
    const text = await hot.metrics();
    expect(text).to.equal(await reference.metrics());
    expect(text).to.contain('x_age_ns_bucket{le="10",transport="rest"} 2');
    expect(text).to.contain('x_age_ns_bucket{le="+Inf",transport="rest"} 5');
    // As JSON, without prom-client's exemplar slots (null or undefined: exemplars are off).
    const asJson = async (registry: Registry): Promise<unknown> =>
      JSON.parse(JSON.stringify(await registry.getMetricsAsJSON(), (key, value: unknown) => (key === "exemplar" ? undefined : value))) as unknown;
    expect(await asJson(hot)).to.deep.equal(await asJson(reference));
  });

  it("keeps counting on a child looked up before a reset, from zero", async () => {
    const registry = new Registry();
    const histogram = new HotHistogram({ name: "y_ns", help: "y", labelName: "transport", buckets, registry });
    const child = histogram.labels("grpc");
    child.observe(50);
    registry.resetMetrics();
    child.observe(500);
    expect(await registry.metrics()).to.contain('y_ns_count{transport="grpc"} 1').and.contain('y_ns_sum{transport="grpc"} 500');
  });

  it("shows a label value from its first observation on, and refuses a value that is not finite, as prom-client does", async () => {
    const registry = new Registry();
    const histogram = new HotHistogram({ name: "w_ns", help: "w", labelName: "transport", buckets, registry });
    const child = histogram.labels("ws");
    expect(await registry.metrics()).to.not.contain('transport="ws"');
    expect(() => child.observe(Number.NaN)).to.throw(TypeError, "finite");
    child.observe(1);
    expect(await registry.metrics()).to.contain('w_ns_count{transport="ws"} 1');
    registry.resetMetrics();
    expect(await registry.metrics()).to.not.contain('transport="ws"');
  });

  it("refuses metric and label names the exposition format does not allow, before registering anything", () => {
    const registry = new Registry();
    for (const name of ["", "9lives", "age-ns", "age ns", 'x"y']) {
      expect(() => new HotHistogram({ name, help: "h", labelName: "transport", buckets, registry }), name).to.throw(TypeError, "invalid metric name");
    }
    for (const labelName of ["", "le", "__reserved", "a:b", "tr-ansport"]) {
      expect(() => new HotHistogram({ name: "ok_ns", help: "h", labelName, buckets, registry }), labelName).to.throw(TypeError, "invalid label name");
    }
    expect(registry.getMetricsAsArray()).to.have.length(0);
    expect(() => new HotHistogram({ name: "ok:age_ns", help: "h", labelName: "_transport", buckets, registry })).to.not.throw();
  });

  it("refuses buckets that are not strictly ascending and finite", () => {
    const registry = new Registry();
    for (const bad of [[], [10, 10], [100, 10], [1, Number.POSITIVE_INFINITY]]) {
      expect(() => new HotHistogram({ name: "z_ns", help: "z", labelName: "l", buckets: bad, registry })).to.throw(RangeError, "strictly ascending");
    }
  });
});

describe("ScrapedMetric, copiedCounter and collectProcessMetrics (lib/metrics.ts)", () => {
  it("ScrapedMetric shows no series while its source has nothing, and the value read at each scrape otherwise", async () => {
    const registry = new Registry();
    let value: number | undefined;
    new ScrapedMetric({ name: "x_quality", help: "Quality", type: "gauge", registry, read: () => value });
    new ScrapedMetric({ name: "x_attempts_total", help: "Attempts", type: "counter", registry, read: () => 3 });
    expect(await registry.metrics()).to.contain("# TYPE x_attempts_total counter\nx_attempts_total 3\n");
    const empty = await registry.metrics();
    expect(empty).to.contain("# TYPE x_quality gauge");
    expect(empty).not.to.match(/^x_quality /m);
    value = 7;
    expect(await registry.metrics()).to.match(/^x_quality 7$/m);
    value = undefined;
    expect(await registry.metrics()).not.to.match(/^x_quality /m);
    expect(() => new ScrapedMetric({ name: "x-y", help: "h", type: "gauge", registry, read: () => 1 })).to.throw(TypeError, "invalid metric name");
  });

  it("copiedCounter is a counter that shows the source's counts at each scrape, by label, and none without a source", async () => {
    const registry = new Registry();
    let counts: Record<string, number> | undefined;
    copiedCounter({ name: "x_drops_total", help: "Drops", labelName: "reason", registry, read: () => counts });
    expect(await registry.metrics()).to.contain("# TYPE x_drops_total counter");
    expect(await registry.metrics()).not.to.match(/^x_drops_total/m);
    counts = { short: 2, replay: 0 };
    const first = await registry.metrics();
    expect(first).to.match(/^x_drops_total\{reason="short"\} 2$/m);
    expect(first).to.match(/^x_drops_total\{reason="replay"\} 0$/m);
    counts = { short: 5, replay: 1 };
    const second = await registry.metrics();
    // Copied, not added up: the source's own totals.
    expect(second).to.match(/^x_drops_total\{reason="short"\} 5$/m);
    expect(second).to.match(/^x_drops_total\{reason="replay"\} 1$/m);
  });

  it("collectProcessMetrics keeps the process metrics under the prefix and leaves out the per-handle lists", async () => {
    const registry = new Registry();
    collectProcessMetrics(registry, "x_");
    const names = registry.getMetricsAsArray().map((metric) => metric.name);
    expect(names).to.include.members(["x_process_cpu_seconds_total", "x_process_open_fds", "x_nodejs_eventloop_lag_p99_seconds"]);
    for (const omitted of OMITTED_DEFAULT_METRICS) expect(names).not.to.include(`x_${omitted}`);
  });
});
