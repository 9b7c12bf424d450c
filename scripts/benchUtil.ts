/**
 * What the benchmarks (bench-node.ts, bench-attack.ts) share: pinning processes to cores, and how numbers are
 * summarised and printed.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { cpus } from "node:os";

/** Whether `command` can be run (its version flag answers at all). */
export function commandExists(command: string, versionFlag = "--version"): boolean {
  return spawnSync(command, [versionFlag], { stdio: "ignore" }).error === undefined;
}

/** Whether processes can be pinned: taskset present, ≥ 2 cores, not turned off (BENCH_PIN=0). */
export const PINNING = process.env.BENCH_PIN !== "0" && cpus().length >= 2 && commandExists("taskset");

/** Pins every thread of `pid` (present and future) to one core; a process that already exited is skipped. */
export function pin(pid: number | undefined, core: number): void {
  if (!PINNING || pid === undefined) return;
  try {
    execFileSync("taskset", ["-a", "-p", "-c", String(core), String(pid)], { stdio: "ignore" });
  } catch {
    // the process may have exited meanwhile
  }
}

/** The p-th percentile (0..100) of ascending `sorted` values (nearest rank); NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** A number with thousands separators and `digits` decimals; "n/a" when not finite. */
export function fmt(value: number, digits = 0): string {
  if (!Number.isFinite(value)) return "n/a";
  return value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}
