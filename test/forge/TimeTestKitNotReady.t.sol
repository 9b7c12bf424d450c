// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

// forge runs the functions named test_*: its naming, not mixedCase.
// solhint-disable func-name-mixedcase

import {TimeProof} from "../../contracts/interfaces/ITimeOracle.sol";
import {TimeTestKit} from "../../contracts/testing/TimeTestKit.sol";
import {TEST_CHEATS} from "./TestCheats.sol";

/// @notice Misuse before the kit is ready: no deployment yet (no quorum), or forge's clock not yet moved.
contract TimeTestKitNotReadyTest is TimeTestKit {
    function test_proofAtBeforeDeploymentReverts() public {
        TEST_CHEATS.expectRevert(abi.encodeWithSelector(TimeTestKitNotDeployed.selector));
        this.externalProofAt();
    }

    function test_expiredProofNeedsARealChainClock() public {
        deployAttestedTime(); // forge's clock still at block.timestamp 1
        TEST_CHEATS.expectRevert(
            abi.encodeWithSelector(TimeTestKitChainClockTooEarly.selector, 1e9, INVALID_PROOF_OFFSET_NS)
        );
        this.externalInvalidProof(InvalidProofKind.Expired);
    }

    /// @dev Through an external call, so that expectRevert sees the revert.
    function externalInvalidProof(InvalidProofKind kind) external view returns (TimeProof memory) {
        return invalidProof(kind);
    }

    /// @dev Through an external call, so that expectRevert sees the revert.
    function externalProofAt() external view returns (TimeProof memory) {
        return proofAt(1);
    }
}
