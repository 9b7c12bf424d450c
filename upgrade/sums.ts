/**
 * SHA256SUMS for the agent (lib/sha256Sums.ts reads and writes the format): a malformed file is a "bad-checksum"
 * refusal. The agent never trusts it alone: the plan's approved bundle digest must match it too.
 */
import { ValidationError } from "../protocol/errors";
import { formatSums, parseSums as parseSumsText, SUMS_FILE } from "../lib/sha256Sums";
import { UpgradeRefusal } from "./errors";

export { formatSums, SUMS_FILE };

export function parseSums(text: string): Map<string, string> {
  try {
    return parseSumsText(text);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    throw new UpgradeRefusal("bad-checksum", error.message);
  }
}
