/**
 * SHA256SUMS in the format `sha256sum --check` reads: `<64 hex>  <file name>` per line, in name order. Written by
 * `npm run release`, read strictly (a malformed line refuses the whole file) by the upgrade agent and by the
 * downloads service's index (catalog/downloads.ts).
 */
import { ValidationError } from "../protocol/errors";

export const SUMS_FILE = "SHA256SUMS";
/** File names a release may list: no separators, so a name can never reach outside its release folder. */
export const RELEASE_FILE_NAME = /^[A-Za-z0-9._+-]{1,200}$/;

export function formatSums(digests: Readonly<Record<string, string>>): string {
  return Object.keys(digests)
    .sort()
    .map((name) => `${digests[name]}  ${name}\n`)
    .join("");
}

/** File name → lowercase hex SHA-256. Throws ValidationError (field `SHA256SUMS`) naming the bad line or name. */
export function parseSums(text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const [index, line] of text.split("\n").entries()) {
    if (line === "") continue;
    const match = /^([0-9a-f]{64}) [ *](.+)$/.exec(line);
    if (match === null || !RELEASE_FILE_NAME.test(match[2]!) || match[2] === "." || match[2] === "..") {
      throw new ValidationError(SUMS_FILE, `line ${index + 1} is not "<sha256>  <file>"`, { line: index + 1 });
    }
    if (sums.has(match[2]!)) throw new ValidationError(SUMS_FILE, `lists ${match[2]} twice`, { file: match[2]! });
    sums.set(match[2]!, match[1]!);
  }
  return sums;
}
