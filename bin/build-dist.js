#!/usr/bin/env node
"use strict";
/**
 * Builds dist/, the JavaScript the node runs (`node bin/build-dist.js`, `npm run build:dist`; `npm install` and
 * `npm ci` run it through the `prepare` script):
 *
 * 1. `tsc -p tsconfig.build.json` (the production folders abi/, protocol/, wire/, lib/, client/, node/, gateway/, relayer/,
 *    upgrade/, deploy/, testing/; never scripts/, test/ or hardhat.config.ts; type errors fail the build and emit
 *    nothing) into a staging folder, with source maps and type declarations (the package's `exports` point at both);
 * 2. proto/*.proto copied to dist/proto/ and a dist/package.json (name, version), so dist/ mirrors the
 *    repository's layout and holds everything the node reads from disk besides node_modules: a versioned artifact;
 * 3. a stamp file, written last; then the staging folder replaces dist/ in one rename (a process running from the
 *    old dist/ keeps its loaded modules; a failed build leaves the old dist/ as it was).
 *
 * `--if-stale` builds only when dist/ is missing or older than its sources (SOURCES below): what `npm test`
 * (pretest), `npm run bench:node` and bin/ats-node.js (ensureBuilt, on first use) do. Concurrent builds of one
 * checkout wait for each other through a lock folder.
 *
 * `--bench` builds dist-bench/ the same way from tsconfig.bench.json: the production folders and the benchmarks'
 * node child (scripts/bench-node.ts), which `npm run bench:node` and `bench:mesh` fork, so that the benchmarked
 * node is compiled code as bin/ats-node.js runs it, while the package build (dist/) holds no script.
 */
const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const ROOT = path.join(__dirname, "..");
const LOCK = path.join(ROOT, ".dist-build.lock");
/** A lock older than this is from a build that died: it is taken over. */
const STALE_LOCK_MS = 10 * 60 * 1000;
/** What dist/ is built from (relative to the repository root): a change to any of these makes dist/ stale. */
const SOURCES = ["abi", "protocol", "wire", "lib", "client", "node", "gateway", "relayer", "upgrade", "catalog", "deploy", "testing", "proto", "package.json", "tsconfig.json", "tsconfig.build.json"];

/**
 * What is built: the package's dist/ (default), or with `--bench` the benchmarks' dist-bench/ (see the header). A
 * target may name another `root` (the folder its sources, tsconfig, proto/ and package.json are read from; tests).
 */
const TARGETS = {
  dist: { dir: path.join(ROOT, "dist"), tsconfig: "tsconfig.build.json", sources: SOURCES },
  bench: { dir: path.join(ROOT, "dist-bench"), tsconfig: "tsconfig.bench.json", sources: [...SOURCES, "scripts", "tsconfig.bench.json"] },
};
const DIST = TARGETS.dist.dir;

/**
 * The newest file and the newest folder under `entry` (itself included), each `{ path, mtimeMs }` or null. A folder
 * counts because deleting or renaming a file changes only its folder's time.
 */
function newestEntries(entry) {
  let stat;
  try {
    stat = fs.statSync(entry);
  } catch {
    return { file: null, folder: null };
  }
  const self = { path: entry, mtimeMs: stat.mtimeMs };
  if (!stat.isDirectory()) return { file: self, folder: null };
  const newest = { file: null, folder: self };
  for (const name of fs.readdirSync(entry)) {
    const inner = newestEntries(path.join(entry, name));
    for (const kind of ["file", "folder"]) {
      if (inner[kind] !== null && (newest[kind] === null || inner[kind].mtimeMs > newest[kind].mtimeMs)) newest[kind] = inner[kind];
    }
  }
  return newest;
}

/** The newest modification time (ms) of the files and folders under `entry`, 0 when it does not exist. */
function newestMtimeMs(entry) {
  const { file, folder } = newestEntries(entry);
  return Math.max(file?.mtimeMs ?? 0, folder?.mtimeMs ?? 0);
}

/**
 * Why the target's folder needs a build, or null when it is at least as new as every source:
 * `{ reason: "missing" }`, or `{ reason: "stale", source, sourceMtimeMs, stampMtimeMs }` with `source` the source
 * that made it stale (relative to the root), so that a rebuild can say what caused it: the newest file newer than
 * the build's stamp; else (only a file removed) the newest such folder, named with a trailing "/". A file comes
 * first because an editor that saves by writing a new file and renaming it over the old also touches the folder,
 * a moment later.
 */
function staleness(target = TARGETS.dist) {
  const root = target.root ?? ROOT;
  let stampMtimeMs;
  try {
    stampMtimeMs = fs.statSync(path.join(target.dir, ".build-stamp")).mtimeMs;
  } catch {
    return { reason: "missing" };
  }
  const newest = { file: null, folder: null };
  for (const source of target.sources) {
    const inner = newestEntries(path.join(root, source));
    for (const kind of ["file", "folder"]) {
      const candidate = inner[kind];
      if (candidate !== null && candidate.mtimeMs > stampMtimeMs && (newest[kind] === null || candidate.mtimeMs > newest[kind].mtimeMs)) newest[kind] = candidate;
    }
  }
  const cause = newest.file ?? newest.folder;
  if (cause === null) return null;
  const relative = path.relative(root, cause.path).split(path.sep).join("/");
  return { reason: "stale", source: cause === newest.file ? relative : `${relative}/`, sourceMtimeMs: cause.mtimeMs, stampMtimeMs };
}

