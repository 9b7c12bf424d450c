/**
 * The evidence gateway: `GET|HEAD /ipfs/<cid>` serves stored content by its identifier (CIDv1, raw, sha2-256:
 * lib/contentId.ts), read-only. Only what was published into the local store is served (catalog/publish.ts: the
 * mesh's contradiction evidence and the releases); an unknown identifier is 404 and is never fetched from
 * elsewhere. There is no upload or administrative route.
 *
 * Every answer is a forced download (`Content-Disposition: attachment`, `application/octet-stream`,
 * `X-Content-Type-Options: nosniff`): content is evidence to check, never a page for a browser to render on this
 * origin. The bytes under an identifier never change, so they are cached for a year.
 */
import type { FastifyInstance } from "fastify";
import type {} from "@fastify/static"; // reply.sendFile
import { NotFoundError } from "../protocol/errors";
import { parseContentId } from "../lib/contentId";
import type { ContentStore } from "./contentStore";

export function registerEvidenceGateway(app: FastifyInstance, store: ContentStore): void {
  app.get<{ Params: { cid: string } }>("/ipfs/:cid", async (request, reply) => {
    const contentId = parseContentId(request.params.cid);
    const stored = store.get(contentId);
    if (stored === null) throw new NotFoundError(`no content ${contentId} in this gateway's store (it serves only what was published to it)`, { cid: contentId });
    reply.header("content-disposition", `attachment; filename="${contentId}"`);
    reply.header("x-content-type-options", "nosniff");
    reply.header("cache-control", "public, max-age=31536000, immutable");
    reply.type("application/octet-stream");
    return reply.sendFile(contentId, store.dir, { dotfiles: "deny", index: false });
  });
}
