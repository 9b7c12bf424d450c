/**
 * Metrics helpers every program can use with its own prom-client Registry.
 */
import type { Counter, Registry } from "prom-client";

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
