import { expect } from "chai";
import { Attestor } from "../../../node/core/attestor";
import { localProof, soloCoSigning, type LocalAttestation } from "../../../node/core/cosign";
import { buildSignedTime } from "../../../node/core/signedTime";
import type { SignedTime } from "../../../node/core/types";
import { NODE_ENTRY_LENGTH } from "../../../protocol/constants";
import { attestorSetup } from "./helpers";

describe("co-signing stage (node/core/cosign.ts)", () => {
  it("the attestor hands each local attestation to its stage once, and serves what the stage returns", async () => {
    const locals: LocalAttestation[] = [];
    const served: SignedTime[] = [];
    const solo = soloCoSigning();
    const { options, verifyAt, identity } = await attestorSetup({
      coSigning: (local) => {
        locals.push(local);
        const signed = solo(local);
        served.push(signed);
        return signed;
      },
    });
    const attestor = new Attestor(options);
    const signed = attestor.attest();
    expect(locals).to.have.length(1);
    expect(served[0]).to.equal(signed);
    expect(attestor.latest).to.equal(signed);

    const local = locals[0]!;
    expect((local.nodeEntry.length - 2) / 2).to.equal(NODE_ENTRY_LENGTH); // this node's entry only
    expect(local.hardwareSignature.slice(2, 66)).to.equal(identity.cardId.slice(2));
    expect(signed.producedAtNs).to.equal(local.producedAtNs);
    expect(verifyAt(signed.proof)).to.deep.include({ valid: true, nodes: [identity.nodeAddress] });
  });

  it("solo co-signing is a pass-through: the served proof is the local attestation, byte for byte", async () => {
    const { options, verifyAt } = await attestorSetup();
    const attestor = new Attestor(options); // default stage: solo
    const signed = attestor.attest();
    const local: LocalAttestation = {
      nanoMoment: signed.proof.nanoMoment,
      hardwareSignature: signed.proof.hardwareSignature,
      accuracy: signed.proof.accuracy,
      nodeEntry: signed.proof.nodeSignature,
      producedAtNs: signed.producedAtNs,
      gps: signed.json.proof.gps,
    };
    expect(localProof(local)).to.deep.equal(signed.proof);
    const again = soloCoSigning()(local);
    expect(again.body).to.equal(signed.body);
    expect(again).to.deep.equal(buildSignedTime(signed.proof, signed.producedAtNs, signed.json.proof.gps));
    expect(Object.isFrozen(again) && Object.isFrozen(again.proof)).to.equal(true);
    expect(verifyAt(again.proof).valid).to.equal(true);
  });
});
