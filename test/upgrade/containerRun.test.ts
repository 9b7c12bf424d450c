/**
 * `ats-upgrade run` on image plans (docs/upgrade.md §4a), end to end on a fake container host
 * (test/upgrade/containerHost.ts: fake systemctl and podman on the agent's PATH, fake nodes and a trusted node on
 * 127.0.0.1, free ports) with images served by a loopback registry (test/upgrade/registryServer.ts):
 *
 * - a rollout A → B: each node's image file gets B's digest, its service is restarted once, one node at a time,
 *   and every gate passes against what the runtime says runs; the receipt names the digests and holds no value;
 * - an image whose node fails a gate (its mesh never converges; or the container runs another digest than the
 *   image file names) is rolled back to the previous digest, which passes every gate again; the rollout stops there;
 * - a downgrade (from the image's version label), a moved tag, an image without a usable version label, and a
 *   container running another digest than its image file names are refused before anything changes;
 * - a run restarted after a killed one accepts the node the killed run left on the target first, restarting it
 *   when the killed run switched its image file but did not get to the restart.
 *
 * Every server is closed in afterEach(), also when a test fails.
 */
import { expect } from "chai";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runUpgrade } from "../../upgrade/agent";
import { formatImageEnv, readImageEnv, type ImageRecord } from "../../upgrade/containerEnv";
import { GATE_NAMES } from "../../upgrade/gates";
import { parsePlan, PLAN_VERSION, type ImagePlan } from "../../upgrade/plan";
import { assertValueFree, type Receipt } from "../../upgrade/receipt";
import { ContainerHost, INSPECT_SECRET, type HostImage } from "./containerHost";
import { LoopbackRegistry, RELEASE_A, RELEASE_B, REPOSITORY, REVISION_A, REVISION_B, testImage, type TestImage } from "./registryServer";

const REVISION_C = "c".repeat(40);
const RELEASE_C = "ats-node-0.1.2-cccccccccccc";
const HOSTS = ["node-a", "node-b"] as const;

