/**
 * What a node runs, and how the agent points it at another release: the only part the native path (installs,
 * named by install.env) and the container path (images, named by the image file) do differently. Preflight, the
 * rollout, the gates, the rollback and the receipt (upgrade/agent.ts, upgrade/gates.ts) are written once against
 * these interfaces; upgrade/installSwitch.ts (bundles) and upgrade/containerSwitch.ts (images) implement them.
 *
 * A swap is the same four steps on both paths: stop, point the record file at the new release (the old one kept
 * as `.previous`), start, accept. The container path's stop is empty because its start is a service restart,
 * which stops the old container itself (the node stays up while the runtime pulls the new digest).
 */
import type { NodeReading } from "./probe";
import type { NodeReceipt } from "./receipt";
import type { AnyPlanNode } from "./plan";
import type { NodeUnit, UnitStatus } from "./unit";

/** One release as a unit runs it: an install folder, or an image digest. */
export interface Deployment {
  kind: "install" | "image";
  releaseId: string;
  /** What the record file names: the install folder, or the image's digest reference (`<host>/<repository>@sha256:…`). */
  reference: string;
  /** What the unit's status reports while it runs this (UnitStatus.runs): the install folder, or the manifest digest. */
  runs: string;
  /** The artifact's own digest: the install's tree digest, or the image manifest's digest (`sha256:…`). */
  digest: string;
  /** The source revision it was built from, when known without asking the node (install metadata, approved label). */
  sourceRevision: string | null;
}

/** What a node running a deployment must report (the version gate). */
export interface ExpectedVersion {
  nodeVersion: string;
  /**
   * The full source revision, or only the 12-digit prefix a release id carries when that is all the agent knows
   * (an image restored by a rollback: its labels were not fetched); null: the node reports none.
   */
  sourceRevision: string | null;
}

/** One node's unit, seen through the record file it runs from. */
export interface NodeTarget {
  readonly unit: NodeUnit;
  /** The record file's name, for messages: "install.env" or the image file's. */
  readonly recordName: string;
  /** What the record file names (the file only, nothing recomputed), or null when the unit has none. */
  recorded(): Deployment | null;
  /** The record kept as `.previous`: what a rollback restores; null when there is none. */
  previous(): Deployment | null;
  /**
   * Null when `deployment` on this host is still what was recorded; otherwise why not (preflight refuses, a
   * rollback does not start it). An install's tree is recomputed; an image needs nothing here, because the
   * runtime refuses bytes that do not hash to the digest the file names.
   */
  tampered(deployment: Deployment): string | null;
  /** The plan's release, in place beside the running one and ready to be pointed at (an install is staged here). */
  prepare(): Deployment;
  /** Before the record changes: the native path stops the node; the container path does nothing (start restarts). */
  stop(): Promise<void>;
  /** Points the record file at `deployment`, keeping the one it replaces as `.previous` (atomic). */
  point(deployment: Deployment): void;
  /** Starts the unit from its record file: the native path starts it, the container path restarts its service. */
  start(): Promise<void>;
  /** The version and revision a node running `deployment` reports; `before` (its earlier reading) where nothing else says. */
  expected(deployment: Deployment, before: NodeReading): ExpectedVersion;
}

/** The plan's release, verified before any node changes, and the way each of the plan's nodes runs it. */
export interface VerifiedArtifact {
  releaseId: string;
  /** The version the release's node reports: the bundle's node_version, or the image's version label. */
  nodeVersion: string;
  /** Where nodeVersion was read, for the downgrade refusal's message. */
  versionSource: string;
  /** The approved source revision, which its node reports (GET /node/info `revision`). */
  sourceRevision: string;
  /** The digest a deployment of it has (Deployment.digest): the bundle's tree digest, or the image manifest's. */
  digest: string;
  /** For the log: what was verified. */
  description: string;
  /** Whether `deployment` is this release's approved artifact (a record naming the release id with other bytes is not). */
  approves(deployment: Deployment): boolean;
  /** The node's unit and record file, for one of the plan's nodes (of this release's path). */
  targetFor(node: AnyPlanNode): NodeTarget;
  /**
   * What `node` runs without a record, as a deployment of this release, read from the host and nothing else (for
   * adoption, upgrade/adopt.ts): the plan's `adopt.installDir` with its tree digest recomputed, or the digest the
   * runtime says the container runs. A string says why it cannot be read.
   */
  found(node: AnyPlanNode, status: UnitStatus): Deployment | string;
  /** Removes what verifying left behind (the bundle's private fetch folder). */
  dispose(): void;
}

/** The receipt's old/new entry: public identifiers only. */
export function summaryOf(deployment: Deployment): NonNullable<NodeReceipt["old"]> {
  const base = { release_id: deployment.releaseId, source_revision: deployment.sourceRevision };
  return deployment.kind === "install" ? { ...base, install_sha256: deployment.digest } : { ...base, image_digest: deployment.digest };
}

/** The receipt's rollback digest field for the restored deployment. */
export function restoredOf(deployment: Deployment): { restored_install_sha256: string } | { restored_image_digest: string } {
  return deployment.kind === "install" ? { restored_install_sha256: deployment.digest } : { restored_image_digest: deployment.digest };
}
