/**
 * The container path's "fetch and verify": resolves the plan's image in its registry (OCI distribution API) and
 * proves it is the approved build, before anything on a node changes:
 *
 * 1. GET /v2/<repository>/manifests/<tag> (OCI and Docker v2 manifest types accepted); the bytes' sha256 must be
 *    the registry's Docker-Content-Digest when it sends one ("bad-checksum": altered in transit or by a proxy),
 *    and must be the plan's approved digest ("moved-tag": the tag now names another image). A manifest list /
 *    image index is refused: the approved digest must be one platform's manifest, the thing that actually runs.
 * 2. GET the config blob by the manifest's config digest; its bytes' sha256 and size must be the manifest's.
 * 3. The config's org.opencontainers.image.revision label must be the approved source_revision
 *    ("unapproved-release"): the digest pins the bytes, the label ties them to the reviewed commit.
 *
 * Detail: docs/upgrade.md §1.
 */
import { createHash } from "node:crypto";
import { UpgradeRefusal } from "./errors";
import { boundedGet, type BoundedResponse } from "./httpGet";
import type { ImageArtifact } from "./plan";
import { fetchToken, parseBearerChallenge, readCredentials } from "./registryAuth";

/*
 * Every request goes to the plan's registry origin only: redirects are refused rather than followed (a registry
 * that redirects blobs to a CDN is not supported yet), responses are read up to a size limit, each request has a
 * time limit. A registry that answers 401 with a Bearer challenge is asked again, once, with a token from the
 * realm it names (upgrade/registryAuth.ts: https or loopback http only; credentials from the file or variable the
 * plan names, or none); the token is kept for the next request of the same resolve and never leaves this module.
 */
export const REVISION_LABEL = "org.opencontainers.image.revision";
export const VERSION_LABEL = "org.opencontainers.image.version";

const MANIFEST_TYPES = ["application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"] as const;
/** Asked for too, so a tag naming a multi-platform index is refused by name rather than served as something else. */
const INDEX_TYPES = ["application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"] as const;
const CONFIG_TYPES = ["application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json"] as const;

/** Manifests are a few KiB; 4 MiB is the limit registries themselves apply to manifests. */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** An image config holds history and env as well as labels; 1 MiB is far above a node image's. */
const MAX_CONFIG_BYTES = 1024 * 1024;
const DEFAULT_REQUEST_TIMEOUT_MS = 15_000;

export interface ResolveOptions {
  /** Each request (headers and body) fails after this long, ms. */
  requestTimeoutMs?: number | undefined;
  /** Where `artifact.credentials.env` is looked up; default process.env (the agent's, not the unit commands'). */
  credentialsEnv?: NodeJS.ProcessEnv | undefined;
}

export interface ResolvedImage {
  /** `sha256:<hex>` of the manifest: what the unit's environment file names. */
  digest: string;
  /** `<registry host>/<repository>@<digest>`: the reference a runtime pulls; never a tag. */
  reference: string;
  /** The image's org.opencontainers.image.version label, or null when it has none. */
  version: string | null;
}

const sha256Digest = (bytes: Buffer) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

/** GETs from one registry: no redirect followed, bounded (upgrade/httpGet.ts), authenticated when it asks. */
type RegistryGet = (path: string, accept: readonly string[], maxBytes: number) => Promise<BoundedResponse>;

function registryClient(image: ImageArtifact, timeoutMs: number, credentialsEnv: NodeJS.ProcessEnv): RegistryGet {
  const registry = new URL(image.registry);
  const what = `registry ${registry.origin}`;
  let token: string | null = null;
  const get = (path: string, accept: readonly string[], maxBytes: number, passStatuses: readonly number[]) =>
    boundedGet(new URL(path, registry), {
      origin: registry.origin,
      maxRedirects: 0,
      maxBytes,
      timeoutMs,
      accept: accept.join(", "),
      headers: token === null ? undefined : { Authorization: `Bearer ${token}` },
      passStatuses,
      code: "bad-checksum",
      what,
    });
  return async (path, accept, maxBytes) => {
    const first = await get(path, accept, maxBytes, [401]);
    if (first.status !== 401) return first;
    const challenge = parseBearerChallenge(first.headers.get("www-authenticate"));
    if (challenge === null) throw new UpgradeRefusal("fetch-failed", `${what}: GET ${path} answered 401 without a Bearer challenge: only token authentication is supported`, { url: path, status: 401 });
    const credentials = image.credentials === undefined ? null : readCredentials(image.credentials, credentialsEnv);
    token = await fetchToken({ challenge, registryOrigin: registry.origin, credentials, timeoutMs });
    // Once: a registry that refuses its own realm's token is refused, not asked in a loop.
    const second = await get(path, accept, maxBytes, [401]);
    if (second.status === 401) throw new UpgradeRefusal("fetch-failed", `${what}: GET ${path} answered 401 again with the token from its realm`, { url: path, status: 401 });
    return second;
  };
}

