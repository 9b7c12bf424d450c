import { expect } from "chai";
import {
  coSignDecision,
  consensusThreshold,
  exchangeSample,
  maxFaults,
  medianNs,
  readingFromExchange,
  readingFromSample,
  runConsensusRound,
  type ConsensusReading,
} from "../../protocol/consensus";
import { ConsensusError } from "../../protocol/errors";
import type { Address } from "../../protocol/types";

const A = "0x00000000000000000000000000000000000000aa" as Address;
const B = "0x00000000000000000000000000000000000000bb" as Address;
const C = "0x00000000000000000000000000000000000000cc" as Address;
const D = "0x00000000000000000000000000000000000000dd" as Address;
const M = 1_800_000_000_000_000_000n;

function reading(nodeId: Address, offsetNs: bigint, uncertaintyNs: bigint): ConsensusReading {
  return { nodeId, readingNs: M + offsetNs, uncertaintyNs };
}

describe("protocol/consensus (docs/protocol.md §7), exact nanoseconds", function () {
  it("threshold ⌈2n/3⌉ and tolerated faults ⌊(n − 1)/3⌋", function () {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(consensusThreshold)).to.deep.equal([1, 2, 2, 3, 4, 4, 5, 6, 6, 7]);
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(maxFaults)).to.deep.equal([0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
    expect(() => consensusThreshold(0)).to.throw(RangeError);
  });

  it("median: the middle reading, or the mean of the two middle ones rounded toward −∞", function () {
    expect(medianNs([1n, 5n, 9n])).to.equal(5n);
    expect(medianNs([1n, 4n, 7n, 9n])).to.equal(5n); // (4 + 7) / 2 = 5.5 → 5
    expect(medianNs([-7n, -4n])).to.equal(-6n); // −5.5 → −6
    expect(() => medianNs([])).to.throw(RangeError);
  });

  it("a 4-member round worked out by hand: median, validity, deviation and the (f + 1)-th smallest bound", function () {
    const result = runConsensusRound({
      memberCount: 4,
      selfId: A,
      momentNs: M,
      windowNs: 1_000n,
      readings: [reading(A, 0n, 50n), reading(B, 300n, 200n), reading(C, -100n, 400n), reading(D, 5_000n, 10n)],
    });
    // Sorted offsets −100, 0, 300, 5,000: median (0 + 300) / 2 = 150.
    expect(result.timeNs).to.equal(M + 150n);
    expect(result.valid.map((r) => r.nodeId)).to.deep.equal([A, B, C]); // ascending by id
    expect(result.valid.map((r) => r.deviationNs)).to.deep.equal([-150n, 150n, -250n]);
    expect(result.excluded).to.have.length(1);
    expect(result.excluded[0]).to.include({ nodeId: D, deviationNs: 4_850n });
    expect(result.deviationNs).to.equal(250n);
    // d = |reading − M| + uncertainty: A 50, B 500, C 500 → sorted 50, 500, 500; f = 1 → the 2nd smallest, 500.
    expect(result.accuracyNs).to.equal(500);
    expect(result.toleratedFaults).to.equal(1);
  });

  it("never signs below the proposer's own card accuracy", function () {
    const result = runConsensusRound({
      memberCount: 3,
      selfId: A,
      momentNs: M,
      windowNs: 1_000n,
      readings: [reading(A, 0n, 900n), reading(B, 0n, 10n), reading(C, 0n, 20n)],
    });
    // f = 0 for n = 3: the smallest d is 10, but the proposer's own accuracy is 900.
    expect(result.accuracyNs).to.equal(900);
  });

  it("'Insufficient node responses' below the threshold, with the counts as evidence", function () {
    const run = () => runConsensusRound({ memberCount: 4, selfId: A, momentNs: M, windowNs: 100n, readings: [reading(A, 0n, 1n), reading(B, 0n, 1n)] });
    expect(run).to.throw(ConsensusError, /^Insufficient node responses$/);
    try {
      run();
    } catch (error) {
      expect((error as ConsensusError).details).to.deep.equal({ responses: 2, threshold: 3, members: 4 });
    }
  });

  it("'Time divergence too high' when fewer than the threshold agree, when the proposer is outside, or the bound overflows uint32", function () {
    const spread = [reading(A, 0n, 1n), reading(B, 1_000n, 1n), reading(C, 2_000n, 1n), reading(D, 3_000n, 1n)];
    expect(() => runConsensusRound({ memberCount: 4, selfId: A, momentNs: M, windowNs: 600n, readings: spread })).to.throw(ConsensusError, /^Time divergence too high$/);
    const selfOut = [reading(A, 0n, 1n), reading(B, 5_000n, 1n), reading(C, 5_010n, 1n), reading(D, 5_020n, 1n)];
    try {
      runConsensusRound({ memberCount: 4, selfId: A, momentNs: M, windowNs: 100n, readings: selfOut });
      expect.fail("no error");
    } catch (error) {
      expect((error as ConsensusError).message).to.equal("Time divergence too high");
      expect((error as ConsensusError).details).to.include({ selfOutsideWindow: true });
    }
    const huge = [reading(A, 0n, 5_000_000_000n), reading(B, 0n, 5_000_000_000n), reading(C, 0n, 5_000_000_000n)];
    expect(() => runConsensusRound({ memberCount: 3, selfId: A, momentNs: M, windowNs: 100n, readings: huge })).to.throw(ConsensusError, /^Time divergence too high$/);
  });

  it("refuses input no caller may build: duplicate members, more readings than members, no reading of its own", function () {
    expect(() => runConsensusRound({ memberCount: 2, selfId: A, momentNs: M, windowNs: 1n, readings: [reading(A, 0n, 1n), reading(A, 0n, 1n)] })).to.throw(RangeError, /two readings/);
    expect(() => runConsensusRound({ memberCount: 1, selfId: A, momentNs: M, windowNs: 1n, readings: [reading(A, 0n, 1n), reading(B, 0n, 1n)] })).to.throw(RangeError);
    expect(() => runConsensusRound({ memberCount: 2, selfId: A, momentNs: M, windowNs: 1n, readings: [reading(B, 0n, 1n), reading(C, 0n, 1n)] })).to.throw(RangeError);
  });

  it("NTP offset and delay of an exchange, rounded toward −∞, and the impossible ones refused", function () {
    expect(exchangeSample({ t1: 1_000n, t2: 1_600n, t3: 1_700n, t4: 1_500n })).to.deep.equal({ offsetNs: 400n, delayNs: 400n });
    expect(exchangeSample({ t1: 1_000n, t2: 1_001n, t3: 1_001n, t4: 1_005n })).to.deep.equal({ offsetNs: -2n, delayNs: 5n }); // −1.5 → −2
    expect(() => exchangeSample({ t1: 0n, t2: 10n, t3: 9n, t4: 20n })).to.throw(RangeError, /before the request arrived/);
    expect(() => exchangeSample({ t1: 10n, t2: 10n, t3: 10n, t4: 9n })).to.throw(RangeError, /before the request left/);
    expect(() => exchangeSample({ t1: 0n, t2: 0n, t3: 100n, t4: 50n })).to.throw(RangeError, /negative delay/);
  });

  it("readings: delay / 2 rounded up plus accuracy; an earlier sample adds 30 ppm of the time since", function () {
    expect(readingFromExchange(B, { t1: M, t2: M + 501n, t3: M + 601n, t4: M + 201n }, 50n)).to.deep.equal({ nodeId: B, readingNs: M + 450n, uncertaintyNs: 51n + 50n }); // delay 101 → 51
    // 1 s after the sample: 30,000 ns of drift allowance.
    expect(readingFromSample(B, M, { offsetNs: -20n, delayNs: 9n, atNs: M - 1_000_000_000n }, 50n)).to.deep.equal({ nodeId: B, readingNs: M - 20n, uncertaintyNs: 5n + 50n + 30_000n });
    expect(readingFromSample(B, M, { offsetNs: 0n, delayNs: 0n, atNs: M - 1n }, 0n).uncertaintyNs).to.equal(1n); // rounded up
  });

  it("co-signs unless its own clock proves the claim false, at the exact boundaries", function () {
    const base = { momentNs: M, accuracyNs: 1_000, ownAccuracyNs: 50, maxTransitNs: 10_000n, maxAccuracyNs: 1_000n };
    expect(coSignDecision({ ...base, receivedAtNs: M - 1_050n })).to.deep.equal({ sign: true }); // 1,050 ahead: allowed
    expect(coSignDecision({ ...base, receivedAtNs: M - 1_051n }).sign).to.equal(false);
    expect(coSignDecision({ ...base, receivedAtNs: M + 11_050n })).to.deep.equal({ sign: true }); // behind by transit + bounds
    expect(coSignDecision({ ...base, receivedAtNs: M + 11_051n })).to.include({ sign: false });
  });
});
