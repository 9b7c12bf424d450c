/**
 * One bounded HTTP GET, for everything the agent downloads (registry manifests and configs, upgrade/registry.ts;
 * release files, upgrade/fetchRelease.ts). What it answers is not trusted: the caller checks the bytes against a
 * digest. The bounds are so that a hostile or broken server can neither send the agent elsewhere nor exhaust it:
 *
 * Detail: docs/upgrade.md §1.
 */
import { UpgradeRefusal, type RefusalCode } from "./errors";

/*
 * - one origin: the request goes to `origin` only. A redirect within it is followed up to `maxRedirects` times
 *   (a release server that maps /latest/ to a versioned folder); a redirect anywhere else is refused, not followed,
 *   so the agent never contacts a host the plan does not name;
 * - one deadline, `timeoutMs`, for the whole exchange: headers, every redirect and the body. A server that trickles
 *   bytes is cut off as one that never answers;
 * - at most `maxBytes` held: a declared Content-Length above it is refused before the body is read, and the body
 *   is counted as it arrives (a missing or lying Content-Length);
 * - no credentials are sent unless the caller passes them in `headers` (a registry token, upgrade/registryAuth.ts),
 *   and then never across a redirect: a request with headers follows none.
 *
 * Every failure is an UpgradeRefusal with the caller's code and the request's path and status as evidence.
 */
export interface BoundedGetOptions {
  /** The only origin contacted (scheme, host, port). */
  origin: string;
  /** Same-origin redirects followed; 0 refuses every redirect. */
  maxRedirects: number;
  maxBytes: number;
  /** For headers, redirects and body together, ms. */
  timeoutMs: number;
  accept?: string | undefined;
  /** Sent with the request (an Authorization header); a request with headers follows no redirect. */
  headers?: Readonly<Record<string, string>> | undefined;
  /**
   * Statuses answered as responses (headers only, the body is not read) instead of refused: a registry's 401,
   * whose WWW-Authenticate challenge says where to get a token. Not read, so its size is no concern of the bounds.
   */
  passStatuses?: readonly number[] | undefined;
  /** The refusal code of every failure. */
  code: RefusalCode;
  /** Who is asked, for messages: "registry http://…", "release server http://…". */
  what: string;
}

export interface BoundedResponse {
  bytes: Buffer;
  headers: Headers;
  /** Where the bytes came from, after same-origin redirects. */
  url: URL;
  /** 200, or one of the caller's passStatuses. */
  status: number;
}

export async function boundedGet(start: URL, options: BoundedGetOptions): Promise<BoundedResponse> {
  const { origin, what, code } = options;
  const refuse = (message: string, evidence: Record<string, string | number> = {}) => new UpgradeRefusal(code, `${what}: ${message}`, evidence);
  const signal = AbortSignal.timeout(options.timeoutMs);
  let url = start;
  for (let redirects = 0; ; redirects++) {
    // The path is built by the caller from schema-checked names; this keeps it so should that ever change.
    if (url.origin !== origin) throw refuse(`request ${url.href} leaves ${origin}`, { url: url.href });
    let response: Response;
    try {
      response = await fetch(url, { headers: { ...(options.accept === undefined ? {} : { Accept: options.accept }), ...options.headers }, redirect: "manual", signal });
    } catch (error) {
      throw refuse(`GET ${url.pathname} failed (${(error as Error).name}: ${(error as Error).message})`, { url: url.pathname });
    }
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel();
      const location = response.headers.get("location");
      const next = location === null ? null : URL.canParse(location, url) ? new URL(location, url) : null;
      // Credentials are for the URL they were issued for: a redirect could carry them to another path's owner.
      const maxRedirects = options.headers === undefined ? options.maxRedirects : 0;
      if (next === null || next.origin !== origin || redirects >= maxRedirects) {
        const where = next === null ? "nowhere usable" : next.origin === origin ? `${next.pathname}, past ${maxRedirects} redirects` : `another origin, ${next.origin}`;
        throw refuse(`GET ${url.pathname} redirects (${response.status}) to ${where}; only ${origin} is contacted`, { url: url.pathname, status: response.status });
      }
      url = next;
      continue;
    }
    if (response.status !== 200 && (options.passStatuses ?? []).includes(response.status)) {
      await response.body?.cancel();
      return { bytes: Buffer.alloc(0), headers: response.headers, url, status: response.status };
    }
    if (response.status !== 200) {
      await response.body?.cancel();
      throw refuse(`GET ${url.pathname} answered ${response.status}`, { url: url.pathname, status: response.status });
    }
    const declared = Number(response.headers.get("content-length") ?? "0");
    if (declared > options.maxBytes) {
      await response.body?.cancel();
      throw refuse(`${url.pathname} is ${declared} bytes, more than the ${options.maxBytes} allowed`, { url: url.pathname, bytes: declared });
    }
    const chunks: Buffer[] = [];
    let length = 0;
    try {
      for await (const chunk of response.body ?? []) {
        length += (chunk as Uint8Array).byteLength;
        if (length > options.maxBytes) throw refuse(`${url.pathname} exceeds ${options.maxBytes} bytes`, { url: url.pathname });
        chunks.push(Buffer.from(chunk as Uint8Array));
      }
    } catch (error) {
      // Leaving the loop cancels the body stream: the rest is never read.
      if (error instanceof UpgradeRefusal) throw error;
      throw refuse(`reading ${url.pathname} failed (${(error as Error).name})`, { url: url.pathname, bytes: length });
    }
    return { bytes: Buffer.concat(chunks), headers: response.headers, url, status: response.status };
  }
}
