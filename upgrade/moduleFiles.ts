/**
 * The files of the bundled packages (upgrade/productionTree.ts) as bundle entries under node_modules/, read from
 * the installed tree at the packages' own locations, so the install resolves them exactly as the checkout does:
 * `<install>/node/cli.js` finds `<install>/node_modules/` by Node's own lookup, without NODE_PATH.
 *
 * - Each package is read without its own node_modules/ folder: the packages nested there are packages of their own
 *   (bundled when they are in the tree), and their `.bin/` links are for npm scripts, which an install never runs.
 * - Links: the bundle holds none (the agent's extractor refuses them, upgrade/tar.ts). A link to a file inside
 *   node_modules/ is stored as that file's content at the link's path, which is what `require` reads through it;
 *   a link to a folder or out of node_modules/ is refused, naming it. Either way the same tree gives the same bytes.
 * - Folders are not entries: extraction creates them from the files' paths, and the tree digest covers files only.
 * - Build intermediates a package does not load are left out (NOT_LOADED), each with the reason it is safe.
 */
import { lstatSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { isAbsolute, join, relative, sep } from "node:path";
import type { LockedPackage } from "./productionTree";
import type { TarEntry } from "./tar";

export const MODULES_DIR = "node_modules";

/**
 * Everything is read into memory to be archived (upgrade/tar.ts): the production tree is about 89 MiB in some
 * 21 000 files today. These bounds, five times that, stop a tree that grew several-fold (a dev tool made a
 * dependency) before it costs the build machine its memory; the compressed bundle has its own bound (upgrade/release.ts).
 */
export const MAX_MODULES_BYTES = 512 * 1024 * 1024;
export const MAX_MODULES_FILES = 100_000;

/**
 * Per package name, the paths (relative to the package folder, POSIX) that are not bundled because nothing loads
 * them at run time. A rule must be shown safe: test/upgrade/releaseModules.test.ts starts a node from a bundled
 * install and loads each native addon from it.
 */
const NOT_LOADED: Readonly<Record<string, (path: string) => boolean>> = {
  // better-sqlite3 compiles SQLite and its addon when it is installed (node-gyp). At run time lib/database.js loads
  // the addon through `bindings("better_sqlite3.node")`, which finds build/Release/better_sqlite3.node (there is no
  // build/Debug); lib/ reads nothing else. The rest of build/ (object files, the static sqlite3.a, Makefiles,
  // test_extension.node) and the C/C++ sources in deps/ and src/ are the compiler's input and output: all but
  // 2 MiB of the package.
  "better-sqlite3": (path) =>
    path === "deps" || path.startsWith("deps/") || path === "src" || path.startsWith("src/") || (path.startsWith("build/") && path !== "build/Release" && path !== "build/Release/better_sqlite3.node"),
};

interface Totals {
  bytes: number;
  files: number;
}

function toPosix(path: string): string {
  return path.split(sep).join("/");
}

/** The content a link stands for: a file inside `modulesRoot` (real path), or a refusal naming the link. */
function linkedFile(path: string, modulesRoot: string): { content: Buffer; executable: boolean } {
  let target: string;
  try {
    target = realpathSync(path);
  } catch (error) {
    throw new Error(`${path} is a link that does not resolve: ${(error as Error).message}`);
  }
  const inside = relative(modulesRoot, target);
  if (inside === "" || inside === ".." || inside.startsWith(`..${sep}`) || isAbsolute(inside)) throw new Error(`${path} links to ${target}, outside ${modulesRoot}: a bundle carries no links, and this one would import a file the lockfile does not describe`);
  const stat = statSync(target);
  if (!stat.isFile()) throw new Error(`${path} links to the folder ${target}: a bundle carries no links (copy or remove it)`);
  return { content: readFileSync(target), executable: (stat.mode & 0o111) !== 0 };
}

function addFile(entries: TarEntry[], totals: Totals, path: string, content: Buffer, executable: boolean): void {
  totals.bytes += content.length;
  totals.files += 1;
  if (totals.bytes > MAX_MODULES_BYTES || totals.files > MAX_MODULES_FILES) {
    throw new Error(`the production node_modules exceeds ${MAX_MODULES_BYTES} bytes or ${MAX_MODULES_FILES} files at ${path} (${totals.bytes} bytes, ${totals.files} files): a dependency grew several-fold, or the tree is not the production one`);
  }
  entries.push({ path, type: "file", content, executable });
}

/** Bundle entries (files, `node_modules/<location>/…`) of `packages`, installed under `projectDir`. */
export function moduleEntries(projectDir: string, packages: readonly LockedPackage[]): TarEntry[] {
  const modulesRoot = realpathSync(join(projectDir, MODULES_DIR));
  const entries: TarEntry[] = [];
  const totals: Totals = { bytes: 0, files: 0 };
  for (const pkg of packages) {
    const packageDir = join(projectDir, pkg.location);
    const skip = NOT_LOADED[pkg.name] ?? (() => false);
    const walk = (inPackage: string): void => {
      for (const item of readdirSync(join(packageDir, inPackage), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
        const path = inPackage === "" ? item.name : `${inPackage}/${item.name}`;
        if ((inPackage === "" && item.name === MODULES_DIR) || skip(path)) continue;
        const source = join(packageDir, path);
        const bundled = `${toPosix(pkg.location)}/${path}`;
        if (item.isDirectory()) walk(path);
        else if (item.isFile()) addFile(entries, totals, bundled, readFileSync(source), (lstatSync(source).mode & 0o111) !== 0);
        else if (item.isSymbolicLink()) {
          const linked = linkedFile(source, modulesRoot);
          addFile(entries, totals, bundled, linked.content, linked.executable);
        } else throw new Error(`${source} is neither a file, a folder nor a link: it cannot be bundled`);
      }
    };
    walk("");
  }
  return entries;
}
