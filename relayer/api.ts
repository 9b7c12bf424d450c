/**
 * The operator API (fastify, 127.0.0.1 by default): list and read items, retry or skip one (API key required;
 * refused with 403 when no key is configured), ask for a proof push, /metrics and /health. Closed schemas, no
 * type coercion: a bad id, filter or body is a 400 naming the field. The read-only routes (/health, /items,
 * /items/<id>) answer CORS for the origins of `apiCorsAllowedOrigins` (lib/cors.ts), so that a page such as the
 * time explorer can show the queues; the actions and /metrics never do.
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { Type } from "@sinclair/typebox";
import { apiKeyMatches, type ApiKeyHash } from "../lib/apiKeys";
import { createCorsPolicy } from "../lib/cors";
import type { RelayerMetrics } from "./metrics";
import { ITEM_KINDS, ITEM_STATUSES, type Item, type RelayerStore } from "./store";

export const MAX_LIST_LIMIT = 500;
const ITEM_ID = Type.String({ pattern: "^(message|call|push|revoke):[0-9]{1,16}:[0-9a-zA-Z:]{1,80}$", maxLength: 120 });

export interface HealthReport {
  ok: boolean;
  chains: { name: string; chainId: number; lagBlocks: string; lastError: string | null }[];
}

export interface OperatorApiDeps {
  store: RelayerStore;
  metrics: RelayerMetrics;
  apiKeys: readonly ApiKeyHash[];
  /** Origins whose pages may read the read-only routes (empty: none). */
  corsAllowedOrigins?: readonly string[];
  health: () => HealthReport;
  /** Adds a forced push item for the chain; false when the chain is unknown. */
  requestPush: (chainId: number) => boolean;
}

function itemJson(item: Item): Record<string, unknown> {
  return { ...item, sourceBlock: item.sourceBlock?.toString() ?? null, payload: JSON.parse(item.payload) as unknown };
}

export function createOperatorApi(deps: OperatorApiDeps): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: 1_024,
    connectionTimeout: 10_000,
    requestTimeout: 10_000,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false } },
  });

  app.setErrorHandler((error: { statusCode?: number; validation?: unknown; message: string }, _request, reply) => {
    const status = error.validation !== undefined ? 400 : (error.statusCode ?? 500);
    void reply.status(status).send({ error: status === 500 ? "internal error" : error.message });
  });

  function authorised(key: unknown): 401 | 403 | null {
    if (deps.apiKeys.length === 0) return 403;
    if (typeof key !== "string" || !apiKeyMatches(deps.apiKeys, key)) return 401;
    return null;
  }

  // CORS on the read-only routes only, on every answer they give (errors too: a page may read its 400 or 503).
  const cors = createCorsPolicy(deps.corsAllowedOrigins ?? [], { methods: "GET, HEAD" });
  const corsOnSend = (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void): void => {
    void reply.headers(cors.answerHeaders(request.headers.origin));
    done(null, payload);
  };
  const readHooks = cors.enabled ? { onSend: corsOnSend } : {};
  if (cors.enabled) {
    for (const path of ["/health", "/items", "/items/:id"]) {
      app.options(path, (request, reply) => {
        void reply.code(204).headers(cors.preflightHeaders(request.headers.origin)).send();
      });
    }
  }

  app.get("/health", readHooks, async (_request, reply) => {
    const report = deps.health();
    return reply.status(report.ok ? 200 : 503).send(report);
  });

  app.get("/metrics", async (_request, reply) => {
    return reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics());
  });

  app.get(
    "/items",
    {
      schema: {
        querystring: Type.Object(
          {
            status: Type.Optional(Type.Union(ITEM_STATUSES.map((s) => Type.Literal(s)))),
            kind: Type.Optional(Type.Union(ITEM_KINDS.map((k) => Type.Literal(k)))),
            chainId: Type.Optional(Type.String({ pattern: "^[1-9][0-9]{0,15}$" })),
            limit: Type.Optional(Type.String({ pattern: "^[1-9][0-9]{0,3}$" })),
            /** oldest (default): the first created first; newest: the latest first (recent deliveries). */
            order: Type.Optional(Type.Union([Type.Literal("oldest"), Type.Literal("newest")])),
          },
          { additionalProperties: false },
        ),
      },
      ...readHooks,
    },
    async (request, reply) => {
      const query = request.query as { status?: Item["status"]; kind?: Item["kind"]; chainId?: string; limit?: string; order?: "oldest" | "newest" };
      const limit = query.limit === undefined ? 100 : Number(query.limit);
      if (limit > MAX_LIST_LIMIT) return reply.status(400).send({ error: `querystring/limit must be at most ${MAX_LIST_LIMIT}` });
      const items = deps.store.items({
        limit,
        newestFirst: query.order === "newest",
        ...(query.status !== undefined ? { status: query.status } : {}),
        ...(query.kind !== undefined ? { kind: query.kind } : {}),
        ...(query.chainId !== undefined ? { chainId: Number(query.chainId) } : {}),
      });
      return { items: items.map(itemJson) };
    },
  );

  const idParams = { params: Type.Object({ id: ITEM_ID }, { additionalProperties: false }) };

  app.get("/items/:id", { schema: idParams, ...readHooks }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const item = deps.store.item(id);
    if (item === undefined) return reply.status(404).send({ error: `no item ${id}` });
    return { item: itemJson(item), txs: deps.store.txsOfItem(id).map((tx) => ({ ...tx, raw: undefined, maxFeePerGas: String(tx.maxFeePerGas), maxPriorityFeePerGas: String(tx.maxPriorityFeePerGas), gas: String(tx.gas), minedBlock: tx.minedBlock?.toString() ?? null })) };
  });

  for (const [action, apply, allowed] of [
    ["retry", (id: string) => deps.store.retry(id), "dead, skipped or pending"],
    ["skip", (id: string) => deps.store.skip(id), "pending or dead"],
  ] as const) {
    app.post(`/items/:id/${action}`, { schema: idParams }, async (request, reply) => {
      const denied = authorised(request.headers["x-api-key"]);
      if (denied !== null) return reply.status(denied).send({ error: denied === 403 ? "no API key is configured: operator actions are off" : "missing or wrong x-api-key" });
      const { id } = request.params as { id: string };
      const item = deps.store.item(id);
      if (item === undefined) return reply.status(404).send({ error: `no item ${id}` });
      if (!apply(id)) return reply.status(409).send({ error: `item ${id} is ${item.status}; ${action} needs ${allowed}` });
      return { item: itemJson(deps.store.item(id)!) };
    });
  }

  app.post(
    "/push/:chainId",
    { schema: { params: Type.Object({ chainId: Type.String({ pattern: "^[1-9][0-9]{0,15}$" }) }, { additionalProperties: false }) } },
    async (request, reply) => {
      const denied = authorised(request.headers["x-api-key"]);
      if (denied !== null) return reply.status(denied).send({ error: denied === 403 ? "no API key is configured: operator actions are off" : "missing or wrong x-api-key" });
      const chainId = Number((request.params as { chainId: string }).chainId);
      if (!deps.requestPush(chainId)) return reply.status(404).send({ error: `chain ${chainId} is not served` });
      return reply.status(202).send({ queued: true });
    },
  );

  return app;
}
