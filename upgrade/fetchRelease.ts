/**
 * Fetches the plan's release into a private folder (0700, under the OS temp folder) and verifies it there, from
 * the copies only (the published folder is read once, so it cannot change between check and use):
 *
 * 1. SHA256SUMS parses, and lists BUILD-METADATA.json and the bundle with their digests;
 * 2. every file's bytes match SHA256SUMS ("bad-checksum": a corrupted or truncated download);
 * 3. the bundle's digest is the plan's approved artifact ("moved-tag": the tag now serves another build);
 * 4. release_id and source_revision are the approved ones ("unapproved-release");
 * 5. the bundle was built for this platform, CPU and Node ABI ("wrong-platform");
 * 6. the archive holds only plain files and folders, and its tree digest is the metadata's;
 * 7. its BUILD-REVISION.json (what the node will report as its revision) names the approved source revision
 *    ("unapproved-release").
 *
 * Any failure refuses before anything on a node changes.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sha256Hex, treeDigestOfEntries } from "./digest";
import { UpgradeRefusal } from "./errors";
import { hostRuntime, METADATA_FILE, parseBuildMetadata, type BuildMetadata } from "./metadata";
import type { BundlePlan } from "./plan";
import { REVISION_FILE, revisionFileContent } from "./release";
import { parseSums, SUMS_FILE } from "./sums";
import { readTarGz, type TarEntry } from "./tar";

export interface VerifiedRelease {
  metadata: BuildMetadata;
  entries: readonly TarEntry[];
  /** Removes the private folder. */
  dispose(): void;
}

function checksum(name: string, bytes: Buffer, sums: Map<string, string>): string {
  const listed = sums.get(name);
  if (listed === undefined) throw new UpgradeRefusal("bad-checksum", `${SUMS_FILE} does not list ${name}`, { file: name });
  const actual = sha256Hex(bytes);
  if (actual !== listed) throw new UpgradeRefusal("bad-checksum", `${name}: sha256 ${actual} but ${SUMS_FILE} says ${listed}`, { file: name, actual, listed });
  return actual;
}

export function fetchVerifiedRelease(release: BundlePlan["release"]): VerifiedRelease {
  // mkdtemp creates the folder 0700: nobody else on the host can swap a file between our check and our use.
  const privateDir = mkdtempSync(join(tmpdir(), "ats-upgrade-fetch-"));
  const dispose = () => rmSync(privateDir, { recursive: true, force: true });
  try {
    const copy = (name: string): Buffer => {
      try {
        copyFileSync(join(release.source.dir, name), join(privateDir, name));
      } catch (error) {
        throw new UpgradeRefusal("bad-checksum", `release ${release.tag}: cannot fetch ${name}: ${(error as Error).message}`, { file: name });
      }
      return readFileSync(join(privateDir, name));
    };
    const sums = parseSums(copy(SUMS_FILE).toString("utf8"));
    const metadataBytes = copy(METADATA_FILE);
    checksum(METADATA_FILE, metadataBytes, sums);
    const metadata = parseBuildMetadata(JSON.parse(metadataBytes.toString("utf8")), `release ${release.tag}`);
    const bundle = copy(metadata.bundle.name);
    const bundleSha256 = checksum(metadata.bundle.name, bundle, sums);
    if (bundleSha256 !== metadata.bundle.sha256) throw new UpgradeRefusal("bad-checksum", `${metadata.bundle.name}: sha256 ${bundleSha256} but ${METADATA_FILE} says ${metadata.bundle.sha256}`);
    if (bundleSha256 !== release.artifact.sha256) {
      throw new UpgradeRefusal("moved-tag", `tag ${release.tag} now serves bundle ${bundleSha256}, the plan approved ${release.artifact.sha256}: a tag is never trusted over the digest`, {
        tag: release.tag,
        served: bundleSha256,
        approved: release.artifact.sha256,
      });
    }
    if (metadata.release_id !== release.release_id || metadata.source_revision !== release.source_revision) {
      throw new UpgradeRefusal("unapproved-release", `release ${metadata.release_id} at ${metadata.source_revision}; the plan approved ${release.release_id} at ${release.source_revision}`, {
        release_id: metadata.release_id,
        source_revision: metadata.source_revision,
      });
    }
    const host = hostRuntime();
    if (metadata.runtime.platform !== host.platform || metadata.runtime.arch !== host.arch || metadata.runtime.abi !== host.abi) {
      throw new UpgradeRefusal("wrong-platform", `bundle built for ${metadata.runtime.platform}-${metadata.runtime.arch} ABI ${metadata.runtime.abi}; this host is ${host.platform}-${host.arch} ABI ${host.abi}`);
    }
    const entries = readTarGz(bundle);
    const tree = treeDigestOfEntries(entries);
    if (tree !== metadata.bundle.tree_sha256) throw new UpgradeRefusal("bad-checksum", `bundle tree digest ${tree} but ${METADATA_FILE} says ${metadata.bundle.tree_sha256}`);
    const revisionFile = entries.find((entry) => entry.path === REVISION_FILE && entry.type === "file");
    if (revisionFile === undefined || !revisionFile.content!.equals(revisionFileContent(release.source_revision))) {
      throw new UpgradeRefusal("unapproved-release", `the bundle's ${REVISION_FILE} ${revisionFile === undefined ? "is missing" : "names another source revision"}; the plan approved ${release.source_revision}`);
    }
    return { metadata, entries, dispose };
  } catch (error) {
    dispose();
    throw error;
  }
}
