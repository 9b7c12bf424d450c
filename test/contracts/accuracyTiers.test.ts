/**
 * contracts/libraries/AccuracyTiers.sol and protocol/constants.ts's ACCURACY_TIERS name the same bounds: the
 * Solidity constants are read from the source, so that a tier changed on one side only fails here.
 */
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ACCURACY_TIERS, accuracyTierFor } from "../../protocol/constants";

describe("AccuracyTiers.sol mirrors ACCURACY_TIERS", () => {
  it("declares exactly the TypeScript tiers, with the same values", () => {
    const source = readFileSync(join(__dirname, "..", "..", "contracts", "libraries", "AccuracyTiers.sol"), "utf8");
    const declared = [...source.matchAll(/uint32 internal constant ([A-Z_]+) = ([\d_]+);/g)].map(([, name, value]) => ({ name, maxAccuracyNs: Number(value!.replaceAll("_", "")) }));
    expect(declared).to.deep.equal(ACCURACY_TIERS.map(({ name, maxAccuracyNs }) => ({ name, maxAccuracyNs })));
  });

  it("names the loosest tier a bound accepts, and none for a bound tighter than every tier", () => {
    expect(accuracyTierFor(99)).to.equal(undefined);
    expect(accuracyTierFor(100)?.name).to.equal("HARDWARE_TIMESTAMPED_NS");
    expect(accuracyTierFor(9_999_999)?.name).to.equal("HARDWARE_TIMESTAMPED_NS");
    expect(accuracyTierFor(10_000_000)?.name).to.equal("SOFTWARE_MESH_NS");
    expect(accuracyTierFor(4_000_000_000)?.name).to.equal("SOFTWARE_MESH_NS");
  });
});
