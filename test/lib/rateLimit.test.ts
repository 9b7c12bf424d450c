import { expect } from "chai";
import { RateLimitError } from "../../protocol/errors";
import { RateLimiter } from "../../lib/rateLimit";

describe("lib/rateLimit RateLimiter", function () {
  it("allows `burst` requests at once, then refills at ratePerSecond", function () {
    let nowMs = 0;
    const limiter = new RateLimiter({ ratePerSecond: 10, nowMs: () => nowMs });
    for (let i = 0; i < 10; i += 1) expect(limiter.tryTake("a")).to.equal(true);
    expect(limiter.tryTake("a")).to.equal(false);
    expect(limiter.tryTake("b")).to.equal(true); // per client
    nowMs += 100; // one token
    expect(limiter.tryTake("a")).to.equal(true);
    expect(limiter.tryTake("a")).to.equal(false);
  });

  it("throws RateLimitError with the fixed message", function () {
    const limiter = new RateLimiter({ ratePerSecond: 1, nowMs: () => 0 });
    limiter.take("a");
    expect(() => limiter.take("a")).to.throw(RateLimitError, "Rate limit exceeded");
  });

  it("keeps memory bounded: evicts the least recently used bucket and sweeps full ones", function () {
    let nowMs = 0;
    const limiter = new RateLimiter({ ratePerSecond: 2, maxClients: 3, nowMs: () => nowMs });
    for (const key of ["a", "b", "c", "d"]) limiter.tryTake(key);
    expect(limiter.size).to.equal(3);
    nowMs += 10_000;
    expect(limiter.sweepIdle()).to.equal(3);
    expect(limiter.size).to.equal(0);
  });

  it("is off at 0", function () {
    const limiter = new RateLimiter({ ratePerSecond: 0 });
    for (let i = 0; i < 1_000; i += 1) expect(limiter.tryTake("a")).to.equal(true);
    expect(limiter.size).to.equal(0);
  });
});
