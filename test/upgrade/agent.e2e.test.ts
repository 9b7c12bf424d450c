/**
 * The upgrade agent end to end on this machine (test/upgrade/cluster.ts): a Hardhat node chain, four meshed
 * attesting nodes each run by a local unit from a versioned install of release A, a trusted node, the manifest.
 *
 * - a corrupted bundle, a moved tag and an unapproved source revision are refused before anything changes;
 * - a rolling upgrade A → B passes every gate, one node at a time (never two units down), while the mesh keeps
 *   serving co-signed proofs;
 * - a downgrade B → A is refused;
 * - a release C whose node cannot reach its mesh fails acceptance on the first node, which is rolled back to B
 *   (its gates pass again), and the rollout stops there;
 * - an agent (bin/ats-upgrade.js, its own process) SIGKILLed during the first node's acceptance of release D and
 *   restarted with the same plan accepts that node again (already-current) before moving any other, then completes;
 *   never two nodes down;
 * - release E served by the downloads service of a real `ats-catalog` process: `ats-upgrade` given its URL refuses
 *   a bundle tampered on the server before anything is staged (no node changes), then, the bytes restored, upgrades
 *   every node to E, each answering healthy on E;
 * - every receipt fits the value-free schema and holds none of the nodes' keys or ids; keys, configs and unit
 *   definitions are byte-identical after all of it, and no data file disappeared.
 *
 * Every process is stopped in after(), also when a step fails.
 *
 * The releases are built --without-modules (the units give the nodes the repository's node_modules through
 * NODE_PATH): with node_modules/ each of the test's 17 stagings extracts some 21 000 files (with 13, that made it take
 * about 2.5 minutes instead of 1.5 and over 1 GiB of temporary installs); test/upgrade/releaseModules.test.ts covers
 * bundled installs. ATS_E2E_WITH_MODULES=1 runs it on bundles with node_modules/ instead.
 */
import { expect } from "chai";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, closeSync, cpSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import hre from "hardhat";
import { runUpgrade } from "../../upgrade/agent";
import { sha256File, treeDigestOfDirectory } from "../../upgrade/digest";
import { readInstallEnv } from "../../upgrade/installEnv";
import { parsePlan, type BundlePlan } from "../../upgrade/plan";
import { assertValueFree, type Receipt } from "../../upgrade/receipt";
import { childEnv, printedJson, startProgram, type RunningProgram } from "../../lib/childProgram";
import { buildRelease, type BuiltRelease } from "../../upgrade/release";
import { planFor, publish, sampleAvailability, secretsOf, startUpgradeCluster, waitConverged, until, type AvailabilitySample, type ClusterNode, type UpgradeCluster } from "./cluster";

const ROOT = join(__dirname, "..", "..");
/** The cluster: with a quorum of 3 of 4, one node down still leaves a co-signing majority. */
const NODE_COUNT = 4;

function bumpPatch(version: string, by: number): string {
  const [major, minor, patch] = version.split(/[.-]/).map(Number) as [number, number, number];
  return `${major}.${minor}.${patch + by}`;
}

/** A copy of dist/ as another version: what a later build would be. `patchCli` edits node/cli.js (release C). */
function distAs(root: string, version: string, patchCli?: (source: string) => string): string {
  const dir = join(root, `dist-${version}`);
  cpSync(join(ROOT, "dist"), dir, { recursive: true });
  const pkgFile = join(dir, "package.json");
  writeFileSync(pkgFile, JSON.stringify({ ...(JSON.parse(readFileSync(pkgFile, "utf8")) as object), version }, null, 2));
  if (patchCli !== undefined) writeFileSync(join(dir, "node", "cli.js"), patchCli(readFileSync(join(dir, "node", "cli.js"), "utf8")));
  return dir;
}

/** Release C's defect: it rewrites every mesh peer's port to 9 before the node reads its config, so it never reaches its mesh. */
const CANNOT_REACH_MESH = `"use strict";
{
  const configFile = process.argv[process.argv.indexOf("--config") + 1];
  const peers = JSON.parse(require("node:fs").readFileSync(configFile, "utf8")).meshPeers || [];
  process.env.ATS_MESH_PEERS = peers.map((peer) => peer.replace(/:[0-9]+$/, ":9")).join(",");
}
`;

