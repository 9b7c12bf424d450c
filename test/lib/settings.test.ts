/**
 * lib/settings.ts as another program (a relayer, say) would use it: its own table over the base settings.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ValidationError } from "../../protocol/errors";
import { BASE_SETTINGS, defineSettings, setting } from "../../lib/settings";

const RELAYER_SETTINGS = {
  rpcUrl: setting({ kind: "string", env: "RELAYER_RPC_URL", description: "Chain JSON-RPC URL.", default: "http://127.0.0.1:8545", secret: false }),
  submitterKey: setting({ kind: "string", env: "RELAYER_KEY", description: "Submitter key.", default: "", secret: true }),
  minBatch: setting({ kind: "integer", env: "RELAYER_MIN_BATCH", description: "Smallest batch.", default: 1, min: 1, max: 100, secret: false }),
  maxBatch: setting({ kind: "integer", env: "RELAYER_MAX_BATCH", description: "Largest batch.", default: 10, min: 1, max: 100, secret: false }),
  ...BASE_SETTINGS,
} as const;

const relayer = defineSettings(RELAYER_SETTINGS, {
  checkCrossFieldRules: (values, fail) => {
    if (values.minBatch > values.maxBatch) fail("minBatch", `must not exceed maxBatch (${values.maxBatch})`, values.minBatch);
  },
});

describe("lib/settings: a program's own table over the base", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-settings-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("loads defaults, then the file, then the environment, typed per kind, base settings included", () => {
    const file = join(dir, "relayer.json");
    writeFileSync(file, JSON.stringify({ maxBatch: 20, logLevel: "debug" }));
    const values = relayer.load({ file, env: { RELAYER_MAX_BATCH: "30" } });
    expect(values).to.include({ rpcUrl: "http://127.0.0.1:8545", minBatch: 1, maxBatch: 30, logLevel: "debug", logFormat: "json" });
    expect(relayer.names).to.deep.equal(["rpcUrl", "submitterKey", "minBatch", "maxBatch", "logLevel", "logFormat"]);
  });

  it("names the setting, the source and the bound in every error, and runs the program's cross-field rules", () => {
    expect(() => relayer.load({ env: { RELAYER_MAX_BATCH: "500" } })).to.throw(
      ValidationError,
      "config.maxBatch: must be between 1 and 100 (got \"500\"), from environment variable RELAYER_MAX_BATCH",
    );
    const file = join(dir, "typo.json");
    writeFileSync(file, JSON.stringify({ maxBacth: 2 }));
    expect(() => relayer.load({ file })).to.throw(ValidationError, "has unknown settings: maxBacth");
    expect(() => relayer.load({ overrides: { minBatch: 5, maxBatch: 2 } })).to.throw(ValidationError, "config.minBatch: must not exceed maxBatch (2)");
  });

  it("hides secrets in the description and the redacted view", () => {
    const values = relayer.load({ env: { RELAYER_KEY: "0xsecret-key-material" } });
    expect(JSON.stringify(relayer.redact(values))).to.not.contain("secret-key-material");
    expect(relayer.describe().find((entry) => entry.name === "submitterKey")).to.include({ env: "RELAYER_KEY", secret: true });
  });
});
