import { expect } from "chai";
import { CLOCK_FILTER_SIZE, ClockFilter, ReachRegister, ceilSqrt } from "../../node/mesh/clockFilter";
import { ConvergenceTracker } from "../../node/mesh/convergence";

describe("mesh peer state: clock filter and reachability (docs/protocol.md §7.4)", function () {
  it("keeps the last 8 samples and trusts the minimum-delay one (the newest of equals)", function () {
    const filter = new ClockFilter();
    expect(filter.best()).to.equal(null);
    for (let i = 0; i < 10; i += 1) filter.add({ offsetNs: BigInt(i * 10), delayNs: BigInt(100 - i), atNs: BigInt(i) });
    expect(filter.size).to.equal(CLOCK_FILTER_SIZE);
    expect(filter.samples()[0]!.atNs).to.equal(2n); // the two oldest are gone
    expect(filter.best()).to.deep.equal({ offsetNs: 90n, delayNs: 91n, atNs: 9n });
    filter.add({ offsetNs: 7n, delayNs: 91n, atNs: 10n });
    expect(filter.best()!.atNs).to.equal(10n);
  });

  it("jitter: RMS of the offsets around the best sample's, rounded up", function () {
    const filter = new ClockFilter();
    filter.add({ offsetNs: 100n, delayNs: 10n, atNs: 0n });
    expect(filter.jitterNs()).to.equal(0n);
    filter.add({ offsetNs: 103n, delayNs: 20n, atNs: 1n });
    filter.add({ offsetNs: 96n, delayNs: 30n, atNs: 2n });
    // Differences 0, 3, −4 around the best (100): sum of squares 25 over 2 → 12.5 → √13 = 3.6… → 4.
    expect(filter.jitterNs()).to.equal(4n);
  });

  it("jitter of absurd offsets (a faulty peer's 2^100 ns) is computed at once, exactly", function () {
    const filter = new ClockFilter();
    filter.add({ offsetNs: 0n, delayNs: 1n, atNs: 0n });
    filter.add({ offsetNs: 1n << 100n, delayNs: 2n, atNs: 1n });
    filter.add({ offsetNs: 0n, delayNs: 3n, atNs: 2n });
    // Differences 0, 2^100, 0: sum of squares 2^200 over 2 → 2^199; its root, rounded up, is ⌈2^99.5⌉. The old
    // float-then-step root took ~10^13 steps here (the node's event loop frozen).
    const jitter = filter.jitterNs();
    expect(jitter * jitter >= 1n << 199n).to.equal(true);
    expect((jitter - 1n) * (jitter - 1n) < 1n << 199n).to.equal(true);
  });

  it("ceilSqrt: the smallest root whose square is at least the value, for small and 400-bit values", function () {
    for (const value of [0n, 1n, 2n, 3n, 4n, 5n, 15n, 16n, 17n, 10n ** 30n, 10n ** 30n + 1n, (1n << 400n) - 1n, 1n << 400n]) {
      const root = ceilSqrt(value);
      expect(root * root >= value, `${value}`).to.equal(true);
      if (root > 0n) expect((root - 1n) * (root - 1n) < value, `${value}`).to.equal(true);
    }
  });

  it("reachability: one bit per probe interval, bit 0 the latest, 8 bits", function () {
    const reach = new ReachRegister();
    expect(reach.reachable).to.equal(false);
    reach.shift(true);
    reach.shift(false);
    reach.shift(true);
    expect(reach.value).to.equal(0b101);
    for (let i = 0; i < 7; i += 1) reach.shift(false);
    expect(reach.value).to.equal(0b1000_0000); // the answer of 8 intervals ago is about to leave
    reach.shift(false);
    expect(reach.value).to.equal(0);
    expect(reach.reachable).to.equal(false);
    for (let i = 0; i < 9; i += 1) reach.shift(true);
    expect(reach.value).to.equal(255);
  });
});

describe("mesh convergence state (docs/protocol.md §7.4)", function () {
  const ok = (offsetNs: bigint, accuracyNs = 1_000, validResponders = 4) => ({ ok: true as const, atNs: 0n, consensusOffsetNs: offsetNs, accuracyNs, validResponders });
  const fail = (error = "Insufficient node responses") => ({ ok: false as const, atNs: 0n, error });

  it("Initializing → Converging on the first success → Converged after 8 stable rounds; timeQuality from its inputs", function () {
    const tracker = new ConvergenceTracker({ memberCount: 4, windowNs: 1_000n });
    expect(tracker.state).to.equal("Initializing");
    expect(tracker.timeQuality()).to.equal(0);
    tracker.observePeers(3);
    tracker.observeRound(fail());
    tracker.observeRound(fail());
    tracker.observeRound(fail());
    expect(tracker.state).to.equal("Initializing"); // never had a round: failures do not make it Degraded
    for (let i = 0; i < 7; i += 1) tracker.observeRound(ok(BigInt(i * 100)));
    expect(tracker.state).to.equal("Converging");
    expect(tracker.timeQuality()).to.equal(Math.floor(10_000 * 0.5 * 1 * (1_000 / 2_000)));
    tracker.observeRound(ok(700n)); // offsets 0..700: within the 1,000 ns window
    expect(tracker.state).to.equal("Converged");
    expect(tracker.timeQuality()).to.equal(5_000); // 1 × 4/4 × 1000/(1000 + 1000)
    expect(tracker.snapshot()).to.include({ state: "Converged", peerCount: 3, threshold: 3, lastError: null });
    expect(tracker.consensusOffsetNs).to.equal(700n);
  });

  it("unstable offsets keep it Converging; Converged is left only for Degraded (3 failures or peers lost), and comes back", function () {
    const tracker = new ConvergenceTracker({ memberCount: 4, windowNs: 1_000n });
    tracker.observePeers(3);
    for (let i = 0; i < 8; i += 1) tracker.observeRound(ok(i % 2 === 0 ? 0n : 1_500n));
    expect(tracker.state).to.equal("Converging"); // spread 1,500 > W
    for (let i = 0; i < 8; i += 1) tracker.observeRound(ok(10n));
    expect(tracker.state).to.equal("Converged");
    tracker.observeRound(ok(5_000n)); // jitter alone does not leave Converged
    expect(tracker.state).to.equal("Converged");
    tracker.observeRound(fail());
    tracker.observeRound(fail());
    expect(tracker.state).to.equal("Converged");
    tracker.observeRound(fail("Time divergence too high"));
    expect(tracker.state).to.equal("Degraded");
    expect(tracker.lastError).to.equal("Time divergence too high");
    expect(tracker.timeQuality()).to.equal(Math.floor(10_000 * 0.25 * 1 * 0.5));
    tracker.observeRound(ok(0n));
    expect(tracker.state).to.equal("Converging");
    tracker.observePeers(1); // 1 + 1 < threshold 3
    expect(tracker.state).to.equal("Degraded");
  });

  it("a lone member converges after the stable window like any other", function () {
    const tracker = new ConvergenceTracker({ memberCount: 1, windowNs: 100n });
    for (let i = 0; i < 8; i += 1) tracker.observeRound(ok(0n, 50, 1));
    expect(tracker.state).to.equal("Converged");
  });
});
