/**
 * The image a container unit runs is named in its environment file (the service passes it to the runtime, e.g.
 * `EnvironmentFile=/etc/ats-node/image.env` and `ExecStart=/usr/bin/podman run … ${ATS_IMAGE}`):
 *
 *   ATS_IMAGE=registry.example:5000/ats/node@sha256:<64 hex digits>
 *   ATS_RELEASE_ID=ats-node-0.1.1-0123456789ab
 *
 * ATS_IMAGE is always a digest reference, never a tag: a tag can be moved to other bytes after approval, a digest
 * cannot, so what was verified (upgrade/registry.ts) is what the runtime pulls. A reference with a tag is refused
 * when read, too. A swap keeps the replaced file as `<file>.previous` (the prior digest, for rollback) and writes
 * atomically (upgrade/installEnv.ts `replaceKeepingPrevious`).
 */
import { existsSync, readFileSync } from "node:fs";
import { UpgradeRefusal } from "./errors";
import { parseEnvLines, replaceKeepingPrevious } from "./installEnv";
import { RELEASE_ID_PATTERN } from "./metadata";

export interface ImageRecord {
  /** `<registry host>/<repository>@sha256:<hex>`. */
  image: string;
  releaseId: string;
}

/** Host[:port]/repository@sha256:hex, with no `:tag` in the repository part. */
const DIGEST_REFERENCE = /^[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?\/[a-z0-9._/-]{1,255}@sha256:[0-9a-f]{64}$/;
const KEYS = { image: "ATS_IMAGE", releaseId: "ATS_RELEASE_ID" } as const;

export function formatImageEnv(record: ImageRecord): string {
  if (!DIGEST_REFERENCE.test(record.image)) throw new UpgradeRefusal("plan-invalid", `${KEYS.image} must be a digest reference, never a tag: ${JSON.stringify(record.image)}`);
  return `# the image this unit runs, by digest; written by ats-upgrade (docs/upgrade.md)\n${KEYS.image}=${record.image}\n${KEYS.releaseId}=${record.releaseId}\n`;
}

export function parseImageEnv(text: string, where: string): ImageRecord {
  const values = parseEnvLines(text, where);
  const image = values.get(KEYS.image);
  const releaseId = values.get(KEYS.releaseId);
  if (image === undefined || !DIGEST_REFERENCE.test(image)) throw new UpgradeRefusal("preflight-failed", `${where}: ${KEYS.image} is not a digest reference (<host>/<repository>@sha256:<hex>)`);
  if (releaseId === undefined || !new RegExp(RELEASE_ID_PATTERN).test(releaseId)) throw new UpgradeRefusal("preflight-failed", `${where}: ${KEYS.releaseId} is not a release id`);
  return { image, releaseId };
}

/** The record in effect, or null when the unit has none. */
export function readImageEnv(file: string): ImageRecord | null {
  if (!existsSync(file)) return null;
  return parseImageEnv(readFileSync(file, "utf8"), file);
}

/** Points the unit at `record`, keeping the file it replaces as `<file>.previous`. */
export function writeImageEnv(file: string, record: ImageRecord): void {
  replaceKeepingPrevious(file, formatImageEnv(record));
}
