/**
 * The agent's bundle reader (upgrade/tar.ts extractTarGz, through upgrade/fetchRelease.ts): an archive is streamed
 * to disk, never inflated into memory, within bounds per entry, in total and in entries; a path twice (a file twice,
 * a file and a folder at one path, anything below a file) is refused naming it; a refusal leaves no file behind.
 */
import { expect } from "chai";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { sha256Hex, treeDigestOfDirectory, treeDigestOfEntries } from "../../upgrade/digest";
import { UpgradeRefusal } from "../../upgrade/errors";
import { fetchVerifiedRelease, type FetchOptions } from "../../upgrade/fetchRelease";
import { stageInstall } from "../../upgrade/installs";
import { METADATA_FILE } from "../../upgrade/metadata";
import { buildRelease, REVISION_FILE, revisionFileContent, type BuiltRelease } from "../../upgrade/release";
import { formatSums, SUMS_FILE } from "../../upgrade/sums";
import * as tar from "../../upgrade/tar";
import { writeTarGz, type TarEntry } from "../../upgrade/tar";
import { fakeDist, rejection } from "./helpers";

const REVISION = "0123456789abcdef0123456789abcdef01234567";
const MiB = 1024 * 1024;

const file = (path: string, content: Buffer | string, executable = false): TarEntry => ({ path, type: "file", content: Buffer.from(content), executable });
const folder = (path: string): TarEntry => ({ path, type: "directory" });

/** A gzip'd ustar archive of `entries` in exactly this order (writeTarGz sorts them), with its end marker. */
function archiveInOrder(entries: readonly TarEntry[], trailer: Buffer = Buffer.alloc(1024)): Buffer {
  // Each entry's header and content, as the writer makes them, without the writer's end marker.
  const blocks = entries.map((entry) => {
    const single = gunzipSync(writeTarGz([entry], 1_700_000_000));
    return single.subarray(0, single.length - 1024);
  });
  return gzipSync(Buffer.concat([...blocks, trailer]));
}

