/**
 * CORS on the node's public reads (docs/protocol.md §9.2; the policy itself is lib/cors.ts): which web origins
 * (`corsAllowedOrigins`, validated once by node/config.ts) may read `GET /node/info`, `/health`, `/mesh/state`
 * and, on a node without API keys, `GET /time/current` from a page of another site. Nothing else gets CORS
 * headers: no authenticated route, no POST (verify, schedule), no schedule record, no /metrics (the operator's).
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
import { createCorsPolicy as createPolicy, type CorsPolicy as BasePolicy } from "../../lib/cors";

export { ANY_ORIGIN, CORS_PREFLIGHT_MAX_AGE_S } from "../../lib/cors";

/** The public reads that get CORS headers on every node; GET /time/current only on a node without API keys. */
export const CORS_OPEN_READ_PATHS = ["/node/info", "/health", "/mesh/state"] as const;

export interface CorsPolicy extends BasePolicy {
  /** Whether GET /time/current is covered: only where it is public, i.e. the node requires no API key. */
  coversCurrentTime(authRequired: boolean): boolean;
  /** Whether a WebSocket upgrade with this `Origin` header may open the stream: none (not a browser), or one allowed. */
  admitsStreamOrigin(origin: string | undefined): boolean;
}

/** The node's policy: its covered routes serve GET (and HEAD, which fastify answers for every GET route). */
export function createCorsPolicy(allowedOrigins: readonly string[]): CorsPolicy {
  const policy = createPolicy(allowedOrigins, { methods: "GET, HEAD" });
  return {
    ...policy,
    coversCurrentTime: (authRequired) => policy.enabled && !authRequired,
    admitsStreamOrigin: (origin) => origin === undefined || policy.allows(origin),
  };
}
