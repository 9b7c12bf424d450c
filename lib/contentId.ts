/**
 * Content identifiers of the evidence gateway (catalog/ipfs.ts) and of everyone who fetches from it: CIDv1 with
 * the `raw` codec and a sha2-256 multihash, the one kind a reader can check against the bytes alone (no DAG to
 * walk, no chunking to reproduce). Parsed and made with the `multiformats` library, never by hand. Anything else
 * is refused with a ValidationError that names the rule it broke.
 */
import { createHash } from "node:crypto";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import * as Digest from "multiformats/hashes/digest";
import { sha256 } from "multiformats/hashes/sha2";
import { ValidationError } from "../protocol/errors";

/**
 * Longest identifier text parsed: a base32 CIDv1 of a sha2-256 digest is 59 characters, and one of a sha2-512 digest
 * 113, which must still be refused by its rule (the hash) rather than by its length.
 */
export const MAX_CONTENT_ID_CHARS = 200;

/** The CIDv1 (raw, sha2-256) of `bytes`, in its canonical base32 text. */
export function contentIdOf(bytes: Uint8Array): string {
  const digest = Digest.create(sha256.code, createHash("sha256").update(bytes).digest());
  return CID.createV1(raw.code, digest).toString();
}

/**
 * Parses `text` as an identifier the gateway serves and returns its canonical base32 text (the store's key).
 * Refused, each with the rule in the message: not a CID, CIDv0, a codec other than raw, a hash other than sha2-256.
 */
export function parseContentId(text: string, field = "cid"): string {
  if (text.length === 0 || text.length > MAX_CONTENT_ID_CHARS) {
    throw new ValidationError(field, `must be a CID of 1 to ${MAX_CONTENT_ID_CHARS} characters, got ${text.length}`);
  }
  let cid: CID;
  try {
    cid = CID.parse(text);
  } catch (error) {
    throw new ValidationError(field, `is not a CID (${(error as Error).message})`, { value: text });
  }
  if (cid.version !== 1) throw new ValidationError(field, "must be a CIDv1 (CIDv0 names a dag-pb DAG, which this gateway does not serve)", { value: text, version: cid.version });
  if (cid.code !== raw.code) {
    throw new ValidationError(field, `must use the raw codec (0x${raw.code.toString(16)}), got 0x${cid.code.toString(16)}`, { value: text, codec: cid.code });
  }
  if (cid.multihash.code !== sha256.code || cid.multihash.size !== 32) {
    throw new ValidationError(field, `must hash with sha2-256 (0x${sha256.code.toString(16)}), got 0x${cid.multihash.code.toString(16)}`, { value: text, hash: cid.multihash.code });
  }
  return cid.toString();
}

/** Whether `bytes` are the content `contentId` names (a canonical id from parseContentId). */
export function isContentOf(contentId: string, bytes: Uint8Array): boolean {
  return contentIdOf(bytes) === contentId;
}

/**
 * The bytes an evidence-gateway URL (`…/ipfs/<cid>`) names, fetched within `maxBytes` and `timeoutMs`, refusing
 * redirects, and checked against the identifier: a gateway that serves other bytes is caught here, so what the
 * caller reads is exactly what the identifier commits to.
 */
export async function fetchContentById(url: string, maxBytes: number, timeoutMs: number): Promise<Uint8Array> {
  const parsed = new URL(url);
  const match = /\/ipfs\/([^/]+)$/.exec(parsed.pathname);
  if ((parsed.protocol !== "http:" && parsed.protocol !== "https:") || match === null) {
    throw new ValidationError("url", `must be an http(s) URL ending in /ipfs/<cid>, got ${url}`);
  }
  const contentId = parseContentId(decodeURIComponent(match[1]!), "url");
  const response = await fetch(parsed, { redirect: "error", signal: AbortSignal.timeout(timeoutMs) });
  if (response.status !== 200) throw new ValidationError("url", `${url} answered HTTP ${response.status}`, { status: response.status });
  const chunks: Uint8Array[] = [];
  let received = 0;
  for await (const chunk of response.body ?? []) {
    received += chunk.length;
    if (received > maxBytes) throw new ValidationError("url", `${url} sent more than ${maxBytes} bytes`, { maxBytes });
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  if (!isContentOf(contentId, bytes)) {
    throw new ValidationError("url", `the ${bytes.length} bytes ${url} sent are not the content ${contentId} (their identifier is ${contentIdOf(bytes)})`);
  }
  return bytes;
}
