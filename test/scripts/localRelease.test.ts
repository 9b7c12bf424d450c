/**
 * The local network's own release (scripts/localRelease.ts): built once by `npm run release`'s code (here without
 * node_modules/, to keep the test light), then reused while the sources are unchanged; a folder under its id that is
 * no release (no SHA256SUMS) is replaced, superseded releases are removed, and no staging folder is left.
 */
import { expect } from "chai";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readRelease } from "../../catalog/downloads";
import { ensureLocalRelease, planLocalRelease, type LocalReleasePlan } from "../../scripts/localRelease";

describe("the local network's release (scripts/localRelease.ts)", function () {
  this.timeout(300_000);
  let releasesDir: string;
  before(() => {
    releasesDir = mkdtempSync(join(tmpdir(), "ats-local-release-"));
  });
  after(() => rmSync(releasesDir, { recursive: true, force: true }));

  it("builds the checkout's release once, says so before it builds, and reuses it while the sources are unchanged", async () => {
    const plans: LocalReleasePlan[] = [];
    const first = await ensureLocalRelease({ releasesDir, withoutModules: true, onPlan: (plan) => plans.push(plan) });
    expect(plans).to.have.length(1);
    expect(plans[0]).to.deep.include({ releaseId: first.releaseId, reuse: false, why: "none for these sources yet" });
    expect(first.built).to.equal(true);
    expect(first.releaseId).to.match(/^ats-node-\d+\.\d+\.\d+-[0-9a-f]{12}(-dirty)?$/);
    const served = readRelease(releasesDir, first.releaseId);
    expect(served?.files.map((file) => file.name).sort()).to.include.members(["BUILD-METADATA.json", "SHA256SUMS"]);
    expect(readdirSync(releasesDir), "no staging folder left").to.deep.equal([first.releaseId]);

    const second = await ensureLocalRelease({ releasesDir, withoutModules: true });
    expect(second).to.deep.include({ releaseId: first.releaseId, dir: first.dir, built: false });
    expect(second.why).to.match(first.releaseId.endsWith("-dirty") ? /^uncommitted sources unchanged since it was built$/ : /^commit [0-9a-f]{12} unchanged$/);
  });

  it("replaces a folder under the release's id that is no release (no SHA256SUMS), and removes superseded releases", async () => {
    const { releaseId, dir } = planLocalRelease(releasesDir);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    writeFileSync(join(dir, "partial.tar.gz"), "half a bundle");
    const superseded = join(releasesDir, "ats-node-0.0.9-0123456789ab");
    mkdirSync(superseded);
    expect(planLocalRelease(releasesDir)).to.deep.include({ reuse: false, why: "none for these sources yet" });
    const rebuilt = await ensureLocalRelease({ releasesDir, withoutModules: true });
    expect(rebuilt).to.deep.include({ releaseId, built: true });
    expect(existsSync(join(dir, "partial.tar.gz"))).to.equal(false);
    expect(readdirSync(releasesDir), "the network's current release only").to.deep.equal([releaseId]);
    expect(readRelease(releasesDir, releaseId)).to.not.equal(null);
  });
});
