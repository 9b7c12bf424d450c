// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

// forge runs the functions named test_*: its naming, not mixedCase.
// solhint-disable func-name-mixedcase

import {TimeProof} from "../../contracts/interfaces/ITimeOracle.sol";
import {TimeTestKit} from "../../contracts/testing/TimeTestKit.sol";
import {TEST_CHEATS} from "./TestCheats.sol";

/// @notice Before {TimeTestKit-deployAttestedTime} the kit knows no quorum: the one-argument proofAt says so.
contract TimeTestKitUndeployedTest is TimeTestKit {
    function test_proofAtBeforeDeploymentReverts() public {
        TEST_CHEATS.expectRevert(abi.encodeWithSelector(TimeTestKitNotDeployed.selector));
        this.externalProofAt();
    }

    /// @dev Through an external call, so that expectRevert sees the revert.
    function externalProofAt() external view returns (TimeProof memory) {
        return proofAt(1);
    }
}
