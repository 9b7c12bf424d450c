/**
 * The container path for one node, after its image was resolved and verified (upgrade/registry.ts):
 *
 * - switch: write the target digest into the unit's image file (the old file kept as `.previous`), restart only
 *   the node's service;
 * - acceptance: the caller's gates (upgrade/gates.ts in the agent; a stub in the tests);
 * - rollback at a failed gate: put the `.previous` file back (the prior digest) and restart, then run every gate
 *   again. Nothing else is restored or touched: chain data and keys live in volumes the image does not contain.
 *
 * A rollback needs no digest re-check of its own (the native path recomputes the saved install's tree): the
 * previous file names a digest, and the runtime refuses bytes that do not hash to it.
 */
import { UpgradeRefusal } from "./errors";
import { readImageEnv, writeImageEnv, type ImageRecord } from "./containerEnv";
import type { ContainerUnit } from "./containerUnit";
import type { GateResult } from "./gates";

export interface SwitchResult {
  /** False when the unit already named the target (a rollout rerun after a killed agent): nothing was written or restarted. */
  changed: boolean;
  /** What the unit ran before the target: the rollback's digest (null only for an unchanged unit without a `.previous`). */
  previous: ImageRecord | null;
}

export type ContainerAcceptance = (expected: ImageRecord) => Promise<{ passed: boolean; gates: GateResult[] }>;

export interface ContainerNodeOutcome {
  outcome: "upgraded" | "already-current" | "rolled-back" | "rollback-failed";
  gates: GateResult[];
  /** The rollback's restored record and its gates; null when there was none. */
  rollback: { restored: ImageRecord | null; gates: GateResult[]; passed: boolean } | null;
}

const previousOf = (file: string) => `${file}.previous`;

/** Points the unit at `target` and restarts it; refuses a unit without an image file (not set up by this agent). */
export async function switchImage(unit: ContainerUnit, target: ImageRecord): Promise<SwitchResult> {
  const current = readImageEnv(unit.installEnvFile);
  if (current === null) throw new UpgradeRefusal("preflight-failed", `${unit.name} has no image file ${unit.installEnvFile}: a node without an image record is outside the plan`);
  if (current.image === target.image) {
    // Rewriting would copy the target over `.previous` and lose the digest a rollback needs.
    return { changed: false, previous: readImageEnv(previousOf(unit.installEnvFile)) };
  }
  writeImageEnv(unit.installEnvFile, target);
  await unit.restart();
  return { changed: true, previous: current };
}

/** Restores the `.previous` image file (keeping the failed one as `.previous` in turn) and restarts the unit. */
export async function rollbackImage(unit: ContainerUnit): Promise<ImageRecord> {
  const saved = readImageEnv(previousOf(unit.installEnvFile));
  const current = readImageEnv(unit.installEnvFile);
  if (saved === null) throw new UpgradeRefusal("unit-failed", `${unit.name}: no ${previousOf(unit.installEnvFile)} to roll back to`);
  if (saved.image === current?.image) throw new UpgradeRefusal("unit-failed", `${unit.name}: ${previousOf(unit.installEnvFile)} names the image already in place; nothing to roll back to`);
  writeImageEnv(unit.installEnvFile, saved);
  await unit.restart();
  return saved;
}

/** Switch, accept; at a failed gate roll back and accept the restored image again. */
export async function upgradeContainerNode(unit: ContainerUnit, target: ImageRecord, accept: ContainerAcceptance): Promise<ContainerNodeOutcome> {
  const switched = await switchImage(unit, target);
  const acceptance = await accept(target);
  if (acceptance.passed) return { outcome: switched.changed ? "upgraded" : "already-current", gates: acceptance.gates, rollback: null };
  let restored: ImageRecord;
  try {
    restored = await rollbackImage(unit);
  } catch (error) {
    if (!(error instanceof UpgradeRefusal)) throw error;
    return { outcome: "rollback-failed", gates: acceptance.gates, rollback: { restored: null, gates: [], passed: false } };
  }
  const again = await accept(restored);
  return { outcome: again.passed ? "rolled-back" : "rollback-failed", gates: acceptance.gates, rollback: { restored, gates: again.gates, passed: again.passed } };
}
