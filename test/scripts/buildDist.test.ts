/**
 * bin/build-dist.js's staleness and rebuild line, on a small TypeScript project in a temporary folder (a target with
 * its own `root`), built for real by tsc: a launcher that finds its build stale says so on one stderr line naming
 * the source file that made it stale, the newest one newer than the build's stamp.
 */
import { expect } from "chai";
import { mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

interface Target {
  root: string;
  dir: string;
  tsconfig: string;
  sources: string[];
}
type Staleness = { reason: "missing" } | { reason: "stale"; source: string; sourceMtimeMs: number; stampMtimeMs: number } | null;
// A plain-JavaScript script of bin/, loaded by path.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const buildDist = require("../../bin/build-dist.js") as {
  staleness(target: Target): Staleness;
  buildMessage(target: Target, stale: NonNullable<Staleness>): string;
  ensureBuilt(options: { target: Target; log(line: string): void; stdio: "ignore" }): boolean;
};

describe("bin/build-dist.js staleness", function () {
  // Two real tsc builds of two files (~4 s of CPU each, longer on a shared machine).
  this.timeout(120_000);
  let root: string;
  let target: Target;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ats-build-dist-"));
    mkdirSync(join(root, "src", "deep"), { recursive: true });
    mkdirSync(join(root, "proto"));
    writeFileSync(join(root, "src", "a.ts"), "export const a: number = 1;\n");
    writeFileSync(join(root, "src", "deep", "b.ts"), "export const b: string = 'b';\n");
    writeFileSync(join(root, "proto", "x.proto"), 'syntax = "proto3";\n');
    writeFileSync(join(root, "package.json"), '{"name":"fixture","version":"1.0.0"}\n');
    writeFileSync(join(root, "tsconfig.json"), JSON.stringify({ compilerOptions: { strict: true, types: [], module: "commonjs", target: "es2022", rootDir: "." }, include: ["src"] }));
    target = { root, dir: join(root, "dist"), tsconfig: "tsconfig.json", sources: ["src", "proto", "package.json", "tsconfig.json"] };
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  /** A build's stamp as a build leaves it (staleness reads only the stamp's time): saves a tsc run. */
  function stamp(): void {
    mkdirSync(target.dir, { recursive: true });
    writeFileSync(join(target.dir, ".build-stamp"), `${new Date().toISOString()}\n`);
  }

  /** Sets a file's (or folder's) modification time `afterMs` after the build's stamp (before it when negative). */
  function touchAfterStamp(relative: string, afterMs: number): void {
    const stampMs = statSync(join(target.dir, ".build-stamp")).mtimeMs;
    const at = new Date(stampMs + afterMs);
    utimesSync(join(root, relative), at, at);
  }

  function ensureBuilt(): { built: boolean; lines: string[] } {
    const lines: string[] = [];
    const built = buildDist.ensureBuilt({ target, log: (line) => lines.push(line), stdio: "ignore" });
    return { built, lines };
  }

  it("builds a missing folder, then builds nothing while no source is newer than the stamp", () => {
    expect(buildDist.staleness(target)).to.deep.equal({ reason: "missing" });
    expect(ensureBuilt()).to.deep.equal({ built: true, lines: ["building dist/ (not built yet): tsc -p tsconfig.json …"] });
    expect(statSync(join(target.dir, "src", "deep", "b.js")).isFile()).to.equal(true);
    expect(buildDist.staleness(target)).to.equal(null);
    expect(ensureBuilt()).to.deep.equal({ built: false, lines: [] });
  });

  it("names the newest source file newer than the stamp, on one line, and rebuilds", () => {
    stamp();
    expect(buildDist.staleness(target)).to.equal(null);
    touchAfterStamp("src/a.ts", 1_000);
    touchAfterStamp("src/deep/b.ts", 2_000); // the newest: the one named
    expect(buildDist.staleness(target)).to.deep.include({ reason: "stale", source: "src/deep/b.ts" });
    const { built, lines } = ensureBuilt();
    expect(built).to.equal(true);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.not.include("\n");
    expect(lines[0]).to.match(/^rebuilding dist\/: src\/deep\/b\.ts changed at \S+Z, after dist\/ was built at \S+Z: tsc -p tsconfig\.json …$/);
    expect(statSync(join(target.dir, "src", "deep", "b.js")).isFile()).to.equal(true);
    expect(buildDist.staleness(target), "the rebuild's stamp is newer than the touched files").to.equal(null);
  });

  it("names the changed file rather than its folder touched a moment later (an editor saving by rename)", () => {
    stamp();
    touchAfterStamp("src/deep/b.ts", 1_000);
    touchAfterStamp("src/deep", 1_500);
    expect(buildDist.staleness(target)).to.deep.include({ reason: "stale", source: "src/deep/b.ts" });
  });

  it("names a source outside the folders too (package.json), and the folder when a file was removed", () => {
    stamp();
    touchAfterStamp("package.json", 1_000);
    expect(buildDist.staleness(target)).to.deep.include({ reason: "stale", source: "package.json" });
    touchAfterStamp("package.json", -1_000); // as built again
    rmSync(join(root, "src", "deep", "b.ts"));
    touchAfterStamp("src/deep", 2_000); // removing a file changes only its folder's time
    const stale = buildDist.staleness(target);
    expect(stale).to.deep.include({ reason: "stale", source: "src/deep/" });
    expect(buildDist.buildMessage(target, stale!)).to.match(/^rebuilding dist\/: src\/deep\/ \(a file added, removed or renamed\) changed at /);
  });
});
