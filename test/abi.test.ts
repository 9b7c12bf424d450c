/**
 * abi/index.ts (the package's `attested-time/abi`) is exactly what scripts/gen-abi.ts makes of the artifacts this
 * run compiled: a contract change without `npm run abi` fails here, not in a dApp that deployed stale bytecode.
 */
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import hre from "hardhat";
import { generatedAbiModule } from "../scripts/abiModule";
import { timeOracleAbi, timeOracleBytecode } from "../abi";

const ROOT = join(__dirname, "..");

describe("abi/index.ts: typed ABIs and bytecode for the package", () => {
  it("is what scripts/gen-abi.ts generates from the compiled artifacts (run `npm run abi` after a contract change)", () => {
    expect(readFileSync(join(ROOT, "abi", "index.ts"), "utf8") === generatedAbiModule(ROOT), "abi/index.ts is stale: npx hardhat compile && npm run abi").to.equal(true);
  });

  it("holds the oracle's ABI and bytecode as the Hardhat artifact has them", async () => {
    const artifact = await hre.artifacts.readArtifact("TimeOracle");
    expect(timeOracleAbi).to.deep.equal(artifact.abi);
    expect(timeOracleBytecode).to.equal(artifact.bytecode);
  });
});
