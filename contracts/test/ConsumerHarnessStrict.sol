// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle} from "../interfaces/ITimeOracle.sol";
import {ConsumerHarness} from "./ConsumerHarness.sol";

/// @notice Test harness: a consumer that overrides the bound hook (10 ns), whatever its constructor was given.
contract ConsumerHarnessStrict is ConsumerHarness {
    constructor(ITimeOracle oracle) ConsumerHarness(oracle, 1_000) {}

    function _maxAccuracyNs() internal pure override returns (uint32) {
        return 10;
    }
}
