/**
 * Fetches the plan's release into a private folder (0700, under the OS temp folder) and verifies it there, from
 * the copies only (the published files are read once, so they cannot change between check and use). The release
 * is a folder (`source.dir`) or a base URL (`source.url`: `<url>/SHA256SUMS`, … downloaded with upgrade/httpGet.ts
 * bounds: one origin, a deadline, a size limit per file). How a file arrives is the only difference; nothing that
 * arrives is trusted until every check below has passed:
 *
 * Detail: docs/upgrade.md §1.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sha256Hex, treeDigestOfExtracted } from "./digest";
import { UpgradeRefusal } from "./errors";
import { boundedGet } from "./httpGet";
import { hostRuntime, METADATA_FILE, parseBuildMetadata, type BuildMetadata } from "./metadata";
import type { BundlePlan } from "./plan";
import { MAX_BUNDLE_BYTES, REVISION_FILE, revisionFileContent } from "./release";
import { parseSums, SUMS_FILE } from "./sums";
import { extractTarGz, type TarLimits } from "./tar";

/*
 * 1. SHA256SUMS parses, and lists BUILD-METADATA.json and the bundle with their digests;
 * 2. every file's bytes match SHA256SUMS ("bad-checksum": a corrupted or truncated download);
 * 3. the bundle's digest is the plan's approved artifact ("moved-tag": the tag now serves another build);
 * 4. release_id and source_revision are the approved ones ("unapproved-release");
 * 5. the bundle was built for this platform, CPU and Node ABI ("wrong-platform");
 * 6. the archive holds only plain files and folders, each path once, within the reader's bounds (upgrade/tar.ts),
 *    and its tree digest is the metadata's: checked while it is streamed into the private folder (`treeDir`);
 * 7. its BUILD-REVISION.json (what the node will report as its revision) names the approved source revision
 *    ("unapproved-release").
 *
 * A download that fails its bounds (another origin, too slow, too large, not 200) is "fetch-failed". Any failure
 * refuses before anything on a node changes, and removes the private folder.
 */
export interface VerifiedRelease {
  metadata: BuildMetadata;
  /** The verified bundle, extracted (read-only files) inside the private folder: installs are copied from it. */
  treeDir: string;
  /** Removes the private folder. */
  dispose(): void;
}

/** The private folder's subfolder the bundle is extracted into (no release file has this name: they end in .json, .tar.gz or are SHA256SUMS). */
const TREE_DIR = "tree";

function checksum(name: string, bytes: Buffer, sums: Map<string, string>): string {
  const listed = sums.get(name);
  if (listed === undefined) throw new UpgradeRefusal("bad-checksum", `${SUMS_FILE} does not list ${name}`, { file: name });
  const actual = sha256Hex(bytes);
  if (actual !== listed) throw new UpgradeRefusal("bad-checksum", `${name}: sha256 ${actual} but ${SUMS_FILE} says ${listed}`, { file: name, actual, listed });
  return actual;
}

/** SHA256SUMS and BUILD-METADATA.json are a few hundred bytes; this is far above either and far below harm. */
const MAX_SMALL_FILE_BYTES = 64 * 1024;
/** The largest bundle a release writes (upgrade/release.ts): a server answering more is not serving a release. */
export const DEFAULT_MAX_BUNDLE_BYTES = MAX_BUNDLE_BYTES;
/** Per file, headers and body: a bundle over a slow link fits, a server that stalls does not hold the rollout. */
export const DEFAULT_DOWNLOAD_TIMEOUT_MS = 120_000;
/** Same-origin redirects a release server may use (e.g. /latest/ to a versioned folder). */
const MAX_REDIRECTS = 3;

export interface FetchOptions {
  /** Each download (one file) fails after this long, ms. */
  downloadTimeoutMs?: number | undefined;
  /** The bundle's download is refused past this many bytes. */
  maxBundleBytes?: number | undefined;
  /** Lower bounds on what the bundle may unpack to (upgrade/tar.ts; default and ceiling: its constants). */
  tarLimits?: Partial<TarLimits> | undefined;
}

