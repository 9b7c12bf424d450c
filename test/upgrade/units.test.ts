/**
 * Units (upgrade/unit.ts): the local supervisor starts the install its install.env names, in its own process
 * group, with no inherited environment (NODE_PATH only for an install without node_modules/), and stops it (SIGKILL after the stop timeout); the systemd unit drives a
 * fake `systemctl` placed first on PATH, which records every call. Every process started here is stopped in
 * afterEach, also when a test fails.
 */
import { expect } from "chai";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { UpgradeRefusal } from "../../upgrade/errors";
import { readInstallEnv, writeInstallEnv } from "../../upgrade/installEnv";
import { createLocalUnit, processAlive } from "../../upgrade/localUnit";
import { MODULES_DIR } from "../../upgrade/moduleFiles";
import { LAUNCHER_FILE } from "../../upgrade/release";
import { createSystemdUnit } from "../../upgrade/systemdUnit";
import type { NodeUnit } from "../../upgrade/unit";
import { rejection } from "./helpers";

const SHA = "a".repeat(64);

/**
 * An "install" whose launcher logs its environment and argv, then idles; `ignoreTerm` makes it ignore SIGTERM;
 * `withModules` gives it a node_modules/ folder, as a release that bundles its dependencies has.
 */
function fakeInstall(root: string, name: string, ignoreTerm = false, withModules = false): string {
  const dir = join(root, name);
  mkdirSync(dir);
  if (withModules) mkdirSync(join(dir, MODULES_DIR));
  writeFileSync(
    join(dir, LAUNCHER_FILE),
    `console.log(JSON.stringify({ env: Object.keys(process.env).sort(), argv: process.argv.slice(2) }));
${ignoreTerm ? 'process.on("SIGTERM", () => console.log("ignoring SIGTERM"));' : 'process.on("SIGTERM", () => { console.log("stopping"); process.exit(0); });'}
setInterval(() => undefined, 1000);\n`,
  );
  return dir;
}

