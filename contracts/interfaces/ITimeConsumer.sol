// SPDX-License-Identifier: MIT
// Floating: dApps compile this file with their own compiler, 0.8.24 or later (test/contracts/pragma.test.ts).
// solhint-disable-next-line compiler-version
pragma solidity ^0.8.24;

import {ITimeOracle} from "./ITimeOracle.sol";

/**
 * @title ITimeConsumer
 * @notice What a contract built on {TimeConsumer} exposes: its oracle, the last attested moment it acted on per
 * action key, and the accuracy it demands. Time values are nanoseconds since the Unix epoch.
 *
 * Besides the custom errors below, a consumer reverts with the two strings docs/protocol.md §6.7 fixes:
 * `Invalid time proof` (the oracle rejects the proof) and `Insufficient accuracy` (`accuracy` above the bound).
 */
interface ITimeConsumer {
    /// @notice The consumer acted for `actionKey` on the proof of `nanoMoment` (ns, with `accuracy` ns); proofs not
    /// newer are now refused for that key.
    event TimeConsumed(bytes32 indexed actionKey, uint128 indexed nanoMoment, uint32 accuracy);

    /// @notice The oracle address given to the constructor is the zero address.
    error TimeConsumerZeroOracle();

    /// @notice The accuracy bound given to the constructor is 0 ns: no network signs a zero error bound, so every
    /// proof would be refused.
    error TimeConsumerZeroMaxAccuracy();

    /// @notice The proof is not newer than the last one consumed for `actionKey` (replay of an older proof).
    error TimeConsumerProofNotNewer(bytes32 actionKey, uint128 nanoMoment, uint128 lastConsumedNanoMoment);

    /// @notice The proof's moment is before `notBefore` (the action is allowed at or after it).
    error TimeConsumerTooEarly(uint128 nanoMoment, uint128 notBefore);

    /// @notice The proof's moment is at or after `deadline` (the action is allowed strictly before it).
    error TimeConsumerTooLate(uint128 nanoMoment, uint128 deadline);

    /// @notice The chain clock (`block.timestamp` in ns) has reached `deadline`: a still-fresh proof of an earlier
    /// moment cannot act after the deadline.
    error TimeConsumerChainPastDeadline(uint256 chainNs, uint128 deadline);

    /// @notice The oracle this consumer verifies proofs with.
    function timeOracle() external view returns (ITimeOracle);

    /**
     * @notice The watermark of `actionKey`: a proof must be strictly newer to act for it. It is the moment (ns) of
     * the last proof consumed for the key (0 before the first); once a key lost trust since (the oracle's
     * {ITimeOracle-registryEpoch} moved), at most the chain clock plus the oracle's `maxFutureDrift`, the latest
     * moment the oracle accepts now. It only increases within an epoch; across one it may read lower, though never
     * low enough to let a proof consumed before act again (docs/protocol.md §14.17).
     */
    function lastConsumedNanoMoment(bytes32 actionKey) external view returns (uint128);

    /// @notice The largest `accuracy` (ns) this consumer accepts: its deployer's explicit choice ({AccuracyTiers}).
    function maxAccuracyNs() external view returns (uint32);
}
