/**
 * Metrics helpers every program can use with its own prom-client Registry.
 */
import { Counter, collectDefaultMetrics, type Registry } from "prom-client";

/**
 * prom-client default metrics the programs leave out: each scrape lists every live handle, request or resource of
 * the process (process._getActiveHandles() and the like) to count them by type, so its cost grows with what clients
 * hold open: with 5,000 connections open (10,000 handles in the measuring process, one core) a node's scrape took
 * 12–31 ms of event loop, and 7.6–8 ms without these (of which process_open_fds, reading /proc/self/fd, is ~4.6 ms:
 * kept, descriptor exhaustion is what an operator must see coming). Their `_total` gauges also break Prometheus's
 * naming rule (`promtool check metrics`: only counters end in `_total`).
 */
export const OMITTED_DEFAULT_METRICS = [
  "nodejs_active_handles",
  "nodejs_active_handles_total",
  "nodejs_active_requests",
  "nodejs_active_requests_total",
  "nodejs_active_resources",
  "nodejs_active_resources_total",
] as const;

/** prom-client's process and Node.js metrics (names prefixed by `prefix`), less OMITTED_DEFAULT_METRICS. */
export function collectProcessMetrics(registry: Registry, prefix = ""): void {
  collectDefaultMetrics({ register: registry, prefix });
  for (const name of OMITTED_DEFAULT_METRICS) registry.removeSingleMetric(`${prefix}${name}`);
}

export interface CopiedCounterOptions {
  name: string;
  help: string;
  /** The one label, whose values are the keys of what `read` returns. */
  labelName: string;
  registry: Registry;
  /** Counts since the component started, by label value; undefined while there is nothing to count. */
  read: () => Readonly<Record<string, number>> | undefined;
}

/**
 * A counter over counts another component keeps as plain numbers (its hot path touches no prom-client object),
 * copied when the registry is scraped. The component's counts only grow while it runs, so the series is a true
 * counter; a restart starts it again from zero, which Prometheus's rate() reads as a counter reset.
 */
export function copiedCounter(options: CopiedCounterOptions): Counter {
  const { labelName, read } = options;
  return new Counter({
    name: options.name,
    help: options.help,
    labelNames: [labelName],
    registers: [options.registry],
    collect() {
      this.reset();
      const counts = read();
      if (counts === undefined) return;
      for (const [value, count] of Object.entries(counts)) this.inc({ [labelName]: value }, count);
    },
  });
}

/**
 * Increments of one labelled counter child, kept as a plain number on the hot path and handed to prom-client when
 * the registry is scraped: prom-client hashes the label set on every inc(), which measured ~5 % of answering
 * GET /time/current under load (two counters per request).
 */
export class CounterTally {
  #pending = 0;
  constructor(private readonly child: Counter.Internal) {}
  add(): void {
    this.#pending += 1;
  }
  flush(): void {
    if (this.#pending === 0) return;
    this.child.inc(this.#pending);
    this.#pending = 0;
  }
}

export function flushAll(tallies: Iterable<CounterTally>): void {
  for (const tally of tallies) tally.flush();
}

/** Prometheus's metric and label names (the exposition format); labels starting with "__" are reserved. */
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^(?!__)[a-zA-Z_][a-zA-Z0-9_]*$/;

/** One label value's observations in a HotHistogram. */
export class HotHistogramChild {
  /** Observations per bucket (not cumulative); the last slot is above the largest bound (+Inf). */
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }
  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`histogram: a value must be finite, got ${value}`); // as prom-client
    const { bounds } = this;
    let bucket = 0;
    while (bucket < bounds.length && value > bounds[bucket]!) bucket += 1;
    this.counts[bucket]! += 1;
    this.sum += value;
    this.count += 1;
  }
  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}

export interface HotHistogramOptions {
  name: string;
  help: string;
  /** The one label (e.g. "transport"). */
  labelName: string;
  /** Upper bounds, ascending. */
  buckets: readonly number[];
  registry: Registry;
}

/** One line of a metric as prom-client's Registry renders it (its get() contract). */
interface MetricLine {
  metricName: string;
  labels: Record<string, string | number>;
  value: number;
}

/**
 * A histogram with one label for a hot path: observe() on a child is a bucket search and three additions on plain
 * numbers. prom-client's Histogram converts, validates and hashes the label set on every observe(), which measured
 * ~2 % of answering GET /time/current under load (one observation per request). It registers itself in a
 * prom-client Registry, which asks a metric only for name, help, type, get() and reset(), and renders exactly what
 * prom-client's Histogram renders: cumulative `_bucket` lines with `le` (then `+Inf`), `_sum` and `_count` per label
 * value (a test compares the two).
 */
