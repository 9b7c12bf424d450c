/**
 * Keys in a PKCS#11 token (issue 26.3), against SoftHSM2 (Debian `softhsm2`) in a temporary token folder
 * (SOFTHSM2_CONF names a config whose directories.tokendir is a private temporary folder: the machine's tokens are
 * never touched):
 *
 * - `ats-node keys init <dir> --pkcs11` (the built CLI, a child process) provisions the token: both keys generated in
 *   it, the card's certificate chain and the trusted root written to <dir>;
 * - `ats-node start` (a child process, 127.0.0.1, free ports) runs on the token keys: cardKeySource and nodeKeySource
 *   'pkcs11', the PIN from a mode-600 file;
 * - its proofs verify with the reference verifier (protocol/verify.ts) and on-chain (scripts/deploy.ts on the
 *   in-process Hardhat chain, the card and node registered), and every signature in them is low-S (a token makes
 *   high-S signatures about half the time: 16 proofs make missing normalisation all but certain to show);
 * - the keys cannot leave the token: C_GetAttributeValue(CKA_VALUE) fails with CKR_ATTRIBUTE_SENSITIVE, asked
 *   through pkcs11js directly (not through the node's own module), and CKA_EXTRACTABLE is false, CKA_SENSITIVE true.
 *
 * Every process started here is stopped in after(), also on failure; the temporary folder is removed.
 */
import hre from "hardhat";
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Address, Hex } from "viem";
import { P256_HALF_N, SECP256K1_HALF_N } from "../protocol/constants";
import { proofFromJson } from "../protocol/json";
import type { TimeProof } from "../protocol/types";
import { createVerifyContext, verifyTimeProof } from "../protocol/verify";
import { deployAttestedTime } from "../deploy";
import { startNodeProcess, stopNodeProcess, type NodeProcess } from "../scripts/nodeProcess";
import { SOFTHSM2_MODULE } from "../scripts/test-system";
import { ATS_NODE_BIN, provisionToken, run, type Provisioned } from "./softhsm";

const TOKEN_LABEL = "ats-system-test";
const USER_PIN = "4711-system-test";
const PROOFS_CHECKED = 16;

/** r ‖ s of the proof's hardware signature and of each node entry, with s as a number. */
function sValues(proof: TimeProof): { cardS: bigint; nodeS: bigint[] } {
  const cardS = BigInt(`0x${proof.hardwareSignature.slice(2 + 64 * 2)}`);
  const entries = proof.nodeSignature.slice(2).match(/.{160}/g) ?? [];
  // entry: nodeTimestamp (16) ‖ r (32) ‖ yParityAndS (32); s is yParityAndS without bit 255.
  const nodeS = entries.map((entry) => BigInt(`0x${entry.slice(96)}`) & ((1n << 255n) - 1n));
  return { cardS, nodeS };
}

