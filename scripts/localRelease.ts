/**
 * The local network's own release, which its downloads service serves (`npm start`, docs/local-network.md): the
 * release of this checkout as `npm run release` makes it (scripts/release.ts, run as a child process so that it
 * builds while the chains and nodes start), reused when the sources did not change, so a second start costs no build.
 * Its folder (`npm start`: .ats/network-release/) holds the network's current release only: a new one replaces the
 * one before, so the folder does not grow with every commit (`npm run release` writes to .ats/releases/, untouched).
 *
 * - A clean tree: the release id names the commit (upgrade/release.ts releaseIdOf), so a folder of that id is this
 *   code and is reused as it is. A release folder is never changed, only replaced whole by the next one.
 * - A tree with changes under dist/'s sources: the release is `…-dirty` (--allow-dirty; its metadata says so). The
 *   same id stands for whatever the tree held, so the folder is reused only while it is newer than dist/'s build
 *   (dist/ is what a release bundles); after a rebuild of dist/ that `-dirty` folder is replaced.
 *
 * The release is built into a staging folder beside the others and renamed into place whole, so a start that is
 * stopped mid-build leaves no half-written release behind. The build runs at a lower CPU priority (nice 10): on a
 * busy host the network's own processes, which have start-up deadlines, come first.
 */
import { execFile } from "node:child_process";
import { readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { setPriority } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { readRelease } from "../catalog/downloads";
import { RELEASE_FILE_NAME } from "../lib/sha256Sums";
import { METADATA_FILE } from "../upgrade/metadata";
import { releaseIdOf } from "../upgrade/release";
import { buildDist, readReleaseSource, ROOT } from "./releaseSource";

const run = promisify(execFile);
/** The release build's deadline, ms: bundling node_modules/ (about 19 MiB) takes seconds of CPU, more on a busy host. */
const BUILD_TIMEOUT_MS = 300_000;
/** The release build's niceness (0 normal, 19 lowest). */
const BUILD_NICENESS = 10;

/** Runs `node <args>` in the checkout at BUILD_NICENESS; resolves with its stdout, rejects with its stderr. */
function runInBackground(args: readonly string[], signal: AbortSignal | undefined): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = execFile(process.execPath, args, { cwd: ROOT, timeout: BUILD_TIMEOUT_MS, maxBuffer: 4 * 1024 * 1024, signal }, (error, stdout, stderr) =>
      error === null ? resolvePromise(stdout) : reject(new Error(stderr.trim() || error.message, { cause: error })),
    );
    try {
      if (child.pid !== undefined) setPriority(child.pid, BUILD_NICENESS);
    } catch {
      // Not permitted here: it runs at normal priority.
    }
  });
}

export interface LocalRelease {
  readonly releaseId: string;
  /** The release folder, `<releasesDir>/<releaseId>`. */
  readonly dir: string;
  /** Whether it was built now (false: an existing one was reused). */
  readonly built: boolean;
  /** Why it was built or reused, for the progress line. */
  readonly why: string;
}

export interface LocalReleaseOptions {
  releasesDir: string;
  /** `npm run release -- --without-modules`: a bundle without node_modules/ (for tests; default false). */
  withoutModules?: boolean;
  /** Aborts the build (its child processes are killed): `npm start` failed or was stopped meanwhile. */
  signal?: AbortSignal;
  /** Told what will be done before it is done (a build takes a while): for a progress line. */
  onPlan?: (plan: LocalReleasePlan) => void;
}

export interface LocalReleasePlan {
  readonly releaseId: string;
  readonly dir: string;
  /** true: the folder is reused; false: a release is built. */
  readonly reuse: boolean;
  readonly why: string;
}

/** What `ensureLocalRelease` will do: reuse the folder, or build (after removing a stale `-dirty` one). */
export function planLocalRelease(releasesDir: string): LocalReleasePlan {
  const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
  const source = readReleaseSource();
  const dirty = source.changes !== "";
  const releaseId = releaseIdOf(version, source.sourceRevision, dirty);
  const dir = join(resolve(releasesDir), releaseId);
  if (readRelease(resolve(releasesDir), releaseId) === null) return { releaseId, dir, reuse: false, why: "none for these sources yet" };
  if (!dirty) return { releaseId, dir, reuse: true, why: `commit ${source.sourceRevision.slice(0, 12)} unchanged` };
  const distBuiltMs = statSync(join(buildDist.DIST, ".build-stamp"), { throwIfNoEntry: false })?.mtimeMs ?? Number.POSITIVE_INFINITY;
  const releasedMs = statSync(join(dir, METADATA_FILE), { throwIfNoEntry: false })?.mtimeMs ?? 0;
  return releasedMs > distBuiltMs
    ? { releaseId, dir, reuse: true, why: "uncommitted sources unchanged since it was built" }
    : { releaseId, dir, reuse: false, why: "uncommitted sources changed since the last one" };
}

/** The local network's release under `releasesDir`: reused when its sources did not change, else built now. */
export async function ensureLocalRelease(options: LocalReleaseOptions): Promise<LocalRelease> {
  const node = process.execPath;
  // A stale dist/ is rebuilt first (bin/build-dist.js waits for a build the nodes may have started): release.ts
  // refuses to bundle a dist/ older than its sources.
  if (buildDist.staleness() !== null) await run(node, [join(ROOT, "bin", "build-dist.js"), "--if-stale"], { cwd: ROOT, timeout: BUILD_TIMEOUT_MS, signal: options.signal });
  const plan = planLocalRelease(options.releasesDir);
  options.onPlan?.(plan);
  if (plan.reuse) return { releaseId: plan.releaseId, dir: plan.dir, built: false, why: plan.why };
  const releasesDir = resolve(options.releasesDir);
  const staging = join(releasesDir, `.staging-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  let releaseId: string;
  try {
    const args = [join(ROOT, "scripts", "release.ts"), "--out", staging, "--allow-dirty", ...(options.withoutModules === true ? ["--without-modules"] : [])];
    const printed = await runInBackground(["-r", join(ROOT, "bin", "register-ts.js"), ...args], options.signal);
    // The id release.ts gave it: a commit made meanwhile names another revision than the plan's.
    releaseId = (JSON.parse(printed) as { metadata: { release_id: string } }).metadata.release_id;
    // Superseded releases of the network go (this folder holds its current one only, so it does not grow with every
    // commit); so does a folder under the new id that is no release (no valid SHA256SUMS) or a stale `-dirty` one.
    for (const name of readdirSync(releasesDir)) if (RELEASE_FILE_NAME.test(name) && !name.startsWith(".")) rmSync(join(releasesDir, name), { recursive: true, force: true });
    renameSync(join(staging, releaseId), join(releasesDir, releaseId));
  } catch (error) {
    throw new Error(`the local network's release ${plan.releaseId} could not be built (npm run release): ${(error as Error).message}`, { cause: error });
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return { releaseId, dir: join(releasesDir, releaseId), built: true, why: plan.why };
}
