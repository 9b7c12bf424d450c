/**
 * What a release of this checkout is built from, read from git: the checked-out commit, whether the working tree has
 * changes under dist/'s sources (bin/build-dist.js SOURCES), and the commit's time. `npm run release`
 * (scripts/release.ts) and the local network's own release (scripts/localRelease.ts) read it the same way. Reads
 * git; never changes it.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";

export const ROOT = join(__dirname, "..");
// eslint-disable-next-line @typescript-eslint/no-require-imports
export const buildDist = require("../bin/build-dist.js") as {
  DIST: string;
  SOURCES: string[];
  staleness(): { reason: "missing" } | { reason: "stale"; source: string } | null;
};

function git(args: string[]): string {
  // GIT_OPTIONAL_LOCKS=0: `git status` must not refresh the index of a checkout others are working in.
  return execFileSync("git", args, { cwd: ROOT, encoding: "utf8", env: { ...process.env, GIT_OPTIONAL_LOCKS: "0" }, stdio: ["ignore", "pipe", "pipe"] }).trim();
}

export interface ReleaseSource {
  /** The checked-out commit, 40 hex. */
  readonly sourceRevision: string;
  /** `git status --porcelain` of dist/'s sources: empty when the commit describes them. */
  readonly changes: string;
  /** The commit's time, s (every bundle entry's mtime). */
  readonly sourceDateEpochS: number;
}

export function readReleaseSource(): ReleaseSource {
  const sourceRevision = git(["rev-parse", "HEAD"]);
  return {
    sourceRevision,
    changes: git(["status", "--porcelain", "--", ...buildDist.SOURCES]),
    sourceDateEpochS: Number(git(["show", "-s", "--format=%ct", sourceRevision])),
  };
}