describe("PKCS#11 token keys (SoftHSM2): provision, serve, verify off- and on-chain, never export", function () {
  // Generous: bin/ats-node.js first builds dist/ when the sources are newer (test:system builds it before, so in CI
  // the children start at once; a working tree being edited meanwhile costs a tsc run per child).
  this.timeout(600_000);
  const dir = mkdtempSync(join(tmpdir(), "ats-pkcs11-"));
  let configFile = "";
  let env: NodeJS.ProcessEnv = {};
  const previousSofthsmConf = process.env.SOFTHSM2_CONF;
  let node: NodeProcess | undefined;
  let provisioned: Provisioned;

  before(async () => {
    const token = await provisionToken(dir, TOKEN_LABEL, USER_PIN);
    ({ provisioned, configFile, env } = token);
    // The node child inherits this process's environment (scripts/nodeProcess.ts): the token folder goes there.
    process.env.SOFTHSM2_CONF = token.softhsmConf;
    node = await startNodeProcess(configFile, 300_000);
  });

  after(async () => {
    await stopNodeProcess(node);
    if (previousSofthsmConf === undefined) delete process.env.SOFTHSM2_CONF;
    else process.env.SOFTHSM2_CONF = previousSofthsmConf;
    rmSync(dir, { recursive: true, force: true });
  });

  it("keys init --pkcs11 prints the card and node identities and refuses to provision the same labels twice", async () => {
    expect(provisioned.cardId).to.match(/^0x[0-9a-f]{64}$/);
    expect(provisioned.cardPublicKey).to.match(/^0x04[0-9a-f]{128}$/);
    expect(provisioned.nodeAddress).to.match(/^0x[0-9a-fA-F]{40}$/);
    const again = await run(process.execPath, [ATS_NODE_BIN, "keys", "init", join(dir, "keys-again"), "--pkcs11", "--config", configFile], { env }).then(
      () => null,
      (error: { code: number; stderr: string }) => error,
    );
    expect(again?.code).to.equal(1);
    expect(again?.stderr).to.contain(`already holds a key labelled "${provisioned.token.cardKeyLabel}"`);
  });

  it("serves proofs signed through the token that verify with the reference verifier and on-chain, all low-S", async () => {
    const info = (await (await fetch(`${node!.rest}/node/info`)).json()) as { nodeId: Address; cardId: Hex };
    expect(info).to.include({ nodeId: provisioned.nodeAddress, cardId: provisioned.cardId });

    const proofs: TimeProof[] = [];
    let lastMoment = 0n;
    while (proofs.length < PROOFS_CHECKED) {
      const { proof } = proofFromJson(await (await fetch(`${node!.rest}/time/current`)).json());
      if (proof.nanoMoment === lastMoment) {
        await new Promise((resolve) => setTimeout(resolve, 2));
        continue;
      }
      lastMoment = proof.nanoMoment;
      proofs.push(proof);
    }
    const context = createVerifyContext({
      cards: { [provisioned.cardId]: { publicKey: provisioned.cardPublicKey, revoked: false } },
      nodes: [provisioned.nodeAddress],
      nowNs: BigInt(Date.now()) * 1_000_000n,
    });
    for (const proof of proofs) {
      expect(verifyTimeProof(proof, context)).to.deep.equal({ valid: true, cardId: provisioned.cardId, nodes: [provisioned.nodeAddress] });
      const { cardS, nodeS } = sValues(proof);
      expect(cardS <= P256_HALF_N, "card signature low-S").to.equal(true);
      expect(nodeS).to.have.length(1);
      expect(nodeS[0]! <= SECP256K1_HALF_N, "node signature low-S").to.equal(true);
    }

    const deployment = await deployAttestedTime(hre, {
      oracleContract: "TimeOracleHarness",
      cards: [{ publicKey: provisioned.cardPublicKey }],
      nodes: [{ address: provisioned.nodeAddress }],
      scheduler: false,
      bridge: false,
      example: false,
    });
    expect(deployment.cardIds).to.deep.equal([provisioned.cardId]);
    const oracle = await hre.viem.getContractAt("TimeOracleHarness", deployment.oracle);
    await oracle.write.setNow([BigInt(Math.floor(Date.now() / 1000))]);
    for (const proof of proofs) expect(await oracle.read.verifyTimeProof([proof])).to.equal(true);
    // The same proof with one byte of the token's card signature changed is refused: the check is not vacuous.
    const tampered = { ...proofs[0]!, hardwareSignature: `${proofs[0]!.hardwareSignature.slice(0, -2)}00` as Hex };
    if (tampered.hardwareSignature === proofs[0]!.hardwareSignature) tampered.hardwareSignature = `${proofs[0]!.hardwareSignature.slice(0, -2)}01` as Hex;
    expect(await oracle.read.verifyTimeProof([tampered])).to.equal(false);
  });

  it("the keys cannot leave the token: CKA_VALUE is refused, CKA_EXTRACTABLE false, CKA_SENSITIVE true", () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the optional binding, loaded as the node loads it
    const pkcs11js = require("pkcs11js") as typeof import("pkcs11js");
    const p11 = new pkcs11js.PKCS11();
    p11.load(SOFTHSM2_MODULE);
    p11.C_Initialize();
    try {
      const slot = p11.C_GetSlotList(true).find((candidate) => p11.C_GetTokenInfo(candidate).label.trim() === TOKEN_LABEL);
      expect(slot, "the test token's slot").to.not.equal(undefined);
      const session = p11.C_OpenSession(slot!, pkcs11js.CKF_SERIAL_SESSION);
      p11.C_Login(session, pkcs11js.CKU_USER, USER_PIN);
      for (const label of [provisioned.token.cardKeyLabel, provisioned.token.nodeKeyLabel]) {
        p11.C_FindObjectsInit(session, [
          { type: pkcs11js.CKA_CLASS, value: pkcs11js.CKO_PRIVATE_KEY },
          { type: pkcs11js.CKA_LABEL, value: label },
        ]);
        const keys = p11.C_FindObjects(session, 2);
        p11.C_FindObjectsFinal(session);
        expect(keys, label).to.have.length(1);
        expect(() => p11.C_GetAttributeValue(session, keys[0]!, [{ type: pkcs11js.CKA_VALUE }]), label).to.throw(/CKR_ATTRIBUTE_SENSITIVE/);
        const [extractable, sensitive, neverExtractable] = p11.C_GetAttributeValue(session, keys[0]!, [
          { type: pkcs11js.CKA_EXTRACTABLE },
          { type: pkcs11js.CKA_SENSITIVE },
          { type: pkcs11js.CKA_NEVER_EXTRACTABLE },
        ]);
        expect([extractable?.value, sensitive?.value, neverExtractable?.value], label).to.deep.equal([Buffer.from([0]), Buffer.from([1]), Buffer.from([1])]);
      }
      p11.C_Logout(session);
      p11.C_CloseSession(session);
    } finally {
      p11.C_Finalize();
      p11.close();
    }
  });
});
