/**
 * Registry token authentication (upgrade/registryAuth.ts through upgrade/registry.ts's resolveImage) against the
 * loopback registry (test/upgrade/registryServer.ts: 127.0.0.1, a free port, closed in after() also when a test
 * fails) with its token endpoint:
 *
 * - an anonymous token: 401 with a Bearer challenge, a token from the realm without credentials, the request
 *   again with it, and the token kept for the config blob;
 * - basic-auth credentials for the token, from a file or an environment variable the plan names;
 * - a wrong credential, and none where one is needed, refused with a clear error holding no secret;
 * - a realm on a disallowed scheme (not https, not loopback http) refused without contacting it;
 * - a token reply too large, or holding no usable token, refused.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UpgradeRefusal } from "../../upgrade/errors";
import type { ImageArtifact } from "../../upgrade/plan";
import { resolveImage } from "../../upgrade/registry";
import { fetchToken, MAX_TOKEN_REPLY_BYTES, parseBearerChallenge } from "../../upgrade/registryAuth";
import { rejection } from "./helpers";
import { LoopbackRegistry, REPOSITORY, REVISION_B, testImage, TOKEN_SERVICE } from "./registryServer";

const PASSWORD = "s3cr3t-Registry-pw";
const CREDENTIALS = `agent:${PASSWORD}`;

describe("upgrade: registry token authentication", function () {
  this.timeout(30_000);
  const registry = new LoopbackRegistry();
  const image = testImage(REVISION_B, "0.1.1");
  let root: string;
  const artifact = (credentials?: ImageArtifact["credentials"]): ImageArtifact => ({ kind: "image", registry: registry.url, repository: REPOSITORY, tag: "0.1.1", digest: image.digest, ...(credentials === undefined ? {} : { credentials }) });
  /** A credentials file holding `line`. */
  const credentialsFile = (line: string) => {
    const file = join(root, "registry-credentials");
    writeFileSync(file, `${line}\n`, { mode: 0o600 });
    return { file };
  };
  const trail = () => registry.requests.map((request) => `${request.path.split("?")[0]} ${request.authorization || "-"}`);
  /** The refusal, which must name neither the password nor the credentials' base64, nor any token issued. */
  async function refused(promise: Promise<unknown>, pattern: RegExp): Promise<UpgradeRefusal> {
    const error = await rejection(promise, UpgradeRefusal, pattern);
    expect(error.code).to.equal("fetch-failed");
    const text = `${error.message} ${JSON.stringify(error.evidence)}`;
    for (const secret of [PASSWORD, Buffer.from(CREDENTIALS).toString("base64"), ...registry.tokens]) expect(text).not.to.include(secret);
    // The message becomes the receipt's refusal: it must pass the receipt's free-text rule (upgrade/receipt.ts).
    expect(error.message).not.to.match(/[Pp]rivate|[Ss]ecret|[Pp]assword|[Mm]nemonic|[Kk]eystore|[0-9a-fA-F]{32}/);
    return error;
  }

  before(async () => {
    await registry.start();
    registry.publish("0.1.1", image);
  });
  after(() => registry.close());
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ats-registry-auth-"));
    registry.requests.length = 0;
    registry.tokens.length = 0;
  });
  afterEach(() => {
    registry.auth = undefined;
    rmSync(root, { recursive: true, force: true });
  });

  it("parses Bearer challenges (quoted and bare parameters) and nothing else", () => {
    expect(parseBearerChallenge(`Bearer realm="https://auth.example/token",service="registry.example",scope="repository:ats/node:pull"`)).to.deep.equal({ realm: "https://auth.example/token", service: "registry.example", scope: "repository:ats/node:pull" });
    expect(parseBearerChallenge("bearer realm=https://auth.example/token")).to.deep.equal({ realm: "https://auth.example/token", service: null, scope: null });
    expect(parseBearerChallenge('Basic realm="registry"')).to.equal(null);
    expect(parseBearerChallenge('Bearer service="x"')).to.equal(null);
    expect(parseBearerChallenge(null)).to.equal(null);
  });

  it("gets an anonymous token on a 401 challenge, asks again with it, and keeps it for the config blob", async () => {
    registry.auth = { credentials: null };
    const resolved = await resolveImage(artifact(), REVISION_B);
    expect(resolved.digest).to.equal(image.digest);
    expect(trail()).to.deep.equal([`/v2/${REPOSITORY}/manifests/0.1.1 -`, "/token -", `/v2/${REPOSITORY}/manifests/0.1.1 Bearer`, `/v2/${REPOSITORY}/blobs/${image.configDigest} Bearer`]);
    expect(registry.requests[1]!.path).to.equal(`/token?service=${TOKEN_SERVICE}&scope=repository%3A${REPOSITORY.replace("/", "%2F")}%3Apull`);
    expect(registry.tokens).to.have.length(1);
  });

  it("sends basic-auth credentials from the plan's file, or its environment variable, to the realm only", async () => {
    registry.auth = { credentials: CREDENTIALS };
    expect((await resolveImage(artifact(credentialsFile(CREDENTIALS)), REVISION_B)).digest).to.equal(image.digest);
    expect(trail()).to.deep.equal([`/v2/${REPOSITORY}/manifests/0.1.1 -`, "/token Basic", `/v2/${REPOSITORY}/manifests/0.1.1 Bearer`, `/v2/${REPOSITORY}/blobs/${image.configDigest} Bearer`]);
    registry.requests.length = 0;
    const resolved = await resolveImage(artifact({ env: "ATS_TEST_REGISTRY_CREDENTIALS" }), REVISION_B, { credentialsEnv: { ATS_TEST_REGISTRY_CREDENTIALS: CREDENTIALS } });
    expect(resolved.digest).to.equal(image.digest);
    expect(trail()[1]).to.equal("/token Basic");
  });

  it("refuses a wrong credential, and a missing one, with a clear error that holds no secret", async () => {
    registry.auth = { credentials: CREDENTIALS };
    const file = credentialsFile("agent:wrong-password");
    const wrong = await refused(resolveImage(artifact(file), REVISION_B), /token realm http:\/\/127\.0\.0\.1:\d+ of registry .* \(with the credentials file .*registry-credentials\): GET \/token answered 401: the credentials were refused$/);
    expect(wrong.message).not.to.include("wrong-password");
    await refused(resolveImage(artifact(), REVISION_B), /\(anonymous\): GET \/token answered 401: anonymous access refused; name credentials in the plan \(artifact\.credentials\)$/);
    await refused(resolveImage(artifact({ env: "ATS_TEST_UNSET" }), REVISION_B, { credentialsEnv: {} }), /^environment variable ATS_TEST_UNSET is not set$/);
    await refused(resolveImage(artifact(credentialsFile(PASSWORD)), REVISION_B), /credentials file .* does not hold one line of the form user:pass$/);
    expect(registry.tokens).to.deep.equal([]);
  });

  it("refuses a realm that is not https or loopback http, without contacting it", async () => {
    for (const [realm, shown] of [
      ["ftp://127.0.0.1:1/token", "ftp://127.0.0.1:1"],
      ["http://registry-auth.invalid/token", "http://registry-auth.invalid"],
    ] as const) {
      registry.auth = { credentials: CREDENTIALS, realm };
      registry.requests.length = 0;
      await refused(resolveImage(artifact(credentialsFile(CREDENTIALS)), REVISION_B), new RegExp(`token realm ${shown.replace(/[.]/g, "\\.")} is neither https nor loopback http: credentials and tokens are not sent there$`));
      expect(trail()).to.deep.equal([`/v2/${REPOSITORY}/manifests/0.1.1 -`]);
    }
    registry.auth = { credentials: null, realm: `http://agent:${PASSWORD}@127.0.0.1:1/token` };
    await refused(resolveImage(artifact(), REVISION_B), /carries credentials in its URL$/);
  });

  it("sends no credentials to a realm named by a registry reached over plain http off this machine", async () => {
    // An answer over plain http can be forged on the path, realm included: the secret would go to whoever forged it.
    const error = await rejection(
      fetchToken({
        challenge: { realm: "https://realm.invalid/token", service: null, scope: null },
        registryOrigin: "http://registry.invalid",
        credentials: { basic: "c2VjcmV0", from: "credentials file /etc/ats/registry" },
        timeoutMs: 1_000,
      }),
      UpgradeRefusal,
      /its token challenge came over plain http, so its realm is not trusted with the credentials file \/etc\/ats\/registry$/,
    );
    expect(error.message).to.not.contain("c2VjcmV0");
  });

  it("refuses a token reply larger than its bound, or one without a usable token", async () => {
    registry.auth = { credentials: null, tokenReply: Buffer.from(JSON.stringify({ token: "t".repeat(MAX_TOKEN_REPLY_BYTES) })) };
    await refused(resolveImage(artifact(), REVISION_B), new RegExp(`\\(anonymous\\): /token exceeds ${MAX_TOKEN_REPLY_BYTES} bytes$`));
    registry.auth = { credentials: null, tokenReply: Buffer.from(JSON.stringify({ token: "abc\r\nX-Injected: 1" })) };
    await refused(resolveImage(artifact(), REVISION_B), /the reply holds no usable token/);
    // The registry still refuses: no token of its own was issued, so the one in the reply is not its.
    registry.auth = { credentials: null, tokenReply: Buffer.from(JSON.stringify({ access_token: "not-issued-by-the-registry" })) };
    await refused(resolveImage(artifact(), REVISION_B), /GET \/v2\/ats\/node\/manifests\/0\.1\.1 answered 401 again with the token from its realm$/);
  });
});
