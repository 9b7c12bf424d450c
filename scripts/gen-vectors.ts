/**
 * Writes the golden vectors of protocol v1 to test/vectors/protocol-v1.json (format documented at the top of
 * test/vectors/build-vectors.ts, which builds them). Deterministic: rerunning without code changes rewrites
 * the same bytes, so `git diff` shows only real changes.
 *
 *   npx hardhat run --no-compile scripts/gen-vectors.ts     or     npx ts-node scripts/gen-vectors.ts
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { VECTORS_FILE_NAME, vectorsText } from "../test/vectors/build-vectors";

function main(): void {
  const path = join(__dirname, "..", "test", "vectors", VECTORS_FILE_NAME);
  const text = vectorsText();
  writeFileSync(path, text);
  const cases = (JSON.parse(text) as { verification: { cases: unknown[] } }).verification.cases.length;
  process.stdout.write(`wrote ${path} (${text.length} bytes, ${cases} verification cases)\n`);
}

main();
