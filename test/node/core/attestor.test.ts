import { expect } from "chai";
import { UnavailableError } from "../../../protocol/errors";
import { proofFromJson } from "../../../protocol/json";
import { Attestor, type AttestorOptions } from "../../../node/core/attestor";
import type { NodeAlert, SignedTime } from "../../../node/core/types";
import { attestorSetup, expectRejects, waitFor } from "./helpers";

async function setup(overrides: Partial<AttestorOptions> = {}) {
  const { identity, card, options, verifyAt } = await attestorSetup(overrides);
  return { identity, card, attestor: new Attestor(options), verifyAt };
}

describe("Attestor", () => {
  const running: Attestor[] = [];
  afterEach(() => {
    for (const attestor of running.splice(0)) attestor.stop();
  });

  it("produces dual-signed proofs that verify off-chain with protocol/verify", async () => {
    const { attestor, verifyAt, identity } = await setup();
    const signed = attestor.attest();
    expect(verifyAt(signed.proof)).to.deep.include({ valid: true, cardId: identity.cardId });
    expect(signed.proof.accuracy).to.equal(50);
    expect(signed.json.proof.hardwareId).to.equal(identity.cardId);
    expect(signed.body).to.equal(JSON.stringify(signed.json));
    // The JSON form decodes back to the same on-chain struct.
    expect(proofFromJson(JSON.parse(signed.body)).proof).to.deep.equal(signed.proof);
    expect(Object.isFrozen(signed) && Object.isFrozen(signed.proof) && Object.isFrozen(signed.json)).to.equal(true);
  });

  it("signs the accuracy: a relayer that lowers or raises it breaks the node signature", async () => {
    const { attestor, verifyAt } = await setup();
    const { proof } = attestor.attest();
    for (const accuracy of [0, 49, 51]) {
      const outcome = verifyAt({ ...proof, accuracy });
      expect(outcome.valid).to.equal(false);
      if (!outcome.valid) expect(outcome.reason).to.equal("unknown-node"); // recovers to another address
    }
  });

  it("ticks on its own and keeps the freshest proof in the cache", async () => {
    const { attestor } = await setup();
    const seen: SignedTime[] = [];
    attestor.onProof((signed) => seen.push(signed));
    expect(() => attestor.current()).to.throw(UnavailableError, "starting");
    attestor.start();
    running.push(attestor);
    await waitFor(() => seen.length >= 5, 20_000, "five ticks");
    const current = attestor.current();
    expect(current.proof.nanoMoment >= seen[0]!.proof.nanoMoment).to.equal(true);
    for (let i = 1; i < seen.length; i += 1) expect(seen[i]!.proof.nanoMoment > seen[i - 1]!.proof.nanoMoment).to.equal(true);
    expect(attestor.stats().attestationsTotal).to.be.at.least(5);
  });

  it("refuses to sign while the card's measured error exceeds the bound, alerts once, and resumes", async () => {
    const { attestor, card } = await setup();
    const alerts: NodeAlert[] = [];
    attestor.onAlert((alert) => alerts.push(alert));
    attestor.attest();
    card.simulateMeasuredError(51);
    expect(() => attestor.attest()).to.throw(UnavailableError, "exceeds the signing bound 50 ns");
    expect(() => attestor.attest()).to.throw(UnavailableError);
    expect(attestor.stats().accuracyRefusalsTotal).to.equal(2);
    expect(alerts.map((alert) => alert.kind)).to.deep.equal(["accuracy"]);
    expect(attestor.refusalReason).to.contain("51 ns");
    card.simulateMeasuredError(50);
    expect(attestor.attest().proof.accuracy).to.equal(50);
    expect(attestor.refusalReason).to.equal(null);
  });

  it("refuses to construct when the signing bound is looser than the signed accuracy", async () => {
    await expectRejects(setup({ signingErrorBoundNs: 60 }), RangeError);
  });

  it("stops at once on tamper: current() throws with the reason, listeners and alert fire once", async () => {
    const { attestor, card } = await setup();
    const tampers: string[] = [];
    const alerts: NodeAlert[] = [];
    attestor.onTamper((reason) => tampers.push(reason));
    attestor.onAlert((alert) => alerts.push(alert));
    let proofsAfterTamper = 0;
    let tampered = false;
    attestor.onProof(() => {
      if (tampered) proofsAfterTamper += 1;
    });
    attestor.start();
    running.push(attestor);
    await waitFor(() => attestor.stats().attestationsTotal >= 2, 20_000, "two proofs");
    card.simulateTamper("lid switch opened");
    tampered = true;
    expect(() => attestor.current()).to.throw(UnavailableError, "time card tampered: lid switch opened");
    expect(() => attestor.attest()).to.throw(UnavailableError, "lid switch opened");
    expect(tampers).to.deep.equal(["lid switch opened"]);
    expect(alerts).to.have.length(1);
    expect(alerts[0]).to.include({ kind: "tamper", reason: "lid switch opened", cardId: card.cardId });
    expect(attestor.stats().tamperEventsTotal).to.equal(1);
    const count = attestor.stats().attestationsTotal;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(attestor.stats().attestationsTotal).to.equal(count);
    expect(proofsAfterTamper).to.equal(0);
  });

  describe("on-demand refresh (refreshAfterNs)", () => {
    // The node clock runs `skewNs` ahead of the card: a test ages the cached proof without waiting for it.
    async function skewedSetup(overrides: Partial<AttestorOptions>) {
      let skewNs = 0n;
      const base = await attestorSetup({ tickIntervalNs: 60_000_000_000n, ...overrides });
      const attestor = new Attestor({ ...base.options, nodeClockNs: () => base.card.readTimeNs() + skewNs, ...overrides });
      return { ...base, attestor, setSkewNs: (value: bigint) => (skewNs = value) };
    }

    it("current() signs a new proof first when the cached one is older than refreshAfterNs", async () => {
      const { attestor, verifyAt, setSkewNs } = await skewedSetup({ refreshAfterNs: 10_000_000_000n });
      attestor.start();
      running.push(attestor);
      const first = attestor.current();
      expect(attestor.current()).to.equal(first); // younger than 10 s: the cached proof, no signature
      expect(attestor.stats().attestationsTotal).to.equal(1);
      setSkewNs(20_000_000_000n); // the cached proof is now 20 s old
      const refreshed = attestor.current();
      expect(refreshed).to.not.equal(first);
      expect(refreshed.proof.nanoMoment > first.proof.nanoMoment).to.equal(true);
      expect(attestor.latest).to.equal(refreshed);
      expect(attestor.stats().attestationsTotal).to.equal(2);
      expect(verifyAt(refreshed.proof).valid).to.equal(true);
    });

    it("is off by default: current() serves the cached proof however old, within maxServeAgeNs", async () => {
      const { attestor, setSkewNs } = await skewedSetup({});
      attestor.start();
      running.push(attestor);
      const first = attestor.current();
      setSkewNs(20_000_000_000n);
      expect(attestor.current()).to.equal(first);
      expect(attestor.stats().attestationsTotal).to.equal(1);
    });

    it("serves the cached proof when the card is out of its accuracy bound, without retrying per request", async () => {
      const { attestor, card, setSkewNs } = await skewedSetup({ refreshAfterNs: 1_000_000n });
      attestor.start();
      running.push(attestor);
      const first = attestor.current();
      card.simulateMeasuredError(51);
      setSkewNs(20_000_000_000n);
      expect(attestor.current()).to.equal(first);
      expect(attestor.current()).to.equal(first);
      expect(attestor.stats().accuracyRefusalsTotal).to.equal(1); // the second request did not try again
      expect(attestor.refusalReason).to.contain("51 ns");
    });

    it("after an unexpected signing failure serves the cached proof, logs once, and resumes after a good proof", async () => {
      const { attestor, card, setSkewNs } = await skewedSetup({ refreshAfterNs: 1_000_000n });
      attestor.start();
      running.push(attestor);
      const first = attestor.current();
      const realSign = card.signHardware.bind(card);
      let failingCalls = 0;
      card.signHardware = () => {
        failingCalls += 1;
        throw new Error("card bus error");
      };
      setSkewNs(20_000_000_000n);
      expect(attestor.current()).to.equal(first);
      expect(attestor.current()).to.equal(first);
      expect(failingCalls).to.equal(1);
      expect(attestor.stats().tickErrorsTotal).to.equal(1);
      card.signHardware = realSign;
      attestor.attest(); // a good proof (a tick, or attestNow) lifts the pause
      setSkewNs(40_000_000_000n);
      const before = attestor.stats().attestationsTotal;
      attestor.current();
      expect(attestor.stats().attestationsTotal).to.equal(before + 1);
    });

    it("throws the tamper reason when the refresh finds the card tampered (no event received yet)", async () => {
      const { attestor, card, setSkewNs } = await skewedSetup({ refreshAfterNs: 1_000_000n });
      const tampers: string[] = [];
      attestor.onTamper((reason) => tampers.push(reason));
      attestor.start();
      running.push(attestor);
      attestor.current();
      setSkewNs(20_000_000_000n);
      // A card whose state says tampered before its event arrives: the refresh's own check must catch it.
      card.tamperState = () => ({ tampered: true, reason: "enclosure opened" });
      expect(() => attestor.current()).to.throw(UnavailableError, "time card tampered: enclosure opened");
      expect(tampers).to.deep.equal(["enclosure opened"]);
      expect(attestor.latest).to.equal(null);
    });

    it("a tick skips signing when a request refreshed the proof less than half an interval ago", async function () {
      this.timeout(10_000);
      // 1 s ticks: start() signs at t0, a request refreshes at ~t0 + 700 ms, the tick at ~t0 + 1 s finds a
      // 300 ms old proof (< 500 ms) and skips; the proofs by ~t0 + 1.3 s are the first and the refreshed one.
      const { attestor } = await setup({ tickIntervalNs: 1_000_000_000n, refreshAfterNs: 1_000_000n });
      attestor.start();
      running.push(attestor);
      expect(attestor.stats().attestationsTotal).to.equal(1);
      await new Promise((resolve) => setTimeout(resolve, 700));
      attestor.current();
      expect(attestor.stats().attestationsTotal).to.equal(2);
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(attestor.stats().attestationsTotal).to.equal(2);
    });
  });

  it("does not start attesting with a card that is already tampered", async () => {
    const { attestor, card } = await setup();
    card.simulateTamper("tampered before start");
    attestor.start();
    running.push(attestor);
    expect(attestor.tamperReason).to.equal("tampered before start");
    expect(() => attestor.current()).to.throw(UnavailableError, "tampered before start");
  });
});
