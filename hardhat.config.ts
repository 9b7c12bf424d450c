import type { HardhatUserConfig } from "hardhat/config";
import { subtask } from "hardhat/config";
import { TASK_COMPILE_SOLIDITY_GET_SOLC_BUILD } from "hardhat/builtin-tasks/task-names";
import "@nomicfoundation/hardhat-toolbox-viem";
import "hardhat-ignore-warnings";

// The compiler comes from the pinned npm `solc` package so that compiling never needs the internet.
const SOLC_VERSION = "0.8.30";
const SOLC_LONG_VERSION = "0.8.30+commit.73712a01";

subtask(TASK_COMPILE_SOLIDITY_GET_SOLC_BUILD).setAction(async (args: { solcVersion: string }) => {
  if (args.solcVersion !== SOLC_VERSION) {
    throw new Error(`only solc ${SOLC_VERSION} is bundled (npm package "solc"); asked for ${args.solcVersion}`);
  }
  return {
    compilerPath: require.resolve("solc/soljson.js"),
    isSolcJs: true,
    version: SOLC_VERSION,
    longVersion: SOLC_LONG_VERSION,
  };
});

/** Chain id of the in-process chain (and of `Hardhat node --hostname 127.0.0.1`); a second chain sets ATS_CHAIN_ID. */
const chainId = Number(process.env.ATS_CHAIN_ID ?? 31337);
/**
 * Set by scripts/chainProcess.ts for Hardhat node chains: automine puts every transaction in its own block, and
 * without this each block within the same second would move the chain clock one second ahead of the wall clock
 * (a burst of 100 transactions puts it 100 s ahead, and every fresh proof looks too old to the oracle).
 */
const sameTimestampBlocks = process.env.ATS_SAME_TIMESTAMP_BLOCKS === "1";

const config: HardhatUserConfig = {
  solidity: {
    version: SOLC_VERSION,
    settings: {
      optimizer: { enabled: true, runs: 10_000 },
      // Prague: PUSH0, MCOPY and transient storage; Hardhat runs Osaka, a superset.
      evmVersion: "prague",
    },
  },
  // Compiler warnings fail the build.
  warnings: { "*": { default: "error" } },
  networks: {
    hardhat: { chainId, allowBlocksWithSameTimestamp: sameTimestampBlocks },
  },
  paths: {
    // Separate build folders let parallel runs (tests, benchmarks) compile without racing each other.
    artifacts: process.env.ATS_ARTIFACTS ?? "./artifacts",
    cache: process.env.ATS_CACHE ?? "./cache",
  },
  mocha: {
    timeout: 120_000,
  },
};

export default config;
