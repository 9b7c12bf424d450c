// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {TimeOracle} from "../TimeOracle.sol";
import {NamedWord} from "./NamedWord.sol";

/**
 * @title TimeOracleHarness
 * @notice Test-only oracle whose chain clock can be pinned (as Uniswap v3's test pools override
 * `_blockTimestamp()`), so freshness edges are tested to the nanosecond without mining blocks; it also exposes the
 * oracle's copies of library constants (used by its assembly) under the library names they copy.
 */
contract TimeOracleHarness is TimeOracle {
    uint256 private _pinnedNow;

    constructor(address admin) TimeOracle(admin) {}

    /// @notice Pins the clock to `nowSeconds`; 0 returns to `block.timestamp`.
    function setNow(uint256 nowSeconds) external {
        _pinnedNow = nowSeconds;
    }

    /**
     * @notice Every constant {TimeOracle} copies from {TimeProofLib} or {SnapshotLib} for its assembly, named after
     * the library constant it copies; test/contracts/constants.test.ts compares each with the library's value.
     */
    function assemblyConstants() external pure returns (NamedWord[] memory words) {
        words = new NamedWord[](26);
        words[0] = NamedWord("TimeProofLib.HW_MESSAGE_TAG", bytes32(_HW_MESSAGE_TAG));
        words[1] = NamedWord("TimeProofLib.HW_MESSAGE_LENGTH", bytes32(_HW_MESSAGE_LENGTH));
        words[2] = NamedWord("TimeProofLib.HARDWARE_SIGNATURE_LENGTH", bytes32(_HARDWARE_SIGNATURE_LENGTH));
        words[3] = NamedWord("TimeProofLib.NODE_ENTRY_LENGTH", bytes32(_NODE_ENTRY_LENGTH));
        words[4] = NamedWord("TimeProofLib.TIME_ATTESTATION_TYPEHASH", _TIME_ATTESTATION_TYPEHASH);
        words[5] = NamedWord("TimeProofLib.TYPED_DATA_PREFIX", bytes32(_TYPED_DATA_PREFIX));
        words[6] = NamedWord("TimeProofLib.DOMAIN_SEPARATOR", _DOMAIN_SEPARATOR);
        words[7] = NamedWord("TimeProofLib.P256_N", bytes32(_P256_N));
        words[8] = NamedWord("TimeProofLib.P256_HALF_N", bytes32(_P256_HALF_N));
        words[9] = NamedWord("TimeProofLib.SECP256K1_HALF_N", bytes32(_SECP256K1_HALF_N));
        words[10] = NamedWord("TimeProofLib.S_MASK", bytes32(_S_MASK));
        words[11] = NamedWord("SnapshotLib.DATA_OFFSET", bytes32(_DATA_OFFSET));
        words[12] = NamedWord("SnapshotLib.HEADER_LENGTH", bytes32(_HEADER_LENGTH));
        words[13] = NamedWord("SnapshotLib.MAX_ATTESTATION_AGE_SHIFT", bytes32(_MAX_ATTESTATION_AGE_SHIFT));
        words[14] = NamedWord("SnapshotLib.MAX_FUTURE_DRIFT_SHIFT", bytes32(_MAX_FUTURE_DRIFT_SHIFT));
        words[15] = NamedWord("SnapshotLib.MAX_ACCEPTABLE_DRIFT_SHIFT", bytes32(_MAX_ACCEPTABLE_DRIFT_SHIFT));
        words[16] = NamedWord("SnapshotLib.NODE_QUORUM_BYTE", bytes32(_NODE_QUORUM_BYTE));
        words[17] = NamedWord("SnapshotLib.NODE_COUNT_BYTE", bytes32(_NODE_COUNT_BYTE));
        words[18] = NamedWord("SnapshotLib.CARD_COUNT_BYTE", bytes32(_CARD_COUNT_BYTE));
        words[19] = NamedWord("SnapshotLib.NODE_RECORD_LENGTH", bytes32(_NODE_RECORD_LENGTH));
        words[20] = NamedWord("SnapshotLib.NODE_VALID_FROM_OFFSET", bytes32(_NODE_VALID_FROM_OFFSET));
        words[21] = NamedWord("SnapshotLib.NODE_VALID_UNTIL_OFFSET", bytes32(_NODE_VALID_UNTIL_OFFSET));
        words[22] = NamedWord("SnapshotLib.CARD_RECORD_LENGTH", bytes32(_CARD_RECORD_LENGTH));
        words[23] = NamedWord("SnapshotLib.CARD_PUBLIC_KEY_OFFSET", bytes32(_CARD_PUBLIC_KEY_OFFSET));
        words[24] = NamedWord("SnapshotLib.CARD_VALID_FROM_OFFSET", bytes32(_CARD_VALID_FROM_OFFSET));
        words[25] = NamedWord("SnapshotLib.CARD_VALID_UNTIL_OFFSET", bytes32(_CARD_VALID_UNTIL_OFFSET));
    }

    function _now() internal view override returns (uint256) {
        uint256 pinned = _pinnedNow;
        return pinned == 0 ? block.timestamp : pinned;
    }
}
