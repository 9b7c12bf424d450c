/**
 * FIXED DEVELOPMENT KEYS. Public knowledge (they are in this repository): never register them on a chain
 * that matters. They make golden vectors, demos and tests reproducible, like Hardhat's well-known accounts.
 */
import type { Hex } from "./types";

/** Card P-256 scalar of the golden vectors. */
export const DEV_CARD_PRIVATE_KEY: Hex = "0x1b0baf96075236dcc25caeea1386cf4ca4dedbaf99d4c20ebed1fc909abdcdd4";

/** A second card (for "unknown card" cases). */
export const DEV_OTHER_CARD_PRIVATE_KEY: Hex = "0x1d70b0ef6c458d7c917592fe0737132d6792968376323514ffdf9c502feb75e9";

/** Three node secp256k1 scalars of the golden vectors. */
export const DEV_NODE_PRIVATE_KEYS: readonly [Hex, Hex, Hex] = [
  "0x74d6e1439a88cc7c3b6a3e5d5a212458bfbe75223b289f3a0e9d451a3a962a6a",
  "0xc51f235dd29ea10ef6141d522c8655a3bc01105b262de5f7f2ecfb890650854c",
  "0xc23b9b9fb0cda9ef1aba881aea7020dec71b329a5b3b5f03f595bade134828c7",
];
