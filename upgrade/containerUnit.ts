/**
 * A node run in a container by a service (systemd, with Podman under it; a Podman quadlet is one):
 *
 *   [Service]
 *   EnvironmentFile=/etc/ats-node/image.env
 *   ExecStart=/usr/bin/podman run --rm --name ats-node --env-file … ${ATS_IMAGE}
 *
 * The agent changes only the image file (upgrade/containerEnv.ts) and restarts this one service with
 * `systemctl restart <name>`: the runtime, other containers, volumes (chain data, keys) and the service file are
 * never touched, and no runtime command that pulls by tag or removes anything is ever issued. Starting, stopping
 * and the journal are the systemd unit's (upgrade/systemdUnit.ts). The status is the container's, from the
 * runtime's inspect (upgrade/containerRuntime.ts): the service's main process is podman's, not the node's, and
 * only the runtime knows which image digest the container runs. Tested against a fake `systemctl` and a fake
 * runtime that record their calls.
 */
import { createPodmanRuntime, CONTAINER_NAME, type ContainerRuntime } from "./containerRuntime";
import { UpgradeRefusal } from "./errors";
import { runCommand, createSystemdUnit } from "./systemdUnit";
import type { NodeUnit, UnitStatus } from "./unit";

export interface ContainerUnitOptions {
  /** The service, e.g. "ats-node.service". */
  name: string;
  /** The image environment file the service reads. */
  envFile: string;
  /** The container the service runs (its `--name`), e.g. "ats-node": what the runtime is asked about. */
  container: string;
  /** Answers what the container runs; default podman on env.PATH. */
  runtime?: ContainerRuntime | undefined;
  /** Environment of the systemctl / journalctl / podman calls (PATH decides which binaries run); default process.env. */
  env?: NodeJS.ProcessEnv | undefined;
  /** Each call fails after this long, ms (a restart waits for the old container to stop: TimeoutStopSec bounds it). */
  commandTimeoutMs?: number;
}

export interface ContainerUnit extends NodeUnit {
  /** Stops and starts this service only: the runtime reads the image file again and runs its digest. */
  restart(): Promise<void>;
}

export function createContainerUnit(options: ContainerUnitOptions): ContainerUnit {
  if (!CONTAINER_NAME.test(options.container)) throw new UpgradeRefusal("plan-invalid", `not a container name: ${JSON.stringify(options.container)}`);
  const env = options.env ?? process.env;
  const timeoutMs = options.commandTimeoutMs ?? 120_000;
  const runtime = options.runtime ?? createPodmanRuntime({ env, timeoutMs });
  // The service name is checked there (a *.service name, no shell syntax): it is an argv element here too.
  const service = createSystemdUnit({ name: options.name, installEnvFile: options.envFile, env, commandTimeoutMs: timeoutMs });
  return {
    ...service,
    async status(): Promise<UnitStatus> {
      const state = await runtime.inspect(options.container);
      if (state === null || !state.running) return { active: false, pid: null, runs: null };
      return { active: true, pid: state.pid, runs: state.imageDigest };
    },
    async restart() {
      await runCommand("systemctl", ["restart", options.name], env, timeoutMs);
    },
  };
}
