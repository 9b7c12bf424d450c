/**
 * Which npm packages a release bundles (docs/upgrade.md §1): the node's production dependency tree, read from
 * package-lock.json and checked against the installed node_modules/. Nothing is resolved or downloaded here: the
 * bundle holds what this checkout installed from its lockfile, or the release is refused with the differences.
 *
 * Detail: docs/upgrade.md §1; the roots of the tree and how it is followed are listed after the imports.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/*
 * The tree is the closure, over the lockfile, of
 * - package.json `dependencies`;
 * - its `optionalDependencies` that are installed (npm skips the ones that do not fit the platform);
 * - `runtimePeers`: the optional peer dependencies the programs need (bin/operatorPackages.js: fastify,
 *   better-sqlite3, pino, prom-client). They are devDependencies as well, so a dApp's install leaves them out
 *   and the repository's tests have them; that is also why `npm ls --omit=dev` does not list them and the
 *   lockfile marks them `dev`, so neither can be asked for the tree;
 *
 * following each package's `dependencies`, its installed `optionalDependencies` and its required peers. A
 * package's optional peers are not followed: they are its consumer's choice (viem's optional peer `typescript`
 * is installed here to build, not to run), and this consumer's choices are the roots above. A name resolves as
 * Node resolves it at run time: the nearest `node_modules/<name>` from the requiring package's folder upwards.
 */
export const LOCK_FILE = "package-lock.json";

/** One package of the tree: where it sits under the project (its lockfile key) and what it is. */
export interface LockedPackage {
  /** e.g. "node_modules/fastify" or "node_modules/ox/node_modules/@noble/curves". */
  location: string;
  name: string;
  version: string;
}

export interface ProductionTreeOptions {
  /** The checkout: its package.json, package-lock.json and installed node_modules/. */
  projectDir: string;
  /** Optional peer dependencies the bundled programs load (bin/operatorPackages.js); each must be installed. */
  runtimePeers: readonly string[];
}

/** A tree installed from another lockfile can differ in hundreds of packages: the first ones say enough. */
const MAX_PROBLEMS_SHOWN = 20;

/** The release is refused because the installed tree is not the lockfile's: `problems` is the evidence, one line each. */
export class InstalledTreeMismatch extends Error {
  override readonly name = "InstalledTreeMismatch";
  constructor(
    readonly problems: readonly string[],
    what: string,
  ) {
    const shown = problems.slice(0, MAX_PROBLEMS_SHOWN);
    const more = problems.length > shown.length ? `\n  … and ${problems.length - shown.length} more` : "";
    super(`${what} (run npm ci, or pass --without-modules):\n  ${shown.join("\n  ")}${more}`);
  }
}

const DEPENDENCY_FIELDS = ["dependencies", "optionalDependencies", "peerDependencies", "devDependencies"] as const;

type DependencyMap = Readonly<Record<string, string>>;

interface Manifest {
  dependencies?: DependencyMap;
  optionalDependencies?: DependencyMap;
  peerDependencies?: DependencyMap;
  devDependencies?: DependencyMap;
}

/** A package-lock.json v2/v3 `packages` entry, the fields read here. */
interface LockEntry extends Manifest {
  name?: string;
  version?: string;
  link?: boolean;
  peerDependenciesMeta?: Readonly<Record<string, { optional?: boolean }>>;
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as unknown;
  } catch (error) {
    throw new Error(`${file}: ${(error as Error).message}`);
  }
}

function readLock(projectDir: string): Readonly<Record<string, LockEntry>> {
  const file = join(projectDir, LOCK_FILE);
  const lock = readJson(file) as { lockfileVersion?: unknown; packages?: unknown };
  // Version 1 lockfiles have no `packages` map (no install locations): npm 7+ writes 2 or 3.
  if (typeof lock.lockfileVersion !== "number" || lock.lockfileVersion < 2 || typeof lock.packages !== "object" || lock.packages === null) {
    throw new Error(`${file}: lockfileVersion ${String(lock.lockfileVersion)} has no "packages" map (npm 7 or later writes one)`);
  }
  return lock.packages as Record<string, LockEntry>;
}

/** The lockfile's root must declare what package.json declares, or it was not written for this package.json. */
function lockRootProblems(manifest: Manifest, root: LockEntry | undefined): string[] {
  const problems: string[] = [];
  for (const field of DEPENDENCY_FIELDS) {
    const declared = manifest[field] ?? {};
    const locked = root?.[field] ?? {};
    for (const name of [...new Set([...Object.keys(declared), ...Object.keys(locked)])].sort()) {
      if (declared[name] !== locked[name]) {
        problems.push(`${field}.${name}: ${JSON.stringify(declared[name] ?? null)} in package.json, ${JSON.stringify(locked[name] ?? null)} in ${LOCK_FILE}`);
      }
    }
  }
  return problems;
}

