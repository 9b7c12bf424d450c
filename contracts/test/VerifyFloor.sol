// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {TimeProof} from "../interfaces/ITimeOracle.sol";

/**
 * @title VerifyFloor
 * @notice The gas floor of `verifyTimeProof` for scripts/bench-gas.ts: the same external function, doing only what
 * no verifier can skip — the card's sha256 digest and P256VERIFY against a key fixed at deployment, and per node
 * entry the EIP-712 hashing and ecrecover — and none of the checks (registry, freshness, shape, ranges, order).
 * Not a verifier: it accepts any recovery, and trusts well-formed input (the benchmark's proofs). The constants are
 * TimeProofLib's (type hash, domain separator, message tag).
 */
contract VerifyFloor {
    bytes32 private immutable _PUBLIC_KEY_X;
    bytes32 private immutable _PUBLIC_KEY_Y;

    constructor(bytes32 publicKeyX, bytes32 publicKeyY) {
        _PUBLIC_KEY_X = publicKeyX;
        _PUBLIC_KEY_Y = publicKeyY;
    }

    /// @dev One assembly pass, as tight as the operations allow (no check can be cheaper than no check).
    function verifyTimeProof(TimeProof calldata proof) external view returns (bool) {
        bytes32 qx = _PUBLIC_KEY_X;
        bytes32 qy = _PUBLIC_KEY_Y;
        assembly ("memory-safe") {
            // Scratch memory from the free memory pointer on (not advanced: the call returns from here).
            let m := mload(0x40)
            let hw := add(add(proof, calldataload(add(proof, 0x20))), 0x20)
            let entry := add(add(proof, calldataload(add(proof, 0x40))), 0x20)
            let entriesEnd := add(entry, calldataload(sub(entry, 0x20)))
            // The struct hash input at m (6 words), the EIP-712 input at m + 0xc0, the ecrecover input at m + 0x120.
            calldatacopy(add(m, 0x80), add(hw, 0x20), 0x40)
            mstore(add(m, 0x80), keccak256(add(m, 0x80), 0x40)) // hardwareSignatureHash
            mstore(m, 0x030352a3afa93a98e94bda9577f77735d5b631dd7b9db0db84b850c251368983) // TIME_ATTESTATION_TYPEHASH
            mstore(add(m, 0x20), calldataload(hw)) // cardId
            mstore(add(m, 0x40), calldataload(proof)) // nanoMoment
            mstore(add(m, 0x60), calldataload(add(proof, 0x60))) // accuracy
            mstore(add(m, 0xc0), shl(240, 0x1901))
            mstore(add(m, 0xc2), 0x550927e2d732602b9254069392a8cdeeb0a7a13a05389eb7d43bcb9660038f42) // DOMAIN_SEPARATOR
            let recovered := 1
            for {} lt(entry, entriesEnd) { entry := add(entry, 80) } {
                mstore(add(m, 0xa0), shr(128, calldataload(entry)))
                mstore(add(m, 0xe2), keccak256(m, 0xc0))
                mstore(add(m, 0x120), keccak256(add(m, 0xc0), 0x42))
                let s := calldataload(add(entry, 0x30))
                mstore(add(m, 0x140), add(27, shr(255, s)))
                mstore(add(m, 0x160), calldataload(add(entry, 0x10)))
                mstore(add(m, 0x180), and(s, sub(shl(255, 1), 1)))
                mstore(0x00, 0)
                pop(staticcall(gas(), 0x01, add(m, 0x120), 0x80, 0x00, 0x20))
                recovered := and(recovered, iszero(iszero(mload(0x00))))
            }
            // sha256("ATS/1 HW" ‖ cardId ‖ nanoMoment), then P256VERIFY(h, r, s, x, y).
            mstore(m, shl(192, 0x4154532f31204857))
            mstore(add(m, 8), calldataload(hw))
            mstore(add(m, 40), shl(128, calldataload(proof)))
            pop(staticcall(gas(), 0x02, m, 56, m, 0x20))
            calldatacopy(add(m, 0x20), add(hw, 0x20), 0x40)
            mstore(add(m, 0x60), qx)
            mstore(add(m, 0x80), qy)
            mstore(0x00, 0)
            pop(staticcall(gas(), 0x100, m, 0xa0, 0x00, 0x20))
            mstore(0x00, and(recovered, eq(mload(0x00), 1)))
            return(0x00, 0x20)
        }
    }
}
