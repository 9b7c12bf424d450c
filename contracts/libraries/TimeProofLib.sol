// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {P256} from "@openzeppelin/contracts/utils/cryptography/P256.sol";

/**
 * @title TimeProofLib
 * @notice Hashing, decoding and signature checks of the Attested Time wire format (docs/protocol.md §3–§5). Mirrors
 * `protocol/codec.ts` and `protocol/constants.ts` (same constant names); both are checked against the golden
 * vectors in `test/vectors/`.
 * @dev Nothing here reverts on malformed signature values: checks return false or the zero address. Callers
 * check lengths before decoding.
 */
library TimeProofLib {
    /// @notice ASCII "ATS/1 HW": the tag in front of every hardware message.
    bytes8 internal constant HW_MESSAGE_TAG = 0x4154532f31204857;
    /// @notice tag (8) ‖ cardId (32) ‖ nanoMoment (16, big-endian).
    uint256 internal constant HW_MESSAGE_LENGTH = 56;
    /// @notice cardId (32) ‖ r (32) ‖ s (32).
    uint256 internal constant HARDWARE_SIGNATURE_LENGTH = 96;
    /// @notice nodeTimestamp (16, big-endian) ‖ r (32) ‖ yParityAndS (32).
    uint256 internal constant NODE_ENTRY_LENGTH = 80;

    /// @notice keccak256("TimeAttestation(bytes32 cardId,uint128 nanoMoment,uint32 accuracy,
    /// bytes32 hardwareSignatureHash,uint128 nodeTimestamp)"), checked by test/contracts/vectors.test.ts.
    bytes32 internal constant TIME_ATTESTATION_TYPEHASH =
        0x030352a3afa93a98e94bda9577f77735d5b631dd7b9db0db84b850c251368983;
    /// @notice The two bytes in front of every EIP-712 digest input: `0x1901 ‖ DOMAIN_SEPARATOR ‖ structHash`.
    bytes2 internal constant TYPED_DATA_PREFIX = 0x1901;
    /// @notice keccak256("EIP712Domain(string name,string version)").
    bytes32 internal constant EIP712_DOMAIN_TYPEHASH =
        0xb03948446334eb9b2196d5eb166f69b9d49403eb4a12f36de8d3f9f3cb8e15c3;
    /**
     * @notice keccak256(abi.encode(EIP712_DOMAIN_TYPEHASH, keccak256("AttestedTime"), keccak256("1"))). No chainId
     * and no verifyingContract (docs/protocol.md §4), so it is a compile-time constant, the same on every chain;
     * `computeDomainSeparator()` recomputes it for the tests.
     */
    bytes32 internal constant DOMAIN_SEPARATOR = 0x550927e2d732602b9254069392a8cdeeb0a7a13a05389eb7d43bcb9660038f42;

    /// @notice Order of the P-256 group.
    uint256 internal constant P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551;
    /// @notice floor(P256_N / 2): the largest accepted card signature `s` (low-S).
    uint256 internal constant P256_HALF_N = 0x7FFFFFFF800000007FFFFFFFFFFFFFFFDE737D56D38BCF4279DCE5617E3192A8;
    /// @notice Order of the secp256k1 group.
    uint256 internal constant SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141;
    /// @notice floor(SECP256K1_N / 2): the largest accepted node signature `s` (low-S, EIP-2).
    uint256 internal constant SECP256K1_HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;
    /// @notice Nanoseconds per second (the chain clock is in seconds).
    uint256 internal constant NS_PER_SECOND = 1_000_000_000;

    /// @notice The P-256 verification precompile (RIP-7212 / EIP-7951).
    address internal constant P256_PRECOMPILE = address(0x100);

    /// @notice Bit 255 of an EIP-2098 `yParityAndS` word is the y parity; the low 255 bits (this mask) are s.
    uint256 internal constant S_MASK = (1 << 255) - 1;

    // ------------------------------------------------------------------------------------------------ hashing

    /// @notice Recomputes `DOMAIN_SEPARATOR` (tests compare the two).
    function computeDomainSeparator() internal pure returns (bytes32) {
        return keccak256(abi.encode(EIP712_DOMAIN_TYPEHASH, keccak256("AttestedTime"), keccak256("1")));
    }

    /// @notice The 56-byte message a card signs (docs/protocol.md §3).
    function hwMessage(bytes32 cardId, uint128 nanoMoment) internal pure returns (bytes memory) {
        return abi.encodePacked(HW_MESSAGE_TAG, cardId, nanoMoment);
    }

    /// @notice sha256(abi.encodePacked(bytes8("ATS/1 HW"), cardId, uint128 nanoMoment)): what the card signs.
    function hwDigest(bytes32 cardId, uint128 nanoMoment) internal view returns (bytes32 digest) {
        // Same bytes as sha256(hwMessage(cardId, nanoMoment)), without allocating memory.
        assembly ("memory-safe") {
            // Scratch use of the memory after the free memory pointer, which is not advanced: nothing else lives
            // there, and the 56 bytes are consumed by the staticcall before any other allocation.
            let ptr := mload(0x40)
            // HW_MESSAGE_TAG ("ATS/1 HW"), left-aligned as every bytesN constant in assembly: bytes 0..8.
            mstore(ptr, HW_MESSAGE_TAG)
            mstore(add(ptr, 8), cardId) // bytes 8..40
            mstore(add(ptr, 40), shl(128, nanoMoment)) // bytes 40..56, big-endian uint128
            // The sha256 precompile (0x02) cannot fail except by running out of gas, which the staticcall result
            // reports; then revert like Solidity's own sha256 does (only reachable with too little gas).
            if iszero(staticcall(gas(), 0x02, ptr, HW_MESSAGE_LENGTH, 0x00, 0x20)) {
                revert(0, 0)
            }
            digest := mload(0x00)
        }
    }

    /// @notice keccak256(r ‖ s) of the card's 64 signature bytes (signed by every node entry).
    function hardwareSignatureHash(bytes32 r, bytes32 s) internal pure returns (bytes32 result) {
        assembly ("memory-safe") {
            // The scratch space 0x00..0x40 is free for hashing (Solidity docs, "Layout in Memory").
            mstore(0x00, r)
            mstore(0x20, s)
            result := keccak256(0x00, 0x40)
        }
    }

    /// @notice EIP-712 struct hash of a `TimeAttestation` (docs/protocol.md §4).
    function timeAttestationStructHash(
        bytes32 cardId,
        uint128 nanoMoment,
        uint32 accuracy,
        bytes32 hwSignatureHash,
        uint128 nodeTimestamp
    ) internal pure returns (bytes32 result) {
        // Same as keccak256(abi.encode(TIME_ATTESTATION_TYPEHASH, cardId, ...)) without allocating memory.
        assembly ("memory-safe") {
            // Scratch use of memory after the free memory pointer (not advanced; consumed at once by keccak256).
            // The uint128/uint32 arguments are clean: Solidity cleans typed arguments of internal functions.
            let ptr := mload(0x40)
            mstore(ptr, TIME_ATTESTATION_TYPEHASH)
            mstore(add(ptr, 0x20), cardId)
            mstore(add(ptr, 0x40), nanoMoment)
            mstore(add(ptr, 0x60), accuracy)
            mstore(add(ptr, 0x80), hwSignatureHash)
            mstore(add(ptr, 0xa0), nodeTimestamp)
            result := keccak256(ptr, 0xc0)
        }
    }

    /// @notice The EIP-712 digest a node signs: keccak256(0x1901 ‖ DOMAIN_SEPARATOR ‖ structHash).
    function timeAttestationDigest(
        bytes32 cardId,
        uint128 nanoMoment,
        uint32 accuracy,
        bytes32 hwSignatureHash,
        uint128 nodeTimestamp
    ) internal pure returns (bytes32 digest) {
        bytes32 structHash = timeAttestationStructHash(cardId, nanoMoment, accuracy, hwSignatureHash, nodeTimestamp);
        // As OpenZeppelin MessageHashUtils.toTypedDataHash, without allocating memory.
        assembly ("memory-safe") {
            // Scratch use of memory after the free memory pointer (not advanced; consumed at once by keccak256).
            let ptr := mload(0x40)
            mstore(ptr, TYPED_DATA_PREFIX) // left-aligned, as every bytesN constant in assembly
            mstore(add(ptr, 0x02), DOMAIN_SEPARATOR)
            mstore(add(ptr, 0x22), structHash)
            digest := keccak256(ptr, 0x42)
        }
    }

    /**
     * @notice `abi.encode` of a `TimeAttestation` with its type hash and `nodeTimestamp = 0`: the fields every node
     * entry of a proof shares. {timeAttestationDigestOf} fills in each entry's `nodeTimestamp` and hashes it, so a
     * verifier encodes the shared fields once per proof rather than once per entry.
     */
    function encodeTimeAttestation(
        bytes32 cardId,
        uint128 nanoMoment,
        uint32 accuracy,
        bytes32 hwSignatureHash
    ) internal pure returns (bytes memory encoded) {
        return abi.encode(TIME_ATTESTATION_TYPEHASH, cardId, nanoMoment, accuracy, hwSignatureHash, uint128(0));
    }

    /// @notice {timeAttestationDigest} of `encoded` (from {encodeTimeAttestation}) with its `nodeTimestamp` set.
    function timeAttestationDigestOf(
        bytes memory encoded,
        uint128 nodeTimestamp
    ) internal pure returns (bytes32 digest) {
        assembly ("memory-safe") {
            // `encoded` holds 6 words (checked by the caller's use of encodeTimeAttestation); the last is the
            // nodeTimestamp, overwritten in place. Then, as MessageHashUtils.toTypedDataHash, hash the 66 bytes
            // 0x1901 ‖ DOMAIN_SEPARATOR ‖ structHash built in scratch memory after the free memory pointer (not
            // advanced; consumed at once by keccak256).
            mstore(add(encoded, 0xc0), nodeTimestamp)
            let structHash := keccak256(add(encoded, 0x20), 0xc0)
            let ptr := mload(0x40)
            mstore(ptr, TYPED_DATA_PREFIX) // left-aligned, as every bytesN constant in assembly
            mstore(add(ptr, 0x02), DOMAIN_SEPARATOR)
            mstore(add(ptr, 0x22), structHash)
            digest := keccak256(ptr, 0x42)
        }
    }

    // ------------------------------------------------------------------------------------------------ decoding

    /**
     * @notice Splits a 96-byte hardware signature into cardId, r and s.
     * @dev The caller has checked `hardwareSignature.length == HARDWARE_SIGNATURE_LENGTH`.
     */
    function decodeHardwareSignature(
        bytes calldata hardwareSignature
    ) internal pure returns (bytes32 cardId, bytes32 r, bytes32 s) {
        assembly ("memory-safe") {
            // Reads 96 bytes from a calldata slice the caller checked to be 96 bytes long.
            let offset := hardwareSignature.offset
            cardId := calldataload(offset)
            r := calldataload(add(offset, 0x20))
            s := calldataload(add(offset, 0x40))
        }
    }

    /**
     * @notice Decodes entry `index` of `nodeSignature` (80 bytes each).
     * @dev The caller has checked `(index + 1) * NODE_ENTRY_LENGTH <= nodeSignature.length`.
     */
    function decodeNodeEntry(
        bytes calldata nodeSignature,
        uint256 index
    ) internal pure returns (uint128 nodeTimestamp, bytes32 r, bytes32 yParityAndS) {
        assembly ("memory-safe") {
            // Reads the 80 bytes of an entry the caller checked to lie inside the slice. The index is bounded by
            // the slice length / 80, so the multiplication cannot overflow.
            let p := add(nodeSignature.offset, mul(index, NODE_ENTRY_LENGTH))
            nodeTimestamp := shr(128, calldataload(p))
            r := calldataload(add(p, 0x10))
            yParityAndS := calldataload(add(p, 0x30))
        }
    }

    // ------------------------------------------------------------------------------------------------ signatures

    /**
     * @notice Recovers the node that signed `digest` with an EIP-2098 compact signature; the zero address when
     * the signature is malformed, high-S or does not recover.
     */
    function recoverNode(bytes32 digest, bytes32 r, bytes32 yParityAndS) internal view returns (address signer) {
        uint256 s = uint256(yParityAndS) & S_MASK;
        if (s > SECP256K1_HALF_N) return address(0); // high-S: malleable, rejected (EIP-2)
        assembly ("memory-safe") {
            // Scratch use of memory after the free memory pointer (not advanced; consumed by the staticcall).
            let ptr := mload(0x40)
            mstore(ptr, digest)
            mstore(add(ptr, 0x20), add(27, shr(255, yParityAndS))) // v = 27 + yParity
            mstore(add(ptr, 0x40), r)
            mstore(add(ptr, 0x60), s)
            // ecrecover (0x01) returns no data for an invalid signature (r or s zero or ≥ n, no point): the
            // zeroed scratch word then reads as address(0). The staticcall itself only fails out of gas.
            mstore(0x00, 0)
            if iszero(staticcall(gas(), 0x01, ptr, 0x80, 0x00, 0x20)) {
                revert(0, 0)
            }
            signer := mload(0x00)
        }
    }

    /**
     * @notice P-256 verification of `h` (a SHA-256 digest) with low-S enforced; never reverts. Uses the precompile
     * at 0x100 and falls back to OpenZeppelin's `P256.verifySolidity` where the precompile is absent.
     */
    function verifyP256(bytes32 h, bytes32 r, bytes32 s, bytes32 qx, bytes32 qy) internal view returns (bool) {
        return verifyP256Using(P256_PRECOMPILE, h, r, s, qx, qy);
    }

    /**
     * @notice {verifyP256} with the precompile address as a parameter, so tests can exercise the Solidity fallback
     * by pointing at an address without code.
     */
    function verifyP256Using(
        address precompile,
        bytes32 h,
        bytes32 r,
        bytes32 s,
        bytes32 qx,
        bytes32 qy
    ) internal view returns (bool) {
        // Range and low-S first: the precompile accepts high-S signatures, the protocol does not (docs/protocol.md §3).
        if (uint256(r) == 0 || uint256(r) >= P256_N || uint256(s) == 0 || uint256(s) > P256_HALF_N) return false;
        if (!P256.isValidPublicKey(qx, qy)) return false;
        if (_callP256(precompile, h, r, s, qx, qy)) return true;
        // No "valid" answer: either the signature is invalid, or the precompile is absent (a call to an address
        // without code also returns empty data). As OpenZeppelin's P256 does, ask the precompile about a known
        // valid signature (Wycheproof ecdsa_secp256r1_sha256_p1363 tcId 292, r = 5, s = 1) to tell them apart.
        if (
            _callP256(
                precompile,
                0xbb5a52f42f9c9261ed4361f59422a1e30036e7c32b270c8807a419feca605023, // sha256("123400")
                bytes32(uint256(5)),
                bytes32(uint256(1)),
                0xa71af64de5126a4a4e02b7922d66ce9415ce88a4c9d25514d91082c8725ac957,
                0x5d47723c8fbe580bb369fec9c2665d8e30a435b9932645482e7c9f11e872296b
            )
        ) return false; // the precompile is present: the signature is invalid
        return P256.verifySolidity(h, r, s, qx, qy);
    }

    /// @dev True only when the precompile answers with the 32-byte word 1.
    function _callP256(
        address precompile,
        bytes32 h,
        bytes32 r,
        bytes32 s,
        bytes32 qx,
        bytes32 qy
    ) private view returns (bool valid) {
        assembly ("memory-safe") {
            // Scratch use of memory after the free memory pointer (not advanced; consumed by the staticcall).
            let ptr := mload(0x40)
            mstore(ptr, h)
            mstore(add(ptr, 0x20), r)
            mstore(add(ptr, 0x40), s)
            mstore(add(ptr, 0x60), qx)
            mstore(add(ptr, 0x80), qy)
            // An invalid signature (or a missing precompile) returns no data: the zeroed word stays 0.
            mstore(0x00, 0)
            let success := staticcall(gas(), precompile, ptr, 0xa0, 0x00, 0x20)
            valid := and(success, eq(mload(0x00), 1))
        }
    }
}