/** Runs bin/ats-upgrade.js as its own process (so it can be killed), its output in `<root>/agent-<name>.log`. */
function startAgentIn(root: string, planFile: string, receiptFile: string, name: string): ChildProcess {
  const log = openSync(join(root, `agent-${name}.log`), "a");
  try {
    // TMPDIR under the test's folder: a killed agent leaves its private fetch folder behind, removed with the root.
    const tmp = join(root, "agent-tmp");
    mkdirSync(tmp, { recursive: true });
    return spawn(process.execPath, [join(ROOT, "bin", "ats-upgrade.js"), "run", "--plan", planFile, "--receipt", receiptFile], { cwd: root, env: { ...process.env, TMPDIR: tmp }, stdio: ["ignore", log, log] });
  } finally {
    closeSync(log);
  }
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
}

function releaseOf(built: BuiltRelease, tag: string, dir: string): BundlePlan["release"] {
  return { tag, release_id: built.metadata.release_id, source_revision: built.metadata.source_revision, artifact: { kind: "bundle", sha256: built.metadata.bundle.sha256 }, source: { dir } };
}

/** Everything of the nodes the agent may not change (keys, config, unit definition) plus what it may (install.env, installs). */
function snapshot(cluster: UpgradeCluster): Record<string, string> {
  const state: Record<string, string> = {};
  for (const node of cluster.nodes) {
    state[`${node.host}/keys`] = treeDigestOfDirectory(node.keyDir);
    state[`${node.host}/config`] = sha256File(node.configFile);
    state[`${node.host}/unit.json`] = sha256File(node.unitFile);
    state[`${node.host}/install.env`] = readFileSync(node.unit.installEnvFile, "utf8");
    state[`${node.host}/installs`] = readdirSync(node.planNode.installRoot).sort().join(",");
  }
  return state;
}

function dataFiles(cluster: UpgradeCluster): string[] {
  return cluster.nodes.flatMap((node) => readdirSync(node.dataDir).map((name) => `${node.host}/${name}`));
}

