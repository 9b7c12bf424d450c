/**
 * The node's trust store: which cards and which node addresses its verify() accepts, in the shape
 * `verifyTimeProof` takes (protocol/verify.ts VerifyTimeProofContext: `resolveCard`, `isActiveNode`).
 *
 * - Cards: this node's own card (refused while its certificate chain does not lead to a configured trusted root,
 *   see checkOwnChain), and other cards whose chain was checked against the trusted roots (checkChain), kept for
 *   KNOWN_CHAIN_TTL_MS and at most KNOWN_CHAIN_LIMIT of them (oldest evicted first). Revoked card ids resolve with
 *   `revoked: true`, which verifyTimeProof refuses.
 * - Nodes: this node's address and the configured trustedNodeAddresses (a static set until the mesh exists).
 *
 * The mesh will feed it (peers' cards and addresses from the registry); the verify rules stay in protocol/.
 */
import { createHash } from "node:crypto";
import { verifyCardCertificateChain } from "../../protocol/certs";
import type { Address, CardRecord, Hex } from "../../protocol/types";

/** Remembered card chains: bounded, and re-checked after a while (certificates expire). */
export const KNOWN_CHAIN_LIMIT = 1_024;
export const KNOWN_CHAIN_TTL_MS = 10 * 60_000;

interface KnownCard {
  cardId: Hex;
  publicKey: Hex;
  checkedAtMs: number;
}

type ChainCheck = { ok: true; card: KnownCard } | { ok: false; detail: string };

/** Why a certificate chain given with a proof cannot vouch for it (verify()'s own reasons, docs/protocol.md §2). */
export interface ChainFailure {
  valid: false;
  reason: "certificate-chain-unchecked" | "certificate-chain-invalid";
  detail: string;
}

export interface TrustStoreOptions {
  /** This node's card. */
  ownCard: { cardId: Hex; publicKey: Hex; certificateChainPem: readonly string[] };
  /** This node's address (always an active node). */
  ownNodeAddress: Address;
  /** Other nodes whose entries count (config.trustedNodeAddresses). */
  trustedNodeAddresses: readonly string[];
  /** Cards refused even when known (config.revokedCardIds). */
  revokedCardIds: readonly string[];
  /** Roots card chains must lead to (config.trustedRootsPem); none = no chain is accepted. */
  trustedRootsPem: readonly string[];
  /** Wall clock, ms (certificate validity, TTL of checked chains). Default Date.now. */
  nowMs?: () => number;
}

function chainKey(chainPem: readonly string[]): string {
  const hash = createHash("sha256");
  for (const pem of chainPem) hash.update(pem.trim()).update("\n");
  return hash.digest("hex");
}

export class TrustStore {
  readonly #options: TrustStoreOptions;
  readonly #nowMs: () => number;
  readonly #ownCardId: Hex;
  readonly #revokedCardIds: Set<string>;
  readonly #activeNodes: Set<string>;
  readonly #knownChains = new Map<string, ChainCheck & { checkedAtMs: number }>();
  readonly #knownCards = new Map<string, KnownCard>();
  #ownChainProblem: string | null = null;

