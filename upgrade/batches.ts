/**
 * Which nodes of a rollout are switched together (docs/upgrade.md §4 step 3).
 *
 * - A primary (a validator: it signs) is always a batch of its own. Two validators down at once can cost the mesh
 *   its co-signing quorum; one at a time it never loses more than one signer.
 * - Other roles (secondary, archive, bridge) serve but do not sign: up to `maxParallel` consecutive ones in the
 *   rollout order form one batch.
 *
 * With maxParallel > 1 the plan must put every primary after the other roles (upgrade/plan.ts refuses a plan that
 * does not): the non-signing nodes are the canaries. A release that fails its gates there is rolled back before
 * any validator ran it, and while a batch of them is down every validator is up, so consensus is untouched. Going
 * primaries first would instead put the riskiest nodes on an untried release, and then take several serving
 * nodes down while the validators are on it.
 *
 * With maxParallel 1 (the default) every batch is one node, in the plan's order: the sequential rollout.
 */
import { isValidator, type NodeRole } from "./plan";

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
