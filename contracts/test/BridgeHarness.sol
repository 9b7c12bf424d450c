// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle} from "../interfaces/ITimeOracle.sol";
import {TimeBridge} from "../TimeBridge.sol";

/// @notice Test harness: {TimeBridge} with its chain clock under the test's control (as TimeOracleHarness pins the
/// oracle's), so the bridge and a pinned oracle read the same clock.
contract BridgeHarness is TimeBridge {
    uint256 private _nowSeconds;

    constructor(ITimeOracle oracle) TimeBridge(oracle) {}

    /// @notice Fixes the chain clock (seconds); 0 means `block.timestamp`.
    function setNow(uint256 nowSeconds) external {
        _nowSeconds = nowSeconds;
    }

    function _now() internal view override returns (uint256) {
        return _nowSeconds == 0 ? block.timestamp : _nowSeconds;
    }
}
