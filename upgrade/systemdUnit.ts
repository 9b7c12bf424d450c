/**
 * A unit under systemd, driven through `systemctl` and read through `journalctl` (both found on PATH). The
 * service file is the operator's; it reads the install environment file and names the install through it:
 *
 *   [Service]
 *   EnvironmentFile=/etc/ats-node/install.env
 *   ExecStart=/usr/bin/node ${ATS_INSTALL_DIR}/ats-node.js start --config /etc/ats-node/node.json
 *
 * so a swap rewrites that one file and restarts the unit; the service file itself (user, sandboxing, bind
 * addresses via the node config) is never touched. An install that bundles node_modules/ (the default release)
 * needs nothing more; for installs built --without-modules the service sets
 * `Environment=NODE_PATH=/opt/ats-node/node_modules` (the host's tree), which a bundling install's launcher
 * ignores, so one service file serves both kinds across a rollout. Tested against a fake `systemctl` that records
 * its calls.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { UpgradeRefusal } from "./errors";
import { LAUNCHER_FILE } from "./release";
import type { NodeUnit, UnitStatus } from "./unit";

export interface SystemdUnitOptions {
  /** e.g. "ats-node.service". */
  name: string;
  installEnvFile: string;
  /** Environment of the systemctl / journalctl calls (PATH decides which binaries run); default process.env. */
  env?: NodeJS.ProcessEnv | undefined;
  /** Each systemctl call fails after this long, ms (a stop waits for the node to close: TimeoutStopSec bounds it). */
  commandTimeoutMs?: number;
}

const UNIT_NAME = /^[A-Za-z0-9@._:-]{1,200}\.service$/;

/** Runs `command` (found on env.PATH); a failure refuses ("unit-failed") with its stderr. Shared with upgrade/containerUnit.ts. */
export function runCommand(command: string, args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { env, timeout: timeoutMs, encoding: "utf8" }, (error, stdout, stderr) => {
      if (error !== null) reject(new UpgradeRefusal("unit-failed", `${command} ${args.join(" ")} failed: ${stderr.trim() || error.message}`, { command: `${command} ${args[0] ?? ""}` }));
      else resolve(stdout);
    });
  });
}

/** The install a process runs, from its command line (`… <install>/ats-node.js start …`), or null. */
function installDirOf(pid: number): string | null {
  try {
    const launcher = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").find((arg) => arg.endsWith(`/${LAUNCHER_FILE}`));
    return launcher === undefined ? null : dirname(launcher);
  } catch {
    return null;
  }
}

export function createSystemdUnit(options: SystemdUnitOptions): NodeUnit {
  if (!UNIT_NAME.test(options.name)) throw new UpgradeRefusal("plan-invalid", `not a systemd service name: ${JSON.stringify(options.name)}`);
  const env = options.env ?? process.env;
  const timeoutMs = options.commandTimeoutMs ?? 120_000;
  const systemctl = (...args: string[]) => runCommand("systemctl", args, env, timeoutMs);
  return {
    name: options.name,
    installEnvFile: options.installEnvFile,
    async start() {
      await systemctl("start", options.name);
    },
    async stop() {
      await systemctl("stop", options.name);
    },
    async status(): Promise<UnitStatus> {
      const text = await systemctl("show", options.name, "--property=ActiveState", "--property=MainPID");
      const values = new Map(text.split("\n").filter((line) => line.includes("=")).map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]));
      const pid = Number(values.get("MainPID") ?? "0");
      const active = values.get("ActiveState") === "active" && pid > 0;
      return { active, pid: active ? pid : null, runs: active ? installDirOf(pid) : null };
    },
    async logCursor() {
      return String(Math.floor(Date.now() / 1_000));
    },
    async logSince(cursor) {
      const text = await runCommand("journalctl", ["--unit", options.name, "--since", `@${cursor}`, "--output", "cat", "--no-pager", "--quiet"], env, timeoutMs);
      return text.split("\n").filter((line) => line !== "");
    },
  };
}
