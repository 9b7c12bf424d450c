/**
 * One bounded HTTP GET, for everything the agent downloads (registry manifests and configs, upgrade/registry.ts;
 * release files, upgrade/fetchRelease.ts). What it answers is not trusted: the caller checks the bytes against a
 * digest. The bounds are so that a hostile or broken server can neither send the agent elsewhere nor exhaust it:
 *
 * - one origin: the request goes to `origin` only. A redirect within it is followed up to `maxRedirects` times
 *   (a release server that maps /latest/ to a versioned folder); a redirect anywhere else is refused, not followed,
 *   so the agent never contacts a host the plan does not name;
 * - one deadline, `timeoutMs`, for the whole exchange: headers, every redirect and the body. A server that trickles
 *   bytes is cut off as one that never answers;
 * - at most `maxBytes` held: a declared Content-Length above it is refused before the body is read, and the body
 *   is counted as it arrives (a missing or lying Content-Length);
 * - no credentials are sent.
 *
 * Every failure is an UpgradeRefusal with the caller's code and the request's path and status as evidence.
 */
import { UpgradeRefusal, type RefusalCode } from "./errors";

export interface BoundedGetOptions {
  /** The only origin contacted (scheme, host, port). */
  origin: string;
  /** Same-origin redirects followed; 0 refuses every redirect. */
  maxRedirects: number;
  maxBytes: number;
  /** For headers, redirects and body together, ms. */
  timeoutMs: number;
  accept?: string | undefined;
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
      response = await fetch(url, { headers: options.accept === undefined ? {} : { Accept: options.accept }, redirect: "manual", signal });
    } catch (error) {
      throw refuse(`GET ${url.pathname} failed (${(error as Error).name}: ${(error as Error).message})`, { url: url.pathname });
    }
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel();
      const location = response.headers.get("location");
      const next = location === null ? null : URL.canParse(location, url) ? new URL(location, url) : null;
      if (next === null || next.origin !== origin || redirects >= options.maxRedirects) {
        const where = next === null ? "nowhere usable" : next.origin === origin ? `${next.pathname}, past ${options.maxRedirects} redirects` : `another origin, ${next.origin}`;
        throw refuse(`GET ${url.pathname} redirects (${response.status}) to ${where}; only ${origin} is contacted`, { url: url.pathname, status: response.status });
      }
      url = next;
      continue;
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
    return { bytes: Buffer.concat(chunks), headers: response.headers, url };
  }
}
