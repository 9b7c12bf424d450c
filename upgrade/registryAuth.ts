/**
 * Registry token authentication (the OCI distribution / Docker token flow), for upgrade/registry.ts: a registry
 * that answers 401 with `WWW-Authenticate: Bearer realm="…",service="…",scope="…"` is asked again, once, with a
 * token from that realm. This module parses the challenge, reads the credentials and fetches the token:
 *
 * - the realm must be https, or http on a loopback address (a token, and the credentials for it, never cross a
 *   network in the clear); a realm with credentials in its URL is refused too. It is the one host besides the
 *   registry the agent contacts, because the registry names it;
 * - the token request is the same bounded GET as every download (upgrade/httpGet.ts): the realm's origin only, no
 *   redirect followed (credentials stay with the URL they were sent to), a deadline and a 64 KiB bound on the reply;
 * - credentials (`<user>:<password>`) come from the file or environment variable the plan names, never from the
 *   plan; without them the token is asked for anonymously (public images). They are read only when a realm asks;
 * - nothing secret is in an error: messages name where the credentials came from (the file, the variable's name),
 *   the realm's origin and path and the status, never a credential, a token or the realm's query.
 */
import { readFileSync, statSync } from "node:fs";
import { UpgradeRefusal } from "./errors";
import { boundedGet } from "./httpGet";
import type { ImageArtifact } from "./plan";

/** The parameters of a `Bearer` challenge. */
export interface BearerChallenge {
  realm: string;
  service: string | null;
  scope: string | null;
}

/** Where the credentials are (plan `artifact.credentials`). */
export type CredentialsSource = NonNullable<ImageArtifact["credentials"]>;

/** A token reply is a few KiB of JSON (a JWT); far more is not a token server. */
export const MAX_TOKEN_REPLY_BYTES = 64 * 1024;
/** A credentials file holds one `<user>:<password>` line. */
const MAX_CREDENTIALS_BYTES = 4 * 1024;
/** What a bearer token may hold: the characters of RFC 6750's b64token, so it can never break a header. */
const TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "[::1]", "localhost"]);

const refuse = (message: string, evidence: Record<string, string | number> = {}) => new UpgradeRefusal("fetch-failed", message, evidence);

/** The `Bearer` challenge of a WWW-Authenticate header (quoted or token parameters), or null when there is none. */
export function parseBearerChallenge(header: string | null): BearerChallenge | null {
  const match = header === null ? null : /^\s*Bearer\s+(.*)$/i.exec(header);
  if (match === null) return null;
  const params = new Map<string, string>();
  for (const param of match[1]!.matchAll(/([A-Za-z_]+)=(?:"((?:[^"\\]|\\.)*)"|([^\s,"]+))\s*,?\s*/g)) {
    params.set(param[1]!.toLowerCase(), param[2] === undefined ? param[3]! : param[2].replace(/\\(.)/g, "$1"));
  }
  const realm = params.get("realm");
  return realm === undefined ? null : { realm, service: params.get("service") ?? null, scope: params.get("scope") ?? null };
}

/** https, or http on a loopback address: where a secret may travel. */
function isSecureOrLoopback(url: URL): boolean {
  return url.protocol === "https:" || (url.protocol === "http:" && LOOPBACK_HOSTS.has(url.hostname));
}

/** The realm as a URL the agent may send credentials to: https, or http on a loopback address. */
export function realmUrl(realm: string, registryOrigin: string): URL {
  const url = URL.canParse(realm) ? new URL(realm) : null;
  if (url === null) throw refuse(`registry ${registryOrigin}: its token realm is not a URL`);
  if (url.username !== "" || url.password !== "") throw refuse(`registry ${registryOrigin}: its token realm ${url.origin} carries credentials in its URL`, { realm: url.origin });
  if (!isSecureOrLoopback(url)) throw refuse(`registry ${registryOrigin}: token realm ${url.protocol}//${url.host} is neither https nor loopback http: credentials and tokens are not sent there`, { realm: `${url.protocol}//${url.host}` });
  return url;
}

/** The `Authorization: Basic` value for `source`, and what to call it in messages; never the value in those. */
export function readCredentials(source: CredentialsSource, env: NodeJS.ProcessEnv): { basic: string; from: string } {
  let text: string | undefined;
  let from: string;
  if ("file" in source) {
    from = `credentials file ${source.file}`;
    try {
      if (statSync(source.file).size > MAX_CREDENTIALS_BYTES) throw refuse(`${from} is larger than ${MAX_CREDENTIALS_BYTES} bytes: not one user:pass line`);
      text = readFileSync(source.file, "utf8");
    } catch (error) {
      if (error instanceof UpgradeRefusal) throw error;
      throw refuse(`${from} cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
  } else {
    from = `environment variable ${source.env}`;
    text = env[source.env];
    if (text === undefined) throw refuse(`${from} is not set`);
  }
  const line = text.replace(/\r?\n$/, "");
  // Checked without echoing: the shape of the line is all a message may say about it.
  if (!/^[^:\r\n]+:[^\r\n]+$/.test(line)) throw refuse(`${from} does not hold one line of the form user:pass`);
  return { basic: Buffer.from(line, "utf8").toString("base64"), from };
}

export interface TokenRequest {
  challenge: BearerChallenge;
  registryOrigin: string;
  /** Null: ask anonymously. */
  credentials: { basic: string; from: string } | null;
  timeoutMs: number;
  maxBytes?: number | undefined;
}

/** Fetches a token from the challenge's realm (docs.docker.com "Token Authentication Specification"). */
export async function fetchToken(request: TokenRequest): Promise<string> {
  const { challenge, credentials, registryOrigin } = request;
  // The realm comes from the registry's answer: over plain http from another host, anyone on the path
  // could have named their own realm, and the credentials would go to it. Anonymous tokens carry no secret.
  if (credentials !== null && !isSecureOrLoopback(new URL(registryOrigin))) {
    throw refuse(`registry ${registryOrigin}: its token challenge came over plain http, so its realm is not trusted with the ${credentials.from}`, { registry: registryOrigin });
  }
  const url = realmUrl(challenge.realm, registryOrigin);
  if (challenge.service !== null) url.searchParams.set("service", challenge.service);
  if (challenge.scope !== null) url.searchParams.set("scope", challenge.scope);
  const what = `token realm ${url.origin} of registry ${registryOrigin}${credentials === null ? " (anonymous)" : ` (with the ${credentials.from})`}`;
  const reply = await boundedGet(url, {
    origin: url.origin,
    maxRedirects: 0,
    maxBytes: request.maxBytes ?? MAX_TOKEN_REPLY_BYTES,
    timeoutMs: request.timeoutMs,
    accept: "application/json",
    headers: credentials === null ? undefined : { Authorization: `Basic ${credentials.basic}` },
    passStatuses: [401, 403],
    code: "fetch-failed",
    what,
  });
  if (reply.status !== 200) {
    throw refuse(`${what}: GET ${url.pathname} answered ${reply.status}: ${credentials === null ? "anonymous access refused; name credentials in the plan (artifact.credentials)" : "the credentials were refused"}`, { status: reply.status });
  }
  let body: { token?: unknown; access_token?: unknown };
  try {
    body = JSON.parse(reply.bytes.toString("utf8")) as typeof body;
  } catch {
    throw refuse(`${what}: the reply is not JSON`);
  }
  const token = typeof body?.token === "string" ? body.token : typeof body?.access_token === "string" ? body.access_token : null;
  if (token === null || token === "" || !TOKEN.test(token)) throw refuse(`${what}: the reply holds no usable token (a "token" or "access_token" of token characters)`);
  return token;
}
