import type { HardhatUserConfig } from "hardhat/config";
import { subtask } from "hardhat/config";
import { TASK_COMPILE_SOLIDITY_GET_SOLC_BUILD } from "hardhat/builtin-tasks/task-names";
import "@nomicfoundation/hardhat-toolbox-viem";

// The compiler comes from the npm `solc` package (a dev dependency), so compiling needs no download. Any 0.8.x
// from 0.8.24 compiles attested-time's TimeConsumer and interfaces; remove this block to let Hardhat fetch one.
const SOLC_VERSION = "0.8.30";
subtask(TASK_COMPILE_SOLIDITY_GET_SOLC_BUILD).setAction(async () => ({
  compilerPath: require.resolve("solc/soljson.js"),
  isSolcJs: true,
  version: SOLC_VERSION,
  longVersion: "0.8.30+commit.73712a01",
}));

const config: HardhatUserConfig = {
  solidity: { version: SOLC_VERSION, settings: { optimizer: { enabled: true, runs: 200 }, evmVersion: "prague" } },
};

export default config;
