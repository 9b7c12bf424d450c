// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle, TimeProof} from "../interfaces/ITimeOracle.sol";
import {TimeConsumer} from "../TimeConsumer.sol";

/// @notice Test harness: every guard of {TimeConsumer} behind an external function.
contract ConsumerHarness is TimeConsumer {
    uint256 public actions;

    constructor(ITimeOracle oracle) TimeConsumer(oracle) {}

    function verifiedTime(TimeProof calldata proof) external view returns (uint128) {
        return _verifiedTime(proof);
    }

    function consume(TimeProof calldata proof) external consumesTime(proof) {
        actions++;
    }

    function actAfter(TimeProof calldata proof, uint128 notBefore) external onlyAfter(proof, notBefore) {
        actions++;
    }

    function actBefore(TimeProof calldata proof, uint128 deadline) external onlyBefore(proof, deadline) {
        actions++;
    }

    function actWithin(
        TimeProof calldata proof,
        uint128 notBefore,
        uint128 deadline
    ) external onlyWithin(proof, notBefore, deadline) {
        actions++;
    }
}
