/**
 * The container path's parts (docs/upgrade.md §4a): a small OCI registry on loopback (test/upgrade/registryServer.ts:
 * node:http on 127.0.0.1, a free port, closed in after() also when a test fails) serves manifests and config blobs;
 * a fake `systemctl` and a fake `podman` first on PATH record their calls (no Docker or Podman on this machine).
 *
 * - resolve: a tag resolves to the approved digest with its revision label; a moved tag, a wrong revision label,
 *   tampered manifest or config bytes, a redirect, an oversized manifest and a multi-platform index are refused,
 *   each with its code;
 * - the container unit: its status is the runtime's (running, main pid, the image digest), a missing container is
 *   a stopped unit, a runtime answer of another shape is refused; it restarts only the node's service;
 * - the image file never names a tag.
 *
 * `ats-upgrade run` on image plans, end to end, is test/upgrade/containerRun.test.ts.
 */
import { expect } from "chai";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatImageEnv, readImageEnv } from "../../upgrade/containerEnv";
import { createPodmanRuntime, parseInspection, type ContainerRuntime, type ContainerState } from "../../upgrade/containerRuntime";
import { createContainerUnit } from "../../upgrade/containerUnit";
import { UpgradeRefusal } from "../../upgrade/errors";
import type { ImageArtifact } from "../../upgrade/plan";
import { resolveImage, REVISION_LABEL } from "../../upgrade/registry";
import { rejection } from "./helpers";
import { digestOf, LoopbackRegistry, OCI_INDEX, OCI_MANIFEST, RELEASE_B, REPOSITORY, REVISION_A, REVISION_B, testImage } from "./registryServer";

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

  describe("the container unit and its runtime (a fake systemctl and podman on PATH)", () => {
    let root: string;
    let bin: string;
    let calls: string;
    let env: NodeJS.ProcessEnv;
    const recordedCalls = () => (existsSync(calls) ? readFileSync(calls, "utf8").trim().split("\n") : []);
    /** What the fake `podman container inspect ats-node` prints; absent: "no such container". */
    const inspectAnswer = () => join(root, "inspect.json");

    beforeEach(() => {
      root = mkdtempSync(join(tmpdir(), "ats-container-"));
      bin = join(root, "bin");
      mkdirSync(bin);
      calls = join(root, "calls.log");
      // Records argv, one call per line; any verb but restart fails, so a stray stop/start shows up.
      writeFileSync(join(bin, "systemctl"), `#!/bin/sh\necho "systemctl $*" >> "${calls}"\n[ "$1" = restart ] && exit 0\necho "unexpected verb $1" >&2\nexit 1\n`);
      writeFileSync(
        join(bin, "podman"),
        `#!/bin/sh
echo "podman $*" >> "${calls}"
if [ -f "${inspectAnswer()}" ]; then cat "${inspectAnswer()}"; else echo "Error: no such container $3" >&2; exit 125; fi
`,
      );
      chmodSync(join(bin, "systemctl"), 0o755);
      chmodSync(join(bin, "podman"), 0o755);
      env = { PATH: `${bin}:${process.env.PATH ?? ""}` };
    });
    afterEach(() => {
      rmSync(root, { recursive: true, force: true });
    });

    it("reads the container's state from podman inspect: running, its pid and the image digest, nothing else", async () => {
      const unit = createContainerUnit({ name: "ats-node.service", envFile: join(root, "image.env"), container: "ats-node", env });
      expect(await unit.status()).to.deep.equal({ active: false, pid: null, runs: null });
      // Podman's shape, with the environment a real inspect carries: it must not be returned.
      writeFileSync(inspectAnswer(), JSON.stringify([{ Id: "c0ffee", State: { Running: true, Pid: 4242 }, ImageDigest: imageB.digest, Config: { Env: ["ATS_CARD_PIN=1234"] } }]));
      expect(await unit.status()).to.deep.equal({ active: true, pid: 4242, runs: imageB.digest });
      writeFileSync(inspectAnswer(), JSON.stringify([{ State: { Running: false, Pid: 0 }, ImageDigest: imageB.digest }]));
      expect(await unit.status()).to.deep.equal({ active: false, pid: null, runs: null });
      await unit.restart();
      expect(recordedCalls()).to.deep.equal([...Array(3).fill("podman container inspect ats-node"), "systemctl restart ats-node.service"]);
    });

    it("refuses a runtime answer it cannot read, a running container without an image digest, a failing runtime and a bad container name", async () => {
      const runtime = createPodmanRuntime({ env });
      for (const [answer, pattern] of [
        ["not json", /not a JSON array of one container/],
        ["[]", /not a JSON array of one container/],
        [JSON.stringify([{ State: {} }]), /no State.Running/],
        [JSON.stringify([{ State: { Running: true, Pid: 7 }, ImageDigest: "" }]), /no ImageDigest/],
      ] as const) {
        writeFileSync(inspectAnswer(), answer);
        const refusal = await rejection(runtime.inspect("ats-node"), UpgradeRefusal, pattern);
        expect(refusal.code).to.equal("unit-failed");
        expect(refusal.message).not.to.include(answer === "not json" ? "not json" : "ATS_");
      }
      writeFileSync(join(bin, "podman"), "#!/bin/sh\necho 'Error: cannot connect to the runtime' >&2\nexit 125\n");
      await rejection(runtime.inspect("ats-node"), UpgradeRefusal, /cannot connect/);
      await rejection(runtime.inspect("ats-node; rm -rf /"), UpgradeRefusal, /not a container name/);
      expect(() => createContainerUnit({ name: "ats-node.service", envFile: "/x", container: "-rm", env })).to.throw(UpgradeRefusal, /not a container name/);
    });

    it("takes an injected runtime instead of podman", async () => {
      const asked: string[] = [];
      const state: ContainerState = { running: true, pid: 9, imageDigest: imageA.digest };
      const runtime: ContainerRuntime = { inspect: async (container) => (asked.push(container), state) };
      const unit = createContainerUnit({ name: "ats-node.service", envFile: join(root, "image.env"), container: "systemd-ats-node", runtime, env });
      expect(await unit.status()).to.deep.equal({ active: true, pid: 9, runs: imageA.digest });
      expect(asked).to.deep.equal(["systemd-ats-node"]);
      expect(recordedCalls()).to.deep.equal([]);
      expect(parseInspection(JSON.stringify([{ State: { Running: false } }]), "x")).to.deep.equal({ running: false, pid: null, imageDigest: null });
    });

    it("never writes or accepts a tag in the image file", () => {
      const envFile = join(root, "image.env");
      expect(() => formatImageEnv({ image: `127.0.0.1:5000/${REPOSITORY}:0.1.1`, releaseId: RELEASE_B })).to.throw(UpgradeRefusal, /never a tag/);
      writeFileSync(envFile, `ATS_IMAGE=127.0.0.1:5000/${REPOSITORY}:0.1.1\nATS_RELEASE_ID=${RELEASE_B}\n`);
      expect(() => readImageEnv(envFile)).to.throw(UpgradeRefusal, /not a digest reference/);
    });
  });
});
