/**
 * The container path for one node (upgrade/target.ts), after its image was resolved and verified
 * (upgrade/registry.ts):
 *
 * - switch: write the target digest into the unit's image file (the old file kept as `.previous`), restart only
 *   the node's service (upgrade/containerUnit.ts); the runtime pulls the digest, never a tag;
 * - acceptance: the agent's gates (upgrade/gates.ts), with `unit-running` comparing the digest the runtime says
 *   the container runs (upgrade/containerRuntime.ts) and `version` the image's labels;
 * - rollback at a failed gate: put the `.previous` file back (the prior digest) and restart, then run every gate
 *   again. Nothing else is restored or touched: chain data and keys live in volumes the image does not contain.
 *
 * Detail: docs/upgrade.md §4a.
 */
import { readImageEnv, writeImageEnv, type ImageRecord } from "./containerEnv";
import type { ContainerRuntime } from "./containerRuntime";
import { createContainerUnit } from "./containerUnit";
import { UpgradeRefusal } from "./errors";
import { NODE_VERSION_PATTERN } from "./metadata";
import type { ContainerPlanNode, ImagePlan } from "./plan";
import { resolveImage, VERSION_LABEL } from "./registry";
import type { Deployment, ExpectedVersion, NodeTarget, VerifiedArtifact } from "./target";

/*
 * A rollback needs no digest re-check of its own (the native path recomputes the saved install's tree): the
 * previous file names a digest (a tag is refused when it is read), and the runtime refuses bytes that do not hash
 * to it. The restored image's labels are not fetched (it may come from another registry), so its version and
 * revision are the ones its release id carries (`ats-node-<version>-<12 digits of the revision>`).
 */
export interface ImageReleaseOptions {
  /** Answers which digest a container runs; default podman on env.PATH (upgrade/containerUnit.ts). */
  runtime?: ContainerRuntime | undefined;
  /** Environment of the systemctl / journalctl / podman calls; default process.env. */
  env?: NodeJS.ProcessEnv | undefined;
  /** Each registry request fails after this long, ms (upgrade/registry.ts). */
  requestTimeoutMs?: number | undefined;
}

/** A release id's version and revision prefix: `ats-node-<version>-<12 hex>[-dirty]` (upgrade/metadata.ts). */
const RELEASE_ID_PARTS = /^ats-node-(.+)-([0-9a-f]{12})(-dirty)?$/;

function deploymentOf(record: ImageRecord, approved: { digest: string; sourceRevision: string }): Deployment {
  // The reference was checked to end in @sha256:<hex> when the file was read (upgrade/containerEnv.ts).
  const digest = record.image.slice(record.image.lastIndexOf("@") + 1);
  return { kind: "image", releaseId: record.releaseId, reference: record.image, runs: digest, digest, sourceRevision: digest === approved.digest ? approved.sourceRevision : null };
}

/** What a node on a deployment the agent has no labels for reports: the version and revision its release id names. */
function expectedFromReleaseId(deployment: Deployment, before: { version: string }): ExpectedVersion {
  const parts = RELEASE_ID_PARTS.exec(deployment.releaseId);
  return parts === null ? { nodeVersion: before.version, sourceRevision: null } : { nodeVersion: parts[1]!, sourceRevision: parts[2]! };
}

/**
 * Resolves the plan's image and verifies it (digest, config, revision label: upgrade/registry.ts), and requires
 * its version label: the version gate and the downgrade check compare the nodes with it, and it must be the
 * version the approved release id names.
 */
export async function verifyImageRelease(release: ImagePlan["release"], options: ImageReleaseOptions = {}): Promise<VerifiedArtifact> {
  const resolved = await resolveImage(release.artifact, release.source_revision, { requestTimeoutMs: options.requestTimeoutMs });
  const name = `${release.artifact.repository}:${release.artifact.tag}`;
  const version = resolved.version;
  if (version === null || !new RegExp(NODE_VERSION_PATTERN).test(version)) {
    throw new UpgradeRefusal("unapproved-release", `${name}: label ${VERSION_LABEL} is ${JSON.stringify(version)}, not a version: the downgrade check and the version gate need it`, { version });
  }
  if (RELEASE_ID_PARTS.exec(release.release_id)?.[1] !== version) {
    throw new UpgradeRefusal("unapproved-release", `${name}: label ${VERSION_LABEL} is ${version}; the approved release ${release.release_id} is another version`, { version, release_id: release.release_id });
  }
  const approved = { digest: resolved.digest, sourceRevision: release.source_revision };
  const target: Deployment = { kind: "image", releaseId: release.release_id, reference: resolved.reference, runs: resolved.digest, digest: resolved.digest, sourceRevision: release.source_revision };
  const artifact: VerifiedArtifact = {
    releaseId: release.release_id,
    nodeVersion: version,
    versionSource: `its ${VERSION_LABEL} label`,
    sourceRevision: release.source_revision,
    digest: resolved.digest,
    description: `image ${release.release_id} verified (${resolved.digest.slice(0, 19)}…, version ${version})`,
    approves: (deployment) => deployment.kind === "image" && deployment.releaseId === release.release_id && deployment.digest === resolved.digest,
    targetFor(planNode): NodeTarget {
      // The plan's schema gives an image plan container units only.
      const node = planNode as ContainerPlanNode;
      const unit = createContainerUnit({ name: node.unit.name, envFile: node.unit.envFile, container: node.unit.container, runtime: options.runtime, env: options.env });
      const read = (file: string) => {
        const record = readImageEnv(file);
        return record === null ? null : deploymentOf(record, approved);
      };
      return {
        unit,
        recordName: "the image file",
        recorded: () => read(unit.installEnvFile),
        previous: () => read(`${unit.installEnvFile}.previous`),
        tampered: () => null,
        prepare: () => target,
        // The restart in start() stops the old container: stopping first would only lengthen the node's downtime.
        stop: async () => undefined,
        point(deployment) {
          writeImageEnv(unit.installEnvFile, { image: deployment.reference, releaseId: deployment.releaseId });
        },
        // A restart also starts a stopped service: the same call resumes a node a killed run left stopped.
        start: () => unit.restart(),
        expected: (deployment, before) => (artifact.approves(deployment) ? { nodeVersion: version, sourceRevision: release.source_revision } : expectedFromReleaseId(deployment, before)),
      };
    },
    found(_node, status) {
      // Only the runtime knows which bytes a container runs; the verified manifest digest is compared with that.
      if (status.runs === null || !/^sha256:[0-9a-f]{64}$/.test(status.runs)) return "the runtime reports no image digest for its container";
      const reference = `${resolved.reference.slice(0, resolved.reference.lastIndexOf("@") + 1)}${status.runs}`;
      return { kind: "image", releaseId: release.release_id, reference, runs: status.runs, digest: status.runs, sourceRevision: status.runs === resolved.digest ? release.source_revision : null };
    },
    dispose: () => undefined,
  };
  return artifact;
}
