/**
 * A unit starts and stops one node from the install its install environment file names (upgrade/installEnv.ts).
 * Two implementations: the local supervisor (upgrade/localUnit.ts: tests and the local network) and systemd
 * (upgrade/systemdUnit.ts: production). The agent sees only this interface, so it cannot do to a unit anything
 * but start, stop and look at it.
 */
export interface UnitStatus {
  active: boolean;
  /** The main process, null when none. */
  pid: number | null;
  /** The install the running process was started from, when the unit can tell (null otherwise). */
  installDir: string | null;
}

export interface NodeUnit {
  /** For receipts and messages: a unit name, never a path with secrets in it. */
  readonly name: string;
  /** The install environment file this unit reads at start. */
  readonly installEnvFile: string;
  start(): Promise<void>;
  /** Stops the node and waits until its process is gone. Stopping a stopped unit is fine. */
  stop(): Promise<void>;
  status(): Promise<UnitStatus>;
  /** A position in the node's log, then the lines written after it (acceptance reads them for repeated errors). */
  logCursor(): Promise<string>;
  logSince(cursor: string): Promise<string[]>;
}
