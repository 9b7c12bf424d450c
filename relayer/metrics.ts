/**
 * The relayer's Prometheus metrics (GET /metrics): what finished and how, failures by reason, lag in blocks and
 * seconds per chain, queue depth by kind and status (read from the store at scrape time), the signer's balance.
 * Names follow Prometheus's conventions (`promtool check metrics` passes them; a system test runs it on a live
 * relayer).
 */
import { Counter, Gauge, Registry } from "prom-client";
import { collectProcessMetrics } from "../lib/metrics";
import { ITEM_KINDS } from "./store";

export interface RelayerMetrics {
  readonly registry: Registry;
  readonly finished: Counter<"kind" | "outcome">;
  readonly failures: Counter<"kind" | "reason">;
  readonly tickFailures: Counter<"chain">;
  readonly reorgs: Counter<"chain">;
  readonly lagBlocks: Gauge<"chain">;
  readonly lagSeconds: Gauge<"chain">;
  readonly signerBalanceWei: Gauge<"chain">;
}

/** `queueDepth()` is read at every scrape: counts by "kind/status". */
export function createRelayerMetrics(queueDepth: () => Record<string, number>): RelayerMetrics {
  const registry = new Registry();
  collectProcessMetrics(registry, "ats_relayer_");
  new Gauge({
    name: "ats_relayer_items",
    help: "Items in the store by kind and status.",
    labelNames: ["kind", "status"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, count] of Object.entries(queueDepth())) {
        const [kind, status] = key.split("/");
        this.set({ kind: kind!, status: status! }, count);
      }
    },
  });
  const finished = new Counter({ name: "ats_relayer_finished_total", help: "Items finished, by kind and outcome (delivered, executed, pushed, done, dead). An item a reorg deeper than the confirmations reopens counts again when it finishes again.", labelNames: ["kind", "outcome"], registers: [registry] });
  // Dead letters at zero from the start, so that increase() (the dead-letter alert) sees the first one.
  for (const kind of ITEM_KINDS) finished.inc({ kind, outcome: "dead" }, 0);
  return {
    registry,
    finished,
    failures: new Counter({ name: "ats_relayer_failures_total", help: "Failed attempts, by kind and reason (a revert's error name, Unavailable, TxReverted).", labelNames: ["kind", "reason"], registers: [registry] }),
    tickFailures: new Counter({ name: "ats_relayer_tick_failures_total", help: "Ticks of a chain that failed (RPC unreachable, …).", labelNames: ["chain"], registers: [registry] }),
    reorgs: new Counter({ name: "ats_relayer_reorgs_total", help: "Reorgs seen at the scan cursor.", labelNames: ["chain"], registers: [registry] }),
    lagBlocks: new Gauge({ name: "ats_relayer_lag_blocks", help: "Confirmed blocks not yet indexed.", labelNames: ["chain"], registers: [registry] }),
    lagSeconds: new Gauge({ name: "ats_relayer_lag_seconds", help: "Age of the oldest pending item that is due, seconds.", labelNames: ["chain"], registers: [registry] }),
    signerBalanceWei: new Gauge({ name: "ats_relayer_signer_balance_wei", help: "The signer's balance, wei (as a float).", labelNames: ["chain"], registers: [registry] }),
  };
}
