/**
 * Versioned installs: `<installRoot>/<release_id>/` holds one release's extracted bundle (read-only files) and
 * `<installRoot>/<release_id>.BUILD-METADATA.json` its metadata. A stage is extracted under a temporary name and
 * renamed into place, so an install with a release id's name is always complete. Installs are never modified or
 * deleted: the previous one stays for rollback, and an existing folder whose tree differs from the release is a
 * conflict the agent refuses rather than repairs.
 */
import { chmodSync, constants as fsConstants, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { treeDigestOfDirectory } from "./digest";
import { UpgradeRefusal } from "./errors";
import type { VerifiedRelease } from "./fetchRelease";
import type { InstallRecord } from "./installEnv";
import { parseBuildMetadata, SOURCE_REVISION_PATTERN, type BuildMetadata } from "./metadata";
import { MODULES_DIR } from "./moduleFiles";
import { REVISION_FILE } from "./release";

export function installDirOf(installRoot: string, releaseId: string): string {
  return join(installRoot, releaseId);
}

function metadataFileOf(installDir: string): string {
  return `${installDir}.BUILD-METADATA.json`;
}

/** The metadata kept beside an install, or null for an install this agent did not stage. */
export function installedMetadata(installDir: string): BuildMetadata | null {
  const file = metadataFileOf(installDir);
  return existsSync(file) ? parseBuildMetadata(JSON.parse(readFileSync(file, "utf8")), file) : null;
}

/**
 * The source revision an install's node reports (its BUILD-REVISION.json, upgrade/release.ts), or null for an
 * install built before releases carried one. The install's tree digest covers the file.
 */
export function installedRevision(installDir: string): string | null {
  const file = join(installDir, REVISION_FILE);
  if (!existsSync(file)) return null;
  const revision = (JSON.parse(readFileSync(file, "utf8")) as { source_revision?: unknown }).source_revision;
  if (typeof revision !== "string" || !new RegExp(SOURCE_REVISION_PATTERN).test(revision)) throw new UpgradeRefusal("preflight-failed", `${file}: source_revision is not a revision`, { file });
  return revision;
}

/**
 * Whether an install carries its npm dependencies (a release built with node_modules/, the default): it then runs
 * without NODE_PATH, and its launcher ignores one. An install without them needs the host's (NODE_PATH).
 */
export function bundlesModules(installDir: string): boolean {
  return existsSync(join(installDir, MODULES_DIR));
}

/**
 * Copies the verified release's tree (`from`, made by upgrade/tar.ts extractTarGz: files and folders only) to `to`,
 * which must not exist: file by file (the kernel copies, nothing is held), read-only like the source.
 */
function copyTree(from: string, to: string): void {
  mkdirSync(to, { recursive: false, mode: 0o755 });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) copyTree(source, target);
    else if (entry.isFile()) {
      copyFileSync(source, target, fsConstants.COPYFILE_EXCL);
      chmodSync(target, (statSync(source).mode & 0o111) !== 0 ? 0o555 : 0o444);
    } else throw new Error(`${source} is neither a file nor a folder`);
  }
}

/** Stages the release beside the other installs (or finds it already staged, identical); returns its record. */
export function stageInstall(installRoot: string, release: VerifiedRelease): InstallRecord {
  const { metadata } = release;
  const installDir = installDirOf(installRoot, metadata.release_id);
  const record = { installDir, releaseId: metadata.release_id, installSha256: metadata.bundle.tree_sha256 };
  if (existsSync(installDir)) {
    const found = treeDigestOfDirectory(installDir);
    if (found !== metadata.bundle.tree_sha256) {
      throw new UpgradeRefusal("install-conflict", `${installDir} exists with tree ${found}, not the release's ${metadata.bundle.tree_sha256}: installs are never overwritten`, { installDir });
    }
    return record;
  }
  const staging = join(installRoot, `.staging-${metadata.release_id}-${process.pid}`);
  copyTree(release.treeDir, staging);
  const staged = treeDigestOfDirectory(staging);
  if (staged !== metadata.bundle.tree_sha256) throw new UpgradeRefusal("bad-checksum", `staged tree ${staged} differs from the release's ${metadata.bundle.tree_sha256}`, { installDir: staging });
  // A run killed between this write and the rename left the same metadata behind: it is checked, not rewritten.
  const kept = installedMetadata(installDir);
  if (kept === null) writeFileSync(metadataFileOf(installDir), `${JSON.stringify(metadata, null, 2)}\n`, { flag: "wx", mode: 0o444 });
  else if (kept.bundle.sha256 !== metadata.bundle.sha256) throw new UpgradeRefusal("install-conflict", `${metadataFileOf(installDir)} describes another bundle`, { installDir });
  renameSync(staging, installDir);
  return record;
}
