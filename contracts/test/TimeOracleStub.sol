// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {TimeProof} from "../interfaces/ITimeOracle.sol";

/**
 * @notice Test stand-in for the oracle, as the scheduler sees it: `verifyTimeProof` (same selector as
 * `ITimeOracle.verifyTimeProof`) answers what the test set, whatever the proof. Nothing else of the oracle.
 */
contract TimeOracleStub {
    bool private _proofsValid = true;

    /// @notice Whether every proof verifies (true) or none does (false).
    function setProofsValid(bool valid) external {
        _proofsValid = valid;
    }

    function verifyTimeProof(TimeProof calldata) external view returns (bool) {
        return _proofsValid;
    }
}
