/**
 * Builds an immutable node release from a built dist/ (bin/build-dist.js): one folder per release,
 *
 *   <outDir>/<release_id>/ats-node-<version>-<platform>-<arch>.tar.gz   the bundle (upgrade/tar.ts: reproducible)
 *   <outDir>/<release_id>/BUILD-METADATA.json                          upgrade/metadata.ts
 *   <outDir>/<release_id>/SHA256SUMS                                   the two files above
 *
 * The bundle also carries BUILD-REVISION.json ({"source_revision"}) at its root, beside package.json: the running
 * node reports it in GET /node/info `revision` (node/core/buildRevision.ts), which the agent's version gate checks.
 * With `modules`, it carries node_modules/ too: the production dependency tree as the checkout installed it from
 * package-lock.json (upgrade/productionTree.ts, upgrade/moduleFiles.ts), so the digest an operator approves covers
 * every line of JavaScript and every native addon the node runs. Without, the host provides them (NODE_PATH).
 *
 * Detail: docs/upgrade.md §1.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { sha256Hex, treeDigestOfEntries } from "./digest";
import { METADATA_FILE, METADATA_SCHEMA_VERSION, hostRuntime, parseBuildMetadata, type BuildMetadata } from "./metadata";
import { moduleEntries, MODULES_DIR } from "./moduleFiles";
import { productionPackages, type ProductionTreeOptions } from "./productionTree";
import { formatSums, SUMS_FILE } from "./sums";
import { writeTarGz, type TarEntry } from "./tar";

/*
 * A tarball rather than a folder: one file is one digest, the digest an operator approves in a plan and compares
 * with SHA256SUMS; a folder would need a manifest of digests, which is what SHA256SUMS already is for one file.
 * The tag names the platform, CPU and Node ABI because the node's native addons (better-sqlite3, secp256k1,
 * keccak: in the bundle with `modules`, on the host without) are built for them. A release folder that exists is
 * never written again (immutable), and its files are read-only.
 */
/** The entry point every install carries: runs this install's compiled CLI (never the repository's). */
export const LAUNCHER_FILE = "ats-node.js";
const LAUNCHER = `#!/usr/bin/env node
"use strict";
// The installed node's entry point, written into every release bundle by upgrade/release.ts: it runs the compiled
// CLI of the install it sits in, so the install folder alone decides which code runs.
if (require("node:fs").existsSync(require("node:path").join(__dirname, "node_modules"))) {
  // This install bundles its npm dependencies, which Node finds beside ./node/ by its own lookup. NODE_PATH is
  // dropped (for this process and the threads and children it starts) so that a host's NODE_PATH, left from
  // installs that needed it, cannot supply a package the approved bundle lacks. Module._initPaths() re-reads it:
  // undocumented but in every Node release; the release test starts a node through this launcher.
  delete process.env.NODE_PATH;
  require("node:module")._initPaths();
}
process.setSourceMapsEnabled(true);
require("./node/cli.js").main(process.argv.slice(2));
`;

/** The source revision file in every bundle (node/core/buildRevision.ts reads it; a test checks the names agree). */
export const REVISION_FILE = "BUILD-REVISION.json";

/**
 * dist/ files that are not part of a release: the build stamp is a build time, which would break reproducibility;
 * a revision file and node_modules/ are the release's to write, never copied from dist/.
 */
const EXCLUDED = new Set([".build-stamp", REVISION_FILE, MODULES_DIR]);

/** The revision file's bytes: what a release's node reports as its revision. */
export function revisionFileContent(sourceRevision: string): Buffer {
  return Buffer.from(`${JSON.stringify({ source_revision: sourceRevision })}\n`);
}

export interface BuildReleaseOptions {
  distDir: string;
  outDir: string;
  /** 40-hex commit the dist/ was built from. */
  sourceRevision: string;
  sourceTreeDirty: boolean;
  /** Mtime of every bundle entry, s (the commit's time). */
  sourceDateEpochS: number;
  buildTime: Date;
  /** Bundle this checkout's production node_modules/ (upgrade/productionTree.ts); absent: the host provides it. */
  modules?: ProductionTreeOptions | undefined;
}

export interface BuiltRelease {
  dir: string;
  bundlePath: string;
  metadata: BuildMetadata;
  /** How many npm packages the bundle carries under node_modules/; null when it carries none. */
  bundledPackages: number | null;
}

