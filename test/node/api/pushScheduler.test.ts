/**
 * Shared stream timers and the node-wide push budget.
 */
import { expect } from "chai";
import { PushScheduler } from "../../../node/api/pushScheduler";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("node/api/pushScheduler", function () {
  let scheduler: PushScheduler | undefined;
  afterEach(() => scheduler?.close());

  it("runs one timer per distinct interval, not one per subscriber, and stops it with the last subscriber", async () => {
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000 });
    const counts = new Array<number>(300).fill(0);
    const stops = counts.map((_, index) => scheduler!.add(index < 200 ? 2 : 7, () => (counts[index]! += 1)));
    expect(scheduler.timerCount).to.equal(2);
    await sleep(60);
    expect(counts.every((count) => count > 0)).to.equal(true);
    for (const stop of stops.slice(0, 200)) stop();
    expect(scheduler.timerCount).to.equal(1);
    for (const stop of stops.slice(200)) stop();
    expect(scheduler.timerCount).to.equal(0);
    const frozen = [...counts];
    await sleep(20);
    expect(counts).to.deep.equal(frozen);
  });

  it("never pushes more than the budget allows, spreads what it allows over every subscriber, and reports skips", async () => {
    let skipped = 0;
    const ratePerSecond = 2_000;
    scheduler = new PushScheduler({ maxPushesPerSecond: ratePerSecond, onSkipped: (count) => (skipped += count) });
    const counts = new Array<number>(500).fill(0);
    const startedMs = performance.now();
    counts.forEach((_, index) => scheduler!.add(1, () => (counts[index]! += 1)));
    await sleep(400);
    scheduler.close();
    const elapsedMs = performance.now() - startedMs;
    const pushed = counts.reduce((sum, count) => sum + count, 0);
    // Token bucket: the rate over the elapsed time plus one burst (a tenth of a second's worth).
    expect(pushed).to.be.at.most(Math.ceil((elapsedMs * ratePerSecond) / 1_000 + ratePerSecond / 10));
    expect(skipped).to.be.greaterThan(0);
    // Rotation: no subscriber is starved while others are served.
    expect(Math.min(...counts)).to.be.greaterThan(0);
  });

  it("lets a subscriber remove itself during a push", async () => {
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000 });
    let calls = 0;
    const stop: () => void = scheduler.add(1, () => {
      calls += 1;
      stop();
    });
    let others = 0;
    scheduler.add(1, () => (others += 1));
    await sleep(30);
    expect(calls).to.equal(1);
    expect(others).to.be.greaterThan(1);
  });

  it("takes a subscription's first push from the same budget, so opening many at once is bounded too", () => {
    let nowMs = 0;
    scheduler = new PushScheduler({ maxPushesPerSecond: 100, nowMs: () => nowMs }); // burst: a tenth of a second, 10
    const taken = Array.from({ length: 50 }, () => scheduler!.tryTake()).filter(Boolean).length;
    expect(taken).to.equal(10);
    nowMs += 50; // five more pushes' worth
    expect(Array.from({ length: 50 }, () => scheduler!.tryTake()).filter(Boolean).length).to.equal(5);
  });

  it("refuses a budget below one push per second", () => {
    expect(() => new PushScheduler({ maxPushesPerSecond: 0 })).to.throw(RangeError, "maxPushesPerSecond must be at least 1");
  });
});
