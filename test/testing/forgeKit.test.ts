/**
 * The Solidity test kit (contracts/testing/TimeTestKit.sol) against the TypeScript one (testing/index.ts): the same
 * default accuracy and keys, and the same proof bytes. The TypeScript kit's proofs are rebuilt and compared with
 * test/vectors/test-kit-v1.json; then forge (the npm @foundry-rs/forge, offline through scripts/solcWrapper.js) runs
 * test/forge/, whose vector test rebuilds every proof of that file with the Solidity kit and compares, and whose kit
 * test checks the oracle accepts and refuses what the kit says.
 */
import { expect } from "chai";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LOCAL_MESH_ACCURACY_NS } from "../../protocol/constants";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS, DEV_OTHER_CARD_PRIVATE_KEY } from "../../protocol/devkeys";
import { TEST_KIT_VECTORS_FILE_NAME } from "../vectors/testKitVectors";

const ROOT = join(__dirname, "..", "..");
const KIT_SOURCE = readFileSync(join(ROOT, "contracts", "testing", "TimeTestKit.sol"), "utf8");

/** The value of `uintN internal constant NAME = value;` in the kit's source (underscores dropped). */
function solidityConstant(name: string): bigint {
  const match = new RegExp(`uint\\d+ internal constant ${name} =\\s*([0-9a-fx_]+);`).exec(KIT_SOURCE);
  if (match === null) throw new Error(`TimeTestKit.sol declares no constant ${name}`);
  return BigInt(match[1]!.replaceAll("_", ""));
}

describe("testing: the Solidity kit (TimeTestKit.sol) matches the TypeScript kit", function () {
  this.timeout(180_000);

  it("signs the same default accuracy, LOCAL_MESH_ACCURACY_NS of protocol/constants.ts", () => {
    expect(solidityConstant("LOCAL_MESH_ACCURACY_NS")).to.equal(BigInt(LOCAL_MESH_ACCURACY_NS));
  });

  it("holds the development keys of protocol/devkeys.ts", () => {
    expect(solidityConstant("DEV_CARD_PRIVATE_KEY")).to.equal(BigInt(DEV_CARD_PRIVATE_KEY));
    expect(solidityConstant("DEV_OTHER_CARD_PRIVATE_KEY")).to.equal(BigInt(DEV_OTHER_CARD_PRIVATE_KEY));
    DEV_NODE_PRIVATE_KEYS.forEach((key, index) => expect(solidityConstant(`DEV_NODE_${index}_PRIVATE_KEY`), `node ${index}`).to.equal(BigInt(key)));
    expect(solidityConstant("DEV_NODE_COUNT")).to.equal(BigInt(DEV_NODE_PRIVATE_KEYS.length));
  });

  it("the TypeScript kit still signs the committed vectors (npx hardhat run test/vectors/write-test-kit-vectors.ts)", () => {
    // In a process of its own: the vectors need a chain whose clock has not passed 2033, which this suite's chain
    // (shared by every test file before this one) cannot promise.
    const out = join(mkdtempSync(join(tmpdir(), "ats-kit-vectors-")), TEST_KIT_VECTORS_FILE_NAME);
    try {
      execFileSync(join(ROOT, "node_modules", ".bin", "hardhat"), ["run", "--no-compile", "test/vectors/write-test-kit-vectors.ts"], {
        cwd: ROOT,
        env: { ...process.env, ATS_TEST_KIT_VECTORS_OUT: out },
        stdio: ["ignore", "pipe", "pipe"],
      });
      expect(readFileSync(out, "utf8")).to.equal(readFileSync(join(ROOT, "test", "vectors", TEST_KIT_VECTORS_FILE_NAME), "utf8"));
    } finally {
      rmSync(join(out, ".."), { recursive: true, force: true });
    }
  });

  it("forge: the Solidity kit signs the vectors' bytes, and the oracle accepts and refuses what it should", () => {
    const build = mkdtempSync(join(tmpdir(), "ats-forge-kit-"));
    try {
      const env = { ...process.env, FOUNDRY_OUT: join(build, "out"), FOUNDRY_CACHE_PATH: join(build, "cache") };
      let output: string;
      try {
        output = execFileSync(join(ROOT, "node_modules", ".bin", "forge"), ["test", "--offline", "--use", join(ROOT, "scripts", "solcWrapper.js")], { cwd: ROOT, env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
      } catch (error) {
        const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
        throw new Error(`forge test failed:\n${stdout.slice(-6_000)}\n${stderr.slice(-2_000)}`, { cause: error });
      }
      expect(output).to.match(/9 tests passed, 0 failed/);
    } finally {
      rmSync(build, { recursive: true, force: true });
    }
  });
});
