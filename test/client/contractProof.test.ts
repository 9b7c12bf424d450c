/**
 * contractProofFromJson (client/contractProof.ts): a proof's REST JSON → the `TimeProof` struct viem passes to the
 * contracts, byte for byte the ABI encoding protocol/codec.ts gives (which the golden vectors pin to the contract).
 */
import { expect } from "chai";
import { decodeFunctionData, encodeAbiParameters, encodeFunctionData, parseAbiParameters } from "viem";
import { iTimeOracleAbi } from "../../abi";
import { encodeTimeProof } from "../../protocol/codec";
import { ValidationError } from "../../protocol/errors";
import { contractProofFromJson as fromBrowserEntry } from "../../client/browser";
import { contractProofFromJson } from "../../client";
import { startTestNode, type TestNode } from "../node/api/helpers";


describe("client contractProofFromJson", function () {
  this.timeout(30_000);
  let t: TestNode;
  before(async function () {
    t = await startTestNode();
  });
  after(async function () {
    await t?.close();
  });

  it("is one function, exported by the Node and the browser entries", function () {
    expect(fromBrowserEntry).to.equal(contractProofFromJson);
  });

  it("turns the node's GET /time/current body (text or parsed) into the struct viem encodes exactly as the codec", async function () {
    const text = await (await fetch(`${t.node.endpoints.rest}/time/current`)).text();
    const proof = contractProofFromJson(text);
    expect(contractProofFromJson(JSON.parse(text))).to.deep.equal(proof);
    const json = JSON.parse(text) as { nanoMoment: string; proof: { hardwareSignature: string; nodeSignature: string; accuracyNs: number } };
    expect(proof).to.deep.equal({
      nanoMoment: BigInt(json.nanoMoment),
      hardwareSignature: json.proof.hardwareSignature,
      nodeSignature: json.proof.nodeSignature,
      accuracy: json.proof.accuracyNs,
    });
    const viemEncoding = encodeAbiParameters(parseAbiParameters("(uint128 nanoMoment, bytes hardwareSignature, bytes nodeSignature, uint32 accuracy)"), [proof]);
    expect(viemEncoding).to.equal(encodeTimeProof(proof));
    const call = encodeFunctionData({ abi: iTimeOracleAbi, functionName: "verifyTimeProof", args: [proof] });
    expect(decodeFunctionData({ abi: iTimeOracleAbi, data: call }).args).to.deep.equal([proof]);
  });

  it("refuses what the strict reader refuses, naming the field", function () {
    const body = t.service.current().json;
    const cases: [unknown, RegExp][] = [
      [{ ...body, nanoMoment: Number(body.nanoMoment) }, /nanoMoment/],
      [{ ...body, proof: { ...body.proof, hardwareSignature: `${body.proof.hardwareSignature}00` } }, /proof\.hardwareSignature/],
      [{ ...body, proof: { ...body.proof, accuracyNs: "50" } }, /proof\.accuracyNs/],
      [{ ...body, surplus: true }, /surplus/],
      ["{", /malformed JSON/],
    ];
    for (const [input, message] of cases) {
      expect(() => contractProofFromJson(input), JSON.stringify(input)).to.throw(ValidationError, message);
    }
  });
});
