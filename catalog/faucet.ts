/**
 * The faucet: test funds for an address whose holder proves control of it by signing an EIP-4361 (Sign-In with
 * Ethereum) message, parsed with viem. The message must name this faucet's domain, URI and chain id, carry a nonce
 * this faucet issued and has not seen used, expire within the nonce's lifetime, and state FAUCET_STATEMENT, so the
 * signer reads what they sign: a proof of control that authorizes no transaction and no fee.
 *
 * Refusals, each with its own error: a message off its shape or for another domain, URI or chain (400), a nonce
 * not issued here, already used or expired, an expired message and a signature that does not prove control (401),
 * an address funded within `addressIntervalMs` and a client over `claimsPerClientPerHour` (429, Retry-After).
 *
 * Order (checks, effects, interaction): every check runs first; the nonce is reserved synchronously before the
 * signature check awaits, so two requests cannot spend one nonce; the address's grant is recorded before the
 * transfer is sent and withdrawn if the transfer fails (the nonce stays spent). Memory is bounded: outstanding
 * nonces (maxOutstandingNonces, expired ones swept) and remembered grants (the same bound, swept after their interval).
 */
import { randomBytes } from "node:crypto";
import { getAddress, isAddress, isHex, parseSignature, type Address, type Hex } from "viem";
import { parseSiweMessage } from "viem/siwe";
import { AuthError, RateLimitError, UnavailableError, ValidationError } from "../protocol/errors";
import { RateLimiter } from "../lib/rateLimit";

export const FAUCET_STATEMENT = "Prove control of this address to receive test funds. This signature authorizes no transaction and no fee.";
/** Longest message accepted, characters (a SIWE message with no resources is well under 1 kB). */
export const MAX_SIWE_MESSAGE_CHARS = 4_096;
/** secp256k1's n / 2: a 65-byte signature with a larger s is malleable and refused. */
const SECP256K1_HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

export interface FaucetOptions {
  chainId: number;
  /** The RFC 3986 authority the message must name (host:port of the faucet's page or API). */
  domain: string;
  /** The URI the message must name. */
  uri: string;
  amountWei: bigint;
  /** One grant per address per this long, ms. */
  addressIntervalMs: number;
  claimsPerClientPerHour: number;
  nonceTtlMs: number;
  maxOutstandingNonces: number;
  /** Checks `signature` over `message` for `address` (viem's verifyMessage: an EOA, or ERC-1271 for a contract). */
  verifySignature(address: Address, message: string, signature: Hex): Promise<boolean>;
  /** Sends `valueWei` to `to`; resolves with the transaction hash. */
  send(to: Address, valueWei: bigint): Promise<Hex>;
  nowMs?: () => number;
}

export interface FaucetTerms {
  chainId: number;
  domain: string;
  uri: string;
  statement: string;
  amountWei: string;
  addressIntervalMs: number;
}

export interface IssuedNonce extends FaucetTerms {
  nonce: string;
  /** ISO 8601: the message must expire no later than this. */
  expiresAt: string;
}

export interface Grant {
  address: Address;
  amountWei: string;
  txHash: Hex;
}

type NonceState = { state: "issued" | "pending" | "used"; expiresAtMs: number };
type SignedFields = { address: Address; nonce: string; expirationTime: Date; notBefore: Date | undefined };

export class Faucet {
  readonly #options: FaucetOptions;
  readonly #nowMs: () => number;
  readonly #nonces = new Map<string, NonceState>();
  /** Address (checksummed) → when it was last funded, ms. */
  readonly #grants = new Map<Address, number>();
  readonly #clients: RateLimiter;

  constructor(options: FaucetOptions) {
    this.#options = options;
    this.#nowMs = options.nowMs ?? Date.now;
    this.#clients = new RateLimiter({ ratePerSecond: options.claimsPerClientPerHour / 3600, burst: options.claimsPerClientPerHour, maxClients: options.maxOutstandingNonces });
  }

  terms(): FaucetTerms {
    const { chainId, domain, uri, amountWei, addressIntervalMs } = this.#options;
    return { chainId, domain, uri, statement: FAUCET_STATEMENT, amountWei: amountWei.toString(), addressIntervalMs };
  }

