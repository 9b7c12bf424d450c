/**
 * Adopting a node without a record: a node started by hand has no install.env (or image file) the agent wrote,
 * so nothing says what it runs. It is taken into a rollout only when the plan names, in that node's `adopt`, the
 * approved release it runs (upgrade/plan.ts), never on a guess: the agent verifies that release as it verifies
 * the target (upgrade/fetchRelease.ts, upgrade/registry.ts), and then every one of these must hold:
 *
 * 1. the unit runs, and what it runs is what `adopt` names (the install folder, when the unit can tell);
 * 2. what runs is the release's artifact: the install folder's tree digest, recomputed, is the release's, or the
 *    digest the runtime reports is the approved manifest's;
 * 3. the node reports (GET /node/info) the release's version and its source revision.
 *
 * Each refusal ("preflight-failed") names what was expected and what was found. Only when every node of the
 * plan has passed preflight does the agent write the record (upgrade/agent.ts), so a refusal changes nothing;
 * the record is new, with no `.previous`, and the receipt's `adopted` entry says which release was adopted.
 */
import { UpgradeRefusal } from "./errors";
import type { AnyPlanNode } from "./plan";
import type { Deployment, VerifiedArtifact } from "./target";
import type { UnitStatus } from "./unit";

/** What the node itself reports (GET /node/info). */
export interface Reported {
  version: string;
  revision: string | null;
}

/** The deployment to record for `node`, or an UpgradeRefusal with the evidence of the first mismatch. */
export function checkAdoption(node: AnyPlanNode, release: VerifiedArtifact, status: UnitStatus, reported: Reported): Deployment {
  const refuse = (what: string, expected: string | null, found: string | null) =>
    new UpgradeRefusal("preflight-failed", `${node.host}: not adopted as ${release.releaseId}: ${what}: expected ${expected ?? "none"}, found ${found ?? "none"}`, {
      host: node.host,
      expected,
      found,
    });
  if (!status.active) throw refuse("its unit is not running", "running", "stopped");
  const found = release.found(node, status);
  if (typeof found === "string") throw new UpgradeRefusal("preflight-failed", `${node.host}: not adopted as ${release.releaseId}: ${found}`, { host: node.host });
  // A unit that can tell what it runs must run the folder the plan names: adopting another would record a lie.
  if (status.runs !== null && status.runs !== found.runs) throw refuse("its unit runs something else than adopt names", found.runs, status.runs);
  // approves(): this release's kind and id (found() labels it so) with its approved digest, the one that can differ.
  if (!release.approves(found)) throw refuse(found.kind === "install" ? "the install's tree digest" : "the image digest the container runs", release.digest, found.digest);
  if (reported.version !== release.nodeVersion) throw refuse("the version the node reports", release.nodeVersion, reported.version);
  if (reported.revision !== release.sourceRevision) throw refuse("the source revision the node reports", release.sourceRevision, reported.revision);
  return found;
}