/** Puts the release file `name` into the private folder, as published; `maxBytes` bounds a download. */
type Fetch = (name: string, maxBytes: number) => Promise<void>;

function fetcherFor(source: BundlePlan["release"]["source"], tag: string, privateDir: string, options: FetchOptions): Fetch {
  if ("dir" in source) {
    return async (name) => {
      try {
        copyFileSync(join(source.dir, name), join(privateDir, name));
      } catch (error) {
        throw new UpgradeRefusal("bad-checksum", `release ${tag}: cannot fetch ${name}: ${(error as Error).message}`, { file: name });
      }
    };
  }
  // The base is a folder: `<url>/<name>` whether or not the plan's URL ends in a slash.
  const base = new URL(source.url.endsWith("/") ? source.url : `${source.url}/`);
  return async (name, maxBytes) => {
    const url = new URL(name, base);
    // Names come from SHA256SUMS' partner files before they are verified: one path segment under the base, or nothing.
    if (name.includes("/") || !url.href.startsWith(base.href)) throw new UpgradeRefusal("unsafe-archive", `release ${tag}: ${JSON.stringify(name)} is not a file of ${base.href}`, { file: name });
    const { bytes } = await boundedGet(url, {
      origin: base.origin,
      maxRedirects: MAX_REDIRECTS,
      maxBytes,
      timeoutMs: options.downloadTimeoutMs ?? DEFAULT_DOWNLOAD_TIMEOUT_MS,
      code: "fetch-failed",
      what: `release ${tag} at ${base.origin}`,
    });
    writeFileSync(join(privateDir, name), bytes, { flag: "wx", mode: 0o600 });
  };
}

export async function fetchVerifiedRelease(release: BundlePlan["release"], options: FetchOptions = {}): Promise<VerifiedRelease> {
  // mkdtemp creates the folder 0700: nobody else on the host can swap a file between our check and our use.
  const privateDir = mkdtempSync(join(tmpdir(), "ats-upgrade-fetch-"));
  const dispose = () => rmSync(privateDir, { recursive: true, force: true });
  try {
    const fetchFile = fetcherFor(release.source, release.tag, privateDir, options);
    const copy = async (name: string, maxBytes = MAX_SMALL_FILE_BYTES): Promise<Buffer> => {
      await fetchFile(name, maxBytes);
      // Checked from the private copy only, on both paths.
      return readFileSync(join(privateDir, name));
    };
    const sums = parseSums((await copy(SUMS_FILE)).toString("utf8"));
    const metadataBytes = await copy(METADATA_FILE);
    checksum(METADATA_FILE, metadataBytes, sums);
    const metadata = parseBuildMetadata(JSON.parse(metadataBytes.toString("utf8")), `release ${release.tag}`);
    const bundle = await copy(metadata.bundle.name, options.maxBundleBytes ?? DEFAULT_MAX_BUNDLE_BYTES);
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
    // Streamed to disk from the private copy, never inflated into memory; a refusal leaves no file of it behind.
    const treeDir = join(privateDir, TREE_DIR);
    const { files } = await extractTarGz(join(privateDir, metadata.bundle.name), treeDir, options.tarLimits ?? {});
    const tree = treeDigestOfExtracted(files);
    if (tree !== metadata.bundle.tree_sha256) throw new UpgradeRefusal("bad-checksum", `bundle tree digest ${tree} but ${METADATA_FILE} says ${metadata.bundle.tree_sha256}`);
    const revisionFile = files.find((file) => file.path === REVISION_FILE);
    if (revisionFile === undefined || revisionFile.sha256 !== sha256Hex(revisionFileContent(release.source_revision))) {
      throw new UpgradeRefusal("unapproved-release", `the bundle's ${REVISION_FILE} ${revisionFile === undefined ? "is missing" : "names another source revision"}; the plan approved ${release.source_revision}`);
    }
    return { metadata, treeDir, dispose };
  } catch (error) {
    dispose();
    throw error;
  }
}
