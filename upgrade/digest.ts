/**
 * Digests of release files and installs. An install's "executable digest" is the SHA-256 of its tree: one line
 * per file (`<sha256 of the content> <mode> <relative path>`), sorted by path. It is computed from the archive's
 * entries before extraction (recorded in BUILD-METADATA.json) and from the disk after it, so a staged install
 * that differs from the approved bundle by one byte or one permission is caught, and a rollback can prove it
 * restores exactly the saved tree.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { ExtractedFile, TarEntry } from "./tar";

export const SHA256_HEX = /^[0-9a-f]{64}$/;

export function sha256Hex(data: Buffer | string): string {
  return createHash("sha256").update(data).digest("hex");
}

export function sha256File(path: string): string {
  return sha256Hex(readFileSync(path));
}

function treeLine(path: string, contentSha256: string, executable: boolean): string {
  return `${contentSha256} ${executable ? "x" : "-"} ${path}\n`;
}

function digestLines(lines: { path: string; line: string }[]): string {
  lines.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return sha256Hex(lines.map((item) => item.line).join(""));
}

/** The tree digest of archive entries (files only: folders are implied by the paths). */
export function treeDigestOfEntries(entries: readonly TarEntry[]): string {
  return digestLines(
    entries.filter((entry) => entry.type === "file").map((entry) => ({ path: entry.path, line: treeLine(entry.path, sha256Hex(entry.content!), entry.executable === true) })),
  );
}

/** The tree digest of an extracted archive, from the digests its extraction computed (upgrade/tar.ts extractTarGz). */
export function treeDigestOfExtracted(files: readonly ExtractedFile[]): string {
  return digestLines(files.map((file) => ({ path: file.path, line: treeLine(file.path, file.sha256, file.executable) })));
}

/** The tree digest of a folder on disk (regular files; a symlink or other file kind throws, naming it). */
export function treeDigestOfDirectory(root: string): string {
  const lines: { path: string; line: string }[] = [];
  const walk = (relative: string): void => {
    for (const entry of readdirSync(join(root, relative), { withFileTypes: true })) {
      const path = relative === "" ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) lines.push({ path, line: treeLine(path, sha256File(join(root, path)), (statSync(join(root, path)).mode & 0o111) !== 0) });
      else throw new Error(`install ${root}: ${path} is neither a file nor a folder`);
    }
  };
  walk("");
  return digestLines(lines);
}