export class HotHistogram {
  readonly type = "histogram";
  readonly aggregator = "sum";
  readonly name: string;
  readonly help: string;
  readonly #labelName: string;
  readonly #bounds: readonly number[];
  readonly #children = new Map<string, HotHistogramChild>();

  constructor(options: HotHistogramOptions) {
    const { buckets } = options;
    // The names prom-client accepts (it checks its own metrics the same way): a bad one would corrupt the exposition.
    if (!METRIC_NAME.test(options.name)) throw new TypeError(`histogram: invalid metric name ${JSON.stringify(options.name)}`);
    if (!LABEL_NAME.test(options.labelName) || options.labelName === "le") {
      throw new TypeError(`histogram ${options.name}: invalid label name ${JSON.stringify(options.labelName)} ("le" is the buckets' own)`);
    }
    if (buckets.length === 0 || buckets.some((bound, index) => !Number.isFinite(bound) || (index > 0 && bound <= buckets[index - 1]!))) {
      throw new RangeError(`histogram ${options.name}: buckets must be finite and strictly ascending, got [${buckets.join(", ")}]`);
    }
    this.name = options.name;
    this.help = options.help;
    this.#labelName = options.labelName;
    this.#bounds = Object.freeze([...buckets]);
    // The Registry's declared parameter is prom-client's own metric classes; it uses only the members above.
    options.registry.registerMetric(this as unknown as Parameters<Registry["registerMetric"]>[0]);
  }

  /** The child of one label value (kept: look it up once, observe on it). */
  labels(value: string): HotHistogramChild {
    let child = this.#children.get(value);
    if (child === undefined) {
      child = new HotHistogramChild(this.#bounds);
      this.#children.set(value, child);
    }
    return child;
  }

  get(): Promise<{ name: string; help: string; type: "histogram"; aggregator: "sum"; values: MetricLine[] }> {
    const values: MetricLine[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const [labelValue, child] of this.#children) {
      if (child.count === 0) continue; // as prom-client: a label value appears with its first observation
      let cumulative = 0;
      this.#bounds.forEach((bound, index) => {
        cumulative += child.counts[index]!;
        values.push({ metricName: bucketName, labels: { le: bound, [this.#labelName]: labelValue }, value: cumulative });
      });
      values.push({ metricName: bucketName, labels: { le: "+Inf", [this.#labelName]: labelValue }, value: child.count });
      values.push({ metricName: `${this.name}_sum`, labels: { [this.#labelName]: labelValue }, value: child.sum });
      values.push({ metricName: `${this.name}_count`, labels: { [this.#labelName]: labelValue }, value: child.count });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /** Zeroes every child in place: children already looked up keep counting (as prom-client's label children do). */
  reset(): void {
    for (const child of this.#children.values()) child.reset();
  }
}

export interface ScrapedMetricOptions {
  name: string;
  help: string;
  /** "counter": `read` returns a count since the source started (it only grows while the source runs). */
  type: "gauge" | "counter";
  registry: Registry;
  /** The value now, or undefined: no series at all (not 0, which prom-client shows for a label-less metric). */
  read: () => number | undefined;
}

/**
 * A label-less gauge or counter read when the registry is scraped, with no series while `read` has nothing to say: a
 * node without a mesh shows no mesh time quality, rather than a quality of 0 that would page as a broken mesh.
 * prom-client's own label-less metrics always show a series (0 until set).
 */
export class ScrapedMetric {
  readonly type: "gauge" | "counter";
  readonly aggregator = "sum";
  readonly name: string;
  readonly help: string;
  readonly #read: () => number | undefined;

  constructor(options: ScrapedMetricOptions) {
    if (!METRIC_NAME.test(options.name)) throw new TypeError(`${options.type}: invalid metric name ${JSON.stringify(options.name)}`);
    this.name = options.name;
    this.help = options.help;
    this.type = options.type;
    this.#read = options.read;
    // As HotHistogram: the Registry uses only name, help, type, get() and reset().
    options.registry.registerMetric(this as unknown as Parameters<Registry["registerMetric"]>[0]);
  }

  get(): Promise<{ name: string; help: string; type: "gauge" | "counter"; aggregator: "sum"; values: MetricLine[] }> {
    const value = this.#read();
    const values = value === undefined ? [] : [{ metricName: this.name, labels: {}, value }];
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /** Nothing to reset: the value is read at every scrape. */
  reset(): void {}
}
