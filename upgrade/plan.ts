/**
 * The plan: everything the operator approves before the agent touches a node, in a closed schema (an unknown key
 * is refused, so a typo never silently drops a rule). The agent refuses to start without every field:
 *
 * Detail: docs/upgrade.md §3.
 */
import { Type, type Static, type TProperties, type TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { UpgradeRefusal } from "./errors";
import { RELEASE_ID_PATTERN, SOURCE_REVISION_PATTERN } from "./metadata";

/*
 * - release: the tag, the immutable artifact, the approved release_id and source_revision. The artifact is exactly
 *   one of
 *     - a bundle (its SHA-256) found in a release folder (`source.dir`: bundle + SHA256SUMS + BUILD-METADATA.json)
 *       or under a base URL (`source.url`), installed by local or systemd units (the native path), or
 *     - an image (registry URL, repository, tag, approved manifest digest), run by container units (the container
 *       path, upgrade/containerSwitch.ts): the tag is only where the digest is looked up;
 * - network: the network manifest (chain identity and the oracle) and an independent trusted node's temporal RPC;
 * - nodes: each target host with its role, endpoints, installs folder and unit; a node started by hand (no
 *   record file the agent wrote) also names, in `adopt`, the approved release it runs (upgrade/adopt.ts);
 * - rolloutOrder: every host, once, in the order they are upgraded;
 * - maxParallel (optional, default 1): how many non-primary nodes may be switched at once (upgrade/batches.ts);
 * - acceptance: warm-up and time limits of the gates.
 */
export const PLAN_VERSION = "ats-upgrade-plan/1";

const AbsolutePath = Type.String({ pattern: "^/[^\\0]{0,4095}$" });
const HttpUrl = Type.String({ pattern: "^https?://[^\\s]{1,2040}$" });
const HostName = Type.String({ pattern: "^[a-z0-9][a-z0-9.-]{0,62}$" });

const LocalUnit = Type.Object({ kind: Type.Literal("local"), dir: AbsolutePath }, { additionalProperties: false });
/** Podman's container names; an argv element of `podman container inspect`, never a shell word. */
export const CONTAINER_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$";
const ServiceName = Type.String({ pattern: "^[A-Za-z0-9@._:-]{1,200}\\.service$" });
const SystemdUnit = Type.Object({ kind: Type.Literal("systemd"), name: ServiceName, installEnvFile: AbsolutePath }, { additionalProperties: false });
/**
 * A service that runs the node's container from the image its environment file names (upgrade/containerUnit.ts).
 * `container` is the service's `--name`: the runtime is asked which digest it runs. It is named, not derived from
 * the service name, because quadlets and hand-written services name their containers differently.
 */
const ContainerUnit = Type.Object(
  { kind: Type.Literal("container"), name: ServiceName, envFile: AbsolutePath, container: Type.String({ pattern: CONTAINER_NAME_PATTERN }) },
  { additionalProperties: false },
);

const ReleaseTag = Type.String({ pattern: "^v?[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.]+)?$" });
/** The immutable artifact of the native path: the bundle's SHA-256, never a tag or a name. */
const BundleArtifact = Type.Object({ kind: Type.Literal("bundle"), sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }) }, { additionalProperties: false });
/** The immutable artifact of the container path: the image manifest's digest; registry, repository and tag say where to look. */
const ImageArtifact = Type.Object(
  {
    kind: Type.Literal("image"),
    /** The registry's base URL (OCI distribution API under /v2/); the agent makes HTTP requests to this origin only. */
    registry: Type.String({ pattern: "^https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?/?$" }),
    /** OCI repository name grammar (lower-case path components). */
    repository: Type.String({ pattern: "^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*){0,7}$" }),
    tag: Type.String({ pattern: "^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$" }),
    digest: Type.String({ pattern: "^sha256:[0-9a-f]{64}$" }),
    /**
     * Where the registry's credentials are found when its token server asks for them (upgrade/registryAuth.ts):
     * a file, or an environment variable of the agent, holding `<user>:<password>`. Never the credentials: a plan
     * is approved, copied and hashed into receipts. Absent: tokens are asked for anonymously.
     */
    credentials: Type.Optional(
      Type.Union([
        Type.Object({ file: AbsolutePath }, { additionalProperties: false }),
        Type.Object({ env: Type.String({ pattern: "^[A-Z_][A-Z0-9_]{0,127}$" }) }, { additionalProperties: false }),
      ]),
    ),
  },
  { additionalProperties: false },
);

/** The roles a node reports (GET /node/info `role`, the node's config `role`). */
export const NODE_ROLES = ["primary", "secondary", "archive", "bridge"] as const;
export type NodeRole = (typeof NODE_ROLES)[number];

/** A primary signs: it is a validator, so it is never switched together with another node (upgrade/batches.ts). */
export function isValidator(role: NodeRole): boolean {
  return role === "primary";
}

/**
 * The most nodes one rollout batch may switch at once. Bounded so that a plan cannot take a network's serving
 * capacity down in one step by a typo; 16 is far above what a batch of a few dozen nodes needs.
 */
