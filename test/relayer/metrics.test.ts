import { expect } from "chai";
import { createRelayerMetrics } from "../../relayer/metrics";
import { ITEM_KINDS } from "../../relayer/store";

describe("relayer metrics (relayer/metrics.ts)", () => {
  it("shows every kind's dead letters at zero from the start, so that increase() sees the first one", async () => {
    const metrics = createRelayerMetrics(() => ({ "call/pending": 2 }));
    const text = await metrics.registry.metrics();
    for (const kind of ITEM_KINDS) expect(text).to.match(new RegExp(`^ats_relayer_finished_total\\{kind="${kind}",outcome="dead"\\} 0$`, "m"));
    expect(text).to.match(/^ats_relayer_items\{kind="call",status="pending"\} 2$/m);
  });

  it("keeps the process metrics under its prefix, without the per-handle gauges named like counters", async () => {
    const text = await createRelayerMetrics(() => ({})).registry.metrics();
    expect(text).to.match(/^ats_relayer_process_cpu_seconds_total /m);
    expect(text).not.to.contain("ats_relayer_nodejs_active_handles");
  });
});
