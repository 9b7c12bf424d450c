/**
 * The source revision this node's code was built from, for GET /node/info `revision`. A release bundle
 * (upgrade/release.ts) carries BUILD-REVISION.json at its root, beside package.json; a node run from the
 * repository's sources or a plain dist/ has none, and reports null rather than guess from git. The upgrade agent's
 * version gate compares it with the approved source revision, so a malformed file is an error, not a null.
 */
import { existsSync, readFileSync } from "node:fs";

export const BUILD_REVISION_FILE = "BUILD-REVISION.json";
const REVISION = /^[0-9a-f]{40}$/;

/** The 40-hex revision in `file`, or null when there is no such file. Throws naming the file when it is malformed. */
export function readBuildRevision(file: string): string | null {
  if (!existsSync(file)) return null;
  let revision: unknown;
  try {
    revision = (JSON.parse(readFileSync(file, "utf8")) as { source_revision?: unknown }).source_revision;
  } catch (error) {
    throw new Error(`${file}: not JSON (${(error as Error).message})`);
  }
  if (typeof revision !== "string" || !REVISION.test(revision)) throw new Error(`${file}: source_revision must be 40 lowercase hex digits, got ${JSON.stringify(revision)}`);
  return revision;
}
