// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

// forge runs the functions named test_*: its naming, not mixedCase.
// solhint-disable func-name-mixedcase

import {TimeProof} from "attested-time/contracts/interfaces/ITimeOracle.sol";
import {TimeTestKit} from "attested-time/contracts/testing/TimeTestKit.sol";

/**
 * @notice What verifying a proof costs, for `forge test --gas-report --match-contract VerifyGasTest` (`npm run gas`):
 * one proof with one node entry verified twice in one transaction, so the report's max is the cold call (oracle and
 * snapshot accounts, storage cold) and its min the warm one. The package's `npm run bench:gas` measures the same.
 */
contract VerifyGasTest is TimeTestKit {
    uint128 private constant _MOMENT_NS = 1_767_225_600_123_456_789;

    /// @notice The oracle refused the kit's proof.
    error ProofRefused(uint128 nanoMoment);

    function setUp() public {
        deployAttestedTime();
        warpTo(_MOMENT_NS);
    }

    function test_verifyOneNodeEntry_coldThenWarm() public view {
        TimeProof memory proof = proofAt(_MOMENT_NS);
        for (uint256 i = 0; i < 2; ++i) {
            require(timeOracle.verifyTimeProof(proof), ProofRefused(proof.nanoMoment));
        }
    }
}
