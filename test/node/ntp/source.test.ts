import { expect } from "chai";
import type { NtpUpstream } from "../../../node/card/types";
import type { HealthReport, HealthStatus, TimeService } from "../../../node/core/types";
import { cardNtpReference, createServiceNtpClock, STATE_REFRESH_NS } from "../../../node/ntp/source";

const NOW_NS = 1_795_000_000_000_000_000n;

/** The parts of a TimeService the NTP clock reads; the rest is never called. */
function fakeService(accuracyNs: number) {
  const state = { nowNs: NOW_NS, status: "ok" as HealthStatus, lastProofAgeNs: 2_000_000n as bigint | null, healthReads: 0, upstream: null as NtpUpstream | null };
  const service = {
    cardNowNs: () => state.nowNs,
    cardNtpUpstream: () => state.upstream,
    info: () => ({ accuracyNs }),
    health: (): HealthReport => {
      state.healthReads += 1;
      return { status: state.status, reason: null, lastProofAgeNs: state.lastProofAgeNs, measuredErrorNs: 0 };
    },
  } as unknown as TimeService;
  return { state, service };
}

describe("NTP state of the node (node/ntp/source.ts)", () => {
  it("serves a card as stratum 1 LOCL (a GPS fix is metadata, not discipline), and a card behind an NTP source at its stratum + 1", () => {
    expect(cardNtpReference(null)).to.deep.equal({ stratum: 1, referenceId: "LOCL" });
    expect(cardNtpReference({ stratum: 1, referenceId: 0x7f000001 })).to.deep.equal({ stratum: 2, referenceId: 0x7f000001 });
    expect(cardNtpReference({ stratum: 15, referenceId: 1 }).stratum, "never 16 (unsynchronised)").to.equal(15);
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

  it("follows the card's NTP upstream as it changes, and takes a fixed reference and a root delay as inputs", () => {
    const { state, service } = fakeService(1_000);
    const clock = createServiceNtpClock(service);
    expect(clock.state()).to.deep.include({ stratum: 1, referenceId: "LOCL" });
    state.upstream = { stratum: 2, referenceId: 0xc0000201 }; // chrony now follows a stratum-2 server
    state.nowNs += STATE_REFRESH_NS;
    expect(clock.state()).to.deep.include({ stratum: 3, referenceId: 0xc0000201 });
    clock.close();
    // A chrony-disciplined source: stratum 3 behind 192.0.2.1, 300 µs of root delay; the root distance stays the bound.
    const secondary = createServiceNtpClock(fakeService(1_000_000).service, { reference: { stratum: 3, referenceId: 0xc0000201 }, rootDelayNs: 300_000n });
    const secondaryState = secondary.state();
    expect(secondaryState).to.deep.include({ stratum: 3, referenceId: 0xc0000201, rootDelayNs: 300_000n, rootDispersionNs: 850_000n });
    expect(secondaryState.rootDelayNs / 2n + secondaryState.rootDispersionNs).to.equal(1_000_000n);
  });
});
