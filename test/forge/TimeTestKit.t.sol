// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

// forge runs the functions named test_*: its naming, not mixedCase.
// solhint-disable func-name-mixedcase

import {TimeProof} from "../../contracts/interfaces/ITimeOracle.sol";
import {TimeTestKit} from "../../contracts/testing/TimeTestKit.sol";
import {AccuracyTiers} from "../../contracts/libraries/AccuracyTiers.sol";
import {TEST_CHEATS} from "./TestCheats.sol";

/**
 * @notice What the kit promises, checked against the oracle it deploys: its proofs verify once {warpTo} makes them
 * fresh, each invalid proof is refused, the deployment matches the local network's, misuse reverts with evidence.
 */
contract TimeTestKitTest is TimeTestKit {
    uint128 private constant _MOMENT_NS = 1_767_225_600_123_456_789;

    /// @notice `verifyTimeProof` answered `actual` where the test expected otherwise.
    error UnexpectedVerdict(string what, bool actual);
    /// @notice A value differs from the expected one.
    error UnexpectedValue(string what, uint256 expected, uint256 actual);

    function setUp() public {
        deployAttestedTime(2, true, true);
    }

    function test_deploysAsTheLocalNetwork() public view {
        _assertEq("nodeQuorum", 2, timeOracle.nodeQuorum());
        _assertEq("maxAcceptableDrift", AccuracyTiers.SOFTWARE_MESH_NS, timeOracle.maxAcceptableDrift());
        _assertEq("nodes", DEV_NODE_COUNT, timeOracle.nodes().length);
        _assertEq("card registered", 1, timeOracle.cards().length);
        _assertEq("card id", uint256(devCardId()), uint256(timeOracle.cards()[0]));
        _assertEq("scheduler's oracle", uint160(address(timeOracle)), uint160(address(timeScheduler.timeOracle())));
        _assertEq("bridge's oracle", uint160(address(timeOracle)), uint160(address(timeBridge.timeOracle())));
    }

    function test_proofsVerifyOnceWarpedTo() public {
        _assertVerdict("before warpTo (an hour and more in the future)", false, proofAt(_MOMENT_NS));
        warpTo(_MOMENT_NS);
        _assertEq("block.timestamp", _MOMENT_NS / 1e9 + 1, block.timestamp);
        _assertVerdict("proofAt(ns)", true, proofAt(_MOMENT_NS));
        _assertVerdict("proofAt(ns, 3 nodes, 80 ns)", true, proofAt(_MOMENT_NS, 3, 80));
        _assertVerdict("proofNow()", true, proofNow());
        _assertEq("default accuracy", LOCAL_MESH_ACCURACY_NS, proofNow().accuracy);
        _assertEq("entries of proofAt(ns, 3, ...)", 3 * 80, proofAt(_MOMENT_NS, 3, 80).nodeSignature.length);
        _assertVerdict(
            "accuracy above the software-mesh tier", false, proofAt(_MOMENT_NS, 2, AccuracyTiers.SOFTWARE_MESH_NS + 1)
        );
    }

    function test_everyInvalidProofIsRefused() public {
        warpTo(_MOMENT_NS);
        for (uint256 kind = 0; kind <= uint256(type(InvalidProofKind).max); ++kind) {
            _assertVerdict(TEST_CHEATS.toString(kind), false, invalidProof(InvalidProofKind(kind)));
        }
    }

    function test_nodeCountsOutsideTheDevelopmentNodesRevert() public {
        TEST_CHEATS.expectRevert(abi.encodeWithSelector(TimeTestKitNodeCountOutOfRange.selector, 4, DEV_NODE_COUNT));
        this.externalProofAt(4);
        TEST_CHEATS.expectRevert(abi.encodeWithSelector(TimeTestKitNodeCountOutOfRange.selector, 0, DEV_NODE_COUNT));
        this.externalProofAt(0);
    }

    function test_belowQuorumNeedsAQuorumOfTwo() public {
        deployAttestedTime();
        TEST_CHEATS.expectRevert(abi.encodeWithSelector(TimeTestKitBelowQuorumNeedsQuorum.selector, 1));
        this.externalInvalidProof(InvalidProofKind.BelowQuorum);
    }

    /// @dev Through an external call, so that expectRevert sees the revert.
    function externalProofAt(uint256 nodes) external view returns (TimeProof memory) {
        return proofAt(_MOMENT_NS, nodes, LOCAL_MESH_ACCURACY_NS);
    }

    /// @dev Through an external call, so that expectRevert sees the revert.
    function externalInvalidProof(InvalidProofKind kind) external view returns (TimeProof memory) {
        return invalidProof(kind);
    }

    function _assertVerdict(string memory what, bool expected, TimeProof memory proof) private view {
        bool actual = timeOracle.verifyTimeProof(proof);
        require(actual == expected, UnexpectedVerdict(what, actual));
    }

    function _assertEq(string memory what, uint256 expected, uint256 actual) private pure {
        require(actual == expected, UnexpectedValue(what, expected, actual));
    }
}