/**
 * The largest bundle a release writes, and the agent downloads by default (upgrade/fetchRelease.ts). With
 * node_modules/ a bundle is about 19 MiB today, without it under 1 MiB: the bound leaves room to grow and still
 * refuses, at build time, a bundle the agent would refuse to download.
 */
export const MAX_BUNDLE_BYTES = 256 * 1024 * 1024;

function distEntries(distDir: string): TarEntry[] {
  const entries: TarEntry[] = [];
  const walk = (relative: string): void => {
    for (const name of readdirSync(join(distDir, relative)).sort()) {
      const path = relative === "" ? name : `${relative}/${name}`;
      if (relative === "" && EXCLUDED.has(name)) continue;
      const stat = statSync(join(distDir, path));
      if (stat.isDirectory()) {
        entries.push({ path, type: "directory" });
        walk(path);
      } else if (stat.isFile()) {
        entries.push({ path, type: "file", content: readFileSync(join(distDir, path)) });
      }
    }
  };
  walk("");
  return entries;
}

/** The production tree's files (refused with the evidence when the installed tree is not the lockfile's). */
function modulesOf(modules: ProductionTreeOptions): { packages: number; entries: TarEntry[] } {
  const packages = productionPackages(modules);
  return { packages: packages.length, entries: moduleEntries(modules.projectDir, packages) };
}

export function releaseIdOf(version: string, sourceRevision: string, dirty: boolean): string {
  return `ats-node-${version}-${sourceRevision.slice(0, 12)}${dirty ? "-dirty" : ""}`;
}

export function buildRelease(options: BuildReleaseOptions): BuiltRelease {
  const packageFile = join(options.distDir, "package.json");
  if (!existsSync(join(options.distDir, "node", "cli.js")) || !existsSync(packageFile)) {
    throw new Error(`${options.distDir} is not a built dist/ (no node/cli.js or package.json): run npm run build:dist`);
  }
  const { version } = JSON.parse(readFileSync(packageFile, "utf8")) as { version: string };
  const runtime = hostRuntime();
  const modules = options.modules === undefined ? null : modulesOf(options.modules);
  const entries = [
    ...distEntries(options.distDir),
    { path: LAUNCHER_FILE, type: "file" as const, content: Buffer.from(LAUNCHER), executable: true },
    { path: REVISION_FILE, type: "file" as const, content: revisionFileContent(options.sourceRevision) },
    ...(modules?.entries ?? []),
  ];
  const bundle = writeTarGz(entries, options.sourceDateEpochS);
  if (bundle.length > MAX_BUNDLE_BYTES) throw new Error(`the bundle is ${bundle.length} bytes, above the ${MAX_BUNDLE_BYTES} the agent downloads: it would refuse this release`);
  const bundleName = `ats-node-${version}-${runtime.platform}-${runtime.arch}.tar.gz`;
  const metadata = parseBuildMetadata(
    {
      schema: METADATA_SCHEMA_VERSION,
      release_id: releaseIdOf(version, options.sourceRevision, options.sourceTreeDirty),
      source_revision: options.sourceRevision,
      source_tree_dirty: options.sourceTreeDirty,
      source_date_epoch: options.sourceDateEpochS,
      build_time: options.buildTime.toISOString(),
      node_version: version,
      runtime,
      bundle: { name: bundleName, sha256: sha256Hex(bundle), tree_sha256: treeDigestOfEntries(entries), files: entries.filter((entry) => entry.type === "file").length },
    },
    "new release",
  );
  const dir = join(options.outDir, metadata.release_id);
  if (existsSync(dir)) throw new Error(`release ${metadata.release_id} already exists at ${dir}: releases are immutable (bump the version or commit)`);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const metadataText = `${JSON.stringify(metadata, null, 2)}\n`;
  const files: Record<string, Buffer | string> = {
    [bundleName]: bundle,
    [METADATA_FILE]: metadataText,
    [SUMS_FILE]: formatSums({ [bundleName]: metadata.bundle.sha256, [METADATA_FILE]: sha256Hex(metadataText) }),
  };
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(dir, name), content, { flag: "wx" });
    chmodSync(join(dir, name), 0o444);
  }
  return { dir, bundlePath: join(dir, bundleName), metadata, bundledPackages: modules?.packages ?? null };
}
