/**
 * Writes test/vectors/test-kit-v1.json (testKitVectors.ts): `npx hardhat run test/vectors/write-test-kit-vectors.ts`.
 * ATS_TEST_KIT_VECTORS_OUT names another file (test/testing/forgeKit.test.ts compares a fresh chain's output so).
 */
import hre from "hardhat";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { TEST_KIT_VECTORS_FILE_NAME, testKitVectorsText } from "./testKitVectors";

async function main(): Promise<void> {
  const path = process.env.ATS_TEST_KIT_VECTORS_OUT ?? join(__dirname, TEST_KIT_VECTORS_FILE_NAME);
  writeFileSync(path, await testKitVectorsText(hre));
  process.stdout.write(`wrote ${path}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
