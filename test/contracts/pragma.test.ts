/**
 * What a dApp imports from the package (TimeConsumer and the interfaces) compiles with an older compiler than
 * ours: solc 0.8.24 (the npm `solc` package, pinned as the dev dependency `solc-0.8.24`; nothing is downloaded),
 * together with a small consumer written the way docs/solidity.md shows. Our deployables stay pinned to 0.8.30.
 */
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..");
/** The files a dApp imports: each with a floating pragma. */
const IMPORTED = ["TimeConsumer.sol", "libraries/AccuracyTiers.sol", "interfaces/ITimeOracle.sol", "interfaces/ITimeConsumer.sol", "interfaces/ITimeScheduler.sol", "interfaces/ITimeBridge.sol"];

const USER_CONTRACT = `// SPDX-License-Identifier: MIT
pragma solidity 0.8.24;

import {TimeConsumer} from "attested-time/contracts/TimeConsumer.sol";
import {ITimeOracle, TimeProof} from "attested-time/contracts/interfaces/ITimeOracle.sol";
import {AccuracyTiers} from "attested-time/contracts/libraries/AccuracyTiers.sol";

contract Auction is TimeConsumer {
    uint128 public immutable biddingEnd;
    mapping(address bidder => uint256 amount) public bids;

    constructor(ITimeOracle oracle, uint128 end) TimeConsumer(oracle, AccuracyTiers.SOFTWARE_MESH_NS) {
        biddingEnd = end;
    }

    function bid(TimeProof calldata proof) external payable onlyBefore(proof, bytes32(uint256(uint160(msg.sender))), biddingEnd) {
        bids[msg.sender] += msg.value;
    }
}
`;

interface SolcOutput {
  errors?: { severity: string; formattedMessage: string }[];
  contracts?: Record<string, Record<string, { evm: { bytecode: { object: string } } }>>;
}

describe("contracts a dApp imports compile with solc 0.8.24 (floating pragma)", function () {
  this.timeout(120_000);

  it("each imported file declares ^0.8.24", () => {
    for (const file of IMPORTED) {
      expect(readFileSync(join(ROOT, "contracts", file), "utf8"), file).to.match(/\npragma solidity \^0\.8\.24;\n/);
    }
  });

  it("compiles TimeConsumer, the interfaces and a consumer importing them by package path, without errors", () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the npm solc package is CommonJS with no types
    const solc = require("solc-0.8.24") as { version(): string; compile(input: string): string };
    expect(solc.version()).to.match(/^0\.8\.24\+/);
    const sources: Record<string, { content: string }> = { "Auction.sol": { content: USER_CONTRACT } };
    for (const file of IMPORTED) sources[`attested-time/contracts/${file}`] = { content: readFileSync(join(ROOT, "contracts", file), "utf8") };
    const input = { language: "Solidity", sources, settings: { evmVersion: "cancun", outputSelection: { "Auction.sol": { Auction: ["evm.bytecode.object"] } } } };
    const output = JSON.parse(solc.compile(JSON.stringify(input))) as SolcOutput;
    const errors = (output.errors ?? []).filter((error) => error.severity === "error").map((error) => error.formattedMessage);
    expect(errors).to.deep.equal([]);
    expect(output.contracts?.["Auction.sol"]?.["Auction"]?.evm.bytecode.object).to.match(/^[0-9a-f]{200,}$/);
  });
});
