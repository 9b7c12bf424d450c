import { expect } from "chai";
import { createHealthCheck, type HealthSources } from "../../../node/core/health";
import type { SignedTime } from "../../../node/core/types";

const MAX_AGE_NS = 1_000n;

function fakeSources() {
  const state = {
    latest: null as SignedTime | null,
    tamperReason: null as string | null,
    refusalReason: null as string | null,
    running: false,
    nowNs: 10_000n,
    measuredErrorNs: 7,
  };
  const sources: HealthSources = {
    attestor: {
      get latest() {
        return state.latest;
      },
      get tamperReason() {
        return state.tamperReason;
      },
      get refusalReason() {
        return state.refusalReason;
      },
    },
    measuredErrorNs: () => state.measuredErrorNs,
    nowNs: () => state.nowNs,
    isRunning: () => state.running,
    maxAttestationAgeNs: MAX_AGE_NS,
  };
  return { state, health: createHealthCheck(sources) };
}

const proofAt = (nanoMoment: bigint) => ({ proof: { nanoMoment } }) as unknown as SignedTime;

describe("health (node/core/health.ts)", () => {
  it("moves starting → ok → degraded → stale → ok, with the proof's age and the card's error", () => {
    const { state, health } = fakeSources();
    expect(health()).to.deep.equal({ status: "starting", reason: null, lastProofAgeNs: null, measuredErrorNs: 7 });
    state.running = true;
    expect(health().status).to.equal("starting"); // running, no proof yet
    state.latest = proofAt(9_900n);
    expect(health()).to.deep.equal({ status: "ok", reason: null, lastProofAgeNs: 100n, measuredErrorNs: 7 });

    state.refusalReason = "too much error";
    state.measuredErrorNs = 900;
    expect(health()).to.deep.equal({ status: "degraded", reason: "too much error", lastProofAgeNs: 100n, measuredErrorNs: 900 });
    state.nowNs = 9_900n + MAX_AGE_NS; // exactly at the bound: still served
    expect(health().status).to.equal("degraded");
    state.nowNs += 1n;
    expect(health()).to.deep.equal({ status: "stale", reason: "too much error", lastProofAgeNs: MAX_AGE_NS + 1n, measuredErrorNs: 900 });
    state.refusalReason = null;
    expect(health().reason).to.equal("no fresh attestation: signing stalled");

    state.latest = proofAt(state.nowNs);
    expect(health()).to.include({ status: "ok", lastProofAgeNs: 0n });
  });

  it("tampered wins over everything; a stopped service is starting with the refusal as reason", () => {
    const { state, health } = fakeSources();
    state.refusalReason = "refusing";
    expect(health()).to.include({ status: "starting", reason: "refusing" });
    state.running = true;
    state.latest = proofAt(0n); // stale too
    state.tamperReason = "case opened";
    expect(health()).to.include({ status: "tampered", reason: "case opened" });
    state.latest = null;
    expect(health()).to.deep.equal({ status: "tampered", reason: "case opened", lastProofAgeNs: null, measuredErrorNs: 7 });
  });
});
