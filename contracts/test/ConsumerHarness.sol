// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle, TimeProof} from "../interfaces/ITimeOracle.sol";
import {TimeConsumer} from "../TimeConsumer.sol";

/// @notice Test harness: every guard of {TimeConsumer} behind an external function.
contract ConsumerHarness is TimeConsumer {
    uint256 public actions;
    /// @dev The chain clock the guards see, ns; 0: block.timestamp (the oracle harness pins its clock the same way).
    uint256 public chainNowNs;

    constructor(ITimeOracle oracle, uint32 maxAccuracyNs_) TimeConsumer(oracle, maxAccuracyNs_) {}

    function setChainNowNs(uint256 nowNs) external {
        chainNowNs = nowNs;
    }

    function _chainNowNs() internal view override returns (uint256) {
        return chainNowNs == 0 ? super._chainNowNs() : chainNowNs;
    }

    function verifiedTime(TimeProof calldata proof) external view returns (uint128) {
        return _verifiedTime(proof);
    }

    function consume(TimeProof calldata proof, bytes32 key) external consumesTime(proof, key) {
        actions++;
    }

    function actAfter(
        TimeProof calldata proof,
        bytes32 key,
        uint128 notBefore
    ) external onlyAfter(proof, key, notBefore) {
        actions++;
    }

    function actBefore(
        TimeProof calldata proof,
        bytes32 key,
        uint128 deadline
    ) external onlyBefore(proof, key, deadline) {
        actions++;
    }

    function actWithin(
        TimeProof calldata proof,
        bytes32 key,
        uint128 notBefore,
        uint128 deadline
    ) external onlyWithin(proof, key, notBefore, deadline) {
        actions++;
    }
}
