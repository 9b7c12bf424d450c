import { expect } from "chai";
import type { HealthReport, HealthStatus, SignedTime, TimeService } from "../../../node/core/types";
import { cardNtpReference, createServiceNtpClock, STATE_REFRESH_NS } from "../../../node/ntp/source";

const NOW_NS = 1_795_000_000_000_000_000n;

/** The parts of a TimeService the NTP clock reads; the rest is never called. */
function fakeService(accuracyNs: number) {
  const state = { nowNs: NOW_NS, status: "ok" as HealthStatus, lastProofAgeNs: 2_000_000n as bigint | null, healthReads: 0 };
  const proofListeners: ((signed: SignedTime) => void)[] = [];
  const service = {
    cardNowNs: () => state.nowNs,
    info: () => ({ accuracyNs }),
    health: (): HealthReport => {
      state.healthReads += 1;
      return { status: state.status, reason: null, lastProofAgeNs: state.lastProofAgeNs, measuredErrorNs: 0 };
    },
    onProof: (listener: (signed: SignedTime) => void) => {
      proofListeners.push(listener);
      return () => proofListeners.splice(proofListeners.indexOf(listener), 1);
    },
  } as unknown as TimeService;
  const proofWithGps = (fixState: string) => ({ json: { proof: { gps: { fixState, satellites: 9, ppsOffsetNs: 0, observedAtNs: "0" } } } }) as unknown as SignedTime;
  return { state, service, proofListeners, proofWithGps };
}

describe("NTP state of the node (node/ntp/source.ts)", () => {
  it("names a GPS fix GPS and anything else LOCL, at stratum 1", () => {
    expect(cardNtpReference(null)).to.deep.equal({ stratum: 1, referenceId: "LOCL" });
    for (const fixState of ["2d", "3d"] as const) expect(cardNtpReference({ fixState, satellites: 7, ppsOffsetNs: 0, observedAtNs: "0" }).referenceId).to.equal("GPS");
    for (const fixState of ["none", "simulated"] as const) expect(cardNtpReference({ fixState, satellites: 0, ppsOffsetNs: 0, observedAtNs: "0" }).referenceId).to.equal("LOCL");
  });

  it("carries the signed accuracy as root dispersion with root delay 0, LI 0 only while health is ok, the last proof as reference time", () => {
    const { state, service } = fakeService(1_000);
    const clock = createServiceNtpClock(service);
    expect(clock.state()).to.deep.equal({ leap: 0, stratum: 1, precisionLog2: -20, rootDelayNs: 0n, rootDispersionNs: 1_000n, referenceId: "LOCL", referenceTimeNs: NOW_NS - 2_000_000n });
    for (const status of ["degraded", "stale", "starting", "tampered"] as const) {
      state.status = status;
      state.nowNs += STATE_REFRESH_NS;
      expect(clock.state().leap, status).to.equal(3);
    }
    state.lastProofAgeNs = null;
    state.nowNs += STATE_REFRESH_NS;
    expect(clock.state().referenceTimeNs).to.equal(0n);
    clock.close();
  });

  it("reuses a state for STATE_REFRESH_NS of the card clock, then reads health again", () => {
    const { state, service } = fakeService(1_000);
    const clock = createServiceNtpClock(service);
    clock.state();
    state.status = "degraded";
    state.nowNs += STATE_REFRESH_NS - 1n;
    expect(clock.state().leap).to.equal(0);
    expect(state.healthReads).to.equal(1);
    state.nowNs += 1n;
    expect(clock.state().leap).to.equal(3);
    expect(state.healthReads).to.equal(2);
  });

  it("follows the card's GPS reference on each proof, and takes a fixed reference and a root delay as inputs", () => {
    const { state, service, proofListeners, proofWithGps } = fakeService(1_000);
    const clock = createServiceNtpClock(service);
    proofListeners[0]!(proofWithGps("3d"));
    state.nowNs += STATE_REFRESH_NS;
    expect(clock.state().referenceId).to.equal("GPS");
    clock.close();
    expect(proofListeners).to.have.length(0);
    // A chrony-disciplined source: stratum 3 behind 192.0.2.1, 300 µs of root delay; the root distance stays the bound.
    const secondary = createServiceNtpClock(fakeService(1_000_000).service, { reference: { stratum: 3, referenceId: 0xc0000201 }, rootDelayNs: 300_000n });
    const secondaryState = secondary.state();
    expect(secondaryState).to.deep.include({ stratum: 3, referenceId: 0xc0000201, rootDelayNs: 300_000n, rootDispersionNs: 850_000n });
    expect(secondaryState.rootDelayNs / 2n + secondaryState.rootDispersionNs).to.equal(1_000_000n);
  });
});
