// SPDX-License-Identifier: MIT
// Floating: dApps compile this file with their own compiler, 0.8.24 or later (test/contracts/pragma.test.ts).
// solhint-disable-next-line compiler-version
pragma solidity ^0.8.24;

import {ITimeOracle} from "./ITimeOracle.sol";

/**
 * @notice A time message between chains (docs/protocol.md §10). Declared once, here.
 * @param networkTime The attested moment (ns); equals the proof's `nanoMoment`.
 * @param targetChain Chain id of the chain the message is for.
 * @param proof `abi.encode(TimeProof)`, canonical encoding.
 * @param targetBlock 0 as sent; the receiving bridge sets it to its `block.number`.
 */
struct CrossChainTime {
    uint128 networkTime;
    uint256 targetChain;
    bytes proof;
    uint256 targetBlock;
}

/**
 * @title ITimeBridge
 * @notice Carries attested time from one chain to another. On the source chain {sendTime} wraps the oracle's
 * current proof in a {CrossChainTime} message and emits it; anyone relays it to the target chain's bridge, whose
 * {receiveTime} checks it against the target chain's own oracle. The proof authenticates itself, so relayers
 * need no trust and no permission: they can carry a message but cannot forge or alter it.
 *
 * Identifiers: `messageId = keccak256(abi.encode(message))` with the message as sent (`targetBlock == 0`). It names
 * the content (target chain and proof), not a send: nothing on the target chain can authenticate which chain,
 * bridge or nonce a message came from, so no such claim is taken or reported there. Whoever delivers a message
 * first delivers it for everyone; {deliveredBlock} tells a relayer it is done.
 */
interface ITimeBridge {
    /// @notice The oracle's current proof was sent to `targetChain` as message `messageId`.
    event TimeSent(bytes32 indexed messageId, uint256 indexed targetChain, uint64 nonce, CrossChainTime message);

    /**
     * @notice Message `messageId` of time `networkTime` (ns) was delivered by `relayer`; `message.targetBlock` is
     * the block it arrived in.
     */
    event TimeReceived(
        bytes32 indexed messageId,
        uint128 indexed networkTime,
        CrossChainTime message,
        address indexed relayer
    );

    /// @notice The oracle address given to the constructor is the zero address.
    error TimeBridgeZeroOracle();

    /// @notice A message may not be sent to chain id 0.
    error TimeBridgeInvalidTargetChain(uint256 targetChain);

    /// @notice The message is for chain `targetChain`, not for this chain (`chainId`).
    error TimeBridgeWrongChain(uint256 targetChain, uint256 chainId);

    /// @notice A message arrives with `targetBlock` 0; only the receiving bridge sets it.
    error TimeBridgeTargetBlockSet(uint256 targetBlock);

    /// @notice Message `messageId` was already delivered, in block `deliveredBlock`.
    error TimeBridgeAlreadyDelivered(bytes32 messageId, uint256 deliveredBlock);

    /// @notice `proof` is not the canonical `abi.encode(TimeProof)` (`length` bytes).
    error TimeBridgeMalformedProof(uint256 length);

    /// @notice The message's `networkTime` differs from its proof's `nanoMoment`.
    error TimeBridgeTimeMismatch(uint128 networkTime, uint128 nanoMoment);

    /// @notice The message's time is not newer than the latest time this bridge delivered.
    error TimeBridgeNotNewer(uint128 networkTime, uint128 latestNetworkTime);

    /// @notice This chain's oracle rejects the message's proof.
    error TimeBridgeInvalidProof(bytes32 messageId, uint128 nanoMoment);

    /**
     * @notice Sends the oracle's current proof (`getCurrentTime`) to `targetChain`: emits {TimeSent} with a fresh
     * nonce. Reverts with the oracle's `TimeOracleNoTime` when it holds no proof. Anyone may call.
     * @return messageId The message's identifier.
     */
    function sendTime(uint256 targetChain) external returns (bytes32 messageId);

    /**
     * @notice Delivers a message (as {TimeSent} emitted it on its source chain). Checks that it is for this chain,
     * that `targetBlock` is 0, that it was not delivered before, that `networkTime` equals the proof's moment and is
     * newer than the latest delivered time (see {latestDelivery}), and that this chain's oracle accepts the proof;
     * then sets `targetBlock = block.number`, records it and emits {TimeReceived}. Anyone may deliver.
     * @return messageId The message's identifier.
     */
    function receiveTime(CrossChainTime calldata message) external returns (bytes32 messageId);

    /// @notice The oracle this bridge reads (sending) and verifies with (receiving).
    function timeOracle() external view returns (ITimeOracle);

    /// @notice Number of messages sent so far (the next nonce).
    function sentCount() external view returns (uint64);

    /// @notice Block in which message `messageId` was delivered here; 0 when it was not.
    function deliveredBlock(bytes32 messageId) external view returns (uint256);

    /**
     * @notice The latest delivered time (ns), its message and the block it arrived in; zeros before the first.
     * `networkTime` is always the time a new message must exceed. After a key lost trust (the oracle's registry
     * epoch moved since the delivery), the delivery is no longer vouched for: `messageId` and `targetBlock` read 0
     * and `networkTime` is the delivered time, at most the chain clock plus the oracle's `maxFutureDrift` (the
     * latest moment the oracle accepts now; {ITimeOracle-registryEpoch}).
     */
    function latestDelivery() external view returns (bytes32 messageId, uint128 networkTime, uint256 targetBlock);

    /// @notice The identifier of a message (with `targetBlock` as sent, 0): `keccak256(abi.encode(message))`.
    function messageIdOf(CrossChainTime calldata message) external pure returns (bytes32);
}