describe("upgrade: the bundle reader streams to disk, within bounds, each path once", function () {
  this.timeout(60_000);
  let root: string;
  let savedTmpdir: string | undefined;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ats-tar-"));
    // The fetch's private folders land here, so that the test sees every one of them (and no other run's).
    savedTmpdir = process.env.TMPDIR;
    mkdirSync(join(root, "tmp"));
    process.env.TMPDIR = join(root, "tmp");
  });
  afterEach(() => {
    if (savedTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmpdir;
    rmSync(root, { recursive: true, force: true });
  });

  /** A release whose bundle is `bundle` (its metadata, digests and SUMS consistent with it), and its approval. */
  let published = 0;
  function publish(bundle: Buffer, treeSha256: string) {
    published += 1;
    const built: BuiltRelease = buildRelease({ distDir: fakeDist(root, "1.2.3"), outDir: join(root, `out-${published}`), sourceRevision: REVISION, sourceTreeDirty: false, sourceDateEpochS: 1_700_000_000, buildTime: new Date("2026-01-02T03:04:05Z") });
    const dir = join(root, `published-${published}`);
    mkdirSync(dir);
    const metadata = { ...built.metadata, bundle: { ...built.metadata.bundle, sha256: sha256Hex(bundle), tree_sha256: treeSha256 } };
    const metadataText = `${JSON.stringify(metadata)}\n`;
    writeFileSync(join(dir, metadata.bundle.name), bundle);
    writeFileSync(join(dir, METADATA_FILE), metadataText);
    writeFileSync(join(dir, SUMS_FILE), formatSums({ [metadata.bundle.name]: sha256Hex(bundle), [METADATA_FILE]: sha256Hex(metadataText) }));
    return { tag: "v1.2.3", release_id: metadata.release_id, source_revision: REVISION, artifact: { kind: "bundle" as const, sha256: sha256Hex(bundle) }, source: { dir } };
  }

  /** The fetch of a release whose bundle holds `entries` (in this order) is refused matching `pattern`; nothing is left in the temp folder. */
  async function fetchRefused(entries: readonly TarEntry[], pattern: RegExp, options: FetchOptions = {}): Promise<UpgradeRefusal> {
    const withRevision = [file(REVISION_FILE, revisionFileContent(REVISION)), ...entries];
    const approved = publish(archiveInOrder(withRevision), treeDigestOfEntries(withRevision));
    const fetched = fetchVerifiedRelease(approved, options).then((verified) => {
      verified.dispose();
      throw new Error("verified, but a refusal was expected");
    });
    const refusal = await rejection(fetched, UpgradeRefusal, pattern);
    expect(refusal.code).to.equal("unsafe-archive");
    expect(readdirSync(join(root, "tmp")), "the private folder is removed").to.deep.equal([]);
    return refusal;
  }

  it("verifies a release extracted into its private folder, and stages installs as read-only copies of that tree", async () => {
    const entries = [file(REVISION_FILE, revisionFileContent(REVISION)), file("ats-node.js", "#!/usr/bin/env node\n", true), folder("node"), file("node/cli.js", "x")];
    const verified = await fetchVerifiedRelease(publish(writeTarGz(entries, 0), treeDigestOfEntries(entries)));
    try {
      expect(verified.treeDir.startsWith(join(root, "tmp"))).to.equal(true);
      expect(treeDigestOfDirectory(verified.treeDir)).to.equal(treeDigestOfEntries(entries));
      const installRoot = join(root, "installs");
      mkdirSync(installRoot);
      const record = stageInstall(installRoot, verified);
      expect(treeDigestOfDirectory(record.installDir)).to.equal(treeDigestOfEntries(entries));
      expect(statSync(join(record.installDir, "ats-node.js")).mode & 0o777).to.equal(0o555);
      expect(statSync(join(record.installDir, "node", "cli.js")).mode & 0o777).to.equal(0o444);
      // The verified tree stays whole for the next node's install, until the release is disposed of.
      expect(treeDigestOfDirectory(verified.treeDir)).to.equal(treeDigestOfEntries(entries));
    } finally {
      verified.dispose();
    }
    expect(readdirSync(join(root, "tmp"))).to.deep.equal([]);
  });

  it("refuses a bundle that holds a path twice, naming the path: a file twice, a file and a folder, a file below a file", async () => {
    const cases: Array<[string, TarEntry[], RegExp]> = [
      ["the same file twice", [file("node/cli.js", "a"), file("node/cli.js", "b")], /path appears twice \(a file, then a file\): "node\/cli\.js"/],
      ["a file, then a folder at its path", [file("node", "a"), folder("node")], /path appears twice \(a file, then a folder\): "node"/],
      ["a folder, then a file at its path", [folder("node"), file("node", "a")], /path appears twice \(a folder, then a file\): "node"/],
      ["a folder twice", [folder("node"), folder("node")], /path appears twice \(a folder, then a folder\): "node"/],
      ["a file, then a file below it", [file("node", "a"), file("node/cli.js", "b")], /a path below the file "node": "node\/cli\.js"/],
      ["a file, then a folder below it", [file("node", "a"), folder("node/lib")], /a path below the file "node": "node\/lib"/],
      ["a file below a path, then a file at that path", [file("node/cli.js", "a"), file("node", "b")], /a file at a path that earlier entries use as a folder: "node"/],
    ];
    for (const [label, entries, pattern] of cases) {
      const refusal = await fetchRefused(entries, pattern);
      expect(refusal.evidence, label).to.have.property("entry");
    }
  });

  it("refuses a file above the per-entry bound before writing it, and an archive past the total bound, naming entry, size and bound", async () => {
    const perEntry = await fetchRefused([file("small", "x"), file("big", Buffer.alloc(2 * MiB))], /a file of 2097152 bytes, above the bound of 1048576 per file: "big"/, {
      tarLimits: { maxEntryBytes: MiB },
    });
    expect(perEntry.evidence).to.deep.equal({ entry: "big", bytes: 2 * MiB, maxEntryBytes: MiB });
    // Each file within the per-entry bound; the second takes the whole past 1 MiB.
    const total = await fetchRefused([file("a", Buffer.alloc(600 * 1024)), file("b", Buffer.alloc(600 * 1024))], /a file of 614400 bytes that takes the archive past its bound of 1048576 bytes unpacked: "b"/, {
      tarLimits: { maxUnpackedBytes: MiB },
    });
    expect(total.evidence).to.include({ entry: "b", bytes: 600 * 1024, maxUnpackedBytes: MiB });
    await fetchRefused([file("a", "x"), file("b", "y"), folder("c")], /more than 2 entries \(the bound\); the first past it: "b"/, { tarLimits: { maxEntries: 2 } });
  });

  describe("extractTarGz", () => {
    /** Writes `archive` into the test folder; returns its path. */
    const saved = (archive: Buffer, name = "bundle.tar.gz"): string => {
      const path = join(root, name);
      writeFileSync(path, archive);
      return path;
    };

    it("writes files and folders as the writer made them, with the digests the tree digest needs", async () => {
      const entries = [folder("node"), file("node/cli.js", "exports.main = 1;\n"), file("ats-node.js", "#!/usr/bin/env node\n", true), file("empty", "")];
      const out = join(root, "install");
      const tree = await tar.extractTarGz(saved(writeTarGz(entries, 1_700_000_000)), out);
      expect(tree.files.map((entry) => entry.path)).to.deep.equal(["ats-node.js", "empty", "node/cli.js"]);
      expect(tree.directories).to.deep.equal(["node"]);
      expect(tree.files[0]).to.deep.equal({ path: "ats-node.js", bytes: 20, sha256: sha256Hex("#!/usr/bin/env node\n"), executable: true });
      expect(treeDigestOfDirectory(out)).to.equal(treeDigestOfEntries(entries));
      expect(statSync(join(out, "node", "cli.js")).mode & 0o777).to.equal(0o444);
      expect(statSync(join(out, "ats-node.js")).mode & 0o777).to.equal(0o555);
      expect(readFileSync(join(out, "node", "cli.js"), "utf8")).to.equal("exports.main = 1;\n");
    });

    it("never holds an entry whole: a 32 MiB file is written a chunk at a time", async () => {
      const archive = saved(writeTarGz([file("zeros", Buffer.alloc(32 * MiB))], 0));
      // Node's fs module itself (an `import * as` is a copy): the reader's writes go through it.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const nodeFs = require("node:fs") as { writeSync: (...args: unknown[]) => number };
      const writes: number[] = [];
      const original = nodeFs.writeSync;
      nodeFs.writeSync = (fd: unknown, buffer: unknown, ...rest: unknown[]) => {
        writes.push((buffer as Buffer).length);
        return original(fd, buffer, ...rest);
      };
      try {
        await tar.extractTarGz(archive, join(root, "out"));
      } finally {
        nodeFs.writeSync = original;
      }
      expect(statSync(join(root, "out", "zeros")).size).to.equal(32 * MiB);
      expect(writes.length).to.be.greaterThan(100);
      expect(Math.max(...writes)).to.be.at.most(64 * 1024);
    });

    it("refuses past the total bound mid-stream, and data after the end marker, leaving no partial file", async () => {
      // 64 MiB of zeros after the end marker gzip to ~64 kB: stopped at the bound, nothing left of what was written.
      const padded = saved(archiveInOrder([file("a", Buffer.alloc(300 * 1024))], Buffer.alloc(64 * MiB)));
      const out = join(root, "out");
      const refusal = await rejection(tar.extractTarGz(padded, out, { maxUnpackedBytes: MiB }), UpgradeRefusal, /unpacks to more than 1048576 bytes \(the bound in total\); reached in or after: "a"/);
      expect(refusal.evidence).to.include({ entry: "a", maxUnpackedBytes: MiB });
      expect(existsSync(out)).to.equal(false);
      const junk = saved(archiveInOrder([file("a", "x")], Buffer.concat([Buffer.alloc(1024), Buffer.from("junk")])), "junk.tar.gz");
      await rejection(tar.extractTarGz(junk, out), UpgradeRefusal, /data after the end-of-archive marker, following: "a"/);
      expect(existsSync(out)).to.equal(false);
    });

    it("refuses a truncated archive (gzip cut short, an entry cut short, no end marker) and removes what it wrote", async () => {
      const out = join(root, "out");
      const whole = writeTarGz([file("a", Buffer.alloc(4096, 1)), file("b", "y")], 0);
      await rejection(tar.extractTarGz(saved(whole.subarray(0, whole.length - 4), "cut.tar.gz"), out), UpgradeRefusal, /not gzip, or cut short/);
      expect(existsSync(out)).to.equal(false);
      const inside = gunzipSync(whole).subarray(0, 512 + 1000);
      await rejection(tar.extractTarGz(saved(gzipSync(inside), "inside.tar.gz"), out), UpgradeRefusal, /truncated file \(3096 of its 4096 bytes missing\): "a"/);
      expect(existsSync(out)).to.equal(false);
      const unterminated = gunzipSync(writeTarGz([file("a", "x")], 0)).subarray(0, 1024);
      await rejection(tar.extractTarGz(saved(gzipSync(unterminated), "open.tar.gz"), out), UpgradeRefusal, /ends without its end-of-archive marker, after: "a"/);
      expect(existsSync(out)).to.equal(false);
      await rejection(tar.extractTarGz(saved(Buffer.from("not gzip at all"), "text.tar.gz"), out), UpgradeRefusal, /not gzip/);
      expect(existsSync(out)).to.equal(false);
    });

    it("takes lower bounds only, and never writes into a folder that exists", async () => {
      const archive = saved(writeTarGz([file("a", "x")], 0));
      for (const limits of [{ maxUnpackedBytes: 0 }, { maxEntryBytes: tar.MAX_TAR_ENTRY_BYTES + 1 }, { maxEntries: 1.5 }]) {
        await rejection(tar.extractTarGz(archive, join(root, "out"), limits), RangeError, /must be an integer in \[1, /);
      }
      mkdirSync(join(root, "there"));
      writeFileSync(join(root, "there", "keep"), "mine");
      await rejection(tar.extractTarGz(archive, join(root, "there")), Error, /EEXIST/);
      expect(readFileSync(join(root, "there", "keep"), "utf8")).to.equal("mine");
    });
  });

  it("writes no bundle a reader would refuse: an entry above the per-entry bound", () => {
    expect(() => writeTarGz([{ path: "big", type: "file", content: Buffer.alloc(tar.MAX_TAR_ENTRY_BYTES + 1) }], 0)).to.throw(/big is 67108865 bytes, above the 67108864 per file a reader accepts/);
  });
});
