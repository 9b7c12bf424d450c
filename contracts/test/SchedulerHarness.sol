// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {TimeProof} from "../interfaces/ITimeOracle.sol";
import {TimeScheduler} from "../TimeScheduler.sol";

/**
 * @notice Test harness: {TimeScheduler} on its own, with proof validity and the chain clock under the test's
 * control, so the scheduler's rules are tested apart from the oracle's.
 */
contract SchedulerHarness is TimeScheduler {
    bool private _proofsValid = true;
    uint256 private _nowSeconds;

    /// @notice Whether every proof verifies (true) or none does (false).
    function setProofsValid(bool valid) external {
        _proofsValid = valid;
    }

    /// @notice Fixes the chain clock (seconds); 0 means `block.timestamp`.
    function setNow(uint256 nowSeconds) external {
        _nowSeconds = nowSeconds;
    }

    function _isValidTimeProof(TimeProof calldata) internal view override returns (bool) {
        return _proofsValid;
    }

    function _now() internal view override returns (uint256) {
        return _nowSeconds == 0 ? block.timestamp : _nowSeconds;
    }
}