function parseJson(bytes: Buffer, what: string): Record<string, unknown> {
  try {
    const value = JSON.parse(bytes.toString("utf8")) as unknown;
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new UpgradeRefusal("unapproved-release", `${what} is not a JSON object`);
}

/** Resolves `image` to its manifest digest and checks it against the approved digest and source revision. */
export async function resolveImage(image: ImageArtifact, approvedRevision: string, options: ResolveOptions = {}): Promise<ResolvedImage> {
  const registry = new URL(image.registry);
  const registryGet = registryClient(image, options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS, options.credentialsEnv ?? process.env);
  const name = `${image.repository}:${image.tag}`;

  const manifest = await registryGet(`/v2/${image.repository}/manifests/${image.tag}`, [...MANIFEST_TYPES, ...INDEX_TYPES], MAX_MANIFEST_BYTES);
  const computed = sha256Digest(manifest.bytes);
  const announced = manifest.headers.get("docker-content-digest");
  if (announced !== null && announced !== computed) {
    throw new UpgradeRefusal("bad-checksum", `${name}: manifest bytes hash to ${computed}, the registry says ${announced}`, { computed, announced });
  }
  if (computed !== image.digest) {
    throw new UpgradeRefusal("moved-tag", `tag ${name} now names ${computed}, the plan approved ${image.digest}: a tag is never trusted over the digest`, {
      tag: name,
      served: computed,
      approved: image.digest,
    });
  }
  const body = parseJson(manifest.bytes, `${name}: the manifest`);
  const mediaType = typeof body.mediaType === "string" ? body.mediaType : (manifest.headers.get("content-type") ?? "");
  if ((INDEX_TYPES as readonly string[]).includes(mediaType) || Array.isArray(body.manifests)) {
    throw new UpgradeRefusal("unapproved-release", `${name}: ${image.digest} is a multi-platform index; approve the digest of this platform's image manifest`, { mediaType });
  }
  const config = body.config as { mediaType?: unknown; digest?: unknown; size?: unknown } | undefined;
  if (body.schemaVersion !== 2 || typeof config?.digest !== "string" || !/^sha256:[0-9a-f]{64}$/.test(config.digest) || !Number.isInteger(config.size)) {
    throw new UpgradeRefusal("unapproved-release", `${name}: not an image manifest (schemaVersion 2 with a sha256 config digest and size)`, { mediaType });
  }
  if (!(CONFIG_TYPES as readonly string[]).includes(String(config.mediaType))) {
    throw new UpgradeRefusal("unapproved-release", `${name}: config media type ${JSON.stringify(config.mediaType)} is not an image config`);
  }
  const size = config.size as number;
  if (size > MAX_CONFIG_BYTES) throw new UpgradeRefusal("unapproved-release", `${name}: config is ${size} bytes, more than the ${MAX_CONFIG_BYTES} allowed`);

  const blob = await registryGet(`/v2/${image.repository}/blobs/${config.digest}`, [String(config.mediaType), "application/octet-stream"], size);
  const blobDigest = sha256Digest(blob.bytes);
  if (blobDigest !== config.digest || blob.bytes.length !== size) {
    throw new UpgradeRefusal("bad-checksum", `${name}: config blob is ${blob.bytes.length} bytes hashing to ${blobDigest}; the manifest says ${size} bytes, ${config.digest}`, {
      computed: blobDigest,
      expected: config.digest,
    });
  }
  const labels = (parseJson(blob.bytes, `${name}: the config`).config as { Labels?: Record<string, unknown> } | undefined)?.Labels ?? {};
  const revision = labels[REVISION_LABEL];
  if (revision !== approvedRevision) {
    throw new UpgradeRefusal("unapproved-release", `${name}: label ${REVISION_LABEL} is ${JSON.stringify(revision ?? null)}; the plan approved ${approvedRevision}`, {
      revision: typeof revision === "string" ? revision : null,
      approved: approvedRevision,
    });
  }
  const version = labels[VERSION_LABEL];
  return { digest: computed, reference: `${registry.host}/${image.repository}@${computed}`, version: typeof version === "string" ? version : null };
}
