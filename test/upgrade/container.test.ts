/**
 * The container path (docs/upgrade.md §4, container): a small OCI registry on loopback (node:http on 127.0.0.1,
 * a free port, closed in after() also when a test fails) serves manifests and config blobs; a fake `systemctl`
 * first on PATH records every call, as the systemd tests do (no Docker on this machine).
 *
 * - resolve: a tag resolves to the approved digest with its revision label; a moved tag, a wrong revision label,
 *   tampered manifest or config bytes, a redirect, an oversized manifest and a multi-platform index are refused,
 *   each with its code;
 * - switch: the image file gets the digest (never the tag), the previous file is kept, only the node's service is
 *   restarted; a failed acceptance restores the previous digest, restarts, and runs the gates again;
 * - the agent's `run` refuses an image plan before touching anything (its gates check installs, not images).
 */
import { expect } from "chai";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runUpgrade } from "../../upgrade/agent";
import { formatImageEnv, readImageEnv, type ImageRecord } from "../../upgrade/containerEnv";
import { rollbackImage, switchImage, upgradeContainerNode } from "../../upgrade/containerSwitch";
import { createContainerUnit, type ContainerUnit } from "../../upgrade/containerUnit";
import { UpgradeRefusal } from "../../upgrade/errors";
import type { GateResult } from "../../upgrade/gates";
import { parsePlan, type ImageArtifact, type ImagePlan } from "../../upgrade/plan";
import { assertValueFree } from "../../upgrade/receipt";
import { resolveImage, REVISION_LABEL, VERSION_LABEL } from "../../upgrade/registry";
import { rejection } from "./helpers";

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
const REPOSITORY = "ats/node";
const REVISION_A = "a".repeat(40);
const REVISION_B = "b".repeat(40);
const RELEASE_A = "ats-node-0.1.0-aaaaaaaaaaaa";
const RELEASE_B = "ats-node-0.1.1-bbbbbbbbbbbb";

const digestOf = (bytes: Buffer) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

interface TestImage {
  manifest: Buffer;
  digest: string;
  config: Buffer;
  configDigest: string;
}

/** A one-platform image: a config blob with the revision (null: no labels) and version labels, and a manifest naming it. */
function testImage(revision: string | null, version: string): TestImage {
  const labels = revision === null ? {} : { Labels: { [REVISION_LABEL]: revision, [VERSION_LABEL]: version } };
  const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", config: labels, rootfs: { type: "layers", diff_ids: [] } }));
  const configDigest = digestOf(config);
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, config: { mediaType: OCI_CONFIG, digest: configDigest, size: config.length }, layers: [] }));
  return { manifest, digest: digestOf(manifest), config, configDigest };
}

interface ServedManifest {
  body: Buffer;
  /** The Docker-Content-Digest header; default the body's digest. */
  announced?: string;
  mediaType?: string;
  /** Answer a redirect to this URL instead. */
  redirectTo?: string;
}

/** The registry's routes: manifests by "<repository>:<tag>", blobs by digest. Every request is recorded. */
class LoopbackRegistry {
  readonly manifests = new Map<string, ServedManifest>();
  readonly blobs = new Map<string, Buffer>();
  readonly requests: { method: string; path: string; accept: string }[] = [];
  private server: Server | undefined;
  url = "";

