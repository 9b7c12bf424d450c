/**
 * Releases (upgrade/release.ts, upgrade/tar.ts): the bundle is reproducible, BUILD-METADATA.json and SHA256SUMS
 * describe it, a release folder is never written twice, and the extractor refuses archives that would write
 * outside their folder or carry links.
 */
import { expect } from "chai";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { sha256File, sha256Hex, treeDigestOfDirectory, treeDigestOfEntries, treeDigestOfExtracted } from "../../upgrade/digest";
import { UpgradeRefusal } from "../../upgrade/errors";
import { METADATA_FILE, parseBuildMetadata } from "../../upgrade/metadata";
import { BUILD_REVISION_FILE, readBuildRevision } from "../../node/core/buildRevision";
import { fetchVerifiedRelease } from "../../upgrade/fetchRelease";
import { installedRevision } from "../../upgrade/installs";
import { buildRelease, LAUNCHER_FILE, REVISION_FILE } from "../../upgrade/release";
import { formatSums, parseSums, SUMS_FILE } from "../../upgrade/sums";
import { extractTarGz, writeTarGz, type TarEntry } from "../../upgrade/tar";
import { fakeDist, rejection } from "./helpers";

const REVISION = "0123456789abcdef0123456789abcdef01234567";

/** A raw ustar header block for a crafted entry (name, type flag), gzip'd with an end-of-archive. */
function craftedArchive(name: string, type: string, linkName = ""): Buffer {
  const block = Buffer.alloc(512);
  block.write(name, 0);
  block.write("0000644\0", 100);
  block.write("00000000000\0", 124);
  block.write("00000000000\0", 136);
  block.write("        ", 148);
  block.write(type, 156);
  block.write(linkName, 157);
  block.write("ustar\0", 257);
  block.write("00", 263);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return gzipSync(Buffer.concat([block, Buffer.alloc(1024)]));
}

