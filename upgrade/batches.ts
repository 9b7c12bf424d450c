/**
 * Which nodes of a rollout are switched together (docs/upgrade.md §4 step 3).
 *
 * - A primary (a validator: its card's moments are what the mesh signs) is always a batch of its own.
 * - Other roles (secondary, archive, bridge) sign no moments of their own: up to `maxParallel` consecutive ones in
 *   the rollout order form one batch, and never more than the mesh can lose (meshSafeParallel): they still
 *   co-sign the primaries' rounds and count among the members whose ⌈2n/3⌉ a round needs.
 *
 * With maxParallel > 1 the plan must put every primary after the other roles (upgrade/plan.ts refuses a plan that
 * does not): the non-primary nodes are the canaries. A release that fails its gates there is rolled back before
 * any primary ran it, and while a batch of them is down every primary is up. Going primaries first would instead
 * put the nodes whose moments are served on an untried release, and then take several serving nodes down while
 * the primaries are on it.
 * Detail: docs/upgrade.md §4.
 */
import { consensusThreshold } from "../protocol/consensus";
import { isValidator, type NodeRole } from "./plan";

/*
 * With maxParallel 1 (the default) every batch is one node, in the plan's order: the sequential rollout.
 */
export function rolloutBatches<T extends { node: { role: NodeRole } }>(ordered: readonly T[], maxParallel: number): T[][] {
  const batches: T[][] = [];
  let open: T[] | null = null;
  for (const item of ordered) {
    if (isValidator(item.node.role) || maxParallel <= 1) {
      batches.push([item]);
      open = null;
      continue;
    }
    if (open === null || open.length >= maxParallel) {
      open = [];
      batches.push(open);
    }
    open.push(item);
  }
  return batches;
}

/**
 * The largest batch the mesh can lose at once and still sign: every member co-signs (non-primaries too), and a
 * round needs ⌈2n/3⌉ of the n configured members (docs/protocol.md §7.1), so k members down keep the quorum only
 * while n − k ≥ ⌈2n/3⌉. A 4- or 5-member mesh can lose one (batches of one); 6 or 7, two. Nodes without a mesh
 * (`meshMembers` ≤ 1) limit nothing but `maxParallel`.
 */
export function meshSafeParallel(maxParallel: number, meshMembers: number): number {
  if (meshMembers <= 1) return maxParallel;
  return Math.max(1, Math.min(maxParallel, meshMembers - consensusThreshold(meshMembers)));
}