async function until(condition: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("upgrade: units", function () {
  this.timeout(30_000);
  let root: string;
  const started: NodeUnit[] = [];
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ats-units-"));
  });
  afterEach(async () => {
    for (const unit of started.splice(0)) await unit.stop();
    rmSync(root, { recursive: true, force: true });
  });

  /** A local unit in `<root>/<name>`; `modulesDir: null` leaves it out of unit.json. */
  function localUnit({ stopTimeoutMs, modulesDir = join(root, "modules"), name = "unit" }: { stopTimeoutMs?: number; modulesDir?: string | null; name?: string } = {}): NodeUnit {
    const dir = join(root, name);
    mkdirSync(dir);
    writeFileSync(join(dir, "unit.json"), JSON.stringify({ configFile: "node.json", ...(modulesDir === null ? {} : { modulesDir }), ...(stopTimeoutMs === undefined ? {} : { stopTimeoutMs }) }));
    const unit = createLocalUnit(dir);
    started.push(unit);
    return unit;
  }

  it("local: starts the named install with PATH and NODE_PATH only, reports it, and stops it", async () => {
    const unit = localUnit();
    const install = fakeInstall(root, "install-a");
    writeInstallEnv(unit.installEnvFile, { installDir: install, releaseId: "ats-node-1.0.0-0123456789ab", installSha256: SHA });
    const cursor = await unit.logCursor();
    process.env.ATS_UNIT_TEST_SECRET = "must-not-reach-the-node";
    try {
      await unit.start();
    } finally {
      delete process.env.ATS_UNIT_TEST_SECRET;
    }
    const status = await unit.status();
    expect(status.active).to.equal(true);
    expect(status.runs).to.equal(install);
    await until(async () => (await unit.logSince(cursor)).length > 0, 5_000, "the node's first log line");
    const first = JSON.parse((await unit.logSince(cursor))[0]!) as { env: string[]; argv: string[] };
    expect(first.env).to.deep.equal(["NODE_PATH", "PATH"]);
    expect(first.argv).to.deep.equal(["start", "--config", join(root, "unit", "node.json")]);
    await rejection(unit.start(), UpgradeRefusal, /already running/);
    await unit.stop();
    expect(processAlive(status.pid!)).to.equal(false);
    expect((await unit.status()).active).to.equal(false);
    expect((await unit.logSince(cursor)).join("\n")).to.include("stopping");
  });

  it("local: starts an install that bundles node_modules/ with PATH only, with or without a modulesDir", async () => {
    for (const [name, modulesDir] of [["with-modules-dir", join(root, "modules")], ["without-modules-dir", null]] as const) {
      const unit = localUnit({ modulesDir, name });
      writeInstallEnv(unit.installEnvFile, { installDir: fakeInstall(root, `install-${name}`, false, true), releaseId: "ats-node-1.0.0-0123456789ab", installSha256: SHA });
      const cursor = await unit.logCursor();
      await unit.start();
      await until(async () => (await unit.logSince(cursor)).length > 0, 5_000, "the node's first log line");
      expect((JSON.parse((await unit.logSince(cursor))[0]!) as { env: string[] }).env, name).to.deep.equal(["PATH"]);
      await unit.stop();
    }
  });

  it("local: refuses to start an install without node_modules/ when unit.json names no modulesDir, naming the install", async () => {
    const unit = localUnit({ modulesDir: null });
    const install = fakeInstall(root, "without-modules");
    writeInstallEnv(unit.installEnvFile, { installDir: install, releaseId: "ats-node-1.0.0-0123456789ab", installSha256: SHA });
    const refusal = await rejection(unit.start(), UpgradeRefusal, /has no node_modules\/ \(a release built --without-modules\) and .*unit\.json names no modulesDir/);
    expect(refusal.code).to.equal("unit-failed");
    expect(refusal.message).to.include(install);
    expect((await unit.status()).active).to.equal(false);
  });

  it("local: kills a node that ignores SIGTERM once the stop timeout passes", async () => {
    const unit = localUnit({ stopTimeoutMs: 300 });
    writeInstallEnv(unit.installEnvFile, { installDir: fakeInstall(root, "stubborn", true), releaseId: "ats-node-1.0.0-0123456789ab", installSha256: SHA });
    const cursor = await unit.logCursor();
    await unit.start();
    await until(async () => (await unit.logSince(cursor)).length > 0, 5_000, "the node's first log line");
    const { pid } = await unit.status();
    const startedAt = Date.now();
    await unit.stop();
    expect(Date.now() - startedAt).to.be.at.least(300);
    expect(processAlive(pid!)).to.equal(false);
    expect((await unit.logSince(cursor)).join("\n")).to.include("ignoring SIGTERM");
  });

  it("local: refuses to start without an install.env, and refuses a unit.json with unknown keys", async () => {
    const unit = localUnit();
    await rejection(unit.start(), UpgradeRefusal, /no install\.env/);
    const bad = join(root, "bad");
    mkdirSync(bad);
    writeFileSync(join(bad, "unit.json"), JSON.stringify({ configFile: "x", modulesDir: "y", host: "0.0.0.0" }));
    expect(() => createLocalUnit(bad)).to.throw(UpgradeRefusal, /unit\.json/);
  });

  it("local: writes its pid record whole (no temporary file left), and refuses an unreadable one naming the file", async () => {
    const unit = localUnit();
    const install = fakeInstall(root, "install-a");
    writeInstallEnv(unit.installEnvFile, { installDir: install, releaseId: "ats-node-1.0.0-0123456789ab", installSha256: SHA });
    await unit.start();
    const pidFile = join(root, "unit", "node.pid");
    expect(JSON.parse(readFileSync(pidFile, "utf8"))).to.include({ installDir: install, pid: (await unit.status()).pid });
    const firstInode = statSync(pidFile).ino;
    await unit.stop();
    await unit.start();
    // Replaced by a rename (a new file), not rewritten in place where a reader could find it half-written.
    expect(statSync(pidFile).ino).to.not.equal(firstInode);
    expect(readdirSync(join(root, "unit")).filter((name) => name.includes(".tmp-"))).to.deep.equal([]);
    await unit.stop();
    // A record cut short (written by an older agent that died mid-write) is named, not a bare SyntaxError.
    writeFileSync(pidFile, '{"pid": 12');
    await rejection(unit.status(), UpgradeRefusal, /node\.pid is not a pid record \(.*JSON.*\): remove it once no node of this unit runs/);
    rmSync(pidFile);
    expect((await unit.status()).active).to.equal(false);
  });

  it("install.env: a swap keeps the previous record", () => {
    const file = join(root, "install.env");
    const a = { installDir: "/opt/a", releaseId: "ats-node-1.0.0-0123456789ab", installSha256: SHA };
    const b = { installDir: "/opt/b", releaseId: "ats-node-1.0.1-0123456789ab", installSha256: "b".repeat(64) };
    writeInstallEnv(file, a);
    writeInstallEnv(file, b);
    expect(readInstallEnv(file)).to.deep.equal(b);
    expect(readInstallEnv(`${file}.previous`)).to.deep.equal(a);
    writeFileSync(file, "ATS_INSTALL_DIR=relative\n");
    expect(() => readInstallEnv(file)).to.throw(UpgradeRefusal, /absolute path/);
  });

  describe("systemd (a fake systemctl on PATH)", () => {
    let bin: string;
    let calls: string;
    let env: NodeJS.ProcessEnv;
    beforeEach(() => {
      bin = join(root, "bin");
      mkdirSync(bin);
      calls = join(root, "calls.log");
      const state = join(root, "state");
      // Records argv, one call per line; keeps the unit's state in a file; `show` answers like systemd does.
      writeFileSync(
        join(bin, "systemctl"),
        `#!/bin/sh
echo "systemctl $*" >> "${calls}"
case "$1" in
  start) echo active > "${state}" ;;
  stop) echo inactive > "${state}" ;;
  show) s=$(cat "${state}" 2>/dev/null || echo inactive); if [ "$s" = active ]; then echo "ActiveState=active"; echo "MainPID=999999"; else echo "ActiveState=inactive"; echo "MainPID=0"; fi ;;
  *) echo "unknown verb $1" >&2; exit 1 ;;
esac
`,
      );
      writeFileSync(join(bin, "journalctl"), `#!/bin/sh\necho "journalctl $*" >> "${calls}"\necho "a log line"\n`);
      chmodSync(join(bin, "systemctl"), 0o755);
      chmodSync(join(bin, "journalctl"), 0o755);
      env = { PATH: `${bin}:${process.env.PATH ?? ""}` };
    });

    it("starts, reports, stops and reads the journal through systemctl / journalctl", async () => {
      const unit = createSystemdUnit({ name: "ats-node.service", installEnvFile: join(root, "install.env"), env });
      expect((await unit.status()).active).to.equal(false);
      await unit.start();
      expect(await unit.status()).to.deep.equal({ active: true, pid: 999999, runs: null });
      await unit.stop();
      expect((await unit.status()).active).to.equal(false);
      expect(await unit.logSince("1700000000")).to.deep.equal(["a log line"]);
      expect(readFileSync(calls, "utf8").trim().split("\n")).to.deep.equal([
        "systemctl show ats-node.service --property=ActiveState --property=MainPID",
        "systemctl start ats-node.service",
        "systemctl show ats-node.service --property=ActiveState --property=MainPID",
        "systemctl stop ats-node.service",
        "systemctl show ats-node.service --property=ActiveState --property=MainPID",
        "journalctl --unit ats-node.service --since @1700000000 --output cat --no-pager --quiet",
      ]);
    });

    it("reports a failing systemctl with its stderr, and refuses a unit name that is not a service", async () => {
      const unit = createSystemdUnit({ name: "ats-node.service", installEnvFile: join(root, "install.env"), env: { PATH: bin } });
      writeFileSync(join(bin, "systemctl"), "#!/bin/sh\necho 'Failed to start ats-node.service: Unit not found.' >&2\nexit 5\n");
      await rejection(unit.start(), UpgradeRefusal, /Unit not found/);
      expect(() => createSystemdUnit({ name: "ats-node; rm -rf /", installEnvFile: "/x", env })).to.throw(UpgradeRefusal);
    });
  });
});
