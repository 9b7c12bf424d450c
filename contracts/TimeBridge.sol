// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle, TimeProof} from "./interfaces/ITimeOracle.sol";
import {CrossChainTime, ITimeBridge} from "./interfaces/ITimeBridge.sol";

/**
 * @title TimeBridge
 * @notice Sends the oracle's current proof to other chains and receives theirs (see {ITimeBridge}). The same
 * contract is deployed on every chain, next to that chain's oracle.
 *
 * What the message id binds, and what guards against replay. `messageId = keccak256(abi.encode(sourceChain,
 * sourceBridge, nonce, message))` names one send, so a relayer can tell whether it already delivered it, and the
 * bridge refuses the same id twice ({TimeBridgeAlreadyDelivered}). But nothing on the target chain authenticates
 * `sourceChain`, `sourceBridge` or `nonce`: there is no cross-chain messaging layer, only a self-authenticating
 * proof, so anyone can wrap the same proof in a new envelope (another nonce, another claimed source) and get a new
 * id. The id therefore cannot be what stops a proof from being delivered twice. What matters on the target is the
 * time itself: the bridge accepts a message only when its `networkTime` is strictly newer than the latest time it
 * delivered ({TimeBridgeNotNewer}). That binds the content, whatever the envelope: the same proof, or an older
 * still-fresh one, can never be delivered again, and the bridge's latest time never goes backwards. The cost is
 * that an older message arriving after a newer one (from another source chain, say) is refused; it carries
 * nothing a reader of the latest time would want. Freshness comes from the target oracle: its `verifyTimeProof`
 * accepts a proof only while it is at most `maxAttestationAge` old against the target chain's clock, so a
 * relayer has that long to deliver. The proof bytes must also be the canonical `abi.encode(TimeProof)`, so that
 * one proof has one encoding and hence one id per envelope.
 *
 * Storage: the nonce, the latest delivered time and its block share one slot; plus the latest message id and one
 * slot per delivered message (its block). The messages themselves live in the events.
 */
contract TimeBridge is ITimeBridge {
    ITimeOracle private immutable _TIME_ORACLE;

    uint64 private _sentCount;
    uint128 private _latestNetworkTime;
    uint64 private _latestTargetBlock;
    bytes32 private _latestMessageId;
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
        messageId = keccak256(abi.encode(block.chainid, address(this), nonce, message));
        emit TimeSent(messageId, targetChain, nonce, message);
    }

    /// @inheritdoc ITimeBridge
    function receiveTime(
        uint256 sourceChain,
        address sourceBridge,
        uint64 nonce,
        CrossChainTime calldata message
    ) external returns (bytes32 messageId) {
        if (message.targetChain != block.chainid) revert TimeBridgeWrongChain(message.targetChain, block.chainid);
        if (message.targetBlock != 0) revert TimeBridgeTargetBlockSet(message.targetBlock);
        messageId = keccak256(abi.encode(sourceChain, sourceBridge, nonce, message));
        uint256 delivered = _deliveredBlock[messageId];
        if (delivered != 0) revert TimeBridgeAlreadyDelivered(messageId, delivered);

        TimeProof memory proof = _decodeCanonicalProof(message.proof);
        if (message.networkTime != proof.nanoMoment) {
            revert TimeBridgeTimeMismatch(message.networkTime, proof.nanoMoment);
        }
        uint128 latest = _latestNetworkTime;
        if (message.networkTime <= latest) revert TimeBridgeNotNewer(message.networkTime, latest);
        // The expensive check last.
        if (!_TIME_ORACLE.verifyTimeProof(proof)) revert TimeBridgeInvalidProof(messageId, proof.nanoMoment);

        _deliveredBlock[messageId] = block.number;
        _latestNetworkTime = message.networkTime;
        _latestTargetBlock = uint64(block.number); // block numbers stay far below 2^64
        _latestMessageId = messageId;
        CrossChainTime memory received = message;
        received.targetBlock = block.number;
        emit TimeReceived(messageId, sourceChain, sourceBridge, nonce, received, msg.sender);
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
        return (_latestMessageId, _latestNetworkTime, _latestTargetBlock);
    }

    /// @inheritdoc ITimeBridge
    function messageIdOf(
        uint256 sourceChain,
        address sourceBridge,
        uint64 nonce,
        CrossChainTime calldata message
    ) external pure returns (bytes32) {
        return keccak256(abi.encode(sourceChain, sourceBridge, nonce, message));
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
