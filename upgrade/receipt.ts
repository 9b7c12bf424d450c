/**
 * The receipt: one JSON record of a rollout, per node what changed and why the agent went on or stopped. It is
 * value-free (docs/upgrade.md): it holds identifiers of public artifacts (release ids, source revisions, bundle,
 * install and image digests), the plan's host labels and unit names, timestamps, and the results of comparisons (gate
 * pass/fail with states, counts and block numbers). It never holds anything read from a node's keys, config,
 * environment or logs, nor the node's own values (ids, hashes, offsets): "identity unchanged" is reported, not the
 * identity. Two locks keep it so: a closed schema whose free-text fields refuse hex runs and key-like words, and
 * `assertValueFree`, run on the serialised receipt before it is written.
 */
import { Type, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { GATE_NAMES } from "./gates";
import { RELEASE_ID_PATTERN, SOURCE_REVISION_PATTERN } from "./metadata";

export const RECEIPT_VERSION = "ats-upgrade-receipt/1";

/** Free text: no run of 32+ hex digits (a key, a hash), no PEM, no word that names a secret. */
const TEXT_PATTERN = "^(?![\\s\\S]*[0-9a-fA-F]{32})(?![\\s\\S]*-----BEGIN)(?![\\s\\S]*(?:[Pp]rivate|[Ss]ecret|[Pp]assword|[Mm]nemonic|[Kk]eystore))[\\s\\S]{0,400}$";
const Text = Type.String({ pattern: TEXT_PATTERN });
const Sha256 = Type.String({ pattern: "^[0-9a-f]{64}$" });
const Time = Type.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$" });
const ReleaseId = Type.String({ pattern: RELEASE_ID_PATTERN });
const Revision = Type.Union([Type.String({ pattern: SOURCE_REVISION_PATTERN }), Type.Null()]);

const Gate = Type.Object({ gate: Type.Union(GATE_NAMES.map((name) => Type.Literal(name))), passed: Type.Boolean(), detail: Text }, { additionalProperties: false });
const ImageDigest = Type.String({ pattern: "^sha256:[0-9a-f]{64}$" });
/** What a node ran or runs: an install (its tree digest) or an image (its manifest digest, as the runtime pulls it). */
const Install = Type.Union([
  Type.Object({ release_id: ReleaseId, source_revision: Revision, install_sha256: Sha256 }, { additionalProperties: false }),
  Type.Object({ release_id: ReleaseId, source_revision: Revision, image_digest: ImageDigest }, { additionalProperties: false }),
]);


export const NodeReceiptSchema = Type.Object(
  {
    host: Type.String({ pattern: "^[a-z0-9][a-z0-9.-]{0,62}$" }),
    unit: Type.String({ pattern: "^[A-Za-z0-9@._:-]{1,210}$" }),
    role: Type.String({ pattern: "^[a-z]{1,16}$" }),
    outcome: Type.Union([
      Type.Literal("upgraded"),
      Type.Literal("already-current"),
      Type.Literal("rolled-back"),
      Type.Literal("rollback-failed"),
      Type.Literal("refused"),
      Type.Literal("not-started"),
    ]),
    /** What preflight saw, as comparisons: never the values. */
    preflight: Type.Union([
      Type.Object(
        {
          at: Time,
          genesis_matches_manifest: Type.Boolean(),
          finalized_number: Type.Union([Type.String({ pattern: "^[0-9]{1,20}$" }), Type.Null()]),
          peers: Type.Integer({ minimum: 0 }),
          syncing: Type.Boolean(),
          mesh_state: Type.String({ pattern: "^[A-Za-z]{1,32}$" }),
          time_quality_reported: Type.Boolean(),
          registered: Type.Boolean(),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ]),
    old: Type.Union([Install, Type.Null()]),
    new: Type.Union([Install, Type.Null()]),
    /** The bundle's sha256, or the image manifest's digest without its `sha256:`. */
    artifact_sha256: Sha256,
    started_at: Type.Union([Time, Type.Null()]),
    finished_at: Type.Union([Time, Type.Null()]),
    gates: Type.Array(Gate),
    rollback: Type.Union([
      Type.Object({ restored_install_sha256: Sha256, digest_verified: Type.Boolean(), gates: Type.Array(Gate), passed: Type.Boolean() }, { additionalProperties: false }),
      // An image's digest is checked by the runtime when it pulls; digest_verified says the file named a digest.
      Type.Object({ restored_image_digest: ImageDigest, digest_verified: Type.Boolean(), gates: Type.Array(Gate), passed: Type.Boolean() }, { additionalProperties: false }),
      Type.Null(),
    ]),
    note: Type.Union([Text, Type.Null()]),
    /** A node that had no record and was adopted as this release (upgrade/adopt.ts): verified, then recorded. */
    adopted: Type.Union([Install, Type.Null()]),
  },
  { additionalProperties: false },
);
export type NodeReceipt = Static<typeof NodeReceiptSchema>;

export const ReceiptSchema = Type.Object(
  {
    version: Type.Literal(RECEIPT_VERSION),
    plan_sha256: Sha256,
    release_tag: Type.String({ pattern: "^v?[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.]+)?$" }),
    release_id: ReleaseId,
    source_revision: Type.String({ pattern: SOURCE_REVISION_PATTERN }),
    artifact_sha256: Sha256,
    started_at: Time,
    finished_at: Time,
    outcome: Type.Union([Type.Literal("completed"), Type.Literal("stopped"), Type.Literal("refused")]),
    refusal: Type.Union([Type.Object({ code: Type.String({ pattern: "^[a-z-]{1,40}$" }), message: Text }, { additionalProperties: false }), Type.Null()]),
    nodes: Type.Array(NodeReceiptSchema),
  },
  { additionalProperties: false },
);
export type Receipt = Static<typeof ReceiptSchema>;

/**
 * Throws unless `receipt` fits the closed schema and none of `forbidden` (values the caller knows must never
 * appear: a node's key, a password, an id) occurs anywhere in its JSON, case-insensitively.
 */
export function assertValueFree(receipt: unknown, forbidden: readonly string[] = []): asserts receipt is Receipt {
  const problem = Value.Errors(ReceiptSchema, receipt).First();
  if (problem !== undefined) throw new Error(`receipt${problem.path}: ${problem.message} (receipts are value-free: docs/upgrade.md)`);
  const text = JSON.stringify(receipt).toLowerCase();
  for (const value of forbidden) {
    const needle = value.toLowerCase().replace(/^0x/, "");
    if (needle.length >= 8 && text.includes(needle)) throw new Error("receipt holds a forbidden value (receipts are value-free: docs/upgrade.md)");
  }
}

/** Messages of refusals go into receipts: hex runs are cut to 12 digits (enough to tell digests apart). */
export function valueFreeText(text: string): string {
  return text
    .replace(/(0x)?([0-9a-fA-F]{12})[0-9a-fA-F]{20,}/g, "$1$2…")
    .replace(/-----BEGIN[\s\S]*?-----END[^-]*-----/g, "[pem]")
    .slice(0, 400);
}
