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
 * epoch moved), the delivery is no longer reported as vouched for, and the latest time reads as at most the chain
 * clock plus the oracle's `maxFutureDrift`: a time a compromised key dated ahead is not served beyond what the
 * oracle accepts now, while no moment delivered before can be delivered again (every proof the oracle accepts now
 * lies at or below that bound; {_latestTime}, docs/protocol.md §14.17). A reader of {latestDelivery} must not assume
 * it only increases across epochs.
 * Freshness comes from the target oracle: its `verifyTimeProof` accepts a proof only while it is at most
 * `maxAttestationAge` old against the target chain's clock, so a relayer has that long to deliver. The proof bytes
 * must be the canonical `abi.encode(TimeProof)`, so that one proof has one encoding and hence one id.
 *
 * Storage: the nonce, the latest delivered time and its block share one slot; the latest message id, the registry
 * epoch of the latest delivery, and one slot per delivered message (its block). The messages live in the events.
 */
contract TimeBridge is ITimeBridge {
    uint256 private constant _NS_PER_SECOND = 1e9;

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
     * epoch. Delivered in an earlier one (a key lost trust since): at most `_now() * 1e9 + maxFutureDrift`, the
     * latest moment the oracle accepts now (the current setting, read on this path only). A moment delivered before
     * lies at or below the latest time, and can only pass the oracle again at or below that bound, so it stays
     * refused ({TimeBridgeNotNewer}): the same moment is never delivered twice, across any registry change. For the
     * same reason the bound never lets a message through that the unclamped time would refuse; it only keeps
     * {latestDelivery} from reporting a time beyond what the oracle accepts now (docs/protocol.md §14.17).
     */
    function _latestTime(uint64 epoch) private view returns (uint128 networkTime, bool current) {
        networkTime = _latestNetworkTime;
        current = _latestRegistryEpoch == epoch;
        if (current) return (networkTime, current);
        uint256 nowNs = _now() * _NS_PER_SECOND;
        // Not ahead of the chain clock (nothing delivered yet, or long ago): below the bound, no setting to read.
        if (networkTime <= nowNs) return (networkTime, current);
        uint256 boundNs = nowNs + _TIME_ORACLE.maxFutureDrift();
        if (networkTime > boundNs) networkTime = uint128(boundNs); // boundNs < networkTime: fits
    }

    /// @dev The chain clock in seconds: `block.timestamp`, the oracle's freshness clock. Virtual for tests
    /// (BridgeHarness pins it, as TimeOracleHarness pins the oracle's).
    function _now() internal view virtual returns (uint256) {
        return block.timestamp;
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
