/**
 * What the container runtime says a node's container runs: the one question the agent asks the runtime. The
 * `unit-running` gate and preflight compare its answer, the manifest digest of the image the container was
 * started from, with the digest the unit's image file names (upgrade/containerEnv.ts): the file says what should
 * run, the runtime says what does.
 *
 * The agent only reads here (`podman container inspect <name>`); it never pulls, runs, stops or removes through
 * the runtime: starting and stopping stay the service's (upgrade/containerUnit.ts). The runtime is injectable (an
 * object with `inspect`), so tests stand a fake in for podman; the default runs `podman` found on PATH.
 *
 * Only three fields of the inspect output are read (State.Running, State.Pid, ImageDigest). The rest, which holds
 * the container's environment and so possibly secrets, is parsed and dropped, never logged or returned.
 */
import { UpgradeRefusal } from "./errors";
import { CONTAINER_NAME_PATTERN } from "./plan";
import { runCommand } from "./systemdUnit";

export interface ContainerState {
  running: boolean;
  /** The container's main process on the host (changes when the container restarts); null when not running. */
  pid: number | null;
  /** `sha256:<hex>` of the image manifest the container was started from (podman's ImageDigest); null when not running. */
  imageDigest: string | null;
}

export interface ContainerRuntime {
  /** The named container's state; null when there is no such container (a stopped service that runs with `--rm`). */
  inspect(container: string): Promise<ContainerState | null>;
}

export interface PodmanRuntimeOptions {
  /** The runtime's command; default "podman". */
  command?: string;
  /** Environment of the call (PATH decides which binary runs); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** The call fails after this long, ms. */
  timeoutMs?: number;
}

/** The service's `--name` (docs/upgrade.md §2), as the plan checks it. */
export const CONTAINER_NAME = new RegExp(CONTAINER_NAME_PATTERN);
const IMAGE_DIGEST = /^sha256:[0-9a-f]{64}$/;
/** What podman (and docker) print for a container that does not exist. */
const NO_SUCH_CONTAINER = /no such (container|object)/i;

/** The state in `podman container inspect` output (a JSON array of one object); refuses an answer of another shape. */
export function parseInspection(text: string, container: string): ContainerState {
  let first: { State?: { Running?: unknown; Pid?: unknown }; ImageDigest?: unknown } | undefined;
  try {
    const parsed = JSON.parse(text) as unknown;
    first = Array.isArray(parsed) && parsed.length === 1 ? (parsed[0] as typeof first) : undefined;
  } catch {
    first = undefined;
  }
  // The message names what is missing, never the output: it holds the container's environment.
  if (first === undefined || typeof first !== "object" || first === null) throw new UpgradeRefusal("unit-failed", `inspect ${container}: not a JSON array of one container`, { container });
  const running = first.State?.Running;
  if (typeof running !== "boolean") throw new UpgradeRefusal("unit-failed", `inspect ${container}: no State.Running`, { container });
  const pid = first.State?.Pid;
  const digest = typeof first.ImageDigest === "string" && IMAGE_DIGEST.test(first.ImageDigest) ? first.ImageDigest : null;
  // A running container whose digest is unknown cannot be checked against the image file: refused, not passed.
  if (running && digest === null) throw new UpgradeRefusal("unit-failed", `inspect ${container}: no ImageDigest (sha256:<hex>): cannot tell which image runs`, { container });
  return { running, pid: running && typeof pid === "number" && Number.isInteger(pid) && pid > 0 ? pid : null, imageDigest: digest };
}

export function createPodmanRuntime(options: PodmanRuntimeOptions = {}): ContainerRuntime {
  const command = options.command ?? "podman";
  const env = options.env ?? process.env;
  const timeoutMs = options.timeoutMs ?? 30_000;
  return {
    async inspect(container) {
      if (!CONTAINER_NAME.test(container)) throw new UpgradeRefusal("plan-invalid", `not a container name: ${JSON.stringify(container)}`);
      let text: string;
      try {
        text = await runCommand(command, ["container", "inspect", container], env, timeoutMs);
      } catch (error) {
        if (error instanceof UpgradeRefusal && NO_SUCH_CONTAINER.test(error.message)) return null;
        throw error;
      }
      return parseInspection(text, container);
    },
  };
}
