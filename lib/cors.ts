/**
 * CORS for the programs' public reads (the node's GET routes, docs/protocol.md §9.2; the temporal gateway's
 * JSON-RPC POST, §9.5; the relayer's read-only operator routes): which web origins' pages may read an answer.
 * Never `Access-Control-Allow-Credentials`: these answers are the same for everyone, and a page must not read
 * anything with the visitor's cookies.
 *
 * An answer on a covered route says `Vary: Origin` whenever CORS is on (a shared cache must not hand one origin's
 * answer to another); `Access-Control-Allow-Origin` only for an origin on the list (or `*` when the list is `*`).
 * An origin not on the list gets no CORS headers at all, so its browser keeps the answer from the page. The empty
 * list (every program's default) admits no other site's page.
 *
 * WebSockets: browsers apply no same-origin rule to them, so a program with a WebSocket (the node's stream, the
 * gateway's JSON-RPC) refuses an upgrade whose Origin is not on its list itself, with 403 before the handshake
 * (upgradeOrigin, originRefusal); an upgrade without Origin is not a browser page's and is not checked.
 */
import type { IncomingHttpHeaders } from "node:http";

/** How long a browser may reuse a preflight's answer, s: short, so that a changed list takes effect soon. */
export const CORS_PREFLIGHT_MAX_AGE_S = 600;
/** The list entry that allows every origin. */
export const ANY_ORIGIN = "*";
/** A web origin's shape (http(s), a lowercase host name or bracketed IPv6, an optional port) or "*"; see corsOriginProblems. */
export const CORS_ORIGIN_PATTERN = /^(?:\*|https?:\/\/(?:\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*)(?::[0-9]{1,5})?)$/;

/**
 * What is wrong with a list of allowed origins, one message per problem (empty: none). Each origin must be
 * exactly as a browser serialises it in its Origin header (the programs compare strings): a port within range and
 * not the scheme's default (`https://a.example:443` is sent as `https://a.example`); and "*" only alone (beside it,
 * other entries would suggest a restriction that does not exist).
 */
export function corsOriginProblems(origins: readonly string[]): { message: string; value: unknown }[] {
  const problems: { message: string; value: unknown }[] = [];
  if (origins.includes(ANY_ORIGIN) && origins.length > 1) problems.push({ message: "must be '*' alone or a list of origins, not both", value: origins });
  origins.forEach((origin, index) => {
    if (origin === ANY_ORIGIN) return;
    let serialised: string | null;
    try {
      serialised = new URL(origin).origin;
    } catch {
      serialised = null;
    }
    if (serialised !== origin) problems.push({ message: `entry ${index} must be an origin as browsers send it${serialised === null ? "" : ` (${serialised})`}`, value: origin });
  });
  return problems;
}

export interface CorsPolicy {
  /** False for an empty list: no covered route changes its answers, no preflight route exists. */
  readonly enabled: boolean;
  /** Headers of an answer on a covered route to a request whose `Origin` header is `origin`. */
  answerHeaders(origin: string | undefined): Record<string, string>;
  /** Headers of the answer to a preflight (OPTIONS) on a covered route. */
  preflightHeaders(origin: string | undefined): Record<string, string>;
  /** Whether this `Origin` header is on the list (any, with `*`); false for none. */
  allows(origin: string | undefined): boolean;
}

export interface CorsRoutes {
  /** The methods the covered routes serve, e.g. "GET, HEAD" (fastify answers HEAD for every GET route) or "POST". */
  methods: string;
  /** Request headers a page may send beyond the CORS-safelisted ones (e.g. "content-type" for a JSON POST). */
  allowHeaders?: string;
}

/** The policy of a validated list of origins (exactly as browsers send them, or `*` alone) for routes serving `routes.methods`. */
export function createCorsPolicy(allowedOrigins: readonly string[], routes: CorsRoutes): CorsPolicy {
  const enabled = allowedOrigins.length > 0;
  const anyOrigin = allowedOrigins.includes(ANY_ORIGIN);
  const origins = new Set(allowedOrigins);
  // Browsers send an opaque origin as "null", which is never on the list (the checks refuse it): no match.
  const allowedValue = (origin: string | undefined): string | null => {
    if (origin === undefined) return null;
    if (anyOrigin) return ANY_ORIGIN;
    return origins.has(origin) ? origin : null;
  };
  return {
    enabled,
    answerHeaders(origin) {
      if (!enabled) return {};
      const allowed = allowedValue(origin);
      return allowed === null ? { vary: "Origin" } : { vary: "Origin", "access-control-allow-origin": allowed };
    },
    preflightHeaders(origin) {
      if (!enabled) return {};
      const allowed = allowedValue(origin);
      if (allowed === null) return { vary: "Origin" };
      return {
        vary: "Origin",
        "access-control-allow-origin": allowed,
        "access-control-allow-methods": routes.methods,
        ...(routes.allowHeaders === undefined ? {} : { "access-control-allow-headers": routes.allowHeaders }),
        "access-control-max-age": String(CORS_PREFLIGHT_MAX_AGE_S),
      };
    },
    allows(origin) {
      return allowedValue(origin) !== null;
    },
  };
}

/** How much of a refused Origin header a refusal repeats (the header is the client's text; origins are short). */
const MAX_ECHOED_ORIGIN_CHARS = 100;

/**
 * The page origin a WebSocket upgrade names (RFC 6455 §4.1: Origin; protocol version 8 said Sec-WebSocket-Origin),
 * or undefined for a client that names none (not a browser).
 */
export function upgradeOrigin(headers: IncomingHttpHeaders): string | undefined {
  const header = headers.origin ?? headers["sec-websocket-origin"];
  return Array.isArray(header) ? header.join(", ") : header;
}

/** What a refused upgrade is told: `Origin "<origin>" may not open <what>: it is not in <setting>`. */
export function originRefusal(origin: string, what: string, setting: string): string {
  const echoed = origin.length > MAX_ECHOED_ORIGIN_CHARS ? `${origin.slice(0, MAX_ECHOED_ORIGIN_CHARS)}…` : origin;
  return `Origin ${JSON.stringify(echoed)} may not open ${what}: it is not in ${setting}`;
}
