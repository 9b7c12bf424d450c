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

  it("serves exactly the subscribers left after removals in any order", async () => {
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000 });
    const counts = new Array<number>(100).fill(0);
    const stops = counts.map((_, index) => scheduler!.add(2, () => (counts[index]! += 1)));
    // Remove every odd subscriber, from the middle outwards, and one twice.
    for (const index of [51, 49, 99, 1, ...Array.from({ length: 50 }, (_, k) => 2 * k + 1)]) stops[index]!();
    const before = [...counts];
    await sleep(40);
    counts.forEach((count, index) => {
      if (index % 2 === 1) expect(count, `removed ${index}`).to.equal(before[index]);
      else expect(count, `kept ${index}`).to.be.greaterThan(before[index]!);
    });
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

  it("skips a subscriber whose push still waits (never two queued), and counts what waits against the burst", async () => {
    let skipped = 0;
    // 1 ms ticks, one push per turn: the backlog cannot drain between ticks.
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000, maxPushesPerTurn: 1, onSkipped: (count) => (skipped += count) });
    const counts = new Array<number>(40).fill(0);
    counts.forEach((_, index) => scheduler!.add(1, () => (counts[index]! += 1)));
    let maxBacklog = 0;
    const startedMs = performance.now();
    while (performance.now() - startedMs < 100) {
      maxBacklog = Math.max(maxBacklog, scheduler.backlog);
      // Each turn busy for 0.1 ms, as a loaded loop's turns are: 40 queued pushes need 40 turns, longer than a tick.
      // (Idle turns take microseconds here, and the backlog could drain before the next tick: nothing to skip.)
      const busyUntilMs = performance.now() + 0.1;
      while (performance.now() < busyUntilMs);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(maxBacklog).to.be.at.most(40); // one waiting push per subscriber at most
    expect(skipped).to.be.greaterThan(0);
  });

  it("takes a first update from the turn's allowance too", () => {
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000, maxPushesPerTurn: 3 });
    expect(Array.from({ length: 5 }, () => scheduler!.tryTake())).to.deep.equal([true, true, true, false, false]);
  });

  it("refuses a budget below one push per second, and a per-turn bound below one", () => {
    expect(() => new PushScheduler({ maxPushesPerSecond: 0 })).to.throw(RangeError, "maxPushesPerSecond must be at least 1");
    expect(() => new PushScheduler({ maxPushesPerSecond: 10, maxPushesPerTurn: 0 })).to.throw(RangeError, "maxPushesPerTurn");
  });

  /** Pushes counted per event-loop turn (one sample per check phase) while 200 subscribers at 50 ms get one tick. */
  async function pushesPerTurn(maxPushesPerTurn: number): Promise<{ perTurn: number[]; total: number }> {
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000, maxPushesPerTurn });
    let thisTurn = 0;
    let total = 0;
    for (let index = 0; index < 200; index += 1) {
      scheduler.add(50, () => {
        thisTurn += 1;
        total += 1;
      });
    }
    const perTurn: number[] = [];
    await new Promise<void>((resolve) => {
      const sample = (): void => {
        if (thisTurn > 0) perTurn.push(thisTurn);
        thisTurn = 0;
        if (total >= 200) resolve();
        else setImmediate(sample);
      };
      setImmediate(sample);
    });
    return { perTurn, total };
  }

  it("runs at most maxPushesPerTurn pushes in one event-loop turn, the rest in the next turns", async () => {
    const unbounded = await pushesPerTurn(1_000);
    expect(Math.max(...unbounded.perTurn)).to.equal(200); // the control: one tick's pushes in one turn
    scheduler?.close();
    const bounded = await pushesPerTurn(10);
    expect(bounded.total).to.equal(200);
    // A turn's allowance can be spent on both sides of one sample (the tick, then the check phase's drain).
    expect(Math.max(...bounded.perTurn)).to.be.at.most(20);
    expect(bounded.perTurn.length).to.be.at.least(10);
  });

  it("drops a waiting push whose subscriber was removed, and runs nothing after close()", async function () {
    this.timeout(10_000);
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000, maxPushesPerTurn: 5 });
    let pushed = 0;
    const stops: (() => void)[] = [];
    for (let index = 0; index < 50; index += 1) stops.push(scheduler.add(500, () => (pushed += 1)));
    await new Promise<void>((resolve) => {
      const wait = (): void => {
        if (pushed > 0) resolve();
        else setImmediate(wait);
      };
      wait();
    });
    expect(pushed).to.equal(5); // the tick ran its turn's allowance; 45 wait
    expect(scheduler.backlog).to.equal(45);
    for (const stop of stops.slice(0, 40)) stop(); // 40 subscribers leave (35 of them waiting)
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(pushed).to.equal(15); // the 10 still subscribed ran; the removed ones were dropped
    expect(scheduler.backlog).to.equal(0);
    scheduler.close();
    const frozen = pushed;
    await sleep(600); // past the next tick, were a timer left
    expect(pushed).to.equal(frozen);
  });

  it("writes one turn's pushes to one channel together: corked before its first push, uncorked after the turn's last", async function () {
    this.timeout(10_000);
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000, maxPushesPerTurn: 6 });
    const events: string[] = [];
    const channel = (name: string) => ({ cork: () => events.push(`cork ${name}`), uncork: () => events.push(`uncork ${name}`) });
    const a = channel("a");
    const b = channel("b");
    // Three subscriptions on connection a, two on b, one with no channel (gRPC): interleaved as they were added.
    scheduler.add(500, () => events.push("push a1"), a);
    scheduler.add(500, () => events.push("push b1"), b);
    scheduler.add(500, () => events.push("push a2"), a);
    scheduler.add(500, () => events.push("push none"));
    scheduler.add(500, () => events.push("push b2"), b);
    scheduler.add(500, () => events.push("push a3"), a);
    await new Promise<void>((resolve) => {
      const wait = (): void => {
        if (events.length > 0) resolve();
        else setImmediate(wait);
      };
      wait();
    });
    expect(events).to.deep.equal(["cork a", "push a1", "cork b", "push b1", "push a2", "push none", "push b2", "push a3", "uncork a", "uncork b"]);
  });

  it("corks a channel again in the next turn for what the turn's allowance left, and skips a member removed meanwhile", async function () {
    this.timeout(10_000);
    scheduler = new PushScheduler({ maxPushesPerSecond: 1_000_000, maxPushesPerTurn: 2 });
    const events: string[] = [];
    const a = { cork: () => events.push("cork"), uncork: () => events.push("uncork") };
    const stops = [1, 2, 3, 4].map((n) => scheduler!.add(500, () => events.push(`push ${n}`), a));
    await new Promise<void>((resolve) => {
      const wait = (): void => {
        if (events.length > 0) resolve();
        else setImmediate(wait);
      };
      wait();
    });
    expect(events).to.deep.equal(["cork", "push 1", "push 2", "uncork"]);
    stops[2]!(); // subscriber 3 leaves while its push waits
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).to.deep.equal(["cork", "push 1", "push 2", "uncork", "cork", "push 4", "uncork"]);
  });
});
