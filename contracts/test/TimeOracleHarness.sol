// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {TimeOracle} from "../TimeOracle.sol";

/**
 * @title TimeOracleHarness
 * @notice Test-only oracle whose chain clock can be pinned (as Uniswap v3's test pools override
 * `_blockTimestamp()`), so freshness edges are tested to the nanosecond without mining blocks.
 */
contract TimeOracleHarness is TimeOracle {
    uint256 private _pinnedNow;

    constructor(address admin) TimeOracle(admin) {}

    /// @notice Pins the clock to `nowSeconds`; 0 returns to `block.timestamp`.
    function setNow(uint256 nowSeconds) external {
        _pinnedNow = nowSeconds;
    }

    function _now() internal view override returns (uint256) {
        uint256 pinned = _pinnedNow;
        return pinned == 0 ? block.timestamp : pinned;
    }
}