  constructor(options: TrustStoreOptions) {
    this.#options = options;
    this.#nowMs = options.nowMs ?? Date.now;
    this.#ownCardId = options.ownCard.cardId.toLowerCase() as Hex;
    this.#revokedCardIds = new Set(options.revokedCardIds.map((id) => id.toLowerCase()));
    this.#activeNodes = new Set<string>([
      options.ownNodeAddress.toLowerCase(),
      ...options.trustedNodeAddresses.map((a) => a.toLowerCase()),
    ]);
  }

  /** VerifyTimeProofContext.resolveCard (a stable function: no allocation per verify). */
  readonly resolveCard = (cardId: Hex): CardRecord | undefined => {
    const id = cardId.toLowerCase();
    const revoked = this.#revokedCardIds.has(id);
    if (id === this.#ownCardId) {
      return this.#ownChainProblem === null ? { publicKey: this.#options.ownCard.publicKey, revoked } : undefined;
    }
    const known = this.#knownCards.get(id);
    if (known === undefined || this.#nowMs() - known.checkedAtMs > KNOWN_CHAIN_TTL_MS) return undefined;
    return { publicKey: known.publicKey, revoked };
  };

  /** VerifyTimeProofContext.isActiveNode: this node and the trusted node addresses (any hex case). */
  readonly isActiveNode = (address: Address): boolean => this.#activeNodes.has(address.toLowerCase());

  /** Why this node's own card chain is not trusted, or null (checked by checkOwnChain; null before). */
  get ownChainProblem(): string | null {
    return this.#ownChainProblem;
  }

  /**
   * Checks this node's own card chain against the trusted roots (skipped when none are configured). Until it
   * passes, the own card resolves as unknown. Returns the problem, or null.
   */
  async checkOwnChain(): Promise<string | null> {
    if (this.#options.trustedRootsPem.length === 0) return this.#ownChainProblem;
    const { ownCard } = this.#options;
    const check = await this.#check(ownCard.certificateChainPem, ownCard.cardId);
    this.#ownChainProblem = check.ok ? null : check.detail;
    return this.#ownChainProblem;
  }

  /**
   * Checks a card chain against the trusted roots unless a verdict on it is still fresh, and remembers the
   * verdict (and the card, when the chain is good). Asynchronous: WebCrypto.
   */
  async checkChain(chainPem: readonly string[]): Promise<void> {
    const key = chainKey(chainPem);
    const known = this.#knownChains.get(key);
    if (known === undefined || this.#nowMs() - known.checkedAtMs > KNOWN_CHAIN_TTL_MS) {
      this.#remember(key, await this.#check(chainPem));
    }
  }

  /**
   * What verify() must refuse before running protocol rules, or undefined: a chain given with the proof that was
   * not checked yet (or whose verdict expired), failed, or certifies another card; or a proof from this node's
   * own card while its chain is not trusted. `proofCardId` is undefined for a proof whose card id is unreadable.
   */
  chainFailure(proofCardId: Hex | undefined, chainPem: readonly string[] | undefined): ChainFailure | undefined {
    if (chainPem !== undefined) {
      const known = this.#knownChains.get(chainKey(chainPem));
      if (known === undefined || this.#nowMs() - known.checkedAtMs > KNOWN_CHAIN_TTL_MS) {
        return {
          valid: false,
          reason: "certificate-chain-unchecked",
          detail: "this certificate chain has not been checked yet: use verifyWithCertificateChain()",
        };
      }
      if (!known.ok) return { valid: false, reason: "certificate-chain-invalid", detail: known.detail };
      if (proofCardId !== undefined && known.card.cardId.toLowerCase() !== proofCardId.toLowerCase()) {
        return {
          valid: false,
          reason: "certificate-chain-invalid",
          detail: `the chain certifies card ${known.card.cardId}, the proof is from ${proofCardId}`,
        };
      }
    }
    if (proofCardId?.toLowerCase() === this.#ownCardId && this.#ownChainProblem !== null) {
      return { valid: false, reason: "certificate-chain-invalid", detail: `this node's card chain: ${this.#ownChainProblem}` };
    }
    return undefined;
  }

  async #check(chainPem: readonly string[], expectedCardId?: Hex): Promise<ChainCheck> {
    if (this.#options.trustedRootsPem.length === 0) {
      return { ok: false, detail: "no trusted roots are configured (trustedRootsPem)" };
    }
    const result = await verifyCardCertificateChain({
      chainPem,
      trustedRootsPem: this.#options.trustedRootsPem,
      nowMs: this.#nowMs(),
      ...(expectedCardId === undefined ? {} : { cardId: expectedCardId }),
    });
    if (!result.valid) return { ok: false, detail: `${result.reason}: ${result.detail}` };
    return { ok: true, card: { cardId: result.cardId, publicKey: result.publicKey, checkedAtMs: this.#nowMs() } };
  }

  #remember(key: string, check: ChainCheck): void {
    const knownChains = this.#knownChains;
    const knownCards = this.#knownCards;
    if (knownChains.size >= KNOWN_CHAIN_LIMIT) {
      const oldest = knownChains.keys().next().value;
      if (oldest !== undefined) knownChains.delete(oldest);
    }
    knownChains.set(key, { ...check, checkedAtMs: this.#nowMs() });
    if (check.ok) {
      if (knownCards.size >= KNOWN_CHAIN_LIMIT && !knownCards.has(check.card.cardId.toLowerCase())) {
        const oldest = knownCards.keys().next().value;
        if (oldest !== undefined) knownCards.delete(oldest);
      }
      knownCards.set(check.card.cardId.toLowerCase(), check.card);
    }
  }
}
