/**
 * The local supervisor: a unit on a host without systemd (tests, the local network). Its folder holds
 *
 *   unit.json     { "configFile": "node.json", "modulesDir": "/…/node_modules" } (modulesDir optional): written by
 *                 whoever sets the node up, read here, never written by the agent
 *   install.env   which install to run (upgrade/installEnv.ts)
 *   node.pid      {"pid", "installDir", "startedAtMs"} of the process it started
 *   node.log      the node's stdout and stderr, appended
 *
 * The node runs as `node <install>/ats-node.js start --config <configFile>` in its own process group (detached),
 * so it outlives the agent that started it, as a service manager's would. An install that bundles its npm
 * dependencies (node_modules/, the default release) runs with PATH only. One built --without-modules finds them
 * through NODE_PATH, set to `modulesDir`; without a modulesDir such an install is not started. The environment is
 * not inherited otherwise, so an agent's environment cannot leak into a node or change its settings.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, statSync } from "node:fs";
import { basename, isAbsolute, join, resolve } from "node:path";
import { Type } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { errorText, UpgradeRefusal } from "./errors";
import { readInstallEnv, writeFileAtomically } from "./installEnv";
import { bundlesModules } from "./installs";
import { MODULES_DIR } from "./moduleFiles";
import { LAUNCHER_FILE } from "./release";
import type { NodeUnit, UnitStatus } from "./unit";

export const LOCAL_UNIT_FILE = "unit.json";
const DEFAULT_STOP_TIMEOUT_MS = 15_000;
const POLL_MS = 50;

const LocalUnitSchema = Type.Object(
  {
    configFile: Type.String({ minLength: 1 }),
    /** The host's node_modules for installs built --without-modules (NODE_PATH); unused by installs that bundle theirs. */
    modulesDir: Type.Optional(Type.String({ minLength: 1 })),
    stopTimeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 300_000 })),
  },
  { additionalProperties: false },
);

interface PidRecord {
  pid: number;
  installDir: string;
  startedAtMs: number;
}

/** Whether `pid` is a live process (a zombie, exited but not yet reaped, is not). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // /proc/<pid>/stat: "pid (comm) S …"; the state follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true; // no /proc: trust kill(0)
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

export function createLocalUnit(dir: string): NodeUnit {
  const definitionFile = join(dir, LOCAL_UNIT_FILE);
  const raw = JSON.parse(readFileSync(definitionFile, "utf8")) as unknown;
  const problem = Value.Errors(LocalUnitSchema, raw).First();
  if (problem !== undefined) throw new UpgradeRefusal("plan-invalid", `${definitionFile}${problem.path}: ${problem.message}`);
  const definition = raw as { configFile: string; modulesDir?: string; stopTimeoutMs?: number };
  const configFile = isAbsolute(definition.configFile) ? definition.configFile : resolve(dir, definition.configFile);
  const pidFile = join(dir, "node.pid");
  const logFile = join(dir, "node.log");
  const installEnvFile = join(dir, "install.env");
  const stopTimeoutMs = definition.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS;

  function running(): PidRecord | null {
    let text: string;
    try {
      text = readFileSync(pidFile, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null; // never started (or removed by hand)
      throw new UpgradeRefusal("unit-failed", `${pidFile} cannot be read (${errorText(error)})`, { file: pidFile });
    }
    let record: PidRecord;
    try {
      record = JSON.parse(text) as PidRecord;
    } catch (error) {
      throw new UpgradeRefusal("unit-failed", `${pidFile} is not a pid record (${errorText(error)}): remove it once no node of this unit runs`, { file: pidFile });
    }
    if (!processAlive(record.pid)) return null;
    // A reused pid is not our node: its command line must name the install it was started from.
    try {
      if (!readFileSync(`/proc/${record.pid}/cmdline`, "utf8").includes(record.installDir)) return null;
    } catch {
      // no /proc: accept kill(0)
    }
    return record;
  }

  /** The node's whole environment: PATH, and NODE_PATH for an install that does not bundle its dependencies. */
  function nodeEnv(installDir: string): NodeJS.ProcessEnv {
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
    if (bundlesModules(installDir)) return env;
    if (definition.modulesDir === undefined) {
      throw new UpgradeRefusal("unit-failed", `${unit.name}: ${installDir} has no ${MODULES_DIR}/ (a release built --without-modules) and ${definitionFile} names no modulesDir to provide its npm dependencies`, { installDir });
    }
    return { ...env, NODE_PATH: definition.modulesDir };
  }

  const unit: NodeUnit = {
    name: `local:${basename(dir)}`,
    installEnvFile,

    async start() {
      const current = running();
      if (current !== null) throw new UpgradeRefusal("unit-failed", `${unit.name} is already running (pid ${current.pid})`, { pid: current.pid });
      const install = readInstallEnv(installEnvFile);
      if (install === null) throw new UpgradeRefusal("unit-failed", `${unit.name} has no ${basename(installEnvFile)}: no install to run`);
      const env = nodeEnv(install.installDir);
      const log = openSync(logFile, "a");
      try {
        const child = spawn(process.execPath, [join(install.installDir, LAUNCHER_FILE), "start", "--config", configFile], {
          cwd: dir,
          env,
          stdio: ["ignore", log, log],
          detached: true,
        });
        if (child.pid === undefined) throw new UpgradeRefusal("unit-failed", `${unit.name}: the node process did not start`);
        child.unref();
        const record: PidRecord = { pid: child.pid, installDir: install.installDir, startedAtMs: Date.now() };
        // Atomically: status() reads it at any time, from other processes too (a truncated record would not parse).
        writeFileAtomically(pidFile, `${JSON.stringify(record)}\n`);
      } finally {
        closeSync(log);
      }
    },

    async stop() {
      const current = running();
      if (current === null) return;
      process.kill(current.pid, "SIGTERM");
      const deadline = Date.now() + stopTimeoutMs;
      while (processAlive(current.pid)) {
        if (Date.now() > deadline) {
          // The node did not close in time: the group is killed so no child of it keeps a port.
          process.kill(-current.pid, "SIGKILL");
          while (processAlive(current.pid)) await sleep(POLL_MS);
          break;
        }
        await sleep(POLL_MS);
      }
    },

    async status(): Promise<UnitStatus> {
      const current = running();
      return current === null ? { active: false, pid: null, runs: null } : { active: true, pid: current.pid, runs: current.installDir };
    },

    async logCursor() {
      return String(existsSync(logFile) ? statSync(logFile).size : 0);
    },

    async logSince(cursor) {
      if (!existsSync(logFile)) return [];
      return readFileSync(logFile).subarray(Number(cursor)).toString("utf8").split("\n").filter((line) => line !== "");
    },
  };
  return unit;
}
