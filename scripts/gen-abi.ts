/**
 * Writes abi/index.ts from the compiled artifacts (`npm run abi`, after `npx hardhat compile`): each contract's ABI
 * `as const` (typed for viem) and, for the deployable ones, its creation bytecode. The package ships it
 * (`attested-time/abi`), so that a dApp types its calls without compiling our contracts, and the test kit deploys
 * from it in the user's project. test/abi.test.ts fails when it differs from the artifacts.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { generatedAbiModule } from "./abiModule";

const ROOT = join(__dirname, "..");
writeFileSync(join(ROOT, "abi", "index.ts"), generatedAbiModule(ROOT));
console.log("abi/index.ts written");
