import { expect } from "chai";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthError, NotFoundError, ValidationError } from "../../../protocol/errors";
import { loadConfig } from "../../../node/config";
import { MAX_PIN_FILE_BYTES, readTokenPin } from "../../../node/keysource/pkcs11";

/** What a node with both keys in a token sets (no SoftHSM needed: nothing here opens the token). */
const TOKEN_ENV = {
  ATS_CARD_KEY_SOURCE: "pkcs11",
  ATS_NODE_KEY_SOURCE: "pkcs11",
  ATS_PKCS11_MODULE: "/usr/lib/softhsm/libsofthsm2.so",
  ATS_PKCS11_TOKEN_LABEL: "ats",
};

function refusal(env: NodeJS.ProcessEnv): string {
  try {
    loadConfig({ env });
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return (error as Error).message;
  }
  throw new Error("the configuration was accepted");
}

describe("PKCS#11 key source: settings and PIN", () => {
  it("keys come from keyDir by default; a token configuration loads with its module and label", () => {
    const defaults = loadConfig({ env: {} });
    expect([defaults.cardKeySource, defaults.nodeKeySource, defaults.pkcs11PinEnv, defaults.pkcs11SlotId]).to.deep.equal(["file", "file", "ATS_PKCS11_PIN", -1]);
    const config = loadConfig({ env: TOKEN_ENV });
    expect([config.cardKeySource, config.nodeKeySource, config.pkcs11CardKeyLabel, config.pkcs11NodeKeyLabel]).to.deep.equal(["pkcs11", "pkcs11", "ats-card", "ats-node"]);
  });

  it("refuses a token configuration without a module, or naming the token both by label and slot, or by neither", () => {
    expect(refusal({ ...TOKEN_ENV, ATS_PKCS11_MODULE: "" })).to.contain("pkcs11Module");
    expect(refusal({ ...TOKEN_ENV, ATS_PKCS11_SLOT_ID: "7" })).to.contain("exactly one of pkcs11TokenLabel and pkcs11SlotId");
    expect(refusal({ ...TOKEN_ENV, ATS_PKCS11_TOKEN_LABEL: "" })).to.contain("exactly one of pkcs11TokenLabel and pkcs11SlotId");
    expect(refusal({ ...TOKEN_ENV, ATS_PKCS11_NODE_KEY_LABEL: "ats-card" })).to.contain("must differ from pkcs11CardKeyLabel");
  });

  it("refuses what a token node key cannot do: sign in the signer thread, serve a mesh", () => {
    expect(refusal({ ...TOKEN_ENV, ATS_SIGNER_THREAD: "on" })).to.contain("signerThread");
    const peer = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8@127.0.0.1:9000";
    expect(refusal({ ...TOKEN_ENV, ATS_MESH_PEERS: peer })).to.contain("cannot serve a mesh");
    // A card key in the token with the node key in a file is fine with both.
    expect(loadConfig({ env: { ...TOKEN_ENV, ATS_NODE_KEY_SOURCE: "file", ATS_SIGNER_THREAD: "on" } }).signerThread).to.equal("on");
  });

  it("the PIN is not a setting: a setting names its variable or its file", () => {
    expect(Object.keys(loadConfig({ env: TOKEN_ENV })).filter((name) => /pin$/i.test(name))).to.deep.equal([]);
    expect(readTokenPin({ pinFile: "", pinEnv: "HSM_PIN", env: { HSM_PIN: "1234" } })).to.equal("1234");
    expect(() => readTokenPin({ pinFile: "", pinEnv: "HSM_PIN", env: {} })).to.throw(AuthError, "HSM_PIN is not set");
  });

  describe("PIN file", () => {
    const dir = mkdtempSync(join(tmpdir(), "ats-pin-"));
    after(() => rmSync(dir, { recursive: true, force: true }));

    it("reads one line, drops the newline, and refuses a file others can read without quoting it", () => {
      const file = join(dir, "pin");
      writeFileSync(file, "s3cret-pin\n", { mode: 0o600 });
      expect(readTokenPin({ pinFile: file, pinEnv: "UNUSED", env: {} })).to.equal("s3cret-pin");
      chmodSync(file, 0o644);
      let message = "";
      expect(() => {
        try {
          readTokenPin({ pinFile: file, pinEnv: "UNUSED", env: {} });
        } catch (error) {
          message = `${(error as Error).message} ${JSON.stringify((error as AuthError).details)}`;
          throw error;
        }
      }).to.throw(AuthError, "chmod 600");
      expect(message).to.contain("644").and.not.contain("s3cret-pin");
    });

    it("refuses a missing, empty or oversized file", () => {
      expect(() => readTokenPin({ pinFile: join(dir, "absent"), pinEnv: "UNUSED", env: {} })).to.throw(NotFoundError);
      const empty = join(dir, "empty");
      writeFileSync(empty, "\n", { mode: 0o600 });
      expect(() => readTokenPin({ pinFile: empty, pinEnv: "UNUSED", env: {} })).to.throw(ValidationError, "is empty");
      const big = join(dir, "big");
      writeFileSync(big, "x".repeat(MAX_PIN_FILE_BYTES + 1), { mode: 0o600 });
      expect(() => readTokenPin({ pinFile: big, pinEnv: "UNUSED", env: {} })).to.throw(ValidationError, "not a PIN");
    });
  });
});