export const MAX_PARALLEL_LIMIT = 16;

/** The fields of a plan node both paths share. */
const nodeFields = {
  host: HostName,
  /** The node's role as it reports it (GET /node/info): a primary signs (a validator), the others serve. */
  role: Type.Union(NODE_ROLES.map((role) => Type.Literal(role))),
  rest: HttpUrl,
  rpc: HttpUrl,
};

/** The plan's shape for one path: its release (which artifact kind) and the fields its nodes need beyond the shared ones. */
function planSchema<R extends TSchema, N extends TProperties>(release: R, pathNodeFields: N) {
  return Type.Object(
    {
      version: Type.Literal(PLAN_VERSION),
      release,
      network: Type.Object(
        {
          /** The network manifest (wire/manifest.ts): genesis hash, chain id, the TimeOracle address. */
          manifest: AbsolutePath,
          /** A temporal RPC the rollout does not touch: finalized blocks are compared with it. */
          trustedRpc: HttpUrl,
        },
        { additionalProperties: false },
      ),
      nodes: Type.Array(
        Type.Object({ ...nodeFields, ...pathNodeFields }, { additionalProperties: false }),
        { minItems: 1, maxItems: 64 },
      ),
      rolloutOrder: Type.Array(HostName, { minItems: 1, maxItems: 64 }),
      /**
       * How many non-primary nodes (secondary, archive, bridge) are switched at once; absent: 1, one node at a
       * time. Primaries are always switched alone, after every other node (upgrade/batches.ts says why).
       */
      maxParallel: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_PARALLEL_LIMIT })),
      acceptance: Type.Object(
        {
          /** After a start, gates are first checked this much later, ms (the mesh needs a few rounds to converge). */
          warmupMs: Type.Integer({ minimum: 0, maximum: 600_000 }),
          /** A gate still failing this long after the start fails the node, ms. */
          timeoutMs: Type.Integer({ minimum: 1_000, maximum: 3_600_000 }),
          /** Error lines the node may log after its start before the log gate fails. */
          maxLogErrors: Type.Integer({ minimum: 0, maximum: 1_000 }),
        },
        { additionalProperties: false },
      ),
    },
    { additionalProperties: false },
  );
}

/**
 * What the operator approves, whatever the artifact: the tag, the release id and the source revision (a bundle's
 * BUILD-METADATA.json, or an image's org.opencontainers.image.revision label, must match them).
 */
const APPROVED_RELEASE = {
  tag: ReleaseTag,
  release_id: Type.String({ pattern: RELEASE_ID_PATTERN }),
  source_revision: Type.String({ pattern: SOURCE_REVISION_PATTERN }),
};
const BundleRelease = Type.Object(
  {
    ...APPROVED_RELEASE,
    artifact: BundleArtifact,
    /**
     * Where the tag's release is published (bundle, SHA256SUMS, BUILD-METADATA.json): a folder, or the base URL
     * they are downloaded from (`<url>/SHA256SUMS`, …; upgrade/fetchRelease.ts). Either is only where the files
     * are found: what is approved is artifact.sha256. No query or fragment, no credentials in the URL.
     */
    source: Type.Union([
      Type.Object({ dir: AbsolutePath }, { additionalProperties: false }),
      Type.Object({ url: Type.String({ pattern: "^https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?(/[^\\s?#@]{0,2000})?$" }) }, { additionalProperties: false }),
    ]),
  },
  { additionalProperties: false },
);
const ImageRelease = Type.Object({ ...APPROVED_RELEASE, artifact: ImageArtifact }, { additionalProperties: false });

/**
 * `adopt`: the only way a node without a record file is taken into a rollout (upgrade/adopt.ts). It names the
 * release the node was started with by hand, approved like `release` and verified the same way; for a bundle also
 * the folder it runs from, whose tree digest must be the release's. Absent, such a node is refused.
 */
const BundleAdoption = Type.Object({ release: BundleRelease, installDir: AbsolutePath }, { additionalProperties: false });
const ImageAdoption = Type.Object({ release: ImageRelease }, { additionalProperties: false });

/** The native path: a bundle, installed by local or systemd units. */
export const BundlePlanSchema = planSchema(BundleRelease, {
  /** Versioned installs live here, one folder per release id. */
  installRoot: AbsolutePath,
  unit: Type.Union([LocalUnit, SystemdUnit]),
  adopt: Type.Optional(BundleAdoption),
});
/** The container path: an image digest, run by container units (the runtime keeps images: no installs folder). */
export const ImagePlanSchema = planSchema(ImageRelease, { unit: ContainerUnit, adopt: Type.Optional(ImageAdoption) });
export type BundlePlan = Static<typeof BundlePlanSchema>;
export type ImagePlan = Static<typeof ImagePlanSchema>;
export type UpgradePlan = BundlePlan | ImagePlan;
export type PlanNode = BundlePlan["nodes"][number];
export type ContainerPlanNode = ImagePlan["nodes"][number];
/** A node of either path. */
export type AnyPlanNode = PlanNode | ContainerPlanNode;
export type ImageArtifact = Static<typeof ImageArtifact>;
/** An approved release of either path: the plan's target, or one a node adopts. */
export type AnyRelease = UpgradePlan["release"];

