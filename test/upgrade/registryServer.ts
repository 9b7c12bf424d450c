/**
 * A small OCI registry for the container path's tests: node:http on 127.0.0.1, a free port (listen(0)), serving
 * image manifests by tag and config blobs by digest, recording every request. Whoever starts one closes it in
 * after(), also when a test fails.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { REVISION_LABEL, VERSION_LABEL } from "../../upgrade/registry";

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
export const REPOSITORY = "ats/node";
export const REVISION_A = "a".repeat(40);
export const REVISION_B = "b".repeat(40);
export const RELEASE_A = "ats-node-0.1.0-aaaaaaaaaaaa";
export const RELEASE_B = "ats-node-0.1.1-bbbbbbbbbbbb";

export const digestOf = (bytes: Buffer) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;

export interface TestImage {
  manifest: Buffer;
  digest: string;
  config: Buffer;
  configDigest: string;
}

/** A one-platform image: a config blob with the revision (null: no labels) and version labels, and a manifest naming it. */
export function testImage(revision: string | null, version: string): TestImage {
  const labels = revision === null ? {} : { Labels: { [REVISION_LABEL]: revision, [VERSION_LABEL]: version } };
  const config = Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux", config: labels, rootfs: { type: "layers", diff_ids: [] } }));
  const configDigest = digestOf(config);
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, config: { mediaType: OCI_CONFIG, digest: configDigest, size: config.length }, layers: [] }));
  return { manifest, digest: digestOf(manifest), config, configDigest };
}

export interface ServedManifest {
  body: Buffer;
  /** The Docker-Content-Digest header; default the body's digest. */
  announced?: string;
  mediaType?: string;
  /** Answer a redirect to this URL instead. */
  redirectTo?: string;
}

/** The registry's routes: manifests by "<repository>:<tag>", blobs by digest. Every request is recorded. */
export class LoopbackRegistry {
  readonly manifests = new Map<string, ServedManifest>();
  readonly blobs = new Map<string, Buffer>();
  readonly requests: { method: string; path: string; accept: string }[] = [];
  private server: Server | undefined;
  url = "";

  async start(): Promise<void> {
    this.server = createServer((request, response) => this.handle(request, response));
    await new Promise<void>((resolve, reject) => {
      this.server!.once("error", reject);
      this.server!.listen(0, "127.0.0.1", resolve);
    });
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    if (this.server === undefined) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  /** Serves `image` under `tag` (its manifest and config). */
  publish(tag: string, image: TestImage, override: Partial<ServedManifest> = {}): void {
    this.manifests.set(`${REPOSITORY}:${tag}`, { body: image.manifest, mediaType: OCI_MANIFEST, ...override });
    this.blobs.set(image.configDigest, image.config);
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const path = request.url ?? "";
    this.requests.push({ method: request.method ?? "", path, accept: request.headers.accept ?? "" });
    const manifest = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(path);
    const blob = /^\/v2\/(.+)\/blobs\/(sha256:[0-9a-f]{64})$/.exec(path);
    const served = manifest === null ? undefined : this.manifests.get(`${manifest[1]}:${manifest[2]}`);
    if (served?.redirectTo !== undefined) {
      response.writeHead(307, { Location: served.redirectTo }).end();
    } else if (served !== undefined) {
      response.writeHead(200, { "Content-Type": served.mediaType ?? OCI_MANIFEST, "Docker-Content-Digest": served.announced ?? digestOf(served.body) }).end(served.body);
    } else if (blob !== null && blob[1] === REPOSITORY && this.blobs.has(blob[2]!)) {
      response.writeHead(200, { "Content-Type": "application/octet-stream", "Docker-Content-Digest": blob[2]! }).end(this.blobs.get(blob[2]!));
    } else {
      response.writeHead(404, { "Content-Type": "application/json" }).end(JSON.stringify({ errors: [{ code: "MANIFEST_UNKNOWN" }] }));
    }
  }
}
