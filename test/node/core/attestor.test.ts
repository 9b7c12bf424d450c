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

  it("does not start attesting with a card that is already tampered", async () => {
    const { attestor, card } = await setup();
    card.simulateTamper("tampered before start");
    attestor.start();
    running.push(attestor);
    expect(attestor.tamperReason).to.equal("tampered before start");
    expect(() => attestor.current()).to.throw(UnavailableError, "tampered before start");
  });
});
