/**
 * Releases that bundle node_modules/ (upgrade/productionTree.ts, upgrade/moduleFiles.ts, upgrade/release.ts).
 *
 * - On a small made-up project: which packages are the production tree (dependencies, installed optional ones,
 *   the runtime peers, nested versions; no devDependencies, no optional peers), the refusals with their evidence
 *   when the installed tree is not the lockfile's, and links.
 * - On this repository: a bundle of the real dist/ and node_modules/ holds the production packages and none of
 *   the dev ones, is built twice to the same digest, and a node started from its extracted install, with an empty
 *   environment (no NODE_PATH) and its cwd elsewhere, answers GET /node/info; its native addons load from the
 *   install. The node is stopped in a finally, also when a step fails.
 */
import { expect } from "chai";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { saveKeyDir } from "../../protocol/keystore";
import { createDevIdentity, createDevManufacturerCa } from "../../protocol/devca";
import { freeTcpPort } from "../../scripts/chainProcess";
import { sha256File, treeDigestOfDirectory } from "../../upgrade/digest";
import { moduleEntries } from "../../upgrade/moduleFiles";
import { InstalledTreeMismatch, productionPackages } from "../../upgrade/productionTree";
import { buildRelease, LAUNCHER_FILE, type BuiltRelease } from "../../upgrade/release";
import { extractTarGz } from "../../upgrade/tar";
import { fakeDist } from "./helpers";

const ROOT = join(__dirname, "..", "..");
const REVISION = "0123456789abcdef0123456789abcdef01234567";

interface MadeUpPackage {
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalPeers?: string[];
  /** Installed as another version; null: in the lockfile only. */
  installed?: string | null;
}

/**
 * A project whose lockfile has `packages` (by location) and whose node_modules/ has them installed, each with an
 * index.js. The manifest's fields are the lockfile root's, as npm writes them.
 */
function madeUpProject(dir: string, manifest: Record<string, unknown>, packages: Record<string, MadeUpPackage>): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "made-up", version: "1.0.0", ...manifest }));
  const lockPackages: Record<string, unknown> = { "": { name: "made-up", version: "1.0.0", ...manifest } };
  for (const [location, pkg] of Object.entries(packages)) {
    const { installed, optionalPeers, ...entry } = pkg;
    lockPackages[location] = { ...entry, ...(optionalPeers === undefined ? {} : { peerDependenciesMeta: Object.fromEntries(optionalPeers.map((name) => [name, { optional: true }])) }) };
    if (installed === null) continue;
    const name = location.slice(location.lastIndexOf("node_modules/") + "node_modules/".length);
    mkdirSync(join(dir, location), { recursive: true });
    writeFileSync(join(dir, location, "package.json"), JSON.stringify({ name, version: installed ?? pkg.version }));
    writeFileSync(join(dir, location, "index.js"), `module.exports = ${JSON.stringify(location)};\n`);
  }
  writeFileSync(join(dir, "package-lock.json"), JSON.stringify({ name: "made-up", version: "1.0.0", lockfileVersion: 3, packages: lockPackages }));
  return dir;
}

/** Runtime code (a, its nested b, its required peer c), an optional dependency, a runtime peer and its dependency; dev tools beside them. */
const MANIFEST = {
  dependencies: { a: "^1.0.0" },
  optionalDependencies: { opt: "^1.0.0", "other-platform": "^1.0.0" },
  devDependencies: { devtool: "^1.0.0", server: "^1.0.0" },
  peerDependencies: { server: "^1.0.0" },
};
const PACKAGES: Record<string, MadeUpPackage> = {
  "node_modules/a": { version: "1.0.0", dependencies: { b: "^1.0.0" }, peerDependencies: { c: "^1.0.0", compiler: "^5.0.0" }, optionalPeers: ["compiler"] },
  "node_modules/a/node_modules/b": { version: "1.0.0" },
  "node_modules/b": { version: "2.0.0" },
  "node_modules/c": { version: "1.0.0" },
  "node_modules/compiler": { version: "5.0.0" },
  "node_modules/devtool": { version: "1.0.0", dependencies: { b: "^2.0.0" } },
  "node_modules/opt": { version: "1.0.0" },
  "node_modules/other-platform": { version: "1.0.0", installed: null },
  "node_modules/server": { version: "1.0.0", dependencies: { d: "^1.0.0" } },
  "node_modules/d": { version: "1.0.0" },
};
const RUNTIME_PEERS = ["server"];

