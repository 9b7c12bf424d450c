/**
 * A unit starts and stops one node from what its record file names: an install (upgrade/installEnv.ts) or an image
 * (upgrade/containerEnv.ts). Three implementations: the local supervisor (upgrade/localUnit.ts: tests and the local
 * network), systemd (upgrade/systemdUnit.ts: production) and a container service (upgrade/containerUnit.ts). The
 * agent sees only this interface, so it cannot do to a unit anything but start, stop and look at it.
 */
export interface UnitStatus {
  active: boolean;
  /** The main process, null when none. */
  pid: number | null;
  /**
   * What the running process was started from, when the unit can tell (null otherwise): the install folder (local
   * and systemd units) or the image's manifest digest (container units, from the runtime's inspect).
   */
  runs: string | null;
}

export interface NodeUnit {
  /** For receipts and messages: a unit name, never a path with secrets in it. */
  readonly name: string;
  /** The record file this unit reads at start: install.env, or a container unit's image file. */
  readonly installEnvFile: string;
  start(): Promise<void>;
  /** Stops the node and waits until its process is gone. Stopping a stopped unit is fine. */
  stop(): Promise<void>;
  status(): Promise<UnitStatus>;
  /** A position in the node's log, then the lines written after it (acceptance reads them for repeated errors). */
  logCursor(): Promise<string>;
  logSince(cursor: string): Promise<string[]>;
}
