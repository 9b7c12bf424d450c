/**
 * Adopting a node without a record, on the native path (upgrade/adopt.ts with upgrade/installSwitch.ts): a
 * release is built and verified here, its bundle extracted by hand into a folder as an operator would, and the
 * adoption check compares that folder and what the node reports with the verified release:
 *
 * - a matching install, version and revision are adopted: the deployment to record names the folder and its tree;
 * - a version, a revision, a tampered install tree, a unit that runs another folder and a stopped unit are each
 *   refused with what was expected and what was found.
 *
 * The image path, through runUpgrade, is in test/upgrade/containerRun.test.ts. Nothing here listens or starts a
 * process; the temporary folder is removed in afterEach, also when a test fails.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { checkAdoption, type Reported } from "../../upgrade/adopt";
import { UpgradeRefusal } from "../../upgrade/errors";
import { verifyBundleRelease } from "../../upgrade/installSwitch";
import type { PlanNode } from "../../upgrade/plan";
import { buildRelease, LAUNCHER_FILE, type BuiltRelease } from "../../upgrade/release";
import { extractTarGz } from "../../upgrade/tar";
import type { VerifiedArtifact } from "../../upgrade/target";
import type { UnitStatus } from "../../upgrade/unit";
import { fakeDist } from "./helpers";

const REVISION = "0123456789abcdef0123456789abcdef01234567";

describe("upgrade: adopting a node without an install record (bundles)", () => {
  let root: string;
  let built: BuiltRelease;
  let release: VerifiedArtifact;
  let installDir: string;
  let node: PlanNode;
  const running = (): UnitStatus => ({ active: true, pid: 4242, runs: installDir });
  const matching: Reported = { version: "0.1.0", revision: REVISION };

  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), "ats-adopt-"));
    built = buildRelease({ distDir: fakeDist(root, "0.1.0"), outDir: join(root, "release"), sourceRevision: REVISION, sourceTreeDirty: false, sourceDateEpochS: 1_700_000_000, buildTime: new Date("2026-01-02T03:04:05Z") });
    const approved = { tag: "v0.1.0", release_id: built.metadata.release_id, source_revision: REVISION, artifact: { kind: "bundle" as const, sha256: built.metadata.bundle.sha256 }, source: { dir: built.dir } };
    release = await verifyBundleRelease(approved);
    // Installed by hand: the bundle extracted into a folder the agent did not stage, with no install.env.
    installDir = join(root, "ats-node-by-hand");
    await extractTarGz(built.bundlePath, installDir);
    node = {
      host: "node-a",
      role: "primary",
      rest: "http://127.0.0.1:1",
      rpc: "http://127.0.0.1:1",
      installRoot: join(root, "installs"),
      unit: { kind: "local", dir: join(root, "unit") },
      adopt: { release: approved, installDir },
    };
  });
  afterEach(() => {
    release?.dispose();
    chmodSync(root, 0o700);
    rmSync(root, { recursive: true, force: true });
  });

  /** The refusal checkAdoption throws; fails the test when it adopts instead. */
  function refusal(status: UnitStatus, reported: Reported): UpgradeRefusal {
    try {
      checkAdoption(node, release, status, reported);
    } catch (error) {
      expect(error).to.be.instanceOf(UpgradeRefusal);
      expect((error as UpgradeRefusal).code).to.equal("preflight-failed");
      return error as UpgradeRefusal;
    }
    throw new Error("expected the adoption to be refused, but it was adopted");
  }

  it("adopts an install whose tree, version and revision are the verified release's", () => {
    const adopted = checkAdoption(node, release, running(), matching);
    expect(adopted).to.deep.equal({ kind: "install", releaseId: built.metadata.release_id, reference: installDir, runs: installDir, digest: built.metadata.bundle.tree_sha256, sourceRevision: REVISION });
    expect(release.approves(adopted)).to.equal(true);
    // A unit that cannot tell which folder it runs (runs null) is judged by the tree and what the node reports.
    expect(checkAdoption(node, release, { ...running(), runs: null }, matching)).to.deep.equal(adopted);
  });

  it("refuses a node that reports another version, with both versions as evidence", () => {
    const error = refusal(running(), { ...matching, version: "0.0.9" });
    expect(error.message).to.match(/node-a: not adopted as ats-node-0\.1\.0-0123456789ab: the version the node reports: expected 0\.1\.0, found 0\.0\.9/);
    expect(error.evidence).to.deep.include({ host: "node-a", expected: "0.1.0", found: "0.0.9" });
  });

  it("refuses a node that reports another source revision, or none", () => {
    const other = "f".repeat(40);
    expect(refusal(running(), { ...matching, revision: other }).evidence).to.deep.include({ expected: REVISION, found: other });
    expect(refusal(running(), { ...matching, revision: null }).message).to.match(/the source revision the node reports: expected 0123456789abcdef0123456789abcdef01234567, found none$/);
  });

  it("refuses an install tree modified in place, naming the release's tree digest and the one found", () => {
    const launcher = join(installDir, LAUNCHER_FILE);
    chmodSync(launcher, 0o644);
    writeFileSync(launcher, `${readFileSync(launcher, "utf8")}\n// patched by hand\n`);
    const error = refusal(running(), matching);
    expect(error.message).to.match(/the install's tree digest: expected [0-9a-f]{64}, found [0-9a-f]{64}$/);
    expect(error.evidence.expected).to.equal(built.metadata.bundle.tree_sha256);
    expect(error.evidence.found).to.be.a("string").and.not.equal(built.metadata.bundle.tree_sha256);
  });

  it("refuses a unit that runs another folder than adopt names, a stopped unit and a missing folder", () => {
    const elsewhere = join(root, "elsewhere");
    expect(refusal({ ...running(), runs: elsewhere }, matching).evidence).to.deep.include({ expected: installDir, found: elsewhere });
    expect(refusal({ active: false, pid: null, runs: null }, matching).message).to.match(/its unit is not running: expected running, found stopped/);
    node = { ...node, adopt: { ...node.adopt!, installDir: join(root, "missing") } };
    expect(refusal({ ...running(), runs: null }, matching).message).to.match(/cannot read install .*missing \(ENOENT/);
  });
});
