// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {TimeProofLib} from "../libraries/TimeProofLib.sol";
import {NamedWord} from "./NamedWord.sol";

/**
 * @title TimeProofLibHarness
 * @notice Exposes {TimeProofLib} to the tests (golden vectors, Wycheproof).
 */
contract TimeProofLibHarness {
    function constants()
        external
        pure
        returns (
            bytes8 hwMessageTag,
            uint256 hardwareSignatureLength,
            uint256 nodeEntryLength,
            bytes32 timeAttestationTypehash,
            bytes32 domainSeparator,
            bytes32 computedDomainSeparator
        )
    {
        return (
            TimeProofLib.HW_MESSAGE_TAG,
            TimeProofLib.HARDWARE_SIGNATURE_LENGTH,
            TimeProofLib.NODE_ENTRY_LENGTH,
            TimeProofLib.TIME_ATTESTATION_TYPEHASH,
            TimeProofLib.DOMAIN_SEPARATOR,
            TimeProofLib.computeDomainSeparator()
        );
    }

    /// @notice The constants of {TimeProofLib} that assembly elsewhere copies, by name (constants.test.ts).
    function namedConstants() external pure returns (NamedWord[] memory words) {
        words = new NamedWord[](12);
        words[0] = NamedWord("TimeProofLib.HW_MESSAGE_TAG", bytes32(TimeProofLib.HW_MESSAGE_TAG));
        words[1] = NamedWord("TimeProofLib.HW_MESSAGE_LENGTH", bytes32(TimeProofLib.HW_MESSAGE_LENGTH));
        words[2] = NamedWord(
            "TimeProofLib.HARDWARE_SIGNATURE_LENGTH",
            bytes32(TimeProofLib.HARDWARE_SIGNATURE_LENGTH)
        );
        words[3] = NamedWord("TimeProofLib.NODE_ENTRY_LENGTH", bytes32(TimeProofLib.NODE_ENTRY_LENGTH));
        words[4] = NamedWord("TimeProofLib.TIME_ATTESTATION_TYPEHASH", TimeProofLib.TIME_ATTESTATION_TYPEHASH);
        words[5] = NamedWord("TimeProofLib.TYPED_DATA_PREFIX", bytes32(TimeProofLib.TYPED_DATA_PREFIX));
        words[6] = NamedWord("TimeProofLib.DOMAIN_SEPARATOR", TimeProofLib.DOMAIN_SEPARATOR);
        words[7] = NamedWord("TimeProofLib.P256_N", bytes32(TimeProofLib.P256_N));
        words[8] = NamedWord("TimeProofLib.P256_HALF_N", bytes32(TimeProofLib.P256_HALF_N));
        words[9] = NamedWord("TimeProofLib.SECP256K1_N", bytes32(TimeProofLib.SECP256K1_N));
        words[10] = NamedWord("TimeProofLib.SECP256K1_HALF_N", bytes32(TimeProofLib.SECP256K1_HALF_N));
        words[11] = NamedWord("TimeProofLib.S_MASK", bytes32(TimeProofLib.S_MASK));
    }

    function hwMessage(bytes32 cardId, uint128 nanoMoment) external pure returns (bytes memory) {
        return TimeProofLib.hwMessage(cardId, nanoMoment);
    }

    function hwDigest(bytes32 cardId, uint128 nanoMoment) external view returns (bytes32) {
        return TimeProofLib.hwDigest(cardId, nanoMoment);
    }

    function hardwareSignatureHash(bytes32 r, bytes32 s) external pure returns (bytes32) {
        return TimeProofLib.hardwareSignatureHash(r, s);
    }

    function timeAttestationStructHash(
        bytes32 cardId,
        uint128 nanoMoment,
        uint32 accuracy,
        bytes32 hwSignatureHash,
        uint128 nodeTimestamp
    ) external pure returns (bytes32) {
        return TimeProofLib.timeAttestationStructHash(cardId, nanoMoment, accuracy, hwSignatureHash, nodeTimestamp);
    }

    /// @notice The digest both ways (direct, and through the per-proof encoding the oracle uses).
    function timeAttestationDigest(
        bytes32 cardId,
        uint128 nanoMoment,
        uint32 accuracy,
        bytes32 hwSignatureHash,
        uint128 nodeTimestamp
    ) external pure returns (bytes32 direct, bytes32 viaEncoding) {
        direct = TimeProofLib.timeAttestationDigest(cardId, nanoMoment, accuracy, hwSignatureHash, nodeTimestamp);
        bytes memory encoded = TimeProofLib.encodeTimeAttestation(cardId, nanoMoment, accuracy, hwSignatureHash);
        viaEncoding = TimeProofLib.timeAttestationDigestOf(encoded, nodeTimestamp);
    }

    function decodeHardwareSignature(
        bytes calldata hardwareSignature
    ) external pure returns (bytes32 cardId, bytes32 r, bytes32 s) {
        return TimeProofLib.decodeHardwareSignature(hardwareSignature);
    }

    function decodeNodeEntry(
        bytes calldata nodeSignature,
        uint256 index
    ) external pure returns (uint128 nodeTimestamp, bytes32 r, bytes32 yParityAndS) {
        return TimeProofLib.decodeNodeEntry(nodeSignature, index);
    }

    function recoverNode(bytes32 digest, bytes32 r, bytes32 yParityAndS) external view returns (address) {
        return TimeProofLib.recoverNode(digest, r, yParityAndS);
    }

    function verifyP256(bytes32 h, bytes32 r, bytes32 s, bytes32 qx, bytes32 qy) external view returns (bool) {
        return TimeProofLib.verifyP256(h, r, s, qx, qy);
    }

    /// @notice {TimeProofLib.verifyP256Using}: pass an address without code to exercise the Solidity fallback.
    function verifyP256Using(
        address precompile,
        bytes32 h,
        bytes32 r,
        bytes32 s,
        bytes32 qx,
        bytes32 qy
    ) external view returns (bool) {
        return TimeProofLib.verifyP256Using(precompile, h, r, s, qx, qy);
    }
}
