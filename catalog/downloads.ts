/**
 * The downloads service: the release folders `npm run release` writes (bundle, BUILD-METADATA.json, SHA256SUMS),
 * served read-only. A release folder is immutable, so its files are served with strong validators (ETag,
 * Last-Modified), `Content-Length`, byte ranges (resumed downloads) and a year of caching, by @fastify/send.
 *
 * Only what a release's SHA256SUMS lists (and SHA256SUMS itself) is served, and nothing is listed but the JSON
 * index of releases (`GET /releases`): no directory listing, no other file of the folder, no path that could leave
 * it (release ids and file names are checked against RELEASE_FILE_NAME before any file is touched). Readers
 * verify what they download against SHA256SUMS and an approved digest (the upgrade agent does, docs/upgrade.md):
 * this service is a mirror, not a root of trust.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import type {} from "@fastify/static"; // reply.sendFile
import { NotFoundError } from "../protocol/errors";
import { parseSums, RELEASE_FILE_NAME, SUMS_FILE } from "../lib/sha256Sums";

/** Most releases the index lists (newest first by folder time); older ones are still served by URL. */
export const MAX_INDEXED_RELEASES = 200;
/** Largest SHA256SUMS read, bytes (a release lists three files). */
const MAX_SUMS_BYTES = 64 * 1024;

export interface ReleaseFile {
  readonly name: string;
  readonly bytes: number;
  /** From SHA256SUMS; null for SHA256SUMS itself. */
  readonly sha256: string | null;
  readonly path: string;
}

export interface ReleaseEntry {
  readonly releaseId: string;
  readonly path: string;
  readonly files: readonly ReleaseFile[];
}

/** The release `releaseId` under `releasesDir`, or null when it is not a release (no readable, valid SHA256SUMS). */
export function readRelease(releasesDir: string, releaseId: string): ReleaseEntry | null {
  if (!RELEASE_FILE_NAME.test(releaseId) || releaseId === "." || releaseId === "..") return null;
  const folder = join(releasesDir, releaseId);
  let sums: Map<string, string>;
  try {
    const sumsPath = join(folder, SUMS_FILE);
    if (!statSync(sumsPath).isFile() || statSync(sumsPath).size > MAX_SUMS_BYTES) return null;
    sums = parseSums(readFileSync(sumsPath, "utf8"));
  } catch {
    return null;
  }
  const files: ReleaseFile[] = [];
  for (const [name, sha256] of [...sums, [SUMS_FILE, null] as const]) {
    try {
      const stats = statSync(join(folder, name));
      if (stats.isFile()) files.push({ name, bytes: stats.size, sha256, path: `/releases/${releaseId}/${name}` });
    } catch {
      // Listed but absent (a release being copied in): not offered.
    }
  }
  return { releaseId, path: `/releases/${releaseId}/`, files };
}

/** Every release under `releasesDir`, newest first, at most MAX_INDEXED_RELEASES. */
export function listReleases(releasesDir: string): ReleaseEntry[] {
  let names: string[];
  try {
    names = readdirSync(releasesDir);
  } catch {
    return [];
  }
  const dated = names
    .filter((name) => RELEASE_FILE_NAME.test(name))
    .map((name) => ({ name, modifiedMs: statSync(join(releasesDir, name), { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
    .sort((a, b) => b.modifiedMs - a.modifiedMs || a.name.localeCompare(b.name));
  const releases: ReleaseEntry[] = [];
  for (const { name } of dated) {
    if (releases.length === MAX_INDEXED_RELEASES) break;
    const release = readRelease(releasesDir, name);
    if (release !== null) releases.push(release);
  }
  return releases;
}

/** Registers `GET /releases` (the index) and `GET|HEAD /releases/:releaseId/:file` on `app` (@fastify/static registered). */
export function registerDownloads(app: FastifyInstance, releasesDir: string): void {
  app.get("/releases", async () => ({ releases: listReleases(releasesDir) }));
  app.get<{ Params: { releaseId: string; file: string } }>("/releases/:releaseId/:file", async (request, reply) => {
    const { releaseId, file } = request.params;
    const release = readRelease(releasesDir, releaseId);
    if (release === null) throw new NotFoundError(`no release ${JSON.stringify(releaseId)}`, { releaseId });
    if (!release.files.some((listed) => listed.name === file)) {
      throw new NotFoundError(`release ${releaseId} has no file ${JSON.stringify(file)} (only what its ${SUMS_FILE} lists)`, { releaseId, file });
    }
    reply.header("cache-control", "public, max-age=31536000, immutable");
    reply.header("x-content-type-options", "nosniff");
    reply.type(file.endsWith(".json") ? "application/json" : file === SUMS_FILE ? "text/plain; charset=utf-8" : "application/octet-stream");
    return reply.sendFile(join(releaseId, file), releasesDir, { dotfiles: "deny", index: false });
  });
}
