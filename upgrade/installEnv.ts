/**
 * The install a unit runs is named in one small file, the unit's install environment file (systemd reads it with
 * EnvironmentFile=, the local supervisor reads it at start):
 *
 *   ATS_INSTALL_DIR=/var/lib/ats-node/installs/ats-node-0.1.1-0123456789ab
 *   ATS_RELEASE_ID=ats-node-0.1.1-0123456789ab
 *   ATS_INSTALL_SHA256=<the install's tree digest>
 *
 * It is the only file of a unit the agent writes. A swap keeps the file it replaces as `<file>.previous` and
 * writes the new one atomically (temporary file + rename), so a crash leaves either the old or the new record,
 * never half of one. The node's own config, keys, data and bind addresses are in other files the agent never
 * opens for writing.
 */
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { SHA256_HEX } from "./digest";
import { UpgradeRefusal } from "./errors";
import { RELEASE_ID_PATTERN } from "./metadata";

export interface InstallRecord {
  installDir: string;
  releaseId: string;
  /** The install's tree digest (upgrade/digest.ts): its executable digest. */
  installSha256: string;
}

const KEYS = { installDir: "ATS_INSTALL_DIR", releaseId: "ATS_RELEASE_ID", installSha256: "ATS_INSTALL_SHA256" } as const;

export function formatInstallEnv(record: InstallRecord): string {
  return `# the install this unit runs; written by ats-upgrade (docs/upgrade.md)\n${KEYS.installDir}=${record.installDir}\n${KEYS.releaseId}=${record.releaseId}\n${KEYS.installSha256}=${record.installSha256}\n`;
}

/** The KEY=value lines of an environment file (comments and blank lines skipped); a line of another shape refuses. */
export function parseEnvLines(text: string, where: string): Map<string, string> {
  const values = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line.trim() === "" || line.startsWith("#")) continue;
    const match = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (match === null) throw new UpgradeRefusal("preflight-failed", `${where}: a line is not KEY=value`);
    values.set(match[1]!, match[2]!);
  }
  return values;
}

export function parseInstallEnv(text: string, where: string): InstallRecord {
  const values = parseEnvLines(text, where);
  const installDir = values.get(KEYS.installDir);
  const releaseId = values.get(KEYS.releaseId);
  const installSha256 = values.get(KEYS.installSha256);
  if (installDir === undefined || !installDir.startsWith("/")) throw new UpgradeRefusal("preflight-failed", `${where}: ${KEYS.installDir} must be an absolute path`);
  if (releaseId === undefined || !new RegExp(RELEASE_ID_PATTERN).test(releaseId)) throw new UpgradeRefusal("preflight-failed", `${where}: ${KEYS.releaseId} is not a release id`);
  if (installSha256 === undefined || !SHA256_HEX.test(installSha256)) throw new UpgradeRefusal("preflight-failed", `${where}: ${KEYS.installSha256} is not a sha256`);
  return { installDir, releaseId, installSha256 };
}

/** The record in effect, or null when the unit has none yet. */
export function readInstallEnv(file: string): InstallRecord | null {
  if (!existsSync(file)) return null;
  return parseInstallEnv(readFileSync(file, "utf8"), file);
}

/** Points the unit at `record`, keeping the file it replaces as `<file>.previous`. */
export function writeInstallEnv(file: string, record: InstallRecord): void {
  replaceKeepingPrevious(file, formatInstallEnv(record));
}

/**
 * Writes `content` to `file` atomically (temporary file + rename), first copying the file it replaces to
 * `<file>.previous`: a crash leaves the old or the new file whole, and the previous one is there for a rollback.
 * Shared by install.env and the container unit's image file (upgrade/containerEnv.ts).
 */
export function replaceKeepingPrevious(file: string, content: string): void {
  // The new content first: if it cannot be written (a full disk), `.previous` still holds the real rollback target;
  // `.previous` itself is replaced whole or not at all.
  const temporary = writeTemporary(file, content);
  renameOrRemove(temporary, file, () => {
    if (existsSync(file)) writeFileAtomically(`${file}.previous`, readFileSync(file));
  });
}

/**
 * Writes `content` to `file` through a temporary file and a rename: a reader (another process: the agent's and the
 * unit's files are read by status checks at any time) or a crash in the middle sees the old file or the new one,
 * whole, never a truncated one.
 */
export function writeFileAtomically(file: string, content: string | Buffer): void {
  renameOrRemove(writeTemporary(file, content), file);
}

/**
 * `content` in a temporary file beside `file` (same folder, so a rename replaces `file` atomically); its path. A
 * failed write (a full disk) removes what it left, so no `.tmp-<pid>` file outlives the error.
 */
function writeTemporary(file: string, content: string | Buffer): string {
  const temporary = `${file}.tmp-${process.pid}`;
  try {
    writeFileSync(temporary, content, { mode: 0o644 });
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
  return temporary;
}

/** Runs `before`, then renames `temporary` over `file`; when either throws, `temporary` is removed and the error rethrown. */
function renameOrRemove(temporary: string, file: string, before: () => void = () => undefined): void {
  try {
    before();
    renameSync(temporary, file);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
}