  /** A fresh nonce for `clientKey` (the caller's address or key), counted against its claims. */
  issueNonce(clientKey: string): IssuedNonce {
    this.#takeClientToken(clientKey);
    const nowMs = this.#nowMs();
    this.#sweep(nowMs);
    if (this.#nonces.size >= this.#options.maxOutstandingNonces) {
      throw new UnavailableError(`the faucet holds ${this.#nonces.size} outstanding nonces, its bound; try again when some expire`, { outstanding: this.#nonces.size });
    }
    const nonce = randomBytes(16).toString("hex");
    const expiresAtMs = nowMs + this.#options.nonceTtlMs;
    this.#nonces.set(nonce, { state: "issued", expiresAtMs });
    return { ...this.terms(), nonce, expiresAt: new Date(expiresAtMs).toISOString() };
  }

  /** Funds the address `message` names when every rule of the module comment holds; throws the first that breaks. */
  async claim(clientKey: string, message: string, signature: string): Promise<Grant> {
    this.#takeClientToken(clientKey);
    if (message.length > MAX_SIWE_MESSAGE_CHARS) throw new ValidationError("message", `is ${message.length} characters, over ${MAX_SIWE_MESSAGE_CHARS}`);
    const signed = this.#checkMessage(message);
    const checkedSignature = checkSignatureShape(signature);
    const nonce = this.#reserveNonce(signed);
    let proven: boolean;
    try {
      proven = await this.#options.verifySignature(signed.address, message, checkedSignature);
    } catch (error) {
      nonce.state = "issued";
      throw new UnavailableError("the signature could not be checked (the chain did not answer)", { address: signed.address }, { cause: error });
    }
    if (!proven) {
      nonce.state = "issued"; // a forged claim does not burn the holder's nonce
      throw new AuthError(`the signature does not prove control of ${signed.address}`, { address: signed.address });
    }
    nonce.state = "used";
    const nowMs = this.#nowMs();
    const fundedAtMs = this.#grants.get(signed.address);
    if (fundedAtMs !== undefined && nowMs - fundedAtMs < this.#options.addressIntervalMs) {
      const retryAfterMs = fundedAtMs + this.#options.addressIntervalMs - nowMs;
      throw new RateLimitError({ address: signed.address, retryAfterMs }, { message: `${signed.address} was funded ${Math.round((nowMs - fundedAtMs) / 1000)} s ago; one grant per ${this.#options.addressIntervalMs / 1000} s` });
    }
    this.#rememberGrant(signed.address, nowMs);
    try {
      const txHash = await this.#options.send(signed.address, this.#options.amountWei);
      return { address: signed.address, amountWei: this.#options.amountWei.toString(), txHash };
    } catch (error) {
      this.#grants.delete(signed.address);
      throw new UnavailableError("the transfer could not be sent; sign in again with a new nonce", { address: signed.address }, { cause: error });
    }
  }

  #takeClientToken(clientKey: string): void {
    if (!this.#clients.tryTake(clientKey)) {
      throw new RateLimitError({ retryAfterMs: Math.ceil(3_600_000 / this.#options.claimsPerClientPerHour) }, { message: `over ${this.#options.claimsPerClientPerHour} faucet requests per hour from this client` });
    }
  }

  /** The message's fields this faucet relies on, checked; throws the first rule broken. */
  #checkMessage(message: string): SignedFields {
    const fields = parseSiweMessage(message);
    const { address, chainId, domain, uri, nonce, version, statement, expirationTime, notBefore } = fields;
    if (version !== "1" || address === undefined || !isAddress(address, { strict: false }) || nonce === undefined || uri === undefined || domain === undefined || chainId === undefined) {
      throw new ValidationError("message", "is not an EIP-4361 message (version 1 with domain, address, URI, chain id and nonce)");
    }
    const options = this.#options;
    if (domain !== options.domain) throw new ValidationError("message.domain", `must be this faucet's ${options.domain}, got ${domain}`, { domain });
    if (uri !== options.uri) throw new ValidationError("message.uri", `must be ${options.uri}, got ${uri}`, { uri });
    if (chainId !== options.chainId) throw new ValidationError("message.chainId", `this faucet funds chain ${options.chainId}; the message names chain ${chainId}`, { chainId });
    if (statement !== FAUCET_STATEMENT) throw new ValidationError("message.statement", `must be exactly "${FAUCET_STATEMENT}"`);
    if (expirationTime === undefined) throw new ValidationError("message.expirationTime", "is required (at most the nonce's expiresAt)");
    return { address: getAddress(address), nonce, expirationTime, notBefore };
  }

  /** Marks the nonce pending (synchronously: no other claim can take it meanwhile); throws if it cannot be spent. */
  #reserveNonce({ nonce, expirationTime, notBefore }: SignedFields): NonceState {
    const held = this.#nonces.get(nonce);
    const nowMs = this.#nowMs();
    if (held === undefined) throw new AuthError("the nonce was not issued by this faucet (or expired long ago): ask for a new one", { nonce });
    if (held.state !== "issued") throw new AuthError("the nonce was already used: a signed message funds once", { nonce });
    if (held.expiresAtMs <= nowMs) throw new AuthError(`the nonce expired at ${new Date(held.expiresAtMs).toISOString()}: ask for a new one`, { nonce });
    if (expirationTime.getTime() > held.expiresAtMs) {
      throw new ValidationError("message.expirationTime", `must be no later than the nonce's expiry ${new Date(held.expiresAtMs).toISOString()}`);
    }
    if (expirationTime.getTime() <= nowMs) throw new AuthError(`the message expired at ${expirationTime.toISOString()}`, { expirationTime: expirationTime.toISOString() });
    if (notBefore !== undefined && notBefore.getTime() > nowMs) throw new AuthError(`the message is not valid before ${notBefore.toISOString()}`);
    held.state = "pending";
    return held;
  }

  #rememberGrant(address: Address, nowMs: number): void {
    if (this.#grants.size >= this.#options.maxOutstandingNonces) {
      for (const [known, fundedAtMs] of this.#grants) if (nowMs - fundedAtMs >= this.#options.addressIntervalMs) this.#grants.delete(known);
    }
    if (this.#grants.size >= this.#options.maxOutstandingNonces) {
      throw new UnavailableError("the faucet remembers as many recent grants as it may; try again later", { grants: this.#grants.size });
    }
    this.#grants.set(address, nowMs);
  }

  /** Forgets nonces past their expiry (used ones too: an expired nonce is refused as unknown). */
  #sweep(nowMs: number): void {
    for (const [nonce, held] of this.#nonces) if (held.expiresAtMs <= nowMs && held.state !== "pending") this.#nonces.delete(nonce);
  }
}

/** A hex signature; a 65-byte one must be low-S (a malleable twin of a valid signature is not a second proof). */
function checkSignatureShape(signature: string): Hex {
  if (!isHex(signature, { strict: true }) || signature.length < 132 || signature.length > 2 + 2 * 4096) {
    throw new ValidationError("signature", "must be a 0x-prefixed hex signature of at least 65 bytes");
  }
  if (signature.length === 132 && BigInt(parseSignature(signature).s) > SECP256K1_HALF_N) {
    throw new ValidationError("signature", "has a high s value: use the low-S form (EIP-2)");
  }
  return signature;
}
