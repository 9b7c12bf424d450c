/**
 * Authentication of callers.
 *
 * API keys — header `x-api-key` (REST and the WebSocket upgrade request), metadata `x-api-key` (gRPC). When the
 * node has at least one key configured, every attested-time route requires one: REST `/time/*`, the `/v1/stream`
 * upgrade and all `TimeRPC` methods. `/health`, `/node/info`, `/metrics` and the gRPC health service stay open so
 * that load balancers, monitoring and clients that look up the node's card chain need no secret. Keys are kept
 * only as SHA-256 digests (node/config.ts `apiKeys`; an entry `sha256:<64 hex>` is an already-hashed key) and a
 * presented key is compared against every stored digest in constant time (config.ts `apiKeyMatches`).
 *
 * Detail: docs/protocol.md §9.6.
 */
import { getAddress, isAddress, recoverMessageAddress, type Hex as ViemHex } from "viem";
import { AuthError, RateLimitError, ValidationError } from "../../protocol/errors";
import type { Address } from "../../protocol/types";
import { apiKeyMatches, hashApiKey, type ApiKeyHash } from "../../lib/apiKeys";
import { clientRequestMessage, type ClientRequestFields } from "../../wire/auth";

/*
 * Client signatures (gRPC `TimeRequest.client_signature`) — when the node has an address registered for the
 * request's `client_id` (setting `clientPublicKeys`), the request must carry a 65-byte secp256k1 signature,
 * EIP-191 `personal_sign` over the UTF-8 text of `clientRequestMessage()`:
 *     "ATS/1 REQ|<request_id>|<nonce>|<type>|<at_ns>|<client_id>|<issued_at_ms>"
 * (nonce is the decimal form of the uint64 TimeRequest.nonce, e.g. 42; type is the enum NAME, e.g. CURRENT_TIME,
 * also when the request left it at its default; at_ns is the decimal string or empty). A signed request needs a
 * non-zero nonce: proto3 cannot tell 0 from an absent nonce, so 0 is refused (a client that forgot its nonce
 * learns so at once, instead of "Nonce already used" from its second request on). The recovered address must
 * equal the registered one, and a (client_id, nonce) pair is accepted once: the nonce is remembered for as long
 * as issued_at_ms keeps the request fresh. At most `maxNoncesPerClient` live nonces per client; beyond that the
 * client is refused ("Rate limit exceeded") rather than a live nonce forgotten.
 *
 * Policy — by default (`requireClientSignature` false) a signature is enforced ONLY for registered client ids: a
 * request with an empty or unregistered `client_id` passes unsigned, so `client_id` alone proves nothing and the
 * API key stays the authentication of such callers. Registration binds an id to a key; it does not make signing
 * mandatory for the node. With `requireClientSignature` true, every GetCurrentTime must name a registered
 * `client_id` and carry its valid signature (UNAUTHENTICATED otherwise, saying what is missing). Only
 * GetCurrentTime carries a signature: StreamTime, VerifyTime and ScheduleAttestation rely on API keys either way.
 */
/** Header (REST, WS upgrade) and metadata key (gRPC) carrying the API key. */

export class ApiKeyAuth {
  /** SHA-256 digests of the configured keys (node/config.ts loads them hashed; the keys are not kept). */
  private readonly hashes: readonly ApiKeyHash[];

  constructor(hashes: readonly ApiKeyHash[]) {
    this.hashes = hashes;
  }

  /** True when keys are configured, i.e. the attested-time API requires one. */
  get required(): boolean {
    return this.hashes.length > 0;
  }

  /**
   * Checks a presented key (header / metadata value). Returns the client key for rate limiting
   * (`key:<first 16 hex of the key's SHA-256>`), or null when auth is off.
   * Throws AuthError when a key is required and missing or unknown.
   */
  authenticate(presented: string | undefined): string | null {
    if (!this.required) return null;
    if (presented === undefined || presented.length === 0) throw new AuthError("Missing API key (header x-api-key)");
    if (presented.length > 256 || !apiKeyMatches(this.hashes, presented)) throw new AuthError("Invalid API key");
    return `key:${hashApiKey(presented).subarray(0, 8).toString("hex")}`;
  }
}

/** Rate-limit key of an unauthenticated caller. */
export function clientKeyForIp(ip: string | undefined): string {
  return `ip:${ip ?? "unknown"}`;
}

export interface ClientSignatureOptions {
  /** client_id → EIP-55 or lowercase secp256k1 address. */
  clientAddresses: Readonly<Record<string, string>>;
  /** Replay window, ms (default 10 minutes): a request is fresh while issued_at_ms is within half of it of now. */
  nonceWindowMs?: number;
  /**
   * Most live nonces remembered per client (default 100,000; at the default 100 requests/s a client uses at most
   * 60,000 in a window). A client at the bound gets "Rate limit exceeded" until its oldest nonces expire: nonces
   * are never forgotten early, so a flood cannot make an earlier request replayable.
   */
  maxNoncesPerClient?: number;
  /**
   * true: every request must name a registered client and be signed (setting `requireClientSignature`).
   * false (default): only requests naming a registered client are checked; the others pass unsigned.
   */
  requireSignature?: boolean;
  nowMs?: () => number;
}

