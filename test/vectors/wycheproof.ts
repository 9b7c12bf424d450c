/**
 * Google's Wycheproof ECDSA P-256 / SHA-256 / IEEE P1363 vectors, read once for the TypeScript and the contract
 * tests so both sides see identical inputs, with the protocol's verdict for each (docs/protocol.md §3).
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { P256_HALF_N } from "../../protocol";

export interface WycheproofTest {
  tcId: number;
  comment: string;
  /** Hex, no 0x. */
  msg: string;
  /** P1363 r ‖ s, hex, no 0x (not always 64 bytes: malformed sizes are part of the suite). */
  sig: string;
  result: "valid" | "invalid" | "acceptable";
  flags: string[];
}

export interface WycheproofGroup {
  key: { uncompressed: string; wx: string; wy: string; curve: string };
  sha: string;
  type: string;
  tests: WycheproofTest[];
}

export interface WycheproofFile {
  algorithm: string;
  numberOfTests: number;
  testGroups: WycheproofGroup[];
}

const FILE_NAME = "ecdsa_secp256r1_sha256_p1363_test.json";

/** The repository's copy, test/vectors/wycheproof/ (nothing outside the repository is read). */
export function loadWycheproofP256(): WycheproofFile {
  const file = resolve(__dirname, "wycheproof", FILE_NAME);
  if (!existsSync(file)) throw new Error(`Wycheproof vectors not found: test/vectors/wycheproof/${FILE_NAME}`);
  return JSON.parse(readFileSync(file, "utf8")) as WycheproofFile;
}

/** The protocol accepts exactly what Wycheproof calls "valid", as a 64-byte r ‖ s, with s ≤ n/2 (low-S). */
export function protocolAccepts(test: WycheproofTest): boolean {
  return test.result === "valid" && test.sig.length === 128 && BigInt(`0x${test.sig.slice(64)}`) <= P256_HALF_N;
}
