/**
 * What the core reads of the node's settings, by the settings table's names (node/config.ts owns the table, its
 * defaults and bounds; the core never imports it). node/compose.ts passes the loaded NodeConfig, which fits
 * structurally, plus the two bounds it derives from the card driver.
 */

export interface CoreSettings {
  /** docs/protocol.md §7.6: only a primary signs as a card. */
  readonly role: string;
  readonly tickIntervalNs: bigint;
  readonly maxAttestationAgeNs: bigint;
  readonly maxFutureDriftNs: bigint;
  readonly maxAcceptableDriftNs: bigint;
  readonly refreshAfterNs: bigint;
  /** "auto", "on" or "off" (attestor.ts signInWorker). */
  readonly signerThread: string;
  readonly nodeQuorum: number;
  readonly meshMaxProofAgeNs: bigint;
  readonly archiveIntervalNs: bigint;
  readonly archiveCapacity: number;
  readonly trustedNodeAddresses: readonly string[];
  readonly revokedCardIds: readonly string[];
  readonly trustedRootsPem: readonly string[];
}

/** The card-dependent bounds of the settings (node/config.ts advertisedAccuracyNs, signingErrorBoundNs). */
export interface SigningBounds {
  /** The accuracy the node advertises and signs at most, ns. */
  readonly accuracyNs: number;
  /** The measured error above which the attestor refuses to sign, ns. */
  readonly signingErrorBoundNs: number;
}