export class ClientSignatureVerifier {
  private readonly addresses = new Map<string, Address>();
  /** clientId → nonce → when it stops mattering (issued_at + half the window, ms), in arrival order. */
  private readonly liveNonces = new Map<string, Map<string, number>>();
  private readonly nonceWindowMs: number;
  private readonly maxNoncesPerClient: number;
  private readonly requireSignature: boolean;
  private readonly nowMs: () => number;

  constructor(options: ClientSignatureOptions) {
    for (const [clientId, address] of Object.entries(options.clientAddresses)) {
      if (!isAddress(address, { strict: false })) {
        throw new ValidationError(`clientPublicKeys.${clientId}`, "must be a 20-byte hex address");
      }
      this.addresses.set(clientId, getAddress(address));
    }
    this.nonceWindowMs = options.nonceWindowMs ?? 10 * 60_000;
    this.maxNoncesPerClient = options.maxNoncesPerClient ?? 100_000;
    this.requireSignature = options.requireSignature ?? false;
    this.nowMs = options.nowMs ?? (() => Date.now());
  }

  /** True when requests naming `clientId` must be signed: it has a registered key, or the node requires it. */
  requiresSignature(clientId: string): boolean {
    return this.requireSignature || this.addresses.has(clientId);
  }

  /**
   * Verifies the signature of a request from a registered client and consumes its nonce. Without
   * `requireSignature`, requests from clients without a registered key pass unchanged (the API key is their
   * authentication); with it, they are refused.
   */
  async check(fields: ClientRequestFields, signature: Uint8Array): Promise<void> {
    const expected = this.addresses.get(fields.clientId);
    if (expected === undefined) {
      if (!this.requireSignature) return;
      // The id is the caller's own input: it goes to the log evidence, not back into the message.
      throw new AuthError(
        fields.clientId === ""
          ? "Missing client_id: this node requires signed requests from a registered client (client_id + client_signature)"
          : "Unregistered client_id: this node requires signed requests from a registered client (client_id + client_signature)",
        { clientId: fields.clientId },
      );
    }
    if (signature.length === 0) throw new AuthError("Missing client_signature: client_id is registered, its requests must be signed");
    if (signature.length !== 65) throw new AuthError("client_signature must be 65 bytes (r ‖ s ‖ v)");
    if (fields.nonce.length === 0 || fields.nonce === "0") throw new AuthError("A signed request needs a non-zero nonce");
    this.checkIssuedAt(fields);
    let recovered: Address;
    try {
      recovered = await recoverMessageAddress({
        message: clientRequestMessage(fields),
        signature: `0x${Buffer.from(signature).toString("hex")}` as ViemHex,
      });
    } catch (cause) {
      throw new AuthError("Invalid client signature", { clientId: fields.clientId }, { cause });
    }
    if (recovered !== expected) throw new AuthError("Invalid client signature", { clientId: fields.clientId });
    this.consumeNonce(fields.clientId, fields.nonce, Number(fields.issuedAtMs));
  }

  /**
   * A signed request is fresh while issued_at_ms is within half the replay window of now, either way (client
   * clocks drift); its nonce is remembered until issued_at_ms leaves that window, so no accepted request can be
   * accepted again.
   */
  private checkIssuedAt(fields: ClientRequestFields): void {
    if (!/^[0-9]{1,16}$/.test(fields.issuedAtMs)) {
      throw new AuthError("A signed request needs issued_at_ms (decimal ms since the Unix epoch)", { clientId: fields.clientId });
    }
    const skewMs = Math.abs(this.nowMs() - Number(fields.issuedAtMs));
    if (skewMs > this.nonceWindowMs / 2) {
      throw new AuthError("Signed request outside the replay window", { clientId: fields.clientId, skewMs });
    }
  }

  private consumeNonce(clientId: string, nonce: string, issuedAtMs: number): void {
    const now = this.nowMs();
    let nonces = this.liveNonces.get(clientId);
    if (nonces === undefined) {
      nonces = new Map();
      this.liveNonces.set(clientId, nonces);
    }
    // Expired entries leave from the old end (arrival order ≈ expiry order; a straggler waits for the next pass).
    for (const [oldNonce, expiresAtMs] of nonces) {
      if (expiresAtMs >= now) break;
      nonces.delete(oldNonce);
    }
    const expiresAtMs = nonces.get(nonce);
    if (expiresAtMs !== undefined && expiresAtMs >= now) throw new AuthError("Nonce already used", { clientId });
    // Fail closed: forgetting a live nonce to make room would let its request be replayed.
    if (nonces.size >= this.maxNoncesPerClient) throw new RateLimitError({ clientId, liveNonces: nonces.size });
    nonces.set(nonce, issuedAtMs + this.nonceWindowMs / 2);
  }
}
