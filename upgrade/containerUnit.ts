/**
 * A node run in a container by a service (systemd, with Docker or Podman under it; a Podman quadlet is one):
 *
 *   [Service]
 *   EnvironmentFile=/etc/ats-node/image.env
 *   ExecStart=/usr/bin/podman run --rm --name ats-node --env-file … ${ATS_IMAGE}
 *
 * The agent changes only the image file (upgrade/containerEnv.ts) and restarts this one service with
 * `systemctl restart <name>`: the runtime, other containers, volumes (chain data, keys) and the service file are
 * never touched, and no runtime command that pulls by tag or removes anything is ever issued. Everything else is
 * the systemd unit's (upgrade/systemdUnit.ts). Tested against a fake `systemctl` on PATH that records its calls.
 */
import { runCommand, createSystemdUnit } from "./systemdUnit";
import type { NodeUnit } from "./unit";

export interface ContainerUnitOptions {
  /** The service, e.g. "ats-node.service". */
  name: string;
  /** The image environment file the service reads. */
  envFile: string;
  /** Environment of the systemctl / journalctl calls (PATH decides which binaries run); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Each call fails after this long, ms (a restart waits for the old container to stop: TimeoutStopSec bounds it). */
  commandTimeoutMs?: number;
}

export interface ContainerUnit extends NodeUnit {
  /** Stops and starts this service only: the runtime reads the image file again and runs its digest. */
  restart(): Promise<void>;
}

export function createContainerUnit(options: ContainerUnitOptions): ContainerUnit {
  const env = options.env ?? process.env;
  const timeoutMs = options.commandTimeoutMs ?? 120_000;
  // The service name is checked there (a *.service name, no shell syntax): it is an argv element here too.
  const service = createSystemdUnit({ name: options.name, installEnvFile: options.envFile, env, commandTimeoutMs: timeoutMs });
  return {
    ...service,
    async restart() {
      await runCommand("systemctl", ["restart", options.name], env, timeoutMs);
    },
  };
}