/** Where `name` resolves from the package at `from` ("" is the project): the nearest node_modules/<name> upwards. */
function resolveLocation(packages: Readonly<Record<string, LockEntry>>, from: string, name: string): string | null {
  for (let base = from; ; ) {
    const candidate = `${base === "" ? "" : `${base}/`}node_modules/${name}`;
    if (packages[candidate] !== undefined) return candidate;
    if (base === "") return null;
    const cut = base.lastIndexOf("/node_modules/");
    base = cut === -1 ? "" : base.slice(0, cut);
  }
}

interface Edge {
  from: string;
  name: string;
  /** An optional dependency: skipped when npm did not install it. */
  optional: boolean;
}

function edgesOf(location: string, entry: LockEntry): Edge[] {
  const optionalPeers = entry.peerDependenciesMeta ?? {};
  return [
    ...Object.keys(entry.dependencies ?? {}).map((name) => ({ from: location, name, optional: false })),
    ...Object.keys(entry.optionalDependencies ?? {}).map((name) => ({ from: location, name, optional: true })),
    ...Object.keys(entry.peerDependencies ?? {})
      .filter((name) => optionalPeers[name]?.optional !== true)
      .map((name) => ({ from: location, name, optional: false })),
  ];
}

/**
 * The production packages of `projectDir`, sorted by location, each installed as its lockfile entry says; throws
 * InstalledTreeMismatch, listing every difference found, when the lockfile is not package.json's or a package of
 * the tree is missing or has another name or version on disk.
 */
export function productionPackages(options: ProductionTreeOptions): LockedPackage[] {
  const { projectDir } = options;
  const manifest = readJson(join(projectDir, "package.json")) as Manifest;
  const packages = readLock(projectDir);
  const rootProblems = lockRootProblems(manifest, packages[""]);
  if (rootProblems.length > 0) throw new InstalledTreeMismatch(rootProblems, `${join(projectDir, LOCK_FILE)} was not written for ${join(projectDir, "package.json")}`);

  const problems = new Set<string>(); // a package reached by several edges is one problem
  const found = new Map<string, LockedPackage>();
  const queue: Edge[] = [
    ...Object.keys(manifest.dependencies ?? {}).map((name) => ({ from: "", name, optional: false })),
    ...Object.keys(manifest.optionalDependencies ?? {}).map((name) => ({ from: "", name, optional: true })),
    ...options.runtimePeers.map((name) => ({ from: "", name, optional: false })),
  ];
  for (let edge = queue.shift(); edge !== undefined; edge = queue.shift()) {
    const requiredBy = edge.from === "" ? "package.json" : edge.from;
    const location = resolveLocation(packages, edge.from, edge.name);
    if (location === null) {
      if (!edge.optional) problems.add(`${edge.name} (needed by ${requiredBy}): not in ${LOCK_FILE}`);
      continue;
    }
    if (found.has(location)) continue;
    const entry = packages[location]!;
    if (entry.link === true) {
      problems.add(`${location} (needed by ${requiredBy}): a link (workspace or file: dependency), which a bundle does not carry`);
      continue;
    }
    const name = entry.name ?? location.slice(location.lastIndexOf("node_modules/") + "node_modules/".length);
    const version = entry.version;
    if (version === undefined) {
      problems.add(`${location} (needed by ${requiredBy}): no version in ${LOCK_FILE}`);
      continue;
    }
    const packageFile = join(projectDir, location, "package.json");
    if (!existsSync(packageFile)) {
      if (!edge.optional) problems.add(`${location} (needed by ${requiredBy}): ${name}@${version} in ${LOCK_FILE}, not installed`);
      continue;
    }
    const installed = readJson(packageFile) as { name?: unknown; version?: unknown };
    if (installed.name !== name || installed.version !== version) {
      problems.add(`${location}: ${name}@${version} in ${LOCK_FILE}, ${String(installed.name)}@${String(installed.version)} installed`);
      continue;
    }
    found.set(location, { location, name, version });
    queue.push(...edgesOf(location, entry));
  }
  if (problems.size > 0) throw new InstalledTreeMismatch([...problems], `the installed ${join(projectDir, "node_modules")} is not ${LOCK_FILE}'s production tree`);
  return [...found.values()].sort((a, b) => (a.location < b.location ? -1 : a.location > b.location ? 1 : 0));
}
