/**
 * `npm run release [-- --out <dir>] [--allow-dirty] [--without-modules]`: an immutable node release from dist/
 * (upgrade/release.ts): the architecture-tagged bundle, BUILD-METADATA.json and SHA256SUMS in
 * `<out>/<release_id>/` (default .ats/releases/). The source revision is the checked-out commit; a working tree
 * with changes under dist/'s sources is refused unless --allow-dirty (the release id then ends in -dirty, and the
 * metadata says so), since the revision would not describe the code. dist/ must be at least as new as its sources
 * (the npm script builds it first).
 *
 * By default the bundle carries the production node_modules/ as installed here from package-lock.json (refused
 * with the differences when the installed tree is not the lockfile's): the approved digest then covers the
 * dependencies too. --without-modules leaves it out (a bundle under 1 MiB instead of some 19) for hosts that
 * provide the dependencies through NODE_PATH. Prints the release folder and its metadata as JSON. Reads git;
 * never changes it.
 */
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { buildRelease } from "../upgrade/release";
import { buildDist, readReleaseSource, ROOT } from "./releaseSource";

// The optional peers the node needs at run time: bundled with the dependencies (upgrade/productionTree.ts).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { OPERATOR_PACKAGES } = require("../bin/operatorPackages.js") as { OPERATOR_PACKAGES: readonly string[] };

function main(): number {
  const { values } = parseArgs({
    options: { out: { type: "string" }, "allow-dirty": { type: "boolean", default: false }, "without-modules": { type: "boolean", default: false } },
  });
  const stale = buildDist.staleness();
  if (stale !== null) {
    const why = stale.reason === "missing" ? "not built" : `older than ${stale.source}`;
    process.stderr.write(`release: dist/ is ${why}: run npm run build:dist first\n`);
    return 1;
  }
  const { sourceRevision, changes, sourceDateEpochS } = readReleaseSource();
  if (changes !== "" && values["allow-dirty"] !== true) {
    process.stderr.write(`release: the working tree has changes under dist/'s sources, so ${sourceRevision} does not describe them:\n${changes}\ncommit them, or pass --allow-dirty\n`);
    return 1;
  }
  const release = buildRelease({
    distDir: buildDist.DIST,
    outDir: resolve(values.out ?? join(ROOT, ".ats", "releases")),
    sourceRevision,
    sourceTreeDirty: changes !== "",
    sourceDateEpochS,
    buildTime: new Date(),
    modules: values["without-modules"] === true ? undefined : { projectDir: ROOT, runtimePeers: OPERATOR_PACKAGES },
  });
  process.stdout.write(`${JSON.stringify({ dir: release.dir, bundled_packages: release.bundledPackages, metadata: release.metadata }, null, 2)}\n`);
  return 0;
}

try {
  process.exitCode = main();
} catch (error) {
  process.stderr.write(`release: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
