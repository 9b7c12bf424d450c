/**
 * The plan: everything the operator approves before the agent touches a node, in a closed schema (an unknown key
 * is refused, so a typo never silently drops a rule). The agent refuses to start without every field:
 *
 * - release: the tag, the immutable artifact (the bundle's SHA-256), the approved release_id and
 *   source_revision, and where the release folder is (bundle + SHA256SUMS + BUILD-METADATA.json);
 * - network: the network manifest (chain identity and the oracle) and an independent trusted node's temporal RPC;
 * - nodes: each target host with its role, endpoints, installs folder and unit;
 * - rolloutOrder: every host, once, in the order they are upgraded (one at a time);
 * - acceptance: warm-up and time limits of the gates.
 */
import { Type, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { UpgradeRefusal } from "./errors";
import { RELEASE_ID_PATTERN, SOURCE_REVISION_PATTERN } from "./metadata";

export const PLAN_VERSION = "ats-upgrade-plan/1";

const AbsolutePath = Type.String({ pattern: "^/[^\\0]{0,4095}$" });
const HttpUrl = Type.String({ pattern: "^https?://[^\\s]{1,2040}$" });
const HostName = Type.String({ pattern: "^[a-z0-9][a-z0-9.-]{0,62}$" });

const LocalUnit = Type.Object({ kind: Type.Literal("local"), dir: AbsolutePath }, { additionalProperties: false });
const SystemdUnit = Type.Object(
  { kind: Type.Literal("systemd"), name: Type.String({ pattern: "^[A-Za-z0-9@._:-]{1,200}\\.service$" }), installEnvFile: AbsolutePath },
  { additionalProperties: false },
);

export const PlanSchema = Type.Object(
  {
    version: Type.Literal(PLAN_VERSION),
    release: Type.Object(
      {
        tag: Type.String({ pattern: "^v?[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.]+)?$" }),
        release_id: Type.String({ pattern: RELEASE_ID_PATTERN }),
        source_revision: Type.String({ pattern: SOURCE_REVISION_PATTERN }),
        /** The immutable artifact: the bundle's SHA-256, never a tag or a name. */
        artifact: Type.Object({ kind: Type.Literal("bundle"), sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }) }, { additionalProperties: false }),
        /** The folder the tag's release is published in (bundle, SHA256SUMS, BUILD-METADATA.json). */
        source: Type.Object({ dir: AbsolutePath }, { additionalProperties: false }),
      },
      { additionalProperties: false },
    ),
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
      Type.Object(
        {
          host: HostName,
          /** The node's role as it reports it (GET /node/info): a primary signs (a validator), the others serve. */
          role: Type.Union([Type.Literal("primary"), Type.Literal("secondary"), Type.Literal("archive"), Type.Literal("bridge")]),
          rest: HttpUrl,
          rpc: HttpUrl,
          /** Versioned installs live here, one folder per release id. */
          installRoot: AbsolutePath,
          unit: Type.Union([LocalUnit, SystemdUnit]),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 64 },
    ),
    rolloutOrder: Type.Array(HostName, { minItems: 1, maxItems: 64 }),
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
export type UpgradePlan = Static<typeof PlanSchema>;
export type PlanNode = UpgradePlan["nodes"][number];

/** Validates a parsed plan; refuses (UpgradeRefusal "plan-invalid") naming the first missing or wrong field. */
export function parsePlan(json: unknown): UpgradePlan {
  const problem = Value.Errors(PlanSchema, json).First();
  if (problem !== undefined) throw new UpgradeRefusal("plan-invalid", `plan${problem.path || "/"}: ${problem.message}`, { field: problem.path });
  const plan = json as UpgradePlan;
  const hosts = plan.nodes.map((node) => node.host);
  if (new Set(hosts).size !== hosts.length) throw new UpgradeRefusal("plan-invalid", "plan/nodes: a host is listed twice");
  const order = [...plan.rolloutOrder].sort();
  if (order.length !== hosts.length || new Set(order).size !== order.length || order.some((host, index) => host !== [...hosts].sort()[index])) {
    throw new UpgradeRefusal("plan-invalid", `plan/rolloutOrder must list every host of plan/nodes exactly once (nodes: ${hosts.join(", ")}; order: ${plan.rolloutOrder.join(", ")})`);
  }
  return plan;
}