describe("upgrade: ats-upgrade run on image plans (a fake container host)", function () {
  this.timeout(60_000);
  const registry = new LoopbackRegistry();
  const imageA = testImage(REVISION_A, "0.1.0");
  const imageB = testImage(REVISION_B, "0.1.1");
  /** Release C's node never gets its mesh back: the mesh gate fails. */
  const imageC = testImage(REVISION_C, "0.1.2");
  const hostImage = (image: TestImage, version: string, revision: string, isolated = false): HostImage => ({ digest: image.digest, version, revision, isolated });
  const onA = hostImage(imageA, "0.1.0", REVISION_A);
  const onB = hostImage(imageB, "0.1.1", REVISION_B);
  const onC = hostImage(imageC, "0.1.2", REVISION_C, true);
  let root: string;
  let host: ContainerHost;

  const reference = (digest: string) => `${new URL(registry.url).host}/${REPOSITORY}@${digest}`;
  const recordOf = (image: HostImage): ImageRecord => ({ image: reference(image.digest), releaseId: image === onA ? RELEASE_A : image === onB ? RELEASE_B : RELEASE_C });

  /** A plan for `release`, looked up in the registry under `tag` (the release tag is its version's). */
  function planFor(tag: string, release: { id: string; revision: string; digest: string }): ImagePlan {
    return parsePlan({
      version: PLAN_VERSION,
      release: { tag: `v${release.id.split("-")[2]!}`, release_id: release.id, source_revision: release.revision, artifact: { kind: "image", registry: registry.url, repository: REPOSITORY, tag, digest: release.digest } },
      network: { manifest: host.manifestFile, trustedRpc: host.trustedRpc },
      nodes: host.nodes.map((node) => node.planNode),
      rolloutOrder: [...HOSTS],
      acceptance: { warmupMs: 0, timeoutMs: 1_000, maxLogErrors: 0 },
    }) as ImagePlan;
  }
  const planB = () => planFor("0.1.1", { id: RELEASE_B, revision: REVISION_B, digest: imageB.digest });

  async function run(plan: ImagePlan): Promise<Receipt> {
    const text = JSON.stringify(plan);
    const receipt = await runUpgrade({ plan, planText: text, pollMs: 50, commandEnv: host.env, log: (line) => process.env.ATS_TEST_VERBOSE === "1" && console.log(`    agent: ${line}`) });
    // Value-free whatever happened: no node or card id, nothing of the runtime's inspect output.
    assertValueFree(receipt, [...host.nodes.flatMap((node) => [node.nodeId, node.cardId]), INSPECT_SECRET]);
    return receipt;
  }

  /** Every node's image file, `.previous` and running digest: what a refused run must leave as it was. */
  const snapshot = () => host.nodes.map((node) => [readFileSync(node.envFile, "utf8"), existsSync(`${node.envFile}.previous`) ? readFileSync(`${node.envFile}.previous`, "utf8") : null, host.running(node)]);

  before(async () => {
    await registry.start();
    registry.publish("0.1.0", imageA);
    registry.publish("0.1.1", imageB);
    registry.publish("0.1.2", imageC);
  });
  after(async () => {
    await registry.close();
  });
  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), "ats-container-run-"));
    host = new ContainerHost(root);
    for (const image of [onA, onB, onC]) host.images.set(image.digest, image);
    await host.start(HOSTS, onA, recordOf);
  });
  afterEach(async () => {
    await host?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("rolls out A → B: the approved digest in each image file, one restart per node, one node at a time, every gate passing", async () => {
    const receipt = await run(planB());
    expect(receipt.outcome, JSON.stringify(receipt.refusal ?? receipt.nodes.map((node) => node.gates.filter((gate) => !gate.passed)))).to.equal("completed");
    expect(receipt.artifact_sha256).to.equal(imageB.digest.slice("sha256:".length));
    expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(["upgraded", "upgraded"]);
    for (const [index, node] of receipt.nodes.entries()) {
      expect(node.gates.map((gate) => gate.gate)).to.deep.equal([...GATE_NAMES]);
      expect(node.gates.filter((gate) => !gate.passed)).to.deep.equal([]);
      expect(node.old).to.deep.equal({ release_id: RELEASE_A, source_revision: null, image_digest: imageA.digest });
      expect(node.new).to.deep.equal({ release_id: RELEASE_B, source_revision: REVISION_B, image_digest: imageB.digest });
      expect(node.preflight?.mesh_state).to.equal("Converged");
      if (index > 0) expect(Date.parse(node.started_at!)).to.be.at.least(Date.parse(receipt.nodes[index - 1]!.finished_at!));
    }
    for (const node of host.nodes) {
      expect(readImageEnv(node.envFile)).to.deep.equal(recordOf(onB));
      expect(readFileSync(node.envFile, "utf8")).not.to.include(":0.1.1"); // the digest, never the tag
      expect(readImageEnv(`${node.envFile}.previous`)).to.deep.equal(recordOf(onA));
      expect(host.running(node)).to.equal(imageB.digest);
    }
    expect(host.calls()).to.deep.equal(["systemctl restart node-a.service", "systemctl restart node-b.service"]);
  });

  it("rolls a node back to the previous digest when a gate fails, runs every gate again, and stops the rollout", async () => {
    const receipt = await run(planFor("0.1.2", { id: RELEASE_C, revision: REVISION_C, digest: imageC.digest }));
    expect(receipt.outcome, JSON.stringify(receipt.refusal)).to.equal("stopped");
    const [first, second] = receipt.nodes as [Receipt["nodes"][number], Receipt["nodes"][number]];
    expect(first.outcome).to.equal("rolled-back");
    expect(first.gates.filter((gate) => !gate.passed).map((gate) => gate.gate)).to.deep.equal(["mesh"]);
    expect(first.rollback).to.deep.include({ restored_image_digest: imageA.digest, digest_verified: true, passed: true });
    expect(first.rollback?.gates.filter((gate) => !gate.passed)).to.deep.equal([]);
    expect(second.outcome).to.equal("not-started");
    const [nodeA, nodeB] = host.nodes as [(typeof host.nodes)[number], (typeof host.nodes)[number]];
    expect(readImageEnv(nodeA.envFile)).to.deep.equal(recordOf(onA));
    expect(readImageEnv(`${nodeA.envFile}.previous`)).to.deep.equal(recordOf(onC));
    expect(host.running(nodeA)).to.equal(imageA.digest);
    expect(readImageEnv(nodeB.envFile)).to.deep.equal(recordOf(onA));
    expect(host.calls()).to.deep.equal(["systemctl restart node-a.service", "systemctl restart node-a.service"]);
  });

  it("fails unit-running when the container runs another digest than the image file names, and rolls back", async () => {
    const [nodeA] = host.nodes as [(typeof host.nodes)[number]];
    host.pin(nodeA, imageA.digest); // the service ignores ATS_IMAGE: a restart brings A back
    const receipt = await run(planB());
    expect(receipt.outcome).to.equal("stopped");
    const first = receipt.nodes[0]!;
    expect(first.outcome).to.equal("rolled-back");
    expect(first.gates[0]).to.deep.equal({ gate: "unit-running", passed: false, detail: "runs another image" });
    expect(first.rollback).to.deep.include({ restored_image_digest: imageA.digest, passed: true });
    expect(host.calls()).to.deep.equal(["systemctl restart node-a.service", "systemctl restart node-a.service"]);
  });

  it("refuses a downgrade by the image's version label, a moved tag and an image without a usable version label, changing nothing", async () => {
    await run(planB());
    const before = snapshot();
    const calls = host.calls().length;

    const downgrade = await run(planFor("0.1.0", { id: RELEASE_A, revision: REVISION_A, digest: imageA.digest }));
    expect(downgrade.refusal?.code).to.equal("downgrade");
    expect(downgrade.refusal?.message).to.match(/node-a runs 0\.1\.1; ats-node-0\.1\.0-aaaaaaaaaaaa is 0\.1\.0 \(its org\.opencontainers\.image\.version label\)/);

    // The tag now names C; the plan approved another digest.
    registry.publish("moved", imageC);
    const moved = await run(planFor("moved", { id: RELEASE_C, revision: REVISION_C, digest: testImage(REVISION_C, "0.1.3").digest }));
    expect(moved.refusal?.code).to.equal("moved-tag");

    // No version label: nothing to compare the nodes with. A label that is not the approved release id's version.
    const unlabelled = testImage(REVISION_C, "not-a-version");
    registry.publish("unlabelled", unlabelled);
    const noVersion = await run(planFor("unlabelled", { id: RELEASE_C, revision: REVISION_C, digest: unlabelled.digest }));
    expect(noVersion.refusal).to.deep.include({ code: "unapproved-release" });
    expect(noVersion.refusal?.message).to.match(/label org\.opencontainers\.image\.version is "not-a-version", not a version/);
    const otherVersion = testImage(REVISION_C, "0.1.3");
    registry.publish("other-version", otherVersion);
    const mismatch = await run(planFor("other-version", { id: RELEASE_C, revision: REVISION_C, digest: otherVersion.digest }));
    expect(mismatch.refusal?.message).to.match(/label org\.opencontainers\.image\.version is 0\.1\.3; the approved release ats-node-0\.1\.2-cccccccccccc is another version/);

    for (const receipt of [downgrade, moved, noVersion, mismatch]) {
      expect(receipt.outcome).to.equal("refused");
      expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(["not-started", "not-started"]);
    }
    expect(snapshot()).to.deep.equal(before);
    expect(host.calls()).to.have.length(calls);
  });

  it("refuses a node whose container runs another digest than its image file names (changed outside the agent)", async () => {
    host.run(host.nodes[1]!, imageC.digest);
    const before = snapshot();
    const receipt = await run(planB());
    expect(receipt.refusal?.code).to.equal("preflight-failed");
    expect(receipt.refusal?.message).to.match(/node-b: node-b\.service runs sha256:[0-9a-f]{12}…, but the image file names sha256:[0-9a-f]{12}…: changed outside the agent/);
    expect(snapshot()).to.deep.equal(before);
    expect(host.calls()).to.deep.equal([]);
  });

  describe("a run restarted after a killed one", () => {
    /** What a run killed on node-a left: its image file switched to B (A kept as `.previous`). */
    const killedAfterTheSwitch = () => {
      const nodeA = host.nodes[0]!;
      writeFileSync(`${nodeA.envFile}.previous`, readFileSync(nodeA.envFile));
      writeFileSync(nodeA.envFile, formatImageEnv(recordOf(onB)));
      return nodeA;
    };

    it("accepts the node left running on the target first, without restarting it, then upgrades the others", async () => {
      host.run(killedAfterTheSwitch(), imageB.digest); // killed during its acceptance
      const receipt = await run(planB());
      expect(receipt.outcome, JSON.stringify(receipt.refusal)).to.equal("completed");
      expect(receipt.nodes.map((node) => [node.host, node.outcome])).to.deep.equal([
        ["node-a", "already-current"],
        ["node-b", "upgraded"],
      ]);
      expect(receipt.nodes[0]!.old).to.deep.equal({ release_id: RELEASE_A, source_revision: null, image_digest: imageA.digest });
      expect(receipt.nodes[0]!.gates.filter((gate) => !gate.passed)).to.deep.equal([]);
      expect(host.calls()).to.deep.equal(["systemctl restart node-b.service"]);
      expect(readImageEnv(`${host.nodes[0]!.envFile}.previous`)).to.deep.equal(recordOf(onA));
    });

    it("restarts the node whose image file was switched before the kill but which still runs the previous digest", async () => {
      const nodeA = killedAfterTheSwitch(); // killed before the restart: still on A
      expect(host.running(nodeA)).to.equal(imageA.digest);
      const receipt = await run(planB());
      expect(receipt.outcome, JSON.stringify(receipt.refusal)).to.equal("completed");
      expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(["already-current", "upgraded"]);
      expect(host.calls()).to.deep.equal(["systemctl restart node-a.service", "systemctl restart node-b.service"]);
      expect(host.running(nodeA)).to.equal(imageB.digest);
    });
  });
});
