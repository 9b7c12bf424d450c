/**
 * A small OCI registry for the container path's tests: node:http on 127.0.0.1, a free port (listen(0)), serving
 * image manifests by tag and config blobs by digest, recording every request. With `auth` set it answers /v2/
 * requests without its token by 401 and a Bearer challenge, and issues tokens at /token (the Docker token flow):
 * to anyone, or only to the basic-auth credentials it is given. Whoever starts one closes it in after(), also when
 * a test fails.
 */
import { createHash, randomBytes } from "node:crypto";
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

export const TOKEN_SERVICE = "loopback-registry";

/** Token authentication of a LoopbackRegistry. */
export interface RegistryAuth {
  /** `<user>:<password>` the token endpoint requires (basic auth); null: tokens for anyone (anonymous pulls). */
  credentials: string | null;
  /** The challenge's realm; default this server's /token. */
  realm?: string;
  /** Answer the token request with this body instead of a token. */
  tokenReply?: Buffer;
}

/** The registry's routes: manifests by "<repository>:<tag>", blobs by digest. Every request is recorded. */
export class LoopbackRegistry {
  readonly manifests = new Map<string, ServedManifest>();
  readonly blobs = new Map<string, Buffer>();
  /** `authorization` is the scheme sent ("Bearer", "Basic") or "": never the value. */
  readonly requests: { method: string; path: string; accept: string; authorization: string }[] = [];
  /** Token authentication; undefined: every request is served. */
  auth: RegistryAuth | undefined;
  /** The tokens issued so far. */
  readonly tokens: string[] = [];
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

  /** The token endpoint: a token for the pull scope of REPOSITORY, to anyone or to the configured credentials. */
  private issueToken(request: IncomingMessage, response: ServerResponse, auth: RegistryAuth): void {
    const query = new URL(request.url ?? "", this.url).searchParams;
    const basic = auth.credentials === null ? null : `Basic ${Buffer.from(auth.credentials).toString("base64")}`;
    if (basic !== null && request.headers.authorization !== basic) {
      response.writeHead(401, { "WWW-Authenticate": 'Basic realm="loopback"' }).end();
    } else if (query.get("service") !== TOKEN_SERVICE || query.get("scope") !== `repository:${REPOSITORY}:pull`) {
      response.writeHead(400).end();
    } else {
      const token = randomBytes(24).toString("base64url");
      this.tokens.push(token);
      response.writeHead(200, { "Content-Type": "application/json" }).end(auth.tokenReply ?? JSON.stringify({ token, expires_in: 300 }));
    }
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const path = request.url ?? "";
    this.requests.push({ method: request.method ?? "", path, accept: request.headers.accept ?? "", authorization: (request.headers.authorization ?? "").split(" ")[0]! });
    const auth = this.auth;
    if (auth !== undefined && path.startsWith("/token")) return this.issueToken(request, response, auth);
    if (auth !== undefined && !this.tokens.some((token) => request.headers.authorization === `Bearer ${token}`)) {
      const realm = auth.realm ?? `${this.url}/token`;
      response.writeHead(401, { "WWW-Authenticate": `Bearer realm="${realm}",service="${TOKEN_SERVICE}",scope="repository:${REPOSITORY}:pull"`, "Content-Type": "application/json" }).end(JSON.stringify({ errors: [{ code: "UNAUTHORIZED" }] }));
      return;
    }
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