/** `fn` throws InstalledTreeMismatch; returns its problems. */
function mismatchOf(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (error) {
    expect(error).to.be.instanceOf(InstalledTreeMismatch);
    expect((error as Error).message).to.include("run npm ci, or pass --without-modules");
    return (error as InstalledTreeMismatch).problems;
  }
  throw new Error("expected an InstalledTreeMismatch");
}

describe("upgrade: releases with node_modules (a made-up project)", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ats-modules-"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("takes dependencies, installed optional ones and the runtime peers, with their required peers; no dev tools, no optional peers", () => {
    const project = madeUpProject(join(root, "project"), MANIFEST, PACKAGES);
    const packages = productionPackages({ projectDir: project, runtimePeers: RUNTIME_PEERS });
    expect(packages.map((pkg) => `${pkg.location}@${pkg.version}`)).to.deep.equal([
      "node_modules/a@1.0.0",
      "node_modules/a/node_modules/b@1.0.0", // a's own b, not the dev tool's b@2 beside it
      "node_modules/c@1.0.0",
      "node_modules/d@1.0.0",
      "node_modules/opt@1.0.0",
      "node_modules/server@1.0.0",
    ]);
  });

  it("refuses an installed tree that is not the lockfile's, listing every difference", () => {
    const project = madeUpProject(join(root, "project"), MANIFEST, {
      ...PACKAGES,
      "node_modules/c": { version: "1.0.0", installed: "1.0.1" },
      "node_modules/d": { version: "1.0.0", installed: null },
    });
    expect(mismatchOf(() => productionPackages({ projectDir: project, runtimePeers: [...RUNTIME_PEERS, "metrics"] }))).to.have.members([
      "node_modules/c: c@1.0.0 in package-lock.json, c@1.0.1 installed",
      "node_modules/d (needed by node_modules/server): d@1.0.0 in package-lock.json, not installed",
      "metrics (needed by package.json): not in package-lock.json",
    ]);
  });

  it("refuses a lockfile that was not written for package.json, naming the field", () => {
    const project = madeUpProject(join(root, "project"), MANIFEST, PACKAGES);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "made-up", version: "1.0.0", ...MANIFEST, dependencies: { a: "^1.1.0", e: "^1.0.0" } }));
    expect(mismatchOf(() => productionPackages({ projectDir: project, runtimePeers: RUNTIME_PEERS }))).to.deep.equal([
      'dependencies.a: "^1.1.0" in package.json, "^1.0.0" in package-lock.json',
      'dependencies.e: "^1.0.0" in package.json, null in package-lock.json',
    ]);
  });

  it("bundles each package without its nested node_modules/, a link to a file as that file, and refuses a link out of node_modules/", () => {
    const project = madeUpProject(join(root, "project"), MANIFEST, PACKAGES);
    mkdirSync(join(project, "node_modules", "a", "node_modules", ".bin"));
    symlinkSync("../b/index.js", join(project, "node_modules", "a", "node_modules", ".bin", "b"));
    symlinkSync("index.js", join(project, "node_modules", "c", "alias.js"));
    const packages = productionPackages({ projectDir: project, runtimePeers: RUNTIME_PEERS });
    const entries = moduleEntries(project, packages);
    expect(entries.map((entry) => entry.path).sort()).to.deep.equal(
      [...packages.flatMap((pkg) => [`${pkg.location}/index.js`, `${pkg.location}/package.json`]), "node_modules/c/alias.js"].sort(),
    );
    expect(entries.find((entry) => entry.path === "node_modules/c/alias.js")?.content?.toString()).to.equal('module.exports = "node_modules/c";\n');

    writeFileSync(join(root, "outside.js"), "module.exports = 1;\n");
    symlinkSync(join(root, "outside.js"), join(project, "node_modules", "d", "outside.js"));
    expect(() => moduleEntries(project, packages)).to.throw(/node_modules\/d\/outside\.js links to .*outside\.js, outside /);
  });

  it("builds the same bundle twice, whose extracted install holds the tree at its locations", async () => {
    const project = madeUpProject(join(root, "project"), MANIFEST, PACKAGES);
    const dist = fakeDist(root, "1.2.3");
    const build = (out: string) =>
      buildRelease({ distDir: dist, outDir: join(root, out), sourceRevision: REVISION, sourceTreeDirty: false, sourceDateEpochS: 1_700_000_000, buildTime: new Date(), modules: { projectDir: project, runtimePeers: RUNTIME_PEERS } });
    const first = build("a");
    const second = build("b");
    expect(sha256File(first.bundlePath)).to.equal(sha256File(second.bundlePath));
    expect(first.bundledPackages).to.equal(6);
    const install = join(root, "install");
    await extractTarGz(first.bundlePath, install);
    expect(treeDigestOfDirectory(install)).to.equal(first.metadata.bundle.tree_sha256);
    expect(readFileSync(join(install, "node_modules", "a", "node_modules", "b", "index.js"), "utf8")).to.include("node_modules/a/node_modules/b");
    expect(buildRelease({ distDir: dist, outDir: join(root, "without"), sourceRevision: REVISION, sourceTreeDirty: false, sourceDateEpochS: 1_700_000_000, buildTime: new Date() }).bundledPackages).to.equal(null);
  });

  it("runs an install with node_modules/ on its own tree, ignoring NODE_PATH; one without finds its packages through NODE_PATH", async () => {
    const project = madeUpProject(join(root, "project"), MANIFEST, PACKAGES);
    const host = madeUpProject(join(root, "host"), { dependencies: { "only-on-host": "^1.0.0", a: "^1.0.0" } }, { "node_modules/only-on-host": { version: "1.0.0" }, "node_modules/a": { version: "1.0.0" } });
    // A dist/ whose CLI reports where its packages come from.
    const dist = fakeDist(root, "1.2.3");
    writeFileSync(
      join(dist, "node", "cli.js"),
      `exports.main = () => {
  const where = (name) => { try { return require.resolve(name); } catch { return null; } };
  console.log(JSON.stringify({ a: where("a"), host: where("only-on-host"), nodePath: process.env.NODE_PATH ?? null }));
};\n`,
    );
    const run = async (modules: boolean) => {
      const release = buildRelease({ distDir: dist, outDir: join(root, `out-${modules}`), sourceRevision: REVISION, sourceTreeDirty: false, sourceDateEpochS: 1_700_000_000, buildTime: new Date(), ...(modules ? { modules: { projectDir: project, runtimePeers: RUNTIME_PEERS } } : {}) });
      const install = join(root, `install-${modules}`);
      await extractTarGz(release.bundlePath, install);
      const result = spawnSync(process.execPath, [join(install, LAUNCHER_FILE)], { cwd: root, env: { NODE_PATH: join(host, "node_modules") }, encoding: "utf8" });
      expect(result.status, result.stderr).to.equal(0);
      return { install, seen: JSON.parse(result.stdout) as { a: string | null; host: string | null; nodePath: string | null } };
    };
    const bundled = await run(true);
    expect(bundled.seen).to.deep.equal({ a: join(bundled.install, "node_modules", "a", "index.js"), host: null, nodePath: null });
    const without = await run(false);
    expect(without.seen).to.deep.equal({ a: join(host, "node_modules", "a", "index.js"), host: join(host, "node_modules", "only-on-host", "index.js"), nodePath: join(host, "node_modules") });
  });
});

