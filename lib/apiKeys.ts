/**
 * API keys as the settings loader stores them (the apiKeyList kind, lib/settings.ts) and the transports check them: only SHA-256 hashes are kept (the apiKeys setting loads keys as hashes),
 * and a presented key is compared against all of them in constant time.
 */
import { createHash, timingSafeEqual } from "node:crypto";

/** SHA-256 of an API key. The node never keeps the key itself in memory after loading. */
export type ApiKeyHash = Buffer;

/** SHA-256 of an API key as presented by a client. */
export function hashApiKey(apiKey: string): ApiKeyHash {
  return createHash("sha256").update(apiKey, "utf8").digest();
}

/**
 * Whether `presented` is one of the configured keys. Hashing first makes every comparison 32 bytes long, so
 * `timingSafeEqual` leaks neither the key nor its length; every configured hash is compared (no early exit).
 */
export function apiKeyMatches(hashes: readonly ApiKeyHash[], presented: string): boolean {
  const candidate = hashApiKey(presented);
  let matched = false;
  for (const hash of hashes) {
    if (timingSafeEqual(hash, candidate)) matched = true;
  }
  return matched;
}