describe("upgrade agent, end to end (4 nodes from installs, a Hardhat node chain)", function () {
  this.timeout(600_000);
  let root: string;
  let cluster: UpgradeCluster;
  const sink: { close?: () => Promise<void> } = {};
  const receipts: Receipt[] = [];
  let releaseA: BuiltRelease;
  let releaseB: BuiltRelease;
  let releaseC: BuiltRelease;
  let releaseD: BuiltRelease;
  let releaseE: BuiltRelease;
  let before0: Record<string, string>;
  let dataBefore: string[];

  const startAgent = (planFile: string, receiptFile: string, name: string) => startAgentIn(root, planFile, receiptFile, name);

  async function run(plan: BundlePlan): Promise<Receipt> {
    const text = JSON.stringify(plan);
    const receipt = await runUpgrade({ plan: parsePlan(JSON.parse(text)), planText: text, pollMs: 250, log: (line) => process.env.ATS_TEST_VERBOSE === "1" && console.log(`    agent: ${line}`) });
    receipts.push(receipt);
    return receipt;
  }

  before(async function () {
    // Releases are built from dist/, and the killed-agent test runs bin/ats-upgrade.js from it: both must be the
    // sources under test (a no-op when dist/ is newer than every source).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require("../../bin/build-dist.js") as { ensureBuilt(): boolean }).ensureBuilt();
    root = mkdtempSync(join(tmpdir(), "ats-upgrade-e2e-"));
    const version = (JSON.parse(readFileSync(join(ROOT, "dist", "package.json"), "utf8")) as { version: string }).version;
    const revision = execFileSync("git", ["rev-parse", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { OPERATOR_PACKAGES } = require("../../bin/operatorPackages.js") as { OPERATOR_PACKAGES: readonly string[] };
    const modules = process.env.ATS_E2E_WITH_MODULES === "1" ? { modules: { projectDir: ROOT, runtimePeers: OPERATOR_PACKAGES } } : {};
    const build = (dist: string) => buildRelease({ distDir: dist, outDir: join(root, "releases"), sourceRevision: revision, sourceTreeDirty: true, sourceDateEpochS: 1_700_000_000, buildTime: new Date(), ...modules });
    releaseA = build(distAs(root, version));
    releaseB = build(distAs(root, bumpPatch(version, 1)));
    releaseC = build(distAs(root, bumpPatch(version, 2), (source) => source.replace('"use strict";\n', CANNOT_REACH_MESH)));
    releaseD = build(distAs(root, bumpPatch(version, 3)));
    releaseE = build(distAs(root, bumpPatch(version, 4)));
    const publishedA = publish(root, releaseA.dir, "a");
    cluster = await startUpgradeCluster({
      hre,
      root,
      nodeCount: NODE_COUNT,
      initial: { ...publishedA, releaseId: releaseA.metadata.release_id, sourceRevision: revision, artifactSha256: releaseA.metadata.bundle.sha256 },
      sink,
    });
    before0 = snapshot(cluster);
    dataBefore = dataFiles(cluster);
  });

  after(async () => {
    await sink.close?.();
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  it("refuses a corrupted bundle, a moved tag and an unapproved source revision, before anything changes", async () => {
    const corrupt = publish(root, releaseB.dir, "corrupt");
    const bundle = join(corrupt.dir, releaseB.metadata.bundle.name);
    chmodSync(bundle, 0o644);
    const bytes = readFileSync(bundle);
    bytes[bytes.length - 100] ^= 0xff;
    writeFileSync(bundle, bytes);
    const corrupted = await run(planFor(cluster, releaseOf(releaseB, "v0.1.1", corrupt.dir)));
    expect(corrupted.outcome).to.equal("refused");
    expect(corrupted.refusal?.code).to.equal("bad-checksum");

    // The tag's folder now serves release C; the plan approved B's digest.
    const moved = await run(planFor(cluster, releaseOf(releaseB, "v0.1.1", publish(root, releaseC.dir, "moved").dir)));
    expect(moved.refusal?.code).to.equal("moved-tag");

    const publishedB = publish(root, releaseB.dir, "b");
    const wrongRevision = await run(planFor(cluster, { ...releaseOf(releaseB, "v0.1.1", publishedB.dir), source_revision: "f".repeat(40) }));
    expect(wrongRevision.refusal?.code).to.equal("unapproved-release");

    for (const receipt of [corrupted, moved, wrongRevision]) expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(Array(NODE_COUNT).fill("not-started"));
    expect(snapshot(cluster)).to.deep.equal(before0);
  });

  it("upgrades A → B one node at a time, every gate passing, while the mesh keeps serving co-signed proofs", async () => {
    const sampler = sampleAvailability(cluster);
    let receipt: Receipt;
    let samples: AvailabilitySample[];
    try {
      receipt = await run(planFor(cluster, releaseOf(releaseB, "v0.1.1", join(root, "published", "b"))));
    } finally {
      samples = await sampler.stop();
    }
    expect(receipt.outcome, JSON.stringify(receipt.nodes.map((node) => node.gates.filter((gate) => !gate.passed)))).to.equal("completed");
    expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(Array(NODE_COUNT).fill("upgraded"));
    for (const [index, node] of receipt.nodes.entries()) {
      expect(node.gates.map((gate) => gate.gate)).to.deep.equal(["unit-running", "version", "genesis", "not-syncing", "finality", "peers", "mesh", "identity", "logs"]);
      expect(node.gates.every((gate) => gate.passed)).to.equal(true);
      expect(node.old?.release_id).to.equal(releaseA.metadata.release_id);
      expect(node.new?.release_id).to.equal(releaseB.metadata.release_id);
      expect(node.preflight?.mesh_state).to.equal("Converged");
      expect(node.preflight?.registered).to.equal(true);
      // One at a time: a node starts only after the previous one finished its gates.
      if (index > 0) expect(Date.parse(node.started_at!)).to.be.at.least(Date.parse(receipt.nodes[index - 1]!.finished_at!));
    }
    for (const node of cluster.nodes) {
      expect(readInstallEnv(node.unit.installEnvFile)?.releaseId).to.equal(releaseB.metadata.release_id);
      expect(readInstallEnv(`${node.unit.installEnvFile}.previous`)?.releaseId).to.equal(releaseA.metadata.release_id);
      expect(existsSync(join(node.planNode.installRoot, releaseA.metadata.release_id))).to.equal(true); // the previous install is kept
      // The node reports the revision it was built from (its bundle's BUILD-REVISION.json): what the version gate checked.
      const info = (await (await fetch(new URL("/node/info", node.planNode.rest))).json()) as { version: string; revision: string | null };
      expect(info).to.deep.include({ version: releaseB.metadata.node_version, revision: releaseB.metadata.source_revision });
    }
    expect(Math.max(...samples.map((sample) => sample.down))).to.equal(1);
    expect(samples.filter((sample) => sample.served).length / samples.length).to.be.at.least(0.9);
  });

  it("refuses a downgrade B → A", async () => {
    const before = snapshot(cluster);
    const receipt = await run(planFor(cluster, releaseOf(releaseA, "v0.1.0", join(root, "published", "a"))));
    expect(receipt.refusal?.code).to.equal("downgrade");
    expect(snapshot(cluster)).to.deep.equal(before);
  });

  it("rolls back a node whose release fails acceptance (it cannot reach its mesh) and stops the rollout", async () => {
    const plan = planFor(cluster, releaseOf(releaseC, "v0.1.2", publish(root, releaseC.dir, "c").dir));
    plan.acceptance.timeoutMs = 15_000;
    await waitConverged(cluster); // B's last restarted node may still be converging: preflight would refuse
    const receipt = await run(plan);
    expect(receipt.outcome, JSON.stringify(receipt.refusal)).to.equal("stopped");
    const [first, ...rest] = receipt.nodes;
    expect(first!.outcome).to.equal("rolled-back");
    const failed = first!.gates.filter((gate) => !gate.passed).map((gate) => gate.gate);
    expect(failed).to.include("mesh");
    expect(first!.rollback?.digest_verified).to.equal(true);
    expect(first!.rollback).to.deep.include({ restored_install_sha256: releaseB.metadata.bundle.tree_sha256 });
    expect(first!.rollback?.passed).to.equal(true);
    expect(first!.rollback?.gates.every((gate) => gate.passed)).to.equal(true);
    expect(rest.map((node) => node.outcome)).to.deep.equal(Array(NODE_COUNT - 1).fill("not-started"));
    for (const node of cluster.nodes) expect(readInstallEnv(node.unit.installEnvFile)?.releaseId).to.equal(releaseB.metadata.release_id);
  });

  it("resumes a rollout whose agent was SIGKILLed during the first node's acceptance, never two nodes down", async () => {
    await waitConverged(cluster); // C's rolled-back node may still be converging: preflight would refuse
    const plan = planFor(cluster, releaseOf(releaseD, "v0.1.3", publish(root, releaseD.dir, "d").dir));
    // The first node's acceptance lasts at least the warm-up: the kill below lands inside it, not after it.
    plan.acceptance.warmupMs = 3_000;
    const planFile = join(root, "plan-d.json");
    writeFileSync(planFile, JSON.stringify(plan));
    const [first, second] = cluster.nodes as [ClusterNode, ClusterNode];
    const onD = (node: ClusterNode) => readInstallEnv(node.unit.installEnvFile)?.releaseId === releaseD.metadata.release_id;
    const killedReceipt = join(root, "receipt-d-killed.json");
    const resumedReceipt = join(root, "receipt-d-resumed.json");
    const sampler = sampleAvailability(cluster);
    const agents: ChildProcess[] = [];
    let samples: AvailabilitySample[];
    let exitCode: number | null;
    try {
      const killed = startAgent(planFile, killedReceipt, "killed");
      agents.push(killed);
      // Switched: install.env names D and the unit runs D's install, so the agent is now in the node's acceptance.
      await until(async () => onD(first) && (await first.unit.status()).runs === join(first.planNode.installRoot, releaseD.metadata.release_id), 120_000, `${first.host} to run D (agent log: ${join(root, "agent-killed.log")})`);
      killed.kill("SIGKILL");
      expect((await exitOf(killed)).signal).to.equal("SIGKILL");
      expect(onD(second), "the kill came after the first node's acceptance").to.equal(false);
      expect(existsSync(killedReceipt)).to.equal(false);
      await waitConverged(cluster, 60_000, cluster.nodes.slice(1)); // the untouched nodes: preflight checks them

      const resumed = startAgent(planFile, resumedReceipt, "resumed");
      agents.push(resumed);
      exitCode = (await exitOf(resumed)).code;
    } finally {
      for (const agent of agents) if (agent.exitCode === null && agent.signalCode === null) agent.kill("SIGKILL");
      samples = await sampler.stop();
    }
    const receipt = JSON.parse(readFileSync(resumedReceipt, "utf8")) as Receipt;
    receipts.push(receipt);
    expect(exitCode, JSON.stringify({ refusal: receipt.refusal, failed: receipt.nodes.map((node) => node.gates.filter((gate) => !gate.passed)) })).to.equal(0);
    expect(receipt.outcome).to.equal("completed");
    // The first node was accepted again (already on D) before any other node moved, and keeps B as its previous install.
    expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(["already-current", ...Array(NODE_COUNT - 1).fill("upgraded")]);
    const [resumedNode, ...others] = receipt.nodes;
    expect(resumedNode!.old?.release_id).to.equal(releaseB.metadata.release_id);
    expect(resumedNode!.new?.release_id).to.equal(releaseD.metadata.release_id);
    expect(resumedNode!.gates.map((gate) => gate.gate)).to.deep.equal(["unit-running", "version", "genesis", "not-syncing", "finality", "peers", "mesh", "identity", "logs"]);
    expect(resumedNode!.gates.every((gate) => gate.passed)).to.equal(true);
    expect(Date.parse(others[0]!.started_at!)).to.be.at.least(Date.parse(resumedNode!.finished_at!));
    for (const node of cluster.nodes) {
      expect(onD(node), node.host).to.equal(true);
      expect(readInstallEnv(`${node.unit.installEnvFile}.previous`)?.releaseId, node.host).to.equal(releaseB.metadata.release_id);
    }
    expect(Math.max(...samples.map((sample) => sample.down))).to.equal(1);
    expect(samples.filter((sample) => sample.served).length / samples.length).to.be.at.least(0.9);
  });

  it("upgrades every node from the downloads URL of ats-catalog, after refusing a bundle tampered on the server before staging anything", async () => {
    // The catalog serves the folder every release of this test was built into (<root>/releases/<release_id>/).
    const catalog: RunningProgram<{ url: string; services: Record<string, string> }> = await startProgram({
      bin: "ats-catalog.js",
      args: ["start"],
      env: childEnv({ ATS_CATALOG_PORT: "0", ATS_CATALOG_RELEASES_DIR: join(root, "releases"), ATS_CATALOG_CONTENT_DIR: join(root, "catalog-content"), ATS_LOG_LEVEL: "warn" }),
      ready: (stdout) => printedJson(stdout),
      name: "ats-catalog",
      timeoutMs: 60_000,
    });
    try {
      const index = (await (await fetch(`${catalog.printed.url}/releases`)).json()) as { releases: { releaseId: string; path: string }[] };
      const listed = index.releases.find((entry) => entry.releaseId === releaseE.metadata.release_id);
      expect(listed, "the catalog lists release E").to.not.equal(undefined);
      const url = new URL(listed!.path, catalog.printed.url).href.replace(/\/$/, "");
      await waitConverged(cluster); // D's last restarted node may still be converging: preflight would refuse
      const plan = planFor(cluster, { tag: "v0.1.4", release_id: releaseE.metadata.release_id, source_revision: releaseE.metadata.source_revision, artifact: { kind: "bundle", sha256: releaseE.metadata.bundle.sha256 }, source: { url } });
      const planFile = join(root, "plan-e.json");
      writeFileSync(planFile, JSON.stringify(plan));
      const runAgent = async (name: string): Promise<{ code: number | null; receipt: Receipt }> => {
        const receiptFile = join(root, `receipt-e-${name}.json`);
        const { code } = await exitOf(startAgent(planFile, receiptFile, `e-${name}`));
        const receipt = JSON.parse(readFileSync(receiptFile, "utf8")) as Receipt;
        receipts.push(receipt);
        return { code, receipt };
      };

      // One byte of the bundle changed on the server: refused by its checksum, before any node changes.
      const bundle = join(releaseE.dir, releaseE.metadata.bundle.name);
      const original = readFileSync(bundle);
      const tampered = Buffer.from(original);
      tampered[tampered.length - 100] ^= 0xff;
      chmodSync(bundle, 0o644);
      writeFileSync(bundle, tampered);
      const before = snapshot(cluster);
      const refused = await runAgent("tampered");
      expect(refused.code).to.equal(1);
      expect(refused.receipt.outcome).to.equal("refused");
      expect(refused.receipt.refusal?.code, refused.receipt.refusal?.message).to.equal("bad-checksum");
      expect(refused.receipt.nodes.map((node) => node.outcome)).to.deep.equal(Array(NODE_COUNT).fill("not-started"));
      expect(snapshot(cluster), "no install staged, no node switched").to.deep.equal(before);

      // The bytes restored: the same URL upgrades every node to E, and each answers healthy on E.
      writeFileSync(bundle, original);
      const { code, receipt } = await runAgent("served");
      expect(code, JSON.stringify({ refusal: receipt.refusal, failed: receipt.nodes.map((node) => node.gates.filter((gate) => !gate.passed)) })).to.equal(0);
      expect(receipt.outcome).to.equal("completed");
      expect(receipt.nodes.map((node) => node.outcome)).to.deep.equal(Array(NODE_COUNT).fill("upgraded"));
      for (const node of receipt.nodes) expect(node.new?.release_id).to.equal(releaseE.metadata.release_id);
      await waitConverged(cluster); // the last restarted node rejoins the mesh
      for (const node of cluster.nodes) {
        expect(readInstallEnv(node.unit.installEnvFile)?.releaseId, node.host).to.equal(releaseE.metadata.release_id);
        const info = (await (await fetch(new URL("/node/info", node.planNode.rest))).json()) as { version: string; revision: string | null };
        expect(info, node.host).to.deep.include({ version: releaseE.metadata.node_version, revision: releaseE.metadata.source_revision });
        expect((await fetch(new URL("/health", node.planNode.rest))).status, `${node.host} /health`).to.equal(200);
      }
    } finally {
      await catalog.stop();
    }
  });

  it("wrote value-free receipts, and changed no key, config, unit definition or data file", () => {
    expect(receipts.length).to.equal(9);
    const secrets = cluster.nodes.flatMap(secretsOf);
    for (const receipt of receipts) assertValueFree(receipt, secrets);
    // The check can fail: a receipt carrying a node's key is refused.
    const leaky = structuredClone(receipts[3]!);
    leaky.nodes[0]!.note = `key ${cluster.nodes[0]!.identity.nodeKey.exportPrivateKey()}`;
    expect(() => assertValueFree(leaky, secrets)).to.throw(/value-free/);

    const after = snapshot(cluster);
    for (const node of cluster.nodes) {
      for (const part of ["keys", "config", "unit.json"]) expect(after[`${node.host}/${part}`], `${node.host}/${part}`).to.equal(before0[`${node.host}/${part}`]);
    }
    const dataAfter = new Set(dataFiles(cluster));
    expect(dataBefore.filter((file) => !dataAfter.has(file))).to.deep.equal([]);
  });
});
