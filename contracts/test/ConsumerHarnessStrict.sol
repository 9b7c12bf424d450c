// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle} from "../interfaces/ITimeOracle.sol";
import {ConsumerHarness} from "./ConsumerHarness.sol";

/// @notice Test harness: a consumer with a stricter accuracy bound (the configurable variant).
contract ConsumerHarnessStrict is ConsumerHarness {
    constructor(ITimeOracle oracle) ConsumerHarness(oracle) {}

    function _maxAccuracyNs() internal pure override returns (uint32) {
        return 10;
    }
}