/** The names of the packages `paths` (bundle file paths) hold, one per location: `node_modules/<name>/package.json` at any depth. */
function bundledPackageNames(paths: readonly string[]): string[] {
  return paths.flatMap((path) => /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/@][^/]*)\/package\.json$/.exec(path)?.[1] ?? []);
}

/** Stops `child` (SIGTERM, then SIGKILL after 5 s) and waits for it; a child already gone is fine. */
async function stop(child: ReturnType<typeof spawn>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
}

describe("upgrade: a release of this repository with node_modules", function () {
  // Two builds of ~90 MiB of files (gzip -9) and one extraction, on a 2-core machine.
  this.timeout(300_000);
  let root: string;
  let first: BuiltRelease;
  let second: BuiltRelease;
  let paths: string[];
  let install: string;

  before(async function () {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require("../../bin/build-dist.js") as { ensureBuilt(): boolean }).ensureBuilt();
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { OPERATOR_PACKAGES } = require("../../bin/operatorPackages.js") as { OPERATOR_PACKAGES: readonly string[] };
    root = mkdtempSync(join(tmpdir(), "ats-release-modules-"));
    const build = (out: string) =>
      buildRelease({ distDir: join(ROOT, "dist"), outDir: join(root, out), sourceRevision: REVISION, sourceTreeDirty: true, sourceDateEpochS: 1_700_000_000, buildTime: new Date(), modules: { projectDir: ROOT, runtimePeers: OPERATOR_PACKAGES } });
    first = build("a");
    second = build("b");
    install = join(root, "install");
    paths = (await extractTarGz(first.bundlePath, install)).files.map((file) => file.path);
  });

  after(() => {
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  it("holds the production packages and none of the dev ones", () => {
    const names = new Set(bundledPackageNames(paths));
    for (const name of ["fastify", "better-sqlite3", "pino", "prom-client", "viem", "ws", "@grpc/grpc-js", "@sinclair/typebox", "secp256k1", "keccak", "bindings"]) expect(names, name).to.include(name);
    for (const name of ["hardhat", "mocha", "typescript", "ts-node", "eslint", "solc", "@openzeppelin/contracts", "autocannon", "fast-check", "chai"]) expect(names, name).to.not.include(name);
    expect(paths.filter((path) => path.includes("/.bin/"))).to.deep.equal([]);
    // better-sqlite3 without its build intermediates, with the addon it loads.
    expect(paths).to.include("node_modules/better-sqlite3/build/Release/better_sqlite3.node");
    expect(paths.filter((path) => /^node_modules\/better-sqlite3\/(deps|src|build\/Release\/obj)/.test(path))).to.deep.equal([]);
    expect(first.bundledPackages).to.equal(bundledPackageNames(paths).length); // one per location
  });

  it("is reproducible: two builds, the same digest; the extracted install is the metadata's tree", () => {
    expect(second.metadata.bundle.sha256).to.equal(first.metadata.bundle.sha256);
    expect(sha256File(second.bundlePath)).to.equal(sha256File(first.bundlePath));
    expect(treeDigestOfDirectory(install)).to.equal(first.metadata.bundle.tree_sha256);
  });

  it("loads its native addons from the install, with an empty environment", () => {
    const elsewhere = mkdtempSync(join(root, "elsewhere-"));
    const probe = `
      const install = process.argv[1];
      const Database = require(install + "/node_modules/better-sqlite3");
      const sqlite = new Database(":memory:").prepare("select sqlite_version() as v").get().v;
      const secp = require(install + "/protocol/secp256k1.js");
      const keccak = require(install + "/protocol/keccak.js");
      console.log(JSON.stringify({ sqlite, secp: secp.SECP256K1_NATIVE_MODULE_PATH, keccak: keccak.KECCAK_NATIVE_MODULE_PATH }));`;
    const result = spawnSync(process.execPath, ["-e", probe, install], { cwd: elsewhere, env: {}, encoding: "utf8", timeout: 60_000 });
    expect(result.status, result.stderr).to.equal(0);
    const loaded = JSON.parse(result.stdout) as { sqlite: string; secp: string | null; keccak: string | null };
    expect(loaded.sqlite).to.match(/^3\./);
    expect(loaded.secp, "secp256k1 addon").to.be.a("string").and.satisfy((path: string) => path.startsWith(`${install}/node_modules/`));
    expect(loaded.keccak, "keccak addon").to.be.a("string").and.satisfy((path: string) => path.startsWith(`${install}/node_modules/`));
  });

  it("starts a node from the extracted install with an empty environment and its cwd elsewhere: GET /node/info answers", async () => {
    const ca = await createDevManufacturerCa();
    const keyDir = join(root, "keys");
    await saveKeyDir(keyDir, await createDevIdentity({ ca }));
    const restPort = await freeTcpPort();
    const configFile = join(root, "node.json");
    writeFileSync(configFile, JSON.stringify({ host: "127.0.0.1", restPort, grpcEnabled: false, keyDir, dataDir: join(root, "data"), trustedRootsPem: [ca.certificatePem], logLevel: "warn" }));
    const elsewhere = mkdtempSync(join(root, "cwd-"));
    const child = spawn(process.execPath, [join(install, LAUNCHER_FILE), "start", "--config", configFile], { cwd: elsewhere, env: {}, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000));
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    try {
      const deadline = Date.now() + 60_000;
      let info: { version?: string; revision?: string | null } | undefined;
      while (info === undefined) {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the node exited (${child.exitCode ?? child.signalCode}): ${output}`);
        if (Date.now() > deadline) throw new Error(`GET /node/info did not answer within 60 s: ${output}`);
        const response = await fetch(`http://127.0.0.1:${restPort}/node/info`, { signal: AbortSignal.timeout(1_000) }).catch(() => undefined);
        if (response?.status === 200) info = (await response.json()) as typeof info;
        else await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(info.version).to.equal(first.metadata.node_version);
      expect(info.revision).to.equal(REVISION);
    } finally {
      await stop(child);
    }
  });
});
