// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle, TimeProof} from "./interfaces/ITimeOracle.sol";
import {CrossChainTime, ITimeBridge} from "./interfaces/ITimeBridge.sol";

/**
 * @title TimeBridge
 * @notice Sends the oracle's current proof to other chains and receives theirs (see {ITimeBridge}). The same
 * contract is deployed on every chain, next to that chain's oracle.
 *
 * What is a fact here, and what guards against replay. There is no cross-chain messaging layer, only a
 * self-authenticating proof: on the target chain nothing can tell which chain, bridge or send a message came from,
 * so the bridge takes no origin at all. The message id is the hash of the message itself (`targetChain` and the
 * proof): anyone who delivers it delivers *the* message, and a relayer that arrives second finds it delivered
 * ({TimeBridgeAlreadyDelivered}, {deliveredBlock}). Two sends of the same stored proof to the same chain are one
 * message. (Another message of the same moment, say the same card signature with fewer node entries, is another id;
 * whoever delivers one of them first delivers that moment, and the other is refused as not newer.) The bridge
 * accepts a message only when its `networkTime` is strictly newer than the latest time it delivered
 * ({TimeBridgeNotNewer}), so within a registry epoch the latest time never goes backwards and an older, still-fresh
 * proof cannot be delivered after a newer one. When a key lost trust since that delivery (the oracle's registry
 * epoch moved), the latest time is clamped to the epoch and no longer reported as delivered: a time a compromised
 * key dated ahead neither blocks honest messages nor keeps being served ({ITimeOracle-registryEpoch}); a reader of
 * {latestDelivery} must therefore not assume it only increases across epochs.
 * Freshness comes from the target oracle: its `verifyTimeProof` accepts a proof only while it is at most
 * `maxAttestationAge` old against the target chain's clock, so a relayer has that long to deliver. The proof bytes
 * must be the canonical `abi.encode(TimeProof)`, so that one proof has one encoding and hence one id.
 *
 * Storage: the nonce, the latest delivered time and its block share one slot; the latest message id, the registry
 * epoch of the latest delivery, and one slot per delivered message (its block). The messages live in the events.
 */
contract TimeBridge is ITimeBridge {
    ITimeOracle private immutable _TIME_ORACLE;

    uint64 private _sentCount;
    uint128 private _latestNetworkTime;
    uint64 private _latestTargetBlock;
    bytes32 private _latestMessageId;
    uint64 private _latestRegistryEpoch;
    mapping(bytes32 messageId => uint256 blockNumber) private _deliveredBlock;

    /// @param oracle This chain's oracle: the source of sent proofs and the verifier of received ones.
    constructor(ITimeOracle oracle) {
        if (address(oracle) == address(0)) revert TimeBridgeZeroOracle();
        _TIME_ORACLE = oracle;
    }

    /// @inheritdoc ITimeBridge
    function sendTime(uint256 targetChain) external returns (bytes32 messageId) {
        if (targetChain == 0) revert TimeBridgeInvalidTargetChain(targetChain);
        TimeProof memory proof = _TIME_ORACLE.getCurrentTime();
        CrossChainTime memory message = CrossChainTime({
            networkTime: proof.nanoMoment,
            targetChain: targetChain,
            proof: abi.encode(proof),
            targetBlock: 0
        });
        uint64 nonce = _sentCount++;
        messageId = keccak256(abi.encode(message));
        emit TimeSent(messageId, targetChain, nonce, message);
    }

    /// @inheritdoc ITimeBridge
    function receiveTime(CrossChainTime calldata message) external returns (bytes32 messageId) {
        if (message.targetChain != block.chainid) revert TimeBridgeWrongChain(message.targetChain, block.chainid);
        if (message.targetBlock != 0) revert TimeBridgeTargetBlockSet(message.targetBlock);
        messageId = keccak256(abi.encode(message));
        uint256 delivered = _deliveredBlock[messageId];
        if (delivered != 0) revert TimeBridgeAlreadyDelivered(messageId, delivered);

        TimeProof memory proof = _decodeCanonicalProof(message.proof);
        if (message.networkTime != proof.nanoMoment) {
            revert TimeBridgeTimeMismatch(message.networkTime, proof.nanoMoment);
        }
        uint64 epoch = _TIME_ORACLE.registryEpoch();
        (uint128 floor, ) = _latestTime(epoch);
        if (message.networkTime <= floor) revert TimeBridgeNotNewer(message.networkTime, floor);
        // The expensive check last.
        if (!_TIME_ORACLE.verifyTimeProof(proof)) revert TimeBridgeInvalidProof(messageId, proof.nanoMoment);

        _deliveredBlock[messageId] = block.number;
        _latestNetworkTime = message.networkTime;
        _latestTargetBlock = uint64(block.number); // block numbers stay far below 2^64
        _latestMessageId = messageId;
        if (_latestRegistryEpoch != epoch) _latestRegistryEpoch = epoch;
        CrossChainTime memory received = message;
        received.targetBlock = block.number;
        emit TimeReceived(messageId, message.networkTime, received, msg.sender);
    }

    /**
     * @notice Decodes `abi.encode(TimeProof)`; reverts (without data) on malformed bytes. Used by {receiveTime}
     * through an external self-call, so that malformed bytes surface as {TimeBridgeMalformedProof}.
     */
    function decodeTimeProof(bytes calldata encoded) external pure returns (TimeProof memory) {
        return abi.decode(encoded, (TimeProof));
    }

    /// @inheritdoc ITimeBridge
    function timeOracle() external view returns (ITimeOracle) {
        return _TIME_ORACLE;
    }

    /// @inheritdoc ITimeBridge
    function sentCount() external view returns (uint64) {
        return _sentCount;
    }

    /// @inheritdoc ITimeBridge
    function deliveredBlock(bytes32 messageId) external view returns (uint256) {
        return _deliveredBlock[messageId];
    }

    /// @inheritdoc ITimeBridge
    function latestDelivery() external view returns (bytes32 messageId, uint128 networkTime, uint256 targetBlock) {
        bool current;
        (networkTime, current) = _latestTime(_TIME_ORACLE.registryEpoch());
        if (current) (messageId, targetBlock) = (_latestMessageId, _latestTargetBlock);
    }

    /// @inheritdoc ITimeBridge
    function messageIdOf(CrossChainTime calldata message) external pure returns (bytes32) {
        return keccak256(abi.encode(message));
    }

    /**
     * @dev The latest delivered time as it stands in registry epoch `epoch`, and whether it was delivered in that
     * epoch. From an earlier epoch it is clamped to the epoch (see the contract's notice).
     */
    function _latestTime(uint64 epoch) private view returns (uint128 networkTime, bool current) {
        networkTime = _latestNetworkTime;
        current = _latestRegistryEpoch == epoch;
        if (!current && networkTime > epoch) networkTime = epoch;
    }

    /// @dev Decodes the proof, refusing bytes that do not decode or are not the canonical encoding.
    function _decodeCanonicalProof(bytes calldata encoded) private view returns (TimeProof memory proof) {
        try this.decodeTimeProof(encoded) returns (TimeProof memory decoded) {
            proof = decoded;
        } catch {
            revert TimeBridgeMalformedProof(encoded.length);
        }
        if (keccak256(abi.encode(proof)) != keccak256(encoded)) revert TimeBridgeMalformedProof(encoded.length);
    }
}
