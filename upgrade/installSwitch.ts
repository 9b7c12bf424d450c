/**
 * The native path for one node (upgrade/target.ts): the release is a verified bundle (upgrade/fetchRelease.ts),
 * staged as a versioned install beside the old one (upgrade/installs.ts); the unit (local or systemd) runs the
 * install its install.env names (upgrade/installEnv.ts). A recorded install is trusted only after its tree digest
 * is recomputed from the disk: an install modified in place is refused in preflight and never started by a
 * rollback.
 */
import { treeDigestOfDirectory } from "./digest";
import { fetchVerifiedRelease, type FetchOptions } from "./fetchRelease";
import { readInstallEnv, writeInstallEnv, type InstallRecord } from "./installEnv";
import { installedMetadata, installedRevision, stageInstall } from "./installs";
import { createLocalUnit } from "./localUnit";
import type { BundlePlan, PlanNode } from "./plan";
import { createSystemdUnit } from "./systemdUnit";
import type { Deployment, NodeTarget, VerifiedArtifact } from "./target";

function deploymentOf(record: InstallRecord): Deployment {
  return {
    kind: "install",
    releaseId: record.releaseId,
    reference: record.installDir,
    runs: record.installDir,
    digest: record.installSha256,
    sourceRevision: installedMetadata(record.installDir)?.source_revision ?? null,
  };
}

/** Fetches and verifies the plan's bundle (every refusal before a node changes); its nodes are local or systemd units. */
export async function verifyBundleRelease(release: BundlePlan["release"], options: { env?: NodeJS.ProcessEnv | undefined; download?: FetchOptions | undefined } = {}): Promise<VerifiedArtifact> {
  const verified = await fetchVerifiedRelease(release, options.download);
  const { metadata } = verified;
  const artifact: VerifiedArtifact = {
    releaseId: metadata.release_id,
    nodeVersion: metadata.node_version,
    versionSource: "its BUILD-METADATA.json",
    sourceRevision: metadata.source_revision,
    digest: metadata.bundle.tree_sha256,
    description: `release ${metadata.release_id} verified (bundle ${metadata.bundle.sha256.slice(0, 12)}…)`,
    approves: (deployment) => deployment.kind === "install" && deployment.releaseId === metadata.release_id && deployment.digest === metadata.bundle.tree_sha256,
    targetFor(planNode): NodeTarget {
      // The plan's schema gives a bundle plan local and systemd units only.
      const node = planNode as PlanNode;
      const unit = node.unit.kind === "local" ? createLocalUnit(node.unit.dir) : createSystemdUnit({ name: node.unit.name, installEnvFile: node.unit.installEnvFile, env: options.env });
      const read = (file: string) => {
        const record = readInstallEnv(file);
        return record === null ? null : deploymentOf(record);
      };
      return {
        unit,
        recordName: "install.env",
        recorded: () => read(unit.installEnvFile),
        previous: () => read(`${unit.installEnvFile}.previous`),
        tampered(deployment) {
          const tree = treeDigestOfDirectory(deployment.runs);
          return tree === deployment.digest ? null : `install ${deployment.releaseId} was modified in place (tree ${tree}, recorded ${deployment.digest})`;
        },
        prepare: () => deploymentOf(stageInstall(node.installRoot, verified)),
        stop: () => unit.stop(),
        point(deployment) {
          writeInstallEnv(unit.installEnvFile, { installDir: deployment.reference, releaseId: deployment.releaseId, installSha256: deployment.digest });
        },
        start: () => unit.start(),
        expected(deployment, before) {
          if (artifact.approves(deployment)) return { nodeVersion: metadata.node_version, sourceRevision: metadata.source_revision };
          // An install this agent staged has its metadata beside it; the revision file is inside its digested tree.
          return { nodeVersion: installedMetadata(deployment.runs)?.node_version ?? before.version, sourceRevision: installedRevision(deployment.runs) };
        },
      };
    },
    found(planNode) {
      const installDir = (planNode as PlanNode).adopt?.installDir;
      if (installDir === undefined) return "the plan names no adopt.installDir";
      let tree: string;
      try {
        tree = treeDigestOfDirectory(installDir);
      } catch (error) {
        return `cannot read install ${installDir} (${(error as Error).message})`;
      }
      return { kind: "install", releaseId: metadata.release_id, reference: installDir, runs: installDir, digest: tree, sourceRevision: metadata.source_revision };
    },
    dispose: () => verified.dispose(),
  };
  return artifact;
}