describe("upgrade: releases", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ats-release-"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const build = (dist: string, out: string, buildTime = new Date("2026-01-02T03:04:05Z")) =>
    buildRelease({ distDir: dist, outDir: join(root, out), sourceRevision: REVISION, sourceTreeDirty: false, sourceDateEpochS: 1_700_000_000, buildTime });

  it("builds the same bundle bytes twice (different build times), and metadata + SHA256SUMS that describe it", () => {
    const dist = fakeDist(root, "1.2.3");
    const first = build(dist, "a", new Date("2026-01-01T00:00:00Z"));
    const second = build(dist, "b", new Date("2026-06-01T00:00:00Z"));
    expect(sha256File(first.bundlePath)).to.equal(sha256File(second.bundlePath));
    expect(first.metadata.build_time).to.not.equal(second.metadata.build_time);

    const metadata = parseBuildMetadata(JSON.parse(readFileSync(join(first.dir, METADATA_FILE), "utf8")), "test");
    expect(metadata.release_id).to.equal("ats-node-1.2.3-0123456789ab");
    expect(metadata.source_revision).to.equal(REVISION);
    expect(metadata.node_version).to.equal("1.2.3");
    expect(metadata.bundle.name).to.equal(`ats-node-1.2.3-${process.platform}-${process.arch}.tar.gz`);
    expect(metadata.runtime).to.deep.equal({ node: process.version, abi: process.versions.modules, platform: process.platform, arch: process.arch });

    const sums = parseSums(readFileSync(join(first.dir, SUMS_FILE), "utf8"));
    expect(sums.get(metadata.bundle.name)).to.equal(sha256File(first.bundlePath));
    expect(sums.get(METADATA_FILE)).to.equal(sha256File(join(first.dir, METADATA_FILE)));
    expect(statSync(first.bundlePath).mode & 0o777).to.equal(0o444);
  });

  it("bundles dist/ without its build stamp, plus the launcher and the revision file; the tree digest is the extracted install's", async () => {
    const dist = fakeDist(root, "1.2.3");
    writeFileSync(join(dist, REVISION_FILE), JSON.stringify({ source_revision: "f".repeat(40) })); // dist/ cannot choose the revision
    const release = build(dist, "out");
    const install = join(root, "install");
    const extracted = await extractTarGz(release.bundlePath, install);
    expect(extracted.files.map((file) => file.path)).to.deep.equal([REVISION_FILE, LAUNCHER_FILE, "node/cli.js", "package.json"]);
    expect(treeDigestOfExtracted(extracted.files)).to.equal(release.metadata.bundle.tree_sha256);
    expect(treeDigestOfDirectory(install)).to.equal(release.metadata.bundle.tree_sha256);
    expect(statSync(join(install, "node", "cli.js")).mode & 0o777).to.equal(0o444);
    expect(statSync(join(install, LAUNCHER_FILE)).mode & 0o777).to.equal(0o555);
    // What the installed node reports in GET /node/info `revision`, read the way the node reads it.
    expect(BUILD_REVISION_FILE).to.equal(REVISION_FILE);
    expect(readBuildRevision(join(install, BUILD_REVISION_FILE))).to.equal(REVISION);
    expect(installedRevision(install)).to.equal(REVISION);
    expect(installedRevision(join(root, "no-such-install"))).to.equal(null);
  });

  it("refuses a bundle whose revision file is not the approved source revision (unapproved-release)", async () => {
    const release = build(fakeDist(root, "1.2.3"), "out");
    const approved = { tag: "v1.2.3", release_id: release.metadata.release_id, source_revision: REVISION, artifact: { kind: "bundle" as const, sha256: release.metadata.bundle.sha256 }, source: { dir: release.dir } };
    (await fetchVerifiedRelease(approved)).dispose();
    // The same bytes republished with another revision file: digests and metadata consistent, the file not.
    const forged = join(root, "forged");
    mkdirSync(forged);
    const unpacked = join(root, "unpacked");
    const entries: TarEntry[] = (await extractTarGz(release.bundlePath, unpacked)).files.map((file) => ({
      path: file.path,
      type: "file",
      content: file.path === REVISION_FILE ? Buffer.from(`${JSON.stringify({ source_revision: "f".repeat(40) })}\n`) : readFileSync(join(unpacked, file.path)),
      executable: file.executable,
    }));
    const bundle = writeTarGz(entries, 1_700_000_000);
    const metadata = { ...release.metadata, bundle: { ...release.metadata.bundle, sha256: sha256Hex(bundle), tree_sha256: treeDigestOfEntries(entries) } };
    const metadataText = `${JSON.stringify(metadata)}\n`;
    writeFileSync(join(forged, metadata.bundle.name), bundle);
    writeFileSync(join(forged, METADATA_FILE), metadataText);
    writeFileSync(join(forged, SUMS_FILE), formatSums({ [metadata.bundle.name]: sha256Hex(bundle), [METADATA_FILE]: sha256Hex(metadataText) }));
    const refusal = await fetchVerifiedRelease({ ...approved, artifact: { kind: "bundle", sha256: sha256Hex(bundle) }, source: { dir: forged } }).then(
      (verified) => verified.dispose(),
      (error: unknown) => error,
    );
    expect(refusal).to.be.instanceOf(UpgradeRefusal);
    expect((refusal as UpgradeRefusal).code).to.equal("unapproved-release");
    expect((refusal as UpgradeRefusal).message).to.match(/BUILD-REVISION\.json names another source revision/);
  });

  it("never writes a release folder twice", () => {
    const dist = fakeDist(root, "1.2.3");
    build(dist, "out");
    expect(() => build(dist, "out")).to.throw(/already exists .* releases are immutable/);
  });

  it("refuses a metadata file with an unknown key or a malformed revision (closed schema)", () => {
    const release = build(fakeDist(root, "1.2.3"), "out");
    expect(() => parseBuildMetadata({ ...release.metadata, extra: 1 }, "test")).to.throw(UpgradeRefusal);
    expect(() => parseBuildMetadata({ ...release.metadata, source_revision: "main" }, "test")).to.throw(/source_revision/);
  });

  it("refuses archives with a path out of the folder, an absolute path or a link, and leaves nothing written", async () => {
    const out = join(root, "out");
    for (const [archive, why] of [
      [craftedArchive("../evil", "0"), /path leaves the bundle/],
      [craftedArchive("/etc/evil", "0"), /not a plain relative path/],
      [craftedArchive("link", "2", "/etc/passwd"), /entry type "2"/],
      [craftedArchive("hard", "1", "node/cli.js"), /entry type "1"/],
    ] as const) {
      writeFileSync(join(root, "crafted.tar.gz"), archive);
      await rejection(extractTarGz(join(root, "crafted.tar.gz"), out), UpgradeRefusal, why);
      expect(existsSync(out), String(why)).to.equal(false);
    }
    const corrupted = writeTarGz([{ path: "a", type: "file", content: Buffer.from("x") }], 0);
    writeFileSync(join(root, "corrupted.tar.gz"), corrupted.subarray(0, corrupted.length - 4));
    await rejection(extractTarGz(join(root, "corrupted.tar.gz"), out), UpgradeRefusal, /not gzip, or cut short/);
  });

  it("refuses an archive that unpacks beyond the bound (a gzip bomb), before writing the entry that passes it", async () => {
    // 64 MiB of zeros gzip to ~64 kB; the reader refuses on the entry's declared size and never inflates it.
    const bomb = join(root, "bomb.tar.gz");
    writeFileSync(bomb, writeTarGz([{ path: "zeros", type: "file", content: Buffer.alloc(64 * 1024 * 1024) }], 0));
    expect(statSync(bomb).size).to.be.below(256 * 1024);
    const out = join(root, "out");
    await rejection(extractTarGz(bomb, out, { maxUnpackedBytes: 1024 * 1024 }), UpgradeRefusal, /a file of 67108864 bytes that takes the archive past its bound of 1048576 bytes unpacked: "zeros"/);
    expect(existsSync(out)).to.equal(false);
    await rejection(extractTarGz(bomb, out, { maxUnpackedBytes: 0 }), RangeError, /maxUnpackedBytes/);
    expect((await extractTarGz(bomb, out)).files.map((file) => file.path)).to.deep.equal(["zeros"]); // within the default bounds
  });

  it("parses SHA256SUMS strictly", () => {
    expect(parseSums(`${sha256Hex("x")}  a.tar.gz\n`).get("a.tar.gz")).to.equal(sha256Hex("x"));
    expect(() => parseSums("deadbeef  a.tar.gz\n")).to.throw(/line 1/);
    expect(() => parseSums(`${sha256Hex("x")}  a\n${sha256Hex("y")}  a\n`)).to.throw(/twice/);
  });
});
