/**
 * CORS on the node's public reads (docs/protocol.md §9.2): which web origins (`corsAllowedOrigins`, validated once
 * by node/config.ts) may read `GET /node/info`, `/health`, `/mesh/state` and, on a node without API keys,
 * `GET /time/current` from a page of another site. Nothing else gets CORS headers: no authenticated route, no POST
 * (verify, schedule), no schedule record, no /metrics (the operator's). Never `Access-Control-Allow-Credentials`:
 * these answers are the same for everyone, and a page must not read anything with the visitor's cookies.
 *
 * An answer on a covered route says `Vary: Origin` whenever CORS is on (a shared cache must not hand one origin's
 * answer to another); `Access-Control-Allow-Origin` only for an origin on the list (or `*` when the list is `*`).
 * An origin not on the list gets no CORS headers at all, so its browser keeps the answer from the page.
 *
 * The stream's WebSocket (`/v1/stream`, ws.ts) follows the same list, checked by the node itself: browsers apply no
 * same-origin rule to WebSockets, so without the check any page could open a visitor's streams (and use up the
 * visitor's maxStreamsPerClient slots). An upgrade whose `Origin` is on the list (any, with `*`) is admitted; one
 * with another Origin is refused with 403 before it takes a slot or a rate-limit token; one without Origin (not a
 * browser: the Node client, wscat, a relay) is admitted as before. The empty default admits no browser page at all:
 * the safe reading of "no other site's page may use the node". A page served from the node's own origin (behind a
 * reverse proxy) is listed like any other: the node cannot tell its public origin (a proxy may rewrite Host, and
 * trusting Host would let a DNS-rebinding page pass as the node's own).
 */

/** How long a browser may reuse a preflight's answer, s: short, so that a changed list takes effect soon. */
export const CORS_PREFLIGHT_MAX_AGE_S = 600;
/** The methods a covered route serves (fastify answers HEAD for every GET route). */
const ALLOWED_METHODS = "GET, HEAD";
/** The list entry that allows every origin. */
export const ANY_ORIGIN = "*";

/** The public reads that get CORS headers on every node; GET /time/current only on a node without API keys. */
export const CORS_OPEN_READ_PATHS = ["/node/info", "/health", "/mesh/state"] as const;

export interface CorsPolicy {
  /** False for an empty list: no covered route changes its answers, no preflight route exists. */
  readonly enabled: boolean;
  /** Headers of an answer on a covered route to a request whose `Origin` header is `origin`. */
  answerHeaders(origin: string | undefined): Record<string, string>;
  /** Headers of the answer to a preflight (OPTIONS) on a covered route. */
  preflightHeaders(origin: string | undefined): Record<string, string>;
  /** Whether GET /time/current is covered: only where it is public, i.e. the node requires no API key. */
  coversCurrentTime(authRequired: boolean): boolean;
  /** Whether a WebSocket upgrade with this `Origin` header may open the stream: none (not a browser), or one allowed. */
  admitsStreamOrigin(origin: string | undefined): boolean;
}

/** The policy of a validated `corsAllowedOrigins` (origins exactly as browsers send them, or `*` alone). */
export function createCorsPolicy(allowedOrigins: readonly string[]): CorsPolicy {
  const enabled = allowedOrigins.length > 0;
  const anyOrigin = allowedOrigins.includes(ANY_ORIGIN);
  const origins = new Set(allowedOrigins);
  // Browsers send an opaque origin as "null", which is never on the list (config refuses it): no match.
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
        "access-control-allow-methods": ALLOWED_METHODS,
        "access-control-max-age": String(CORS_PREFLIGHT_MAX_AGE_S),
      };
    },
    coversCurrentTime(authRequired) {
      return enabled && !authRequired;
    },
    admitsStreamOrigin(origin) {
      return origin === undefined || allowedValue(origin) !== null;
    },
  };
}