export function isImagePlan(plan: UpgradePlan): plan is ImagePlan {
  return plan.release.artifact.kind === "image";
}

const ARTIFACT_KINDS = 'exactly one artifact: {"kind": "bundle", "sha256"} with release/source, or {"kind": "image", "registry", "repository", "tag", "digest"} without it';

/**
 * Which of the two schemas a plan is checked against, from release.artifact.kind. Deciding first gives a refusal
 * that names the field (a schema union would only say "expected union value"); an artifact that mixes the two
 * kinds' fields, or a unit of the other path, is then an unknown or wrong field of the chosen schema.
 */
function schemaFor(json: unknown): typeof BundlePlanSchema | typeof ImagePlanSchema {
  const artifact = (json as { release?: { artifact?: { kind?: unknown } } } | null)?.release?.artifact;
  if (typeof artifact !== "object" || artifact === null) throw new UpgradeRefusal("plan-invalid", `plan/release/artifact: missing; ${ARTIFACT_KINDS}`, { field: "/release/artifact" });
  const otherKindFields = artifact.kind === "bundle" ? ["registry", "repository", "digest"] : artifact.kind === "image" ? ["sha256"] : [];
  const mixed = otherKindFields.filter((field) => field in artifact);
  if (mixed.length > 0) throw new UpgradeRefusal("plan-invalid", `plan/release/artifact: kind ${JSON.stringify(artifact.kind)} with ${mixed.join(", ")} of the other kind; ${ARTIFACT_KINDS}`, { field: "/release/artifact" });
  if (artifact.kind === "bundle") return BundlePlanSchema;
  if (artifact.kind === "image") return ImagePlanSchema;
  throw new UpgradeRefusal("plan-invalid", `plan/release/artifact/kind: ${JSON.stringify(artifact.kind ?? null)}; ${ARTIFACT_KINDS}`, { field: "/release/artifact/kind" });
}

/** Validates a parsed plan; refuses (UpgradeRefusal "plan-invalid") naming the first missing or wrong field. */
export function parsePlan(json: unknown): UpgradePlan {
  const schema = schemaFor(json);
  const problem = Value.Errors(schema, json).First();
  if (problem !== undefined) {
    const kind = schema === BundlePlanSchema ? "a bundle plan (local or systemd units)" : "an image plan (container units, no release/source)";
    throw new UpgradeRefusal("plan-invalid", `plan${problem.path || "/"}: ${problem.message} (in ${kind})`, { field: problem.path });
  }
  const plan = json as UpgradePlan;
  const hosts = plan.nodes.map((node) => node.host);
  if (new Set(hosts).size !== hosts.length) throw new UpgradeRefusal("plan-invalid", "plan/nodes: a host is listed twice");
  const order = [...plan.rolloutOrder].sort();
  if (order.length !== hosts.length || new Set(order).size !== order.length || order.some((host, index) => host !== [...hosts].sort()[index])) {
    throw new UpgradeRefusal("plan-invalid", `plan/rolloutOrder must list every host of plan/nodes exactly once (nodes: ${hosts.join(", ")}; order: ${plan.rolloutOrder.join(", ")})`);
  }
  if (isImagePlan(plan)) {
    // The registry is the one origin an image plan's requests go to: an adopted image is looked up there too.
    const elsewhere = plan.nodes.find((node) => node.adopt !== undefined && new URL(node.adopt.release.artifact.registry).origin !== new URL(plan.release.artifact.registry).origin);
    if (elsewhere !== undefined) {
      throw new UpgradeRefusal("plan-invalid", `plan/nodes: ${elsewhere.host} adopts an image from ${elsewhere.adopt!.release.artifact.registry}, not the plan's registry ${plan.release.artifact.registry}`, { field: "/nodes", host: elsewhere.host });
    }
  }
  if ((plan.maxParallel ?? 1) > 1) {
    // A parallel rollout upgrades the nodes that do not sign first: the order the plan states is the order that
    // runs, so a plan that says otherwise is refused rather than silently reordered.
    const roleOf = new Map(plan.nodes.map((node) => [node.host, node.role as NodeRole]));
    const firstPrimary = plan.rolloutOrder.findIndex((host) => isValidator(roleOf.get(host)!));
    const lateOther = firstPrimary < 0 ? undefined : plan.rolloutOrder.slice(firstPrimary).find((host) => !isValidator(roleOf.get(host)!));
    if (lateOther !== undefined) {
      throw new UpgradeRefusal("plan-invalid", `plan/rolloutOrder: with maxParallel ${plan.maxParallel} every primary comes after the other roles, but ${lateOther} (${roleOf.get(lateOther)}) follows primary ${plan.rolloutOrder[firstPrimary]}`, {
        field: "/rolloutOrder",
        host: lateOther,
      });
    }
  }
  return plan;
}
