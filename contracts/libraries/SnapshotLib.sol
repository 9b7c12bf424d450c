// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/**
 * @title SnapshotLib
 * @notice Layout and writer of the oracle's verification *snapshot*: an immutable data contract whose code is
 * `0x00 ‖ data` (the SSTORE2 pattern, as in Solady; the leading STOP byte makes it uncallable) holding what
 * verification needs — the settings, the active nodes sorted by address with their validity windows, and the
 * active cards with their keys and windows. {TimeOracle} writes one per registry or settings change and reads it
 * back in its assembly hot path, with copies of the layout constants below (inline assembly cannot name another
 * contract's constants); test/contracts/constants.test.ts compares every copy with the value here, by name.
 *
 * Data layout (big-endian, packed), starting at byte {DATA_OFFSET} of the code:
 *   header ({HEADER_LENGTH}): maxAttestationAgeNs u64 ‖ maxFutureDriftNs u64 ‖ maxAcceptableDriftNs u64 ‖
 *                     nodeQuorum u8 ‖ nodeCount u8 ‖ cardCount u8 ‖ 5 zero bytes
 *   nodeCount × {NODE_RECORD_LENGTH}: address (20) ‖ validFromNs u64 ‖ validUntilNs u64, strictly ascending by
 *                     address
 *   cardCount × {CARD_RECORD_LENGTH}: cardId (32) ‖ publicKeyX (32) ‖ publicKeyY (32) ‖ validFromNs u64 ‖
 *                     validUntilNs u64
 * Read as 32-byte words: the u64 settings sit at bit offsets {MAX_ATTESTATION_AGE_SHIFT},
 * {MAX_FUTURE_DRIFT_SHIFT} and {MAX_ACCEPTABLE_DRIFT_SHIFT} of the header word, and the u8 fields are bytes
 * {NODE_QUORUM_BYTE}, {NODE_COUNT_BYTE} and {CARD_COUNT_BYTE} of it (EVM `byte` indexes).
 */
library SnapshotLib {
    /// @notice The settings the header carries, in ns (and the quorum, a count). Also the oracle's storage slot.
    struct Settings {
        uint64 maxAttestationAgeNs;
        uint64 maxFutureDriftNs;
        uint64 maxAcceptableDriftNs;
        uint64 nodeQuorum;
    }

    /// @notice An active node as the snapshot records it (validity window inclusive, ns).
    struct Node {
        address node;
        uint64 validFromNs;
        uint64 validUntilNs;
    }

    /// @notice An active card as the snapshot records it (validity window inclusive, ns).
    struct Card {
        bytes32 cardId;
        bytes32 publicKeyX;
        bytes32 publicKeyY;
        uint64 validFromNs;
        uint64 validUntilNs;
    }

    /// @notice Where the data starts in the snapshot's code: after the one STOP byte.
    uint256 internal constant DATA_OFFSET = 1;
    /// @notice Bytes of the header.
    uint256 internal constant HEADER_LENGTH = 32;
    /// @notice Bit offset of maxAttestationAgeNs (u64) in the header word.
    uint256 internal constant MAX_ATTESTATION_AGE_SHIFT = 192;
    /// @notice Bit offset of maxFutureDriftNs (u64) in the header word.
    uint256 internal constant MAX_FUTURE_DRIFT_SHIFT = 128;
    /// @notice Bit offset of maxAcceptableDriftNs (u64) in the header word.
    uint256 internal constant MAX_ACCEPTABLE_DRIFT_SHIFT = 64;
    /// @notice Byte index (EVM `byte`) of nodeQuorum (u8) in the header word.
    uint256 internal constant NODE_QUORUM_BYTE = 24;
    /// @notice Byte index (EVM `byte`) of nodeCount (u8) in the header word.
    uint256 internal constant NODE_COUNT_BYTE = 25;
    /// @notice Byte index (EVM `byte`) of cardCount (u8) in the header word.
    uint256 internal constant CARD_COUNT_BYTE = 26;

    /// @notice Bytes of a node record: address (20) ‖ validFromNs (8) ‖ validUntilNs (8).
    uint256 internal constant NODE_RECORD_LENGTH = 36;
    /// @notice Offset of validFromNs (u64) in a node record.
    uint256 internal constant NODE_VALID_FROM_OFFSET = 20;
    /// @notice Offset of validUntilNs (u64) in a node record.
    uint256 internal constant NODE_VALID_UNTIL_OFFSET = 28;

    /// @notice Bytes of a card record: cardId (32) ‖ x (32) ‖ y (32) ‖ validFromNs (8) ‖ validUntilNs (8).
    uint256 internal constant CARD_RECORD_LENGTH = 112;
    /// @notice Offset of the public key (x ‖ y, 64 bytes) in a card record.
    uint256 internal constant CARD_PUBLIC_KEY_OFFSET = 32;
    /// @notice Offset of validFromNs (u64) in a card record.
    uint256 internal constant CARD_VALID_FROM_OFFSET = 96;
    /// @notice Offset of validUntilNs (u64) in a card record.
    uint256 internal constant CARD_VALID_UNTIL_OFFSET = 104;

    /// @notice Most records of each kind (and largest quorum) the header's u8 fields hold.
    uint256 internal constant MAX_RECORDS = type(uint8).max;

    /// @dev Creation code that returns the rest of itself as runtime code (SSTORE2, as in Solady):
    /// PUSH2 len, DUP1, PUSH1 0x0a, RETURNDATASIZE, CODECOPY, RETURNDATASIZE, RETURN — 10 bytes, `len` at bytes 1–2.
    uint256 private constant _INIT_CODE_LENGTH = 10;

    /**
     * @notice Sorts `nodes` by address (in place) and deploys a snapshot of `settings`, `nodes` and `cards`.
     * @dev The caller guarantees distinct node addresses, at most {MAX_RECORDS} nodes and cards, and
     * `settings.nodeQuorum <= MAX_RECORDS` (the oracle caps all three at 32). Bounded by those: at most
     * 32 + 255·36 + 255·112 bytes of data.
     * @return pointer the snapshot's address; zero when its deployment failed (out of gas)
     * @return size bytes of data, without the STOP byte
     */
    // solhint-disable-next-line function-max-lines
    function write(
        Settings memory settings,
        Node[] memory nodes,
        Card[] memory cards
    ) internal returns (address pointer, uint256 size) {
        _sortByAddress(nodes);
        size = HEADER_LENGTH + nodes.length * NODE_RECORD_LENGTH + cards.length * CARD_RECORD_LENGTH;

        // init code ‖ 0x00 ‖ data, plus 32 bytes of slack because the packed writes below store whole words.
        bytes memory code = new bytes(_INIT_CODE_LENGTH + DATA_OFFSET + size + 32);
        uint256 header = (uint256(settings.maxAttestationAgeNs) << MAX_ATTESTATION_AGE_SHIFT) |
            (uint256(settings.maxFutureDriftNs) << MAX_FUTURE_DRIFT_SHIFT) |
            (uint256(settings.maxAcceptableDriftNs) << MAX_ACCEPTABLE_DRIFT_SHIFT) |
            (uint256(settings.nodeQuorum) << ((31 - NODE_QUORUM_BYTE) * 8)) | // ≤ MAX_RECORDS, fits a byte
            (nodes.length << ((31 - NODE_COUNT_BYTE) * 8)) | // ≤ MAX_RECORDS
            (cards.length << ((31 - CARD_COUNT_BYTE) * 8)); // ≤ MAX_RECORDS
        uint256 p;
        assembly ("memory-safe") {
            // Writes inside `code` only: every mstore below starts before the end of the data and the buffer has
            // 32 bytes of slack after it. Words are written in ascending order, each overwriting only the zero tail
            // of the previous one.
            let start := add(code, 0x20)
            // PUSH2 (1 + size) DUP1 PUSH1 0x0a RETURNDATASIZE CODECOPY RETURNDATASIZE RETURN
            mstore(start, or(shl(248, 0x61), or(shl(232, add(size, DATA_OFFSET)), shl(176, 0x80600a3d393df3))))
            // Byte 10 stays 0x00: the STOP that makes the data contract uncallable.
            p := add(start, add(_INIT_CODE_LENGTH, DATA_OFFSET))
            mstore(p, header)
            p := add(p, HEADER_LENGTH)
        }
        for (uint256 i = 0; i < nodes.length; ++i) {
            Node memory node = nodes[i];
            address account = node.node;
            uint256 window = (uint256(node.validFromNs) << 64) | node.validUntilNs;
            assembly ("memory-safe") {
                // See above: within `code`, ascending, each write only overwrites the previous zero tail.
                mstore(p, shl(96, account))
                mstore(add(p, NODE_VALID_FROM_OFFSET), shl(128, window))
                p := add(p, NODE_RECORD_LENGTH)
            }
        }
        for (uint256 i = 0; i < cards.length; ++i) {
            Card memory card = cards[i];
            bytes32 cardId = card.cardId;
            bytes32 qx = card.publicKeyX;
            bytes32 qy = card.publicKeyY;
            uint256 window = (uint256(card.validFromNs) << 64) | card.validUntilNs;
            assembly ("memory-safe") {
                // See above: within `code`, ascending, each write only overwrites the previous zero tail.
                mstore(p, cardId)
                mstore(add(p, CARD_PUBLIC_KEY_OFFSET), qx)
                mstore(add(p, add(CARD_PUBLIC_KEY_OFFSET, 32)), qy)
                mstore(add(p, CARD_VALID_FROM_OFFSET), shl(128, window))
                p := add(p, CARD_RECORD_LENGTH)
            }
        }
        assembly ("memory-safe") {
            // Drop the slack from the length, then deploy: the init code returns `0x00 ‖ data` as the runtime code.
            let length := add(add(_INIT_CODE_LENGTH, DATA_OFFSET), size)
            mstore(code, length)
            pointer := create(0, add(code, 0x20), length)
        }
    }

    /// @dev Sorts ascending by address (insertion sort: the caller bounds the length).
    function _sortByAddress(Node[] memory nodes) private pure {
        for (uint256 i = 1; i < nodes.length; ++i) {
            Node memory key = nodes[i];
            uint256 j = i;
            while (j > 0 && nodes[j - 1].node > key.node) {
                nodes[j] = nodes[j - 1];
                --j;
            }
            nodes[j] = key;
        }
    }
}
