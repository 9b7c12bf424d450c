/**
 * BUILD-METADATA.json: what a release is, in a closed schema (unknown keys refuse the file). Field names are
 * snake_case, as operators' release tooling reads them. `bundle.tree_sha256` is the executable digest of the
 * install the bundle extracts to (upgrade/digest.ts).
 */
import { Type, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { UpgradeRefusal } from "./errors";

export const METADATA_FILE = "BUILD-METADATA.json";
export const METADATA_SCHEMA_VERSION = "ats-build-metadata/1";

const Sha256 = Type.String({ pattern: "^[0-9a-f]{64}$" });
export const RELEASE_ID_PATTERN = "^ats-node-[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.]+)?-[0-9a-f]{12}(-dirty)?$";
export const SOURCE_REVISION_PATTERN = "^[0-9a-f]{40}$";
/** A node's package version, as GET /node/info reports it (and an image's version label must be). */
export const NODE_VERSION_PATTERN = "^[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.]+)?$";

export const BuildMetadataSchema = Type.Object(
  {
    schema: Type.Literal(METADATA_SCHEMA_VERSION),
    release_id: Type.String({ pattern: RELEASE_ID_PATTERN }),
    source_revision: Type.String({ pattern: SOURCE_REVISION_PATTERN }),
    /** The working tree had changes beside source_revision when dist/ was built (refused unless --allow-dirty). */
    source_tree_dirty: Type.Boolean(),
    /** The mtime of every bundle entry: the source commit's time, so the bundle bytes are reproducible. */
    source_date_epoch: Type.Integer({ minimum: 0 }),
    /** When this release was made (ISO 8601). Kept out of the bundle, so the bundle digest does not depend on it. */
    build_time: Type.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z$" }),
    /** The node's package version (dist/package.json): what GET /node/info reports once it runs. */
    node_version: Type.String({ pattern: NODE_VERSION_PATTERN }),
    runtime: Type.Object(
      {
        node: Type.String({ pattern: "^v[0-9]+\\.[0-9]+\\.[0-9]+$" }),
        /** process.versions.modules: native addons (better-sqlite3, secp256k1, keccak) are built for one ABI. */
        abi: Type.String({ pattern: "^[0-9]{1,4}$" }),
        platform: Type.String({ pattern: "^[a-z0-9]{1,16}$" }),
        arch: Type.String({ pattern: "^[a-z0-9]{1,16}$" }),
      },
      { additionalProperties: false },
    ),
    bundle: Type.Object(
      {
        name: Type.String({ pattern: "^ats-node-[0-9A-Za-z.+-]{1,100}\\.tar\\.gz$" }),
        sha256: Sha256,
        tree_sha256: Sha256,
        files: Type.Integer({ minimum: 1 }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type BuildMetadata = Static<typeof BuildMetadataSchema>;

export function parseBuildMetadata(json: unknown, where: string): BuildMetadata {
  const problem = Value.Errors(BuildMetadataSchema, json).First();
  if (problem !== undefined) throw new UpgradeRefusal("unapproved-release", `${where}: ${METADATA_FILE}${problem.path} ${problem.message}`, { field: problem.path });
  return json as BuildMetadata;
}

/** The host's platform tag, compared with a release's `runtime`. */
export function hostRuntime(): BuildMetadata["runtime"] {
  return { node: process.version, abi: process.versions.modules, platform: process.platform, arch: process.arch };
}