  async start(): Promise<void> {
    this.server = createServer((request, response) => this.handle(request, response));
    await new Promise<void>((resolve, reject) => {
      this.server!.once("error", reject);
      this.server!.listen(0, "127.0.0.1", resolve);
    });
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    if (this.server === undefined) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  /** Serves `image` under `tag` (its manifest and config). */
  publish(tag: string, image: TestImage, override: Partial<ServedManifest> = {}): void {
    this.manifests.set(`${REPOSITORY}:${tag}`, { body: image.manifest, mediaType: OCI_MANIFEST, ...override });
    this.blobs.set(image.configDigest, image.config);
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const path = request.url ?? "";
    this.requests.push({ method: request.method ?? "", path, accept: request.headers.accept ?? "" });
    const manifest = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(path);
    const blob = /^\/v2\/(.+)\/blobs\/(sha256:[0-9a-f]{64})$/.exec(path);
    const served = manifest === null ? undefined : this.manifests.get(`${manifest[1]}:${manifest[2]}`);
    if (served?.redirectTo !== undefined) {
      response.writeHead(307, { Location: served.redirectTo }).end();
    } else if (served !== undefined) {
      response.writeHead(200, { "Content-Type": served.mediaType ?? OCI_MANIFEST, "Docker-Content-Digest": served.announced ?? digestOf(served.body) }).end(served.body);
    } else if (blob !== null && blob[1] === REPOSITORY && this.blobs.has(blob[2]!)) {
      response.writeHead(200, { "Content-Type": "application/octet-stream", "Docker-Content-Digest": blob[2]! }).end(this.blobs.get(blob[2]!));
    } else {
      response.writeHead(404, { "Content-Type": "application/json" }).end(JSON.stringify({ errors: [{ code: "MANIFEST_UNKNOWN" }] }));
    }
  }
}

describe("upgrade: the container path", function () {
  this.timeout(30_000);
  const registry = new LoopbackRegistry();
  const imageA = testImage(REVISION_A, "0.1.0");
  const imageB = testImage(REVISION_B, "0.1.1");
  const artifact = (tag: string, digest: string): ImageArtifact => ({ kind: "image", registry: registry.url, repository: REPOSITORY, tag, digest });

  before(async () => {
    await registry.start();
    registry.publish("0.1.0", imageA);
    registry.publish("0.1.1", imageB);
  });
  after(async () => {
    await registry.close();
  });

  describe("resolving the approved image", () => {
    it("resolves a tag to the approved digest, with its revision label, asking only the plan's registry", async () => {
      registry.requests.length = 0;
      const resolved = await resolveImage(artifact("0.1.1", imageB.digest), REVISION_B);
      const host = new URL(registry.url).host;
      expect(resolved).to.deep.equal({ digest: imageB.digest, reference: `${host}/${REPOSITORY}@${imageB.digest}`, version: "0.1.1" });
      expect(registry.requests.map((request) => `${request.method} ${request.path}`)).to.deep.equal([`GET /v2/${REPOSITORY}/manifests/0.1.1`, `GET /v2/${REPOSITORY}/blobs/${imageB.configDigest}`]);
      expect(registry.requests[0]!.accept).to.include(OCI_MANIFEST).and.to.include("application/vnd.docker.distribution.manifest.v2+json");
    });

    it("refuses a moved tag: the tag now names another manifest than the approved digest", async () => {
      registry.publish("moved", imageB);
      const refusal = await rejection(resolveImage(artifact("moved", imageA.digest), REVISION_A), UpgradeRefusal, /now names/);
      expect(refusal.code).to.equal("moved-tag");
      expect(refusal.evidence).to.include({ served: imageB.digest, approved: imageA.digest });
    });

    it("refuses an image whose revision label is not the approved source revision", async () => {
      const wrong = testImage(REVISION_A, "0.1.1");
      registry.publish("wrong-revision", wrong);
      const refusal = await rejection(resolveImage(artifact("wrong-revision", wrong.digest), REVISION_B), UpgradeRefusal, new RegExp(`${REVISION_LABEL} is "${REVISION_A}"`));
      expect(refusal.code).to.equal("unapproved-release");
      const unlabelled = testImage(null, "0.1.1");
      registry.publish("unlabelled", unlabelled);
      expect((await rejection(resolveImage(artifact("unlabelled", unlabelled.digest), REVISION_B), UpgradeRefusal, /is null/)).code).to.equal("unapproved-release");
    });

    it("refuses tampered manifest bytes: they do not hash to the Docker-Content-Digest", async () => {
      const tampered = Buffer.from(imageB.manifest.toString("utf8").replace('"layers":[]', '"layers": []'));
      registry.publish("tampered", imageB, { body: tampered, announced: imageB.digest });
      const refusal = await rejection(resolveImage(artifact("tampered", imageB.digest), REVISION_B), UpgradeRefusal, /manifest bytes hash to/);
      expect(refusal.code).to.equal("bad-checksum");
      expect(refusal.evidence).to.include({ computed: digestOf(tampered), announced: imageB.digest });
    });

    it("refuses a config blob that does not hash to the manifest's config digest", async () => {
      const image = testImage(REVISION_B, "0.1.2");
      registry.publish("bad-config", image);
      registry.blobs.set(image.configDigest, Buffer.from(image.config.toString("utf8").replace("0.1.2", "9.9.9")));
      const refusal = await rejection(resolveImage(artifact("bad-config", image.digest), REVISION_B), UpgradeRefusal, /config blob/);
      expect(refusal.code).to.equal("bad-checksum");
    });

    it("follows no redirect, reads no oversized manifest, and refuses a multi-platform index", async () => {
      registry.publish("redirected", imageB, { redirectTo: "http://127.0.0.2:1/elsewhere" });
      await rejection(resolveImage(artifact("redirected", imageB.digest), REVISION_B), UpgradeRefusal, /redirects \(307\)/);
      const huge = Buffer.alloc(4 * 1024 * 1024 + 1, 0x20);
      registry.publish("huge", imageB, { body: huge });
      await rejection(resolveImage(artifact("huge", digestOf(huge)), REVISION_B), UpgradeRefusal, /more than the 4194304 allowed|exceeds 4194304/);
      const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [{ mediaType: OCI_MANIFEST, digest: imageB.digest, size: imageB.manifest.length }] }));
      registry.publish("index", imageB, { body: index, mediaType: OCI_INDEX });
      const refusal = await rejection(resolveImage(artifact("index", digestOf(index)), REVISION_B), UpgradeRefusal, /multi-platform index/);
      expect(refusal.code).to.equal("unapproved-release");
    });
  });

  describe("switching a container unit (a fake systemctl on PATH)", () => {
    let root: string;
    let calls: string;
    let unit: ContainerUnit;
    let recordA: ImageRecord;
    let recordB: ImageRecord;
    const recordedCalls = () => (existsSync(calls) ? readFileSync(calls, "utf8").trim().split("\n") : []);

    beforeEach(() => {
      root = mkdtempSync(join(tmpdir(), "ats-container-"));
      const bin = join(root, "bin");
      mkdirSync(bin);
      calls = join(root, "calls.log");
      // Records argv, one call per line; any verb but restart and show fails, so a stray stop/start/pull shows up.
      writeFileSync(
        join(bin, "systemctl"),
        `#!/bin/sh
echo "systemctl $*" >> "${calls}"
case "$1" in
  restart) exit 0 ;;
  show) echo "ActiveState=active"; echo "MainPID=999999" ;;
  *) echo "unexpected verb $1" >&2; exit 1 ;;
esac
`,
      );
      chmodSync(join(bin, "systemctl"), 0o755);
      unit = createContainerUnit({ name: "ats-node.service", envFile: join(root, "image.env"), env: { PATH: `${bin}:${process.env.PATH ?? ""}` } });
      const host = new URL(registry.url).host;
      recordA = { image: `${host}/${REPOSITORY}@${imageA.digest}`, releaseId: RELEASE_A };
      recordB = { image: `${host}/${REPOSITORY}@${imageB.digest}`, releaseId: RELEASE_B };
      writeFileSync(unit.installEnvFile, formatImageEnv(recordA));
    });
    afterEach(() => {
      rmSync(root, { recursive: true, force: true });
    });

    it("resolves from the registry, writes the digest (not the tag), keeps the previous file, restarts only the node unit", async () => {
      const resolved = await resolveImage(artifact("0.1.1", imageB.digest), REVISION_B);
      const result = await switchImage(unit, { image: resolved.reference, releaseId: RELEASE_B });
      expect(result).to.deep.equal({ changed: true, previous: recordA });
      const written = readFileSync(unit.installEnvFile, "utf8");
      expect(written).to.include(`ATS_IMAGE=${new URL(registry.url).host}/${REPOSITORY}@${imageB.digest}\n`);
      expect(written).not.to.include(":0.1.1");
      expect(readImageEnv(`${unit.installEnvFile}.previous`)).to.deep.equal(recordA);
      expect(recordedCalls()).to.deep.equal(["systemctl restart ats-node.service"]);
      // A rerun on the target (a killed agent restarted) writes nothing, so `.previous` still holds the prior digest.
      expect(await switchImage(unit, recordB)).to.deep.equal({ changed: false, previous: recordA });
      expect(recordedCalls()).to.have.length(1);
    });

    it("rolls back to the previous digest and restarts; refuses without a previous file", async () => {
      await switchImage(unit, recordB);
      expect(await rollbackImage(unit)).to.deep.equal(recordA);
      expect(readImageEnv(unit.installEnvFile)).to.deep.equal(recordA);
      expect(readImageEnv(`${unit.installEnvFile}.previous`)).to.deep.equal(recordB);
      expect(recordedCalls()).to.deep.equal(["systemctl restart ats-node.service", "systemctl restart ats-node.service"]);
      rmSync(`${unit.installEnvFile}.previous`);
      await rejection(rollbackImage(unit), UpgradeRefusal, /no .*image\.env\.previous/);
    });

    it("a failed gate rolls the node back and runs the gates again for the prior digest", async () => {
      const accepted: string[] = [];
      const gate = (passed: boolean): GateResult[] => [{ gate: "version", passed, detail: passed ? "expected" : "node reports another version" }];
      const outcome = await upgradeContainerNode(unit, recordB, async (expected) => {
        accepted.push(expected.image);
        // What the gates see is what the unit's file names at that moment.
        expect(readImageEnv(unit.installEnvFile)).to.deep.equal(expected);
        return { passed: expected.image === recordA.image, gates: gate(expected.image === recordA.image) };
      });
      expect(outcome).to.deep.equal({ outcome: "rolled-back", gates: gate(false), rollback: { restored: recordA, gates: gate(true), passed: true } });
      expect(accepted).to.deep.equal([recordB.image, recordA.image]);
      expect(recordedCalls()).to.deep.equal(["systemctl restart ats-node.service", "systemctl restart ats-node.service"]);
      const passing = await upgradeContainerNode(unit, recordB, async () => ({ passed: true, gates: gate(true) }));
      expect(passing.outcome).to.equal("upgraded");
    });

    it("never writes or accepts a tag in the image file", () => {
      expect(() => formatImageEnv({ image: `127.0.0.1:5000/${REPOSITORY}:0.1.1`, releaseId: RELEASE_B })).to.throw(UpgradeRefusal, /never a tag/);
      writeFileSync(unit.installEnvFile, `ATS_IMAGE=127.0.0.1:5000/${REPOSITORY}:0.1.1\nATS_RELEASE_ID=${RELEASE_B}\n`);
      expect(() => readImageEnv(unit.installEnvFile)).to.throw(UpgradeRefusal, /not a digest reference/);
    });
  });

  it("the agent's run refuses an image plan before touching anything, with a value-free receipt", async () => {
    const plan = parsePlan({
      version: "ats-upgrade-plan/1",
      release: { tag: "v0.1.1", release_id: RELEASE_B, source_revision: REVISION_B, artifact: artifact("0.1.1", imageB.digest) },
      network: { manifest: "/nonexistent/manifest.json", trustedRpc: "http://127.0.0.1:9" },
      nodes: [{ host: "node-a", role: "primary", rest: "http://127.0.0.1:9", rpc: "http://127.0.0.1:9", unit: { kind: "container", name: "ats-node.service", envFile: "/nonexistent/image.env" } }],
      rolloutOrder: ["node-a"],
      acceptance: { warmupMs: 0, timeoutMs: 1_000, maxLogErrors: 0 },
    }) as ImagePlan;
    registry.requests.length = 0;
    const receipt = await runUpgrade({ plan, planText: "{}" });
    expect(receipt.outcome).to.equal("refused");
    expect(receipt.refusal?.code).to.equal("plan-invalid");
    expect(receipt.artifact_sha256).to.equal(imageB.digest.slice("sha256:".length));
    expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(["not-started"]);
    expect(registry.requests).to.deep.equal([]);
    assertValueFree(receipt);
  });
});
