// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle} from "../interfaces/ITimeOracle.sol";
import {TimeScheduler} from "../TimeScheduler.sol";

/**
 * @notice Test harness: {TimeScheduler} with its chain clock under the test's control (as TimeOracleHarness pins
 * the oracle's). Paired with {TimeOracleStub}, whose answer the test sets, the scheduler's rules are tested apart
 * from the oracle's; paired with a real oracle, end to end.
 */
contract SchedulerHarness is TimeScheduler {
    uint256 private _nowSeconds;

    constructor(ITimeOracle oracle) TimeScheduler(oracle) {}

    /// @notice Fixes the chain clock (seconds); 0 means `block.timestamp`.
    function setNow(uint256 nowSeconds) external {
        _nowSeconds = nowSeconds;
    }

    function _now() internal view override returns (uint256) {
        return _nowSeconds == 0 ? block.timestamp : _nowSeconds;
    }
}
