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
import { parsePlan, PLAN_VERSION, type ImagePlan, type NodeRole } from "../../upgrade/plan";
import { assertValueFree, type Receipt } from "../../upgrade/receipt";
import { ContainerHost, INSPECT_SECRET, type HostImage } from "./containerHost";
import { LoopbackRegistry, RELEASE_A, RELEASE_B, REPOSITORY, REVISION_A, REVISION_B, testImage, type TestImage } from "./registryServer";

const REVISION_C = "c".repeat(40);
const RELEASE_C = "ats-node-0.1.2-cccccccccccc";
const HOSTS = ["node-a", "node-b"] as const;
/** Acceptance of a parallel plan waits this long first, so that nodes switched together overlap measurably. */
const WARMUP_MS = 300;

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
  let root: string | undefined;
  let host: ContainerHost;

  const reference = (digest: string) => `${new URL(registry.url).host}/${REPOSITORY}@${digest}`;
  const recordOf = (image: HostImage): ImageRecord => ({ image: reference(image.digest), releaseId: image === onA ? RELEASE_A : image === onB ? RELEASE_B : RELEASE_C });

  /** A plan for `release`, looked up in the registry under `tag` (the release tag is its version's), in the host's node order. */
  function planFor(tag: string, release: { id: string; revision: string; digest: string }, extra: { maxParallel?: number } = {}): ImagePlan {
    return parsePlan({
      ...extra,
      version: PLAN_VERSION,
      release: { tag: `v${release.id.split("-")[2]!}`, release_id: release.id, source_revision: release.revision, artifact: { kind: "image", registry: registry.url, repository: REPOSITORY, tag, digest: release.digest } },
      network: { manifest: host.manifestFile, trustedRpc: host.trustedRpc },
      nodes: host.nodes.map((node) => node.planNode),
      rolloutOrder: host.nodes.map((node) => node.host),
      acceptance: { warmupMs: extra.maxParallel === undefined ? 0 : WARMUP_MS, timeoutMs: 1_000, maxLogErrors: 0 },
    }) as ImagePlan;
  }
  const planB = (extra: { maxParallel?: number } = {}) => planFor("0.1.1", { id: RELEASE_B, revision: REVISION_B, digest: imageB.digest }, extra);

  async function run(plan: ImagePlan, onLine?: (line: string) => void): Promise<Receipt> {
    const text = JSON.stringify(plan);
    const log = (line: string): void => {
      onLine?.(line);
      if (process.env.ATS_TEST_VERBOSE === "1") console.log(`    agent: ${line}`);
    };
    const receipt = await runUpgrade({ plan, planText: text, pollMs: 50, commandEnv: host.env, log });
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
  /** A new host whose nodes all run A; the one before (if any) is closed and removed first. */
  async function startHost(hosts: readonly string[], roles: Readonly<Record<string, NodeRole>> = {}, meshMembers?: number): Promise<void> {
    await stopHost();
    root = mkdtempSync(join(tmpdir(), "ats-container-run-"));
    host = new ContainerHost(root, meshMembers);
    for (const image of [onA, onB, onC]) host.images.set(image.digest, image);
    await host.start(hosts, onA, recordOf, roles);
  }
  async function stopHost(): Promise<void> {
    if (root === undefined) return;
    await host.close();
    rmSync(root, { recursive: true, force: true });
    root = undefined;
  }
  beforeEach(() => startHost(HOSTS));
  afterEach(stopHost);

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
  describe("a node without an image file (started by hand)", () => {
    /** node-a runs A but has no image file; `adopt` (when given) names the approved release A for it. */
    function handStarted(adopt: boolean): { plan: ImagePlan; envFile: string } {
      const envFile = host.nodes[0]!.envFile;
      rmSync(envFile);
      const plan = planB();
      const approvedA = { tag: "v0.1.0", release_id: RELEASE_A, source_revision: REVISION_A, artifact: { kind: "image", registry: registry.url, repository: REPOSITORY, tag: "0.1.0", digest: imageA.digest } };
      const nodes = plan.nodes.map((node, index) => (index === 0 && adopt ? { ...node, adopt: { release: approvedA } } : node));
      return { plan: parsePlan({ ...plan, nodes }) as ImagePlan, envFile };
    }

    /** Runs `plan`, expecting a refusal before anything changed: no image file written, no service restarted. */
    async function refusedUnchanged(plan: ImagePlan, envFile: string, code: string, message: RegExp): Promise<void> {
      const receipt = await run(plan);
      expect(receipt.outcome).to.equal("refused");
      expect(receipt.refusal?.code).to.equal(code);
      expect(receipt.refusal?.message).to.match(message);
      expect(receipt.nodes.map((node) => node.adopted)).to.deep.equal([null, null]);
      expect(existsSync(envFile)).to.equal(false);
      expect(host.calls()).to.deep.equal([]);
    }

    it("adopts it when the plan names the release it runs: verified, recorded without .previous, noted in the receipt, then rolled out", async () => {
      const { plan, envFile } = handStarted(true);
      const receipt = await run(plan);
      expect(receipt.outcome, JSON.stringify(receipt.refusal)).to.equal("completed");
      const [first] = receipt.nodes as [Receipt["nodes"][number]];
      const adoptedA = { release_id: RELEASE_A, source_revision: REVISION_A, image_digest: imageA.digest };
      expect(first.adopted).to.deep.equal(adoptedA);
      expect(first.old).to.deep.equal(adoptedA);
      expect(first.outcome).to.equal("upgraded");
      expect(receipt.nodes[1]!.adopted).to.equal(null);
      // The record the adoption wrote became .previous at the switch: the rollback target is the adopted release.
      expect(readImageEnv(envFile)).to.deep.equal(recordOf(onB));
      expect(readImageEnv(`${envFile}.previous`)).to.deep.equal(recordOf(onA));
      expect(host.calls()).to.deep.equal(["systemctl restart node-a.service", "systemctl restart node-b.service"]);
    });

    it("refuses it without the plan's adopt, as before: not confirmed without a terminal", async () => {
      const { plan, envFile } = handStarted(false);
      await refusedUnchanged(plan, envFile, "not-confirmed", /^node-a: node-a\.service has no record \(the image file\), and adopting it was not confirmed$/);
    });

    it("refuses it when its container runs another digest than the adopted release's, naming both", async () => {
      const { plan, envFile } = handStarted(true);
      host.run(host.nodes[0]!, imageC.digest);
      const short = (digest: string) => `${digest.slice(0, "sha256:".length + 12)}…`;
      await refusedUnchanged(plan, envFile, "preflight-failed", new RegExp(`^node-a: not adopted as ${RELEASE_A}: the image digest the container runs: expected ${short(imageA.digest)}, found ${short(imageC.digest)}$`));
    });

    it("refuses it when the node reports another version or another revision than the adopted release", async () => {
      const { plan, envFile } = handStarted(true);
      host.images.set(imageA.digest, { ...onA, version: "0.0.9" });
      await refusedUnchanged(plan, envFile, "preflight-failed", /the version the node reports: expected 0\.1\.0, found 0\.0\.9$/);
      host.images.set(imageA.digest, { ...onA, revision: "d".repeat(40) });
      await refusedUnchanged(plan, envFile, "preflight-failed", /the source revision the node reports: expected a{12}…, found d{12}…$/);
    });
  });

  describe("a parallel rollout (maxParallel 2): non-primaries in batches, the primary alone and last", () => {
    /** Three nodes that do not sign, then the primary: the order a parallel plan must have. */
    const PARALLEL_HOSTS = ["node-b", "node-c", "node-d", "node-a"] as const;
    const ROLES: Record<string, NodeRole> = { "node-a": "primary", "node-b": "secondary", "node-c": "archive", "node-d": "bridge" };
    // These four nodes report a 7-member mesh (quorum 5): two may be down at once. A 4-member one is below.
    beforeEach(() => startHost(PARALLEL_HOSTS, ROLES, 7));

    type NodeEntry = Receipt["nodes"][number];
    const byHost = (receipt: Receipt) => Object.fromEntries(receipt.nodes.map((node) => [node.host, node])) as Record<(typeof PARALLEL_HOSTS)[number], NodeEntry>;
    const span = (node: NodeEntry) => [Date.parse(node.started_at!), Date.parse(node.finished_at!)] as const;
    /** Both were in flight at one moment. */
    const overlap = (x: NodeEntry, y: NodeEntry) => span(x)[0] < span(y)[1] && span(y)[0] < span(x)[1];
    /** `later` started after `earlier` was done. */
    const after = (later: NodeEntry, earlier: NodeEntry) => span(later)[0] >= span(earlier)[1];
    const restartsOf = (name: string) => host.calls().filter((call) => call === `systemctl restart ${name}.service`).length;

    it("switches node-b and node-c together, then node-d, then the primary alone; every gate passes", async () => {
      const receipt = await run(planB({ maxParallel: 2 }));
      expect(receipt.outcome, JSON.stringify(receipt.refusal ?? receipt.nodes.map((node) => node.gates.filter((gate) => !gate.passed)))).to.equal("completed");
      expect(receipt.nodes.map((node) => [node.host, node.outcome])).to.deep.equal(PARALLEL_HOSTS.map((name) => [name, "upgraded"]));
      const nodes = byHost(receipt);
      expect(overlap(nodes["node-b"], nodes["node-c"]), "node-b and node-c in flight together").to.equal(true);
      expect(after(nodes["node-d"], nodes["node-b"]) && after(nodes["node-d"], nodes["node-c"]), "node-d waits for its batch slot").to.equal(true);
      for (const other of ["node-b", "node-c", "node-d"] as const) expect(after(nodes["node-a"], nodes[other]), `the primary after ${other}`).to.equal(true);
      for (const node of host.nodes) {
        expect(readImageEnv(node.envFile)).to.deep.equal(recordOf(onB));
        expect(host.running(node)).to.equal(imageB.digest);
        expect(restartsOf(node.host)).to.equal(1);
      }
    });

    it("rolls back every node of a batch when one of it fails a gate, and stops before the next batch", async () => {
      const nodeC = host.nodes.find((node) => node.host === "node-c")!;
      host.pin(nodeC, imageA.digest); // node-c's service ignores ATS_IMAGE: unit-running fails there only
      const receipt = await run(planB({ maxParallel: 2 }));
      expect(receipt.outcome, JSON.stringify(receipt.refusal)).to.equal("stopped");
      const nodes = byHost(receipt);
      expect(nodes["node-c"].outcome).to.equal("rolled-back");
      expect(nodes["node-c"].gates[0]).to.deep.equal({ gate: "unit-running", passed: false, detail: "runs another image" });
      // node-b passed every gate, and still went back with its batch.
      expect(nodes["node-b"].outcome).to.equal("rolled-back");
      expect(nodes["node-b"].gates.filter((gate) => !gate.passed)).to.deep.equal([]);
      expect(nodes["node-b"].note).to.equal("rolled back with its batch: node-c failed");
      for (const entry of [nodes["node-b"], nodes["node-c"]]) {
        expect(entry.rollback).to.deep.include({ restored_image_digest: imageA.digest, digest_verified: true, passed: true });
        expect(entry.rollback?.gates.filter((gate) => !gate.passed)).to.deep.equal([]);
      }
      expect([nodes["node-d"].outcome, nodes["node-a"].outcome]).to.deep.equal(["not-started", "not-started"]);
      for (const node of host.nodes) {
        expect(readImageEnv(node.envFile), node.host).to.deep.equal(recordOf(onA));
        expect(host.running(node), node.host).to.equal(imageA.digest);
      }
      expect([restartsOf("node-b"), restartsOf("node-c"), restartsOf("node-d"), restartsOf("node-a")]).to.deep.equal([2, 2, 0, 0]);
    });

    it("never switches more members together than the mesh can lose: a 4-member mesh (quorum 3) goes one at a time", async () => {
      await startHost(PARALLEL_HOSTS, ROLES, 4);
      const lines: string[] = [];
      const receipt = await run(planB({ maxParallel: 3 }), (line) => lines.push(line));
      expect(receipt.outcome).to.equal("completed");
      const nodes = byHost(receipt);
      for (const [later, earlier] of [["node-c", "node-b"], ["node-d", "node-c"], ["node-a", "node-d"]] as const) {
        expect(after(nodes[later], nodes[earlier]), `${later} after ${earlier}`).to.equal(true);
      }
      expect(lines).to.include("batches of at most 1: a 4-member mesh keeps its co-signing quorum with no more than that down");
    });

    it("finishes every rollback of a batch when one of them fails, and records that one as rollback-failed", async () => {
      await startHost(PARALLEL_HOSTS, ROLES, 10); // a 10-member mesh (quorum 7) may lose three: b, c and d together
      const nodeB = host.nodes.find((node) => node.host === "node-b")!;
      const nodeC = host.nodes.find((node) => node.host === "node-c")!;
      const nodeD = host.nodes.find((node) => node.host === "node-d")!;
      host.pin(nodeC, imageA.digest); // node-c fails a gate, so node-b and node-d (accepted) go back with it
      host.failRestartsFrom(nodeB, 3); // its first start (A) and the switch to B work; its rollback's restart fails
      const receipt = await run(planB({ maxParallel: 3 }));
      expect(receipt.outcome).to.equal("refused");
      const nodes = byHost(receipt);
      expect(nodes["node-b"].outcome).to.equal("rollback-failed");
      expect(nodes["node-b"].note).to.match(/^rolled back with its batch: node-c failed; its rollback failed: /);
      // node-d's rollback ran to its end before the run ended: back on A, every gate passed again.
      expect(nodes["node-d"].outcome).to.equal("rolled-back");
      expect(nodes["node-d"].rollback).to.deep.include({ restored_image_digest: imageA.digest, passed: true });
      expect(host.running(nodeD)).to.equal(imageA.digest);
      expect(nodes["node-c"].outcome).to.equal("rolled-back");
      expect(restartsOf("node-a")).to.equal(0);
    });

    it("after a run killed with a whole batch switched, accepts that batch again first (restarting the one not yet restarted), then the rest", async () => {
      const [nodeB, nodeC] = host.nodes as [(typeof host.nodes)[number], (typeof host.nodes)[number]];
      for (const node of [nodeB, nodeC]) {
        writeFileSync(`${node.envFile}.previous`, readFileSync(node.envFile));
        writeFileSync(node.envFile, formatImageEnv(recordOf(onB)));
      }
      host.run(nodeB, imageB.digest); // node-b restarted before the kill; node-c still runs A
      const receipt = await run(planB({ maxParallel: 2 }));
      expect(receipt.outcome, JSON.stringify(receipt.refusal)).to.equal("completed");
      expect(receipt.nodes.map((node) => [node.host, node.outcome])).to.deep.equal([
        ["node-b", "already-current"],
        ["node-c", "already-current"],
        ["node-d", "upgraded"],
        ["node-a", "upgraded"],
      ]);
      const nodes = byHost(receipt);
      expect(overlap(nodes["node-b"], nodes["node-c"]), "the resumed batch accepted together").to.equal(true);
      // node-d is not added to the resumed batch: every node the killed run left is back before another moves.
      expect(after(nodes["node-d"], nodes["node-b"]) && after(nodes["node-d"], nodes["node-c"])).to.equal(true);
      for (const entry of [nodes["node-b"], nodes["node-c"]]) expect(entry.old).to.deep.equal({ release_id: RELEASE_A, source_revision: null, image_digest: imageA.digest });
      expect([restartsOf("node-b"), restartsOf("node-c"), restartsOf("node-d"), restartsOf("node-a")]).to.deep.equal([0, 1, 1, 1]);
      for (const node of host.nodes) expect(host.running(node), node.host).to.equal(imageB.digest);
    });
  });
});