/** The one line a rebuild prints: what is built, why (naming the source that made it stale), and how. */
function buildMessage(target, stale) {
  const name = `${path.basename(target.dir)}/`;
  const how = `tsc -p ${target.tsconfig} …`;
  if (stale.reason === "missing") return `building ${name} (not built yet): ${how}`;
  const what = stale.source.endsWith("/") ? `${stale.source} (a file added, removed or renamed)` : stale.source;
  const built = new Date(stale.stampMtimeMs).toISOString();
  return `rebuilding ${name}: ${what} changed at ${new Date(stale.sourceMtimeMs).toISOString()}, after ${name} was built at ${built}: ${how}`;
}

function sleepMs(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Runs `fn` holding the build lock (a folder: mkdir is atomic); waits while another build holds it. */
function withLock(fn) {
  for (;;) {
    try {
      fs.mkdirSync(LOCK);
      break;
    } catch (error) {
      if (error.code !== "EEXIST") throw error;
      try {
        if (Date.now() - fs.statSync(LOCK).mtimeMs > STALE_LOCK_MS) fs.rmSync(LOCK, { recursive: true, force: true });
      } catch {
        // released meanwhile
      }
      sleepMs(200);
    }
  }
  try {
    return fn();
  } finally {
    fs.rmSync(LOCK, { recursive: true, force: true });
  }
}

/** Builds the target's folder (see the header). Throws when tsc fails; the folder is then left as it was. */
function build({ stdio = "inherit", target = TARGETS.dist } = {}) {
  const root = target.root ?? ROOT;
  const name = path.basename(target.dir);
  const staging = path.join(root, `.dist-build-${process.pid}`);
  const old = path.join(root, `.dist-old-${process.pid}`);
  fs.rmSync(staging, { recursive: true, force: true });
  try {
    try {
      execFileSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", path.join(root, target.tsconfig), "--outDir", staging], { cwd: root, stdio });
    } catch (error) {
      throw new Error(`tsc -p ${target.tsconfig} failed${error.status === undefined ? `: ${error.message}` : " (errors above)"}; ${name}/ is unchanged`);
    }
    fs.mkdirSync(path.join(staging, "proto"), { recursive: true });
    for (const name of fs.readdirSync(path.join(root, "proto"))) {
      if (name.endsWith(".proto")) fs.copyFileSync(path.join(root, "proto", name), path.join(staging, "proto", name));
    }
    const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
    const built = { name: pkg.name, version: pkg.version, description: pkg.description, license: pkg.license, private: true, type: "commonjs" };
    fs.writeFileSync(path.join(staging, "package.json"), `${JSON.stringify(built, null, 2)}\n`);
    fs.writeFileSync(path.join(staging, ".build-stamp"), `${new Date().toISOString()}\n`);
    if (fs.existsSync(target.dir)) fs.renameSync(target.dir, old);
    fs.renameSync(staging, target.dir);
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
    fs.rmSync(old, { recursive: true, force: true });
  }
}

/**
 * Builds dist/ unless it is at least as new as its sources (checked again under the lock: another process may have
 * just built it). `log` gets one line before a build, naming the source that made it stale (buildMessage): a
 * launcher's rebuild takes seconds to half a minute, and silence then looks like a hang. Returns whether it built.
 */
function ensureBuilt({ log = (line) => process.stderr.write(`${line}\n`), stdio = "inherit", target = TARGETS.dist } = {}) {
  if (staleness(target) === null) return false;
  return withLock(() => {
    const stale = staleness(target);
    if (stale === null) return false;
    log(buildMessage(target, stale));
    build({ stdio, target });
    return true;
  });
}

/**
 * What a bin/ launcher does before it requires its program from dist/: builds dist/ when missing or stale (one line
 * on stderr naming the source file that made it stale, then ~5–30 s of tsc), or exits 1 naming `program` when that fails (never stale code); then turns source maps on so that
 * stack traces name TypeScript lines.
 */
function prepareDistOrExit(program) {
  try {
    ensureBuilt({ stdio: ["ignore", 2, 2] });
  } catch (error) {
    process.stderr.write(`${program}: cannot build dist/: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
  process.setSourceMapsEnabled(true);
}

module.exports = { DIST, SOURCES, TARGETS, build, buildMessage, ensureBuilt, newestMtimeMs, prepareDistOrExit, staleness };

if (require.main === module) {
  try {
    const target = process.argv.includes("--bench") ? TARGETS.bench : TARGETS.dist;
    if (process.argv.includes("--if-stale")) ensureBuilt({ target });
    else withLock(() => build({ target }));
  } catch (error) {
    process.stderr.write(`bin/build-dist.js: ${error.message}\n`);
    process.exitCode = 1;
  }
}
