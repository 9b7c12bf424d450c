/**
 * SHA256SUMS in the format `sha256sum --check` reads: `<64 hex>  <file name>` per line, in name order. The agent
 * parses it strictly (a malformed line refuses the file) and never trusts it alone: the plan's approved bundle
 * digest must match it too.
 */
import { SHA256_HEX } from "./digest";
import { UpgradeRefusal } from "./errors";

export const SUMS_FILE = "SHA256SUMS";

export function formatSums(digests: Readonly<Record<string, string>>): string {
  return Object.keys(digests)
    .sort()
    .map((name) => `${digests[name]}  ${name}\n`)
    .join("");
}

export function parseSums(text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const [index, line] of text.split("\n").entries()) {
    if (line === "") continue;
    const match = /^([0-9a-f]{64}) [ *]([A-Za-z0-9._+-]{1,200})$/.exec(line);
    if (match === null || !SHA256_HEX.test(match[1]!)) throw new UpgradeRefusal("bad-checksum", `${SUMS_FILE} line ${index + 1} is not "<sha256>  <file>"`, { line: index + 1 });
    if (sums.has(match[2]!)) throw new UpgradeRefusal("bad-checksum", `${SUMS_FILE} lists ${match[2]} twice`, { file: match[2]! });
    sums.set(match[2]!, match[1]!);
  }
  return sums;
}
