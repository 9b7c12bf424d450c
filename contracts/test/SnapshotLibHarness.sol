// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {SnapshotLib} from "../libraries/SnapshotLib.sol";
import {NamedWord} from "./NamedWord.sol";

/**
 * @title SnapshotLibHarness
 * @notice Exposes {SnapshotLib} to the tests: its layout constants by name, and its writer.
 */
contract SnapshotLibHarness {
    /// @notice The snapshot {write} deployed, and its data size.
    event SnapshotWritten(address pointer, uint256 size);

    /// @notice Every layout constant of {SnapshotLib}, by name.
    function layout() external pure returns (NamedWord[] memory words) {
        words = new NamedWord[](16);
        words[0] = NamedWord("SnapshotLib.DATA_OFFSET", bytes32(SnapshotLib.DATA_OFFSET));
        words[1] = NamedWord("SnapshotLib.HEADER_LENGTH", bytes32(SnapshotLib.HEADER_LENGTH));
        words[2] = NamedWord("SnapshotLib.MAX_ATTESTATION_AGE_SHIFT", bytes32(SnapshotLib.MAX_ATTESTATION_AGE_SHIFT));
        words[3] = NamedWord("SnapshotLib.MAX_FUTURE_DRIFT_SHIFT", bytes32(SnapshotLib.MAX_FUTURE_DRIFT_SHIFT));
        words[4] = NamedWord(
            "SnapshotLib.MAX_ACCEPTABLE_DRIFT_SHIFT",
            bytes32(SnapshotLib.MAX_ACCEPTABLE_DRIFT_SHIFT)
        );
        words[5] = NamedWord("SnapshotLib.NODE_QUORUM_BYTE", bytes32(SnapshotLib.NODE_QUORUM_BYTE));
        words[6] = NamedWord("SnapshotLib.NODE_COUNT_BYTE", bytes32(SnapshotLib.NODE_COUNT_BYTE));
        words[7] = NamedWord("SnapshotLib.CARD_COUNT_BYTE", bytes32(SnapshotLib.CARD_COUNT_BYTE));
        words[8] = NamedWord("SnapshotLib.NODE_RECORD_LENGTH", bytes32(SnapshotLib.NODE_RECORD_LENGTH));
        words[9] = NamedWord("SnapshotLib.NODE_VALID_FROM_OFFSET", bytes32(SnapshotLib.NODE_VALID_FROM_OFFSET));
        words[10] = NamedWord("SnapshotLib.NODE_VALID_UNTIL_OFFSET", bytes32(SnapshotLib.NODE_VALID_UNTIL_OFFSET));
        words[11] = NamedWord("SnapshotLib.CARD_RECORD_LENGTH", bytes32(SnapshotLib.CARD_RECORD_LENGTH));
        words[12] = NamedWord("SnapshotLib.CARD_PUBLIC_KEY_OFFSET", bytes32(SnapshotLib.CARD_PUBLIC_KEY_OFFSET));
        words[13] = NamedWord("SnapshotLib.CARD_VALID_FROM_OFFSET", bytes32(SnapshotLib.CARD_VALID_FROM_OFFSET));
        words[14] = NamedWord("SnapshotLib.CARD_VALID_UNTIL_OFFSET", bytes32(SnapshotLib.CARD_VALID_UNTIL_OFFSET));
        words[15] = NamedWord("SnapshotLib.MAX_RECORDS", bytes32(SnapshotLib.MAX_RECORDS));
    }

    /// @notice {SnapshotLib.write} (on a memory copy of the arguments, which it sorts); emits {SnapshotWritten}.
    function write(
        SnapshotLib.Settings calldata settings,
        SnapshotLib.Node[] calldata nodes,
        SnapshotLib.Card[] calldata cards
    ) external returns (address pointer, uint256 size) {
        (pointer, size) = SnapshotLib.write(settings, nodes, cards);
        emit SnapshotWritten(pointer, size);
    }
}
