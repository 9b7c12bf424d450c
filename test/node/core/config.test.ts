import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../../protocol/constants";
import { expect } from "chai";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { inspect } from "node:util";
import { ValidationError } from "../../../protocol/errors";
import { apiKeyMatches, hashApiKey } from "../../../lib/apiKeys";
import {
  describeSettings,
  loadConfig,
  redactedConfig,
  SETTINGS,
  signingErrorBoundNs,
} from "../../../node/config";
import { devIdentity, tempDir } from "./helpers";

function expectConfigError(run: () => unknown, field: string, ...fragments: string[]): ValidationError {
  let caught: unknown;
  try {
    run();
  } catch (error) {
    caught = error;
  }
  expect(caught, "expected a ValidationError").to.be.instanceOf(ValidationError);
  const error = caught as ValidationError;
  expect(error.field).to.equal(field);
  for (const fragment of fragments) expect(error.message).to.contain(fragment);
  return error;
}

describe("node config", () => {
  const dir = tempDir("config");
  after(() => dir.remove());

  it("has safe defaults: loopback host, 1 ms tick, 1 µs accuracy (what the dev card meets), on-chain verification bounds", () => {
    const config = loadConfig({ env: {} });
    expect(config.host).to.equal("127.0.0.1");
    expect(config.tickIntervalNs).to.equal(1_000_000n);
    expect(config.accuracyNs).to.equal(DEV_CARD_DRIVER_ACCURACY_NS); // what the dev card meets (docs/protocol.md §14.16)
    expect(config.maxAttestationAgeNs).to.equal(60_000_000_000n);
    expect(config.maxFutureDriftNs).to.equal(15_000_000_000n);
    expect(config.maxAcceptableDriftNs).to.equal(1_000n);
    expect(config.nodeQuorum).to.equal(1);
    expect(config.apiKeys).to.deep.equal([]);
    expect(Object.isFrozen(config)).to.equal(true);
  });

  it("declares every setting once with an ATS_* env variable (MAX_REQUESTS_PER_SECOND as an alias, as the issue names it)", () => {
    const envs = describeSettings().flatMap((setting) => [setting.env, ...setting.envAliases]);
    expect(new Set(envs).size).to.equal(envs.length);
    for (const setting of describeSettings()) expect(setting.env, setting.name).to.match(/^ATS_/);
    expect(SETTINGS.maxRequestsPerSecond.env).to.equal("ATS_MAX_REQUESTS_PER_SECOND");
    expect(describeSettings().find((setting) => setting.name === "maxRequestsPerSecond")?.envAliases).to.deep.equal(["MAX_REQUESTS_PER_SECOND"]);
    expect(describeSettings().find((setting) => setting.name === "apiKeys")?.secret).to.equal(true);
  });

  it("reads maxRequestsPerSecond from ATS_MAX_REQUESTS_PER_SECOND or MAX_REQUESTS_PER_SECOND, and refuses both set to different values", () => {
    expect(loadConfig({ env: { ATS_MAX_REQUESTS_PER_SECOND: "7" } }).maxRequestsPerSecond).to.equal(7);
    expect(loadConfig({ env: { MAX_REQUESTS_PER_SECOND: "9" } }).maxRequestsPerSecond).to.equal(9);
    expect(loadConfig({ env: { ATS_MAX_REQUESTS_PER_SECOND: "5", MAX_REQUESTS_PER_SECOND: "5" } }).maxRequestsPerSecond).to.equal(5);
    expectConfigError(
      () => loadConfig({ env: { ATS_MAX_REQUESTS_PER_SECOND: "5", MAX_REQUESTS_PER_SECOND: "50" } }),
      "config.maxRequestsPerSecond",
      'ATS_MAX_REQUESTS_PER_SECOND="5" and MAX_REQUESTS_PER_SECOND="50" are both set and differ',
      "set only one",
    );
    // Each is validated on its own, naming the variable it came from.
    expectConfigError(() => loadConfig({ env: { MAX_REQUESTS_PER_SECOND: "-1" } }), "config.maxRequestsPerSecond", "environment variable MAX_REQUESTS_PER_SECOND");
  });

  it("loads the sample config of docs/node.md (examples/node.config.json), its relative paths from the file's folder", () => {
    const root = join(__dirname, "..", "..", "..");
    const sample = join(root, "examples", "node.config.json");
    const config = loadConfig({ file: sample, env: {}, cwd: dir.path });
    expect(config.keyDir).to.equal(join(root, "examples", "keys")); // the file's folder, not the working directory
    expect(config.dataDir).to.equal(join(root, "examples", "data"));
    expect(config.restPort).to.equal(8080);
    expect(config.logFormat).to.equal("json");
    // From the environment, a relative path resolves against the working directory.
    expect(loadConfig({ file: sample, env: { ATS_DATA_DIR: "./state" }, cwd: dir.path }).dataDir).to.equal(join(dir.path, "state"));
    // docs/node.md ("Node configuration") shows the same file, byte for byte.
    expect(readFileSync(join(root, "docs", "node.md"), "utf8")).to.contain(readFileSync(sample, "utf8").trim());
  });

  it("reads a JSON file, and the environment overrides the file", () => {
    const file = join(dir.path, "node.json");
    writeFileSync(file, JSON.stringify({ restPort: 9000, tickIntervalNs: "2000000", dataDir: "./state", accuracyNs: 80 }));
    const config = loadConfig({ file, env: { ATS_REST_PORT: "9100", MAX_REQUESTS_PER_SECOND: "7" } });
    expect(config.restPort).to.equal(9100);
    expect(config.tickIntervalNs).to.equal(2_000_000n);
    expect(config.accuracyNs).to.equal(80);
    expect(config.maxRequestsPerSecond).to.equal(7);
    expect(config.dataDir).to.equal(join(dir.path, "state")); // relative to the file's folder
  });

  it("rejects a value out of bounds, naming the setting, the source and the bound", () => {
    expectConfigError(() => loadConfig({ env: { ATS_TICK_INTERVAL_NS: "5" } }), "config.tickIntervalNs", "between 100000 and", "ATS_TICK_INTERVAL_NS");
    expectConfigError(() => loadConfig({ env: { ATS_REST_PORT: "70000" } }), "config.restPort", "between 0 and 65535");
    expectConfigError(() => loadConfig({ env: { ATS_REST_PORT: "12abc" } }), "config.restPort", "must be an integer");
    expectConfigError(() => loadConfig({ env: { ATS_LOG_LEVEL: "loud" } }), "config.logLevel", "one of");
    expectConfigError(() => loadConfig({ env: { ATS_MAX_ATTESTATION_AGE_NS: "-1" } }), "config.maxAttestationAgeNs", "decimal");
  });

  it("rejects unknown keys and malformed JSON in the file", () => {
    const typo = join(dir.path, "typo.json");
    writeFileSync(typo, JSON.stringify({ restport: 1 }));
    expectConfigError(() => loadConfig({ file: typo, env: {} }), "config.file", "unknown settings: restport");
    const broken = join(dir.path, "broken.json");
    writeFileSync(broken, "{ not json");
    expectConfigError(() => loadConfig({ file: broken, env: {} }), "config.file", "not valid JSON");
    expectConfigError(() => loadConfig({ file: join(dir.path, "missing.json"), env: {} }), "config.file", "does not exist");
  });

  it("rejects a ns value from the file that a JSON number cannot hold exactly", () => {
    const file = join(dir.path, "big.json");
    writeFileSync(file, '{ "maxAttestationAgeNs": 90071992547409930 }');
    expectConfigError(() => loadConfig({ file, env: {} }), "config.maxAttestationAgeNs", "decimal");
  });

  it("checks rules across settings (the node never signs an accuracy it does not meet)", () => {
    expectConfigError(
      () => loadConfig({ env: { ATS_ACCURACY_NS: "50", ATS_MAX_MEASURED_ERROR_NS: "60" } }),
      "config.maxMeasuredErrorNs",
      "must not exceed accuracyNs",
    );
    expect(signingErrorBoundNs(loadConfig({ env: {} }))).to.equal(DEV_CARD_DRIVER_ACCURACY_NS);
    expect(signingErrorBoundNs(loadConfig({ env: { ATS_MAX_MEASURED_ERROR_NS: "20" } }))).to.equal(20);
    expectConfigError(
      () => loadConfig({ env: { ATS_WS_MIN_INTERVAL_NS: "2000000000", ATS_WS_MAX_INTERVAL_NS: "1000000000" } }),
      "config.wsMinIntervalNs",
    );
    // A request refreshes the proof by signing in the serving thread: a signer thread 'on' would silently drop it.
    expectConfigError(
      () => loadConfig({ env: { ATS_SIGNER_THREAD: "on", ATS_REFRESH_AFTER_NS: "1000000" } }),
      "config.signerThread",
      "cannot be combined with refreshAfterNs",
    );
    expect(loadConfig({ env: { ATS_SIGNER_THREAD: "off", ATS_REFRESH_AFTER_NS: "1000000" } }).signerThread).to.equal("off");
    expect(loadConfig({ env: {} }).signerThread).to.equal("auto");
    expectConfigError(() => loadConfig({ env: { ATS_SIGNER_THREAD: "yes" } }), "config.signerThread");
  });

  it("keeps only SHA-256 hashes of API keys, compares them in constant time, and redacts them in logs", () => {
    const key = "a-long-enough-api-key-123";
    const config = loadConfig({ env: { ATS_API_KEYS: `${key},sha256:${hashApiKey("another-key-0123456").toString("hex")}` } });
    expect(config.apiKeys).to.have.length(2);
    expect(inspect(config, { depth: 5 })).not.to.contain(key);
    expect(apiKeyMatches(config.apiKeys, key)).to.equal(true);
    expect(apiKeyMatches(config.apiKeys, "another-key-0123456")).to.equal(true);
    expect(apiKeyMatches(config.apiKeys, `${key}x`)).to.equal(false);
    const redacted = redactedConfig(config);
    expect(redacted.apiKeys).to.equal("[redacted: 2 entries]");
    expect(JSON.stringify(redacted)).not.to.contain(key);
    expect(redacted.tickIntervalNs).to.equal("1000000");
  });

  it("never echoes a secret in an error", () => {
    const error = expectConfigError(() => loadConfig({ env: { ATS_API_KEYS: "short-secret" } }), "config.apiKeys", "at least 16");
    expect(error.message).not.to.contain("short-secret");
  });

  it("loads trusted roots from PEM files and validates client keys and addresses", async () => {
    const identity = await devIdentity();
    const rootFile = join(dir.path, "root.pem");
    writeFileSync(rootFile, identity.ca.certificatePem);
    const config = loadConfig({
      env: { ATS_TRUSTED_ROOTS: rootFile, ATS_CLIENT_PUBLIC_KEYS: JSON.stringify({ alice: identity.nodeAddress }) },
    });
    expect(config.trustedRootsPem[0]).to.contain("BEGIN CERTIFICATE");
    expect(config.clientPublicKeys.alice).to.equal(identity.nodeAddress);
    expectConfigError(() => loadConfig({ env: { ATS_TRUSTED_ROOTS: join(dir.path, "nope.pem") } }), "config.trustedRootsPem", "cannot read");
    expectConfigError(() => loadConfig({ env: { ATS_CLIENT_PUBLIC_KEYS: '{"bob":"0x12"}' } }), "config.clientPublicKeys", "20-byte");
    expectConfigError(() => loadConfig({ env: { ATS_CLIENT_PUBLIC_KEYS: "[1,2]" } }), "config.clientPublicKeys", "JSON object");
  });
});
