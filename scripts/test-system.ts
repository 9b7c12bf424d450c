/**
 * `npm run test:system`: the tests that drive real programs from Debian packages (chronyd, sntp, SoftHSM2, gpsd,
 * Prometheus and promtool, Chromium), kept out of `npm test` so that a fresh machine with only Node.js and npm passes that. First every program the
 * suite needs is looked up on PATH (and /usr/sbin, where Debian puts daemons); a missing one is named on one line
 * with the package that provides it, and the run stops with exit code 1 before any test (a suite that skipped what
 * it cannot run would pass without testing anything). Then `hardhat test` runs every file under test-system/.
 *
 * `.ci/run` installs the packages (SYSTEM_PACKAGES below, printed by `--packages`) before running it.
 */
import { spawnSync } from "node:child_process";
import { accessSync, constants, readdirSync } from "node:fs";
import { delimiter, join } from "node:path";

const ROOT = join(__dirname, "..");

/** Each program the system tests run, and the Debian package that provides it. */
export const SYSTEM_PROGRAMS: readonly { program: string; debianPackage: string }[] = [
  { program: "chronyd", debianPackage: "chrony" },
  { program: "chronyc", debianPackage: "chrony" },
  { program: "sntp", debianPackage: "sntp" },
  { program: "softhsm2-util", debianPackage: "softhsm2" },
  { program: "gpsd", debianPackage: "gpsd" },
  { program: "gpsfake", debianPackage: "gpsd-clients" },
  { program: "promtool", debianPackage: "prometheus" },
  { program: "prometheus", debianPackage: "prometheus" },
  // The time explorer's browser tests drive it through playwright-core (no browser download).
  { program: "chromium", debianPackage: "chromium" },
];

/** The PKCS#11 module SoftHSM2 installs (Debian's path), checked like a program. */
export const SOFTHSM2_MODULE = "/usr/lib/softhsm/libsofthsm2.so";

export const SYSTEM_PACKAGES = [...new Set(SYSTEM_PROGRAMS.map((entry) => entry.debianPackage))];

function onPath(program: string): boolean {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/sbin", "/sbin"];
  return dirs.some((dir) => {
    try {
      accessSync(join(dir, program), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

function fileExists(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** One line per missing program: what is missing and how to install it. */
export function missingPrograms(): string[] {
  const lines = SYSTEM_PROGRAMS.filter(({ program }) => !onPath(program)).map(({ program, debianPackage }) => `test:system needs ${program}: apt-get install -y ${debianPackage}`);
  if (!fileExists(SOFTHSM2_MODULE)) lines.push(`test:system needs the PKCS#11 module ${SOFTHSM2_MODULE}: apt-get install -y softhsm2`);
  return [...new Set(lines)];
}

function main(): void {
  if (process.argv.includes("--packages")) {
    console.log(SYSTEM_PACKAGES.join(" "));
    return;
  }
  const missing = missingPrograms();
  if (missing.length > 0) {
    for (const line of missing) console.error(line);
    console.error(`(all at once: apt-get install -y ${SYSTEM_PACKAGES.join(" ")})`);
    process.exit(1);
  }
  const files = readdirSync(join(ROOT, "test-system"))
    .filter((name) => name.endsWith(".test.ts"))
    .sort()
    .map((name) => join("test-system", name));
  if (files.length === 0) {
    console.error("test:system: no test files under test-system/");
    process.exit(1);
  }
  const npx = process.platform === "win32" ? "npx.cmd" : "npx";
  const run = spawnSync(npx, ["hardhat", "test", ...files], { cwd: ROOT, stdio: "inherit" });
  process.exit(run.status ?? 1);
}

if (require.main === module) main();
