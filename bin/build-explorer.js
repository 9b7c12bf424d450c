#!/usr/bin/env node
"use strict";
/**
 * Builds the time explorer's page (explorer/, docs/explorer.md) into explorer/build/: `npm run build:explorer`;
 * `npm install` (prepare) builds it, `npm start` with `--if-stale` (only when older than its sources).
 *
 * esbuild bundles explorer/src/main.ts and everything it imports (the browser client of client/browser.ts, uPlot
 * and its CSS) into main.js and main.css for browsers, with source maps; index.html is copied beside them. The
 * bundle is made for `platform: "browser"`, so an import of a Node built-in fails the build instead of the page.
 * Nothing is fetched at run time: the page loads only these files and the network's own endpoints. The build goes
 * to a staging folder that replaces explorer/build/ in one rename; a failed build leaves the old one.
 */
const fs = require("node:fs");
const path = require("node:path");
const { newestMtimeMs } = require("./build-dist");

const ROOT = path.join(__dirname, "..");
const OUT = path.join(ROOT, "explorer", "build");
const STAMP = path.join(OUT, ".build-stamp");
/** What the bundle is built from: a change to any of these makes it stale. */
const SOURCES = ["explorer/src", "explorer/index.html", "client", "wire", "protocol", "package.json", "bin/build-explorer.js"];

/** Why the bundle needs a build ("missing", "stale"), or null when it is at least as new as every source. */
function staleness() {
  let stamp;
  try {
    stamp = fs.statSync(STAMP).mtimeMs;
  } catch {
    return "missing";
  }
  return SOURCES.some((source) => newestMtimeMs(path.join(ROOT, source)) > stamp) ? "stale" : null;
}

/** esbuild, or null when it is not installed (an install without dev dependencies). */
function loadEsbuild() {
  try {
    return require("esbuild");
  } catch (error) {
    if (error.code === "MODULE_NOT_FOUND") return null;
    throw error;
  }
}

async function build(esbuild) {
  const staging = path.join(ROOT, "explorer", `.build-${process.pid}`);
  const old = path.join(ROOT, "explorer", `.build-old-${process.pid}`);
  fs.rmSync(staging, { recursive: true, force: true });
  try {
    await esbuild.build({
      entryPoints: [path.join(ROOT, "explorer", "src", "main.ts")],
      bundle: true,
      outdir: staging,
      platform: "browser",
      format: "iife",
      target: ["es2022"],
      minify: true,
      sourcemap: true,
      legalComments: "linked",
      tsconfig: path.join(ROOT, "explorer", "tsconfig.json"),
      logLevel: "warning",
    });
    fs.copyFileSync(path.join(ROOT, "explorer", "index.html"), path.join(staging, "index.html"));
    fs.writeFileSync(path.join(staging, ".build-stamp"), `${new Date().toISOString()}\n`);
    if (fs.existsSync(OUT)) fs.renameSync(OUT, old);
    fs.renameSync(staging, OUT);
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
    fs.rmSync(old, { recursive: true, force: true });
  }
}

module.exports = { EXPLORER_BUILD: OUT, staleness };

if (require.main === module) {
  const ifStale = process.argv.includes("--if-stale");
  const reason = staleness();
  if (ifStale && reason === null) process.exit(0);
  // Loaded only now: a fresh bundle needs no esbuild. `--optional` (npm's prepare): an install without dev
  // dependencies (an operator's) has none and needs no explorer page, so it says so and goes on.
  const esbuild = loadEsbuild();
  if (esbuild === null) {
    process.stderr.write("bin/build-explorer.js: esbuild is not installed (dev dependencies omitted): the explorer's page is not built\n");
    process.exit(process.argv.includes("--optional") ? 0 : 1);
  }
  if (ifStale) process.stderr.write(`building explorer/build/ (${reason === "missing" ? "not built yet" : "older than the sources"}) …\n`);
  build(esbuild).catch((error) => {
    process.stderr.write(`bin/build-explorer.js: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  });
}
