// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {
    AccessControlDefaultAdminRules
} from "@openzeppelin/contracts/access/extensions/AccessControlDefaultAdminRules.sol";
import {P256} from "@openzeppelin/contracts/utils/cryptography/P256.sol";
import {ITimeOracle, TimeProof} from "./interfaces/ITimeOracle.sol";
import {SnapshotLib} from "./libraries/SnapshotLib.sol";
import {TimeProofLib} from "./libraries/TimeProofLib.sol";

/**
 * @title TimeOracle
 * @notice Registry of time cards and attesting nodes, verifier of time proofs (docs/protocol.md §6) and store of the
 * latest verified proof. Scheduling lives in its own deployment, {TimeScheduler}, which verifies through
 * {verifyTimeProof} like every other client, so the oracle's code, function dispatch and gas do not move with it.
 *
 * Design: the authoritative registry lives in ordinary storage (mappings plus lists of the active entries, read
 * through {getCard}, {getNode}, {nodes}, {cards}). What verification needs — the settings, the active nodes sorted
 * by address with their validity windows, and the active cards with their keys and windows — is copied into an
 * immutable *snapshot* written by {SnapshotLib} (an SSTORE2 data contract; the layout is documented there). Every
 * registry or settings change writes a new snapshot, and one storage slot holds its address and size. A
 * verification therefore reads one cold slot and one cold account instead of a slot per node and three per card,
 * and looks nodes up in memory. Sizes are bounded ({MAX_NODES}, {MAX_CARDS}), so the snapshot, the loops over it
 * and the rewrite cost are bounded too.
 */
contract TimeOracle is ITimeOracle, AccessControlDefaultAdminRules {
    /// @notice May register cards and nodes (and revoke / deactivate them).
    bytes32 public constant REGISTRAR_ROLE = keccak256("REGISTRAR_ROLE");
    /// @notice May only revoke cards and deactivate nodes: the emergency brake.
    bytes32 public constant GUARDIAN_ROLE = keccak256("GUARDIAN_ROLE");

    /// @notice Most active nodes (bounds the snapshot and the verification loop).
    uint256 public constant MAX_NODES = 32;
    /// @notice Most active cards (bounds the snapshot and the card lookup).
    uint256 public constant MAX_CARDS = 32;
    /// @notice Most node entries a proof may carry: more cannot be distinct active nodes.
    uint256 public constant MAX_NODE_ENTRIES = MAX_NODES;

    /**
     * @notice Seconds between the start of a `DEFAULT_ADMIN_ROLE` transfer (or renouncement) and the moment the new
     * admin may accept it ({AccessControlDefaultAdminRules}): a mistyped address or a stolen admin key cannot take
     * the registry over in one transaction, and there is time to {cancelDefaultAdminTransfer}. The admin can change
     * it ({changeDefaultAdminDelay}, itself delayed).
     */
    uint48 public constant INITIAL_ADMIN_TRANSFER_DELAY_SECONDS = 2 days;

    /// @notice Upper bound of `maxAttestationAge` and `maxFutureDrift`: one day, in ns.
    uint64 public constant MAX_TIME_BOUND_NS = 86_400 * 1e9;

    /// @notice Default settings (docs/protocol.md §6.3): 60 s, 15 s, 1,000 ns, quorum 1.
    uint64 public constant DEFAULT_MAX_ATTESTATION_AGE_NS = 60 * 1e9;
    uint64 public constant DEFAULT_MAX_FUTURE_DRIFT_NS = 15 * 1e9;
    uint64 public constant DEFAULT_MAX_ACCEPTABLE_DRIFT_NS = 1_000;
    uint64 public constant DEFAULT_NODE_QUORUM = 1;

    /// @dev Outcomes of {_verifyFast}.
    uint256 private constant _INVALID = 0;
    uint256 private constant _VALID = 1;
    uint256 private constant _UNCONFIRMED = 2;

    // ---- Copies for the assembly of {_verifyFast}, which cannot name another contract's constants. Each is named
    // after the library constant it copies (with a leading underscore), and test/contracts/constants.test.ts
    // compares every one, by name, with the library's value (TimeOracleHarness exposes them). Internal, not
    // private, only so that the harness can read them.

    /// @dev {TimeProofLib.HW_MESSAGE_TAG} ("ATS/1 HW"); left-aligned in assembly, as every bytesN constant.
    bytes8 internal constant _HW_MESSAGE_TAG = 0x4154532f31204857;
    /// @dev {TimeProofLib.HW_MESSAGE_LENGTH}.
    uint256 internal constant _HW_MESSAGE_LENGTH = 56;
    /// @dev {TimeProofLib.HARDWARE_SIGNATURE_LENGTH}.
    uint256 internal constant _HARDWARE_SIGNATURE_LENGTH = 96;
    /// @dev {TimeProofLib.NODE_ENTRY_LENGTH}.
    uint256 internal constant _NODE_ENTRY_LENGTH = 80;
    /// @dev {TimeProofLib.TIME_ATTESTATION_TYPEHASH}.
    bytes32 internal constant _TIME_ATTESTATION_TYPEHASH =
        0x030352a3afa93a98e94bda9577f77735d5b631dd7b9db0db84b850c251368983;
    /// @dev {TimeProofLib.TYPED_DATA_PREFIX} (0x1901); left-aligned in assembly.
    bytes2 internal constant _TYPED_DATA_PREFIX = 0x1901;
    /// @dev {TimeProofLib.DOMAIN_SEPARATOR}.
    bytes32 internal constant _DOMAIN_SEPARATOR = 0x550927e2d732602b9254069392a8cdeeb0a7a13a05389eb7d43bcb9660038f42;
    /// @dev {TimeProofLib.P256_N}.
    uint256 internal constant _P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551;
    /// @dev {TimeProofLib.P256_HALF_N}.
    uint256 internal constant _P256_HALF_N = 0x7FFFFFFF800000007FFFFFFFFFFFFFFFDE737D56D38BCF4279DCE5617E3192A8;
    /// @dev {TimeProofLib.SECP256K1_HALF_N}.
    uint256 internal constant _SECP256K1_HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;
    /// @dev {TimeProofLib.S_MASK}.
    uint256 internal constant _S_MASK = (1 << 255) - 1;
    /// @dev {SnapshotLib.DATA_OFFSET}.
    uint256 internal constant _DATA_OFFSET = 1;
    /// @dev {SnapshotLib.HEADER_LENGTH}.
    uint256 internal constant _HEADER_LENGTH = 32;
    /// @dev {SnapshotLib.MAX_ATTESTATION_AGE_SHIFT}.
    uint256 internal constant _MAX_ATTESTATION_AGE_SHIFT = 192;
    /// @dev {SnapshotLib.MAX_FUTURE_DRIFT_SHIFT}.
    uint256 internal constant _MAX_FUTURE_DRIFT_SHIFT = 128;
    /// @dev {SnapshotLib.MAX_ACCEPTABLE_DRIFT_SHIFT}.
    uint256 internal constant _MAX_ACCEPTABLE_DRIFT_SHIFT = 64;
    /// @dev {SnapshotLib.NODE_QUORUM_BYTE}.
    uint256 internal constant _NODE_QUORUM_BYTE = 24;
    /// @dev {SnapshotLib.NODE_COUNT_BYTE}.
    uint256 internal constant _NODE_COUNT_BYTE = 25;
    /// @dev {SnapshotLib.CARD_COUNT_BYTE}.
    uint256 internal constant _CARD_COUNT_BYTE = 26;
    /// @dev {SnapshotLib.NODE_RECORD_LENGTH}.
    uint256 internal constant _NODE_RECORD_LENGTH = 36;
    /// @dev {SnapshotLib.NODE_VALID_FROM_OFFSET}.
    uint256 internal constant _NODE_VALID_FROM_OFFSET = 20;
    /// @dev {SnapshotLib.NODE_VALID_UNTIL_OFFSET}.
    uint256 internal constant _NODE_VALID_UNTIL_OFFSET = 28;
    /// @dev {SnapshotLib.CARD_RECORD_LENGTH}.
    uint256 internal constant _CARD_RECORD_LENGTH = 112;
    /// @dev {SnapshotLib.CARD_PUBLIC_KEY_OFFSET}.
    uint256 internal constant _CARD_PUBLIC_KEY_OFFSET = 32;
    /// @dev {SnapshotLib.CARD_VALID_FROM_OFFSET}.
    uint256 internal constant _CARD_VALID_FROM_OFFSET = 96;
    /// @dev {SnapshotLib.CARD_VALID_UNTIL_OFFSET}.
    uint256 internal constant _CARD_VALID_UNTIL_OFFSET = 104;

    // ---- Fixed scratch memory of {_verifyFast} (layout there).
    /// @dev The struct hash input, 6 words; also sha256's and P256VERIFY's input, after the entries.
    uint256 private constant _SCRATCH_STRUCT = 0x80;
    /// @dev The EIP-712 digest input, 0x1901 ‖ DOMAIN_SEPARATOR ‖ structHash (66 bytes).
    uint256 private constant _SCRATCH_TYPED = 0x140;
    /// @dev The ecrecover input, digest ‖ v ‖ r ‖ s.
    uint256 private constant _SCRATCH_RECOVER = 0x180;
    /// @dev The snapshot copy: its header here, its node records after it ({_SCRATCH_NODES}).
    uint256 private constant _SCRATCH_SNAPSHOT = 0x200;
    /// @dev The first node record of the snapshot copy.
    /// _SCRATCH_SNAPSHOT + _HEADER_LENGTH, written out: inline assembly takes only literal constants (a wrong value
    /// misreads every node record, and every valid proof in the tests would fail).
    uint256 private constant _SCRATCH_NODES = 0x220;

    /// @dev The current snapshot and the registry epoch, in one slot (the settings, {SnapshotLib.Settings}, fill
    /// another). Verification reads this slot anyway, so consumers read the epoch warm ({registryEpoch}).
    struct SnapshotRef {
        address pointer;
        uint32 size; // bytes of data, without the leading STOP byte
        uint64 registryEpoch; // {registryEpoch}
    }

    /// @dev `listIndex` is the 1-based position in the active list, 0 when not listed.
    struct CardRecord {
        bytes32 publicKeyX;
        bytes32 publicKeyY;
        uint64 validFromNs;
        uint64 validUntilNs;
        CardStatus status;
        uint32 listIndex;
    }

    struct NodeRecord {
        uint64 validFromNs;
        uint64 validUntilNs;
        NodeStatus status;
        uint32 listIndex;
    }

    SnapshotLib.Settings private _settings;
    SnapshotRef private _snapshot;

    mapping(bytes32 cardId => CardRecord) private _cards;
    mapping(address node => NodeRecord) private _nodes;
    bytes32[] private _cardList;
    address[] private _nodeList;

    // The latest submitted proof: nanoMoment and accuracy share a slot.
    uint128 private _latestNanoMoment;
    uint32 private _latestAccuracy;
    bytes private _latestHardwareSignature;
    bytes private _latestNodeSignature;

    /**
     * @param admin receives `DEFAULT_ADMIN_ROLE` (grants the other roles, changes settings). It is handed on in two
     * steps with {INITIAL_ADMIN_TRANSFER_DELAY_SECONDS} between them, and never granted or renounced in one.
     */
    constructor(address admin) AccessControlDefaultAdminRules(INITIAL_ADMIN_TRANSFER_DELAY_SECONDS, admin) {
        _settings = SnapshotLib.Settings({
            maxAttestationAgeNs: DEFAULT_MAX_ATTESTATION_AGE_NS,
            maxFutureDriftNs: DEFAULT_MAX_FUTURE_DRIFT_NS,
            maxAcceptableDriftNs: DEFAULT_MAX_ACCEPTABLE_DRIFT_NS,
            nodeQuorum: DEFAULT_NODE_QUORUM
        });
        _writeSnapshot();
    }

    // ================================================================================================ registry

    /// @inheritdoc ITimeOracle
    function registerCard(
        bytes32 publicKeyX,
        bytes32 publicKeyY,
        uint64 validFromNs,
        uint64 validUntilNs
    ) external onlyRole(REGISTRAR_ROLE) returns (bytes32 cardId) {
        if (!P256.isValidPublicKey(publicKeyX, publicKeyY)) revert TimeOracleInvalidPublicKey(publicKeyX, publicKeyY);
        if (validFromNs > validUntilNs) revert TimeOracleInvalidValidityWindow(validFromNs, validUntilNs);
        cardId = sha256(abi.encodePacked(bytes1(0x04), publicKeyX, publicKeyY));
        CardRecord storage card = _cards[cardId];
        if (card.status == CardStatus.Revoked) revert TimeOracleCardRevoked(cardId);
        // Narrowed: moments the card signed may now fall outside what is trusted. (Widened: nothing lost trust.)
        bool windowNarrowed = card.status == CardStatus.Active &&
            (validFromNs > card.validFromNs || validUntilNs < card.validUntilNs);
        if (card.status == CardStatus.None) {
            if (_cardList.length >= MAX_CARDS) revert TimeOracleTooManyCards(MAX_CARDS);
            _cardList.push(cardId);
            card.publicKeyX = publicKeyX;
            card.publicKeyY = publicKeyY;
            card.status = CardStatus.Active;
            card.listIndex = uint32(_cardList.length); // ≤ MAX_CARDS
        }
        card.validFromNs = validFromNs;
        card.validUntilNs = validUntilNs;
        emit CardRegistered(cardId, publicKeyX, publicKeyY, validFromNs, validUntilNs);
        _writeSnapshot();
        if (windowNarrowed) _distrustEarlierTime();
    }

    /// @inheritdoc ITimeOracle
    function revokeCard(bytes32 cardId) external {
        _checkRegistrarOrGuardian();
        CardRecord storage card = _cards[cardId];
        if (card.status == CardStatus.None) revert TimeOracleUnknownCard(cardId);
        if (card.status == CardStatus.Revoked) revert TimeOracleCardRevoked(cardId);
        card.status = CardStatus.Revoked;
        _removeCardFromList(card);
        emit CardRevoked(cardId, msg.sender);
        _writeSnapshot();
        _distrustEarlierTime();
    }

    /// @inheritdoc ITimeOracle
    function registerNode(address node, uint64 validFromNs, uint64 validUntilNs) external onlyRole(REGISTRAR_ROLE) {
        if (node == address(0)) revert TimeOracleInvalidNode(node);
        if (validFromNs > validUntilNs) revert TimeOracleInvalidValidityWindow(validFromNs, validUntilNs);
        NodeRecord storage record = _nodes[node];
        bool windowNarrowed = record.status == NodeStatus.Active &&
            (validFromNs > record.validFromNs || validUntilNs < record.validUntilNs);
        if (record.status != NodeStatus.Active) {
            if (_nodeList.length >= MAX_NODES) revert TimeOracleTooManyNodes(MAX_NODES);
            _nodeList.push(node);
            record.status = NodeStatus.Active;
            record.listIndex = uint32(_nodeList.length); // ≤ MAX_NODES
        }
        record.validFromNs = validFromNs;
        record.validUntilNs = validUntilNs;
        emit NodeRegistered(node, validFromNs, validUntilNs);
        SnapshotLib.Node[] memory nodeRecords = _writeSnapshot();
        if (windowNarrowed) {
            _distrustEarlierTime();
            _reportUnreachableQuorum(nodeRecords);
        }
    }

    /// @inheritdoc ITimeOracle
    function deactivateNode(address node) external {
        _checkRegistrarOrGuardian();
        NodeRecord storage record = _nodes[node];
        if (record.status != NodeStatus.Active) revert TimeOracleNodeNotActive(node);
        record.status = NodeStatus.Inactive;
        _removeNodeFromList(record);
        emit NodeDeactivated(node, msg.sender);
        SnapshotLib.Node[] memory nodeRecords = _writeSnapshot();
        _distrustEarlierTime();
        _reportUnreachableQuorum(nodeRecords);
    }

    // ================================================================================================ settings

    /// @inheritdoc ITimeOracle
    function setMaxAttestationAge(uint64 maxAttestationAgeNs) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _checkRange(Setting.MaxAttestationAge, maxAttestationAgeNs, 1, MAX_TIME_BOUND_NS);
        emit SettingChanged(Setting.MaxAttestationAge, _settings.maxAttestationAgeNs, maxAttestationAgeNs);
        _settings.maxAttestationAgeNs = maxAttestationAgeNs;
        _writeSnapshot();
    }

    /// @inheritdoc ITimeOracle
    function setMaxFutureDrift(uint64 maxFutureDriftNs) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _checkRange(Setting.MaxFutureDrift, maxFutureDriftNs, 0, MAX_TIME_BOUND_NS);
        uint64 previous = _settings.maxFutureDriftNs;
        emit SettingChanged(Setting.MaxFutureDrift, previous, maxFutureDriftNs);
        _settings.maxFutureDriftNs = maxFutureDriftNs;
        _writeSnapshot();
        // Tightened: the stored proof may be further ahead than now allowed.
        if (maxFutureDriftNs < previous) _clearStoredProof();
    }

    /// @inheritdoc ITimeOracle
    function setMaxAcceptableDrift(uint64 maxAcceptableDriftNs) external onlyRole(DEFAULT_ADMIN_ROLE) {
        // `accuracy` is a uint32: a larger bound would mean "no bound" and is refused as a likely mistake.
        _checkRange(Setting.MaxAcceptableDrift, maxAcceptableDriftNs, 0, type(uint32).max);
        uint64 previous = _settings.maxAcceptableDriftNs;
        emit SettingChanged(Setting.MaxAcceptableDrift, previous, maxAcceptableDriftNs);
        _settings.maxAcceptableDriftNs = maxAcceptableDriftNs;
        _writeSnapshot();
        // Tightened: the stored proof's accuracy may now be refused.
        if (maxAcceptableDriftNs < previous) _clearStoredProof();
    }

    /// @inheritdoc ITimeOracle
    function setNodeQuorum(uint64 quorum) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _checkRange(Setting.NodeQuorum, quorum, 1, MAX_NODES);
        uint64 previous = _settings.nodeQuorum;
        emit SettingChanged(Setting.NodeQuorum, previous, quorum);
        _settings.nodeQuorum = quorum;
        // A quorum the active nodes cannot meet makes every proof invalid, silently: refuse it. Counted from the
        // records the snapshot write has just read (the revert undoes the write).
        uint256 activeNodes = _activeNodeCount(_writeSnapshot());
        if (quorum > activeNodes) revert TimeOracleQuorumAboveActiveNodes(quorum, activeNodes);
        // Raised: the stored proof may carry fewer node entries than now required.
        if (quorum > previous) _clearStoredProof();
    }

    // ================================================================================================ time

    /// @inheritdoc ITimeOracle
    function verifyTimeProof(TimeProof calldata proof) external view returns (bool valid) {
        // A final outcome (valid or invalid) is returned to our caller from inside {_verifyFast} (answerCaller):
        // only an unconfirmed card signature comes back here.
        (uint256 outcome, uint256 p256Input) = _verifyFast(proof, _clockNs(), true);
        return _conclude(outcome, p256Input);
    }

    /// @inheritdoc ITimeOracle
    function submitTimeProof(TimeProof calldata proof) external {
        uint128 nanoMoment = proof.nanoMoment;
        uint128 latest = _latestNanoMoment;
        // Cheap check first; 0 means "nothing stored", and a valid proof is never at moment 0 (too old).
        if (nanoMoment <= latest) revert TimeOracleTimeProofNotNewer(nanoMoment, latest);
        if (!_isValidTimeProof(proof)) revert TimeOracleInvalidTimeProof(nanoMoment);
        _latestNanoMoment = nanoMoment;
        _latestAccuracy = proof.accuracy;
        _latestHardwareSignature = proof.hardwareSignature;
        _latestNodeSignature = proof.nodeSignature;
        emit TimeProofSubmitted(nanoMoment, bytes32(proof.hardwareSignature[:32]), proof.accuracy, msg.sender);
    }

    /**
     * @dev Discards the stored proof (if any). Called when a key is removed from the registry, when a registered
     * key's validity window changes, and when a setting tightens (quorum raised, accuracy or future-drift bound
     * lowered): the stored proof may no longer pass {verifyTimeProof}, so readers of {getCurrentTime} (and the
     * bridge's `sendTime`) must not keep trusting it, and a proof dated ahead by a compromised key must not keep
     * honest submissions out ({TimeOracleTimeProofNotNewer}) until real time catches up. Clearing is simpler than
     * re-checking it here, and the next submission of any node refills it.
     */
    function _clearStoredProof() private {
        uint128 nanoMoment = _latestNanoMoment;
        if (nanoMoment == 0) return;
        delete _latestNanoMoment;
        delete _latestAccuracy;
        delete _latestHardwareSignature;
        delete _latestNodeSignature;
        emit TimeProofCleared(nanoMoment);
    }

    /**
     * @dev A key lost trust (card revoked, node deactivated, a validity window narrowed): what it signed may be
     * false time, up to `maxFutureDrift` ahead. Clears the stored proof and starts a new registry epoch, on which
     * consumers and the bridge stop reporting watermarks beyond what the oracle accepts now ({registryEpoch}).
     */
    function _distrustEarlierTime() private {
        _clearStoredProof();
        uint64 previous = _snapshot.registryEpoch;
        // The last nanosecond of the chain clock's current second, as {registryEpoch} documents. Consumers and the
        // bridge only compare it for equality (they bound old watermarks by the chain clock and maxFutureDrift, not
        // by this value); the time in it tells an observer when trust was last withdrawn.
        uint256 secondEndNs = _clockNs() + TimeProofLib.NS_PER_SECOND - 1;
        // Strictly increasing, so that two removals in one block are two epochs; saturates in the year 2554.
        uint256 epoch = secondEndNs > previous ? secondEndNs : uint256(previous) + 1;
        uint64 next = epoch > type(uint64).max ? type(uint64).max : uint64(epoch);
        _snapshot.registryEpoch = next;
        emit RegistryEpochStarted(next);
    }

    /// @inheritdoc ITimeOracle
    function getCurrentTime() public view returns (TimeProof memory proof) {
        if (_latestNanoMoment == 0) revert TimeOracleNoTime();
        return TimeProof({
            nanoMoment: _latestNanoMoment,
            hardwareSignature: _latestHardwareSignature,
            nodeSignature: _latestNodeSignature,
            accuracy: _latestAccuracy
        });
    }

    /// @inheritdoc ITimeOracle
    function getTimeNoOlderThan(uint128 maxAgeNs) external view returns (TimeProof memory proof) {
        proof = getCurrentTime();
        uint256 nowNs = _now() * TimeProofLib.NS_PER_SECOND;
        // A proof ahead of the chain clock (within maxFutureDrift when it was submitted) has age 0.
        if (uint256(proof.nanoMoment) + maxAgeNs < nowNs) {
            revert TimeOracleTimeTooOld(proof.nanoMoment, maxAgeNs, nowNs);
        }
    }

    // ================================================================================================ views

    /// @inheritdoc ITimeOracle
    function getCard(bytes32 cardId) external view returns (Card memory card) {
        CardRecord storage record = _cards[cardId];
        return Card({
            publicKeyX: record.publicKeyX,
            publicKeyY: record.publicKeyY,
            validFromNs: record.validFromNs,
            validUntilNs: record.validUntilNs,
            status: record.status
        });
    }

    /// @inheritdoc ITimeOracle
    function getNode(address node) external view returns (Node memory info) {
        NodeRecord storage record = _nodes[node];
        return Node({validFromNs: record.validFromNs, validUntilNs: record.validUntilNs, status: record.status});
    }

    /// @inheritdoc ITimeOracle
    function nodes() external view returns (address[] memory) {
        return _nodeList;
    }

    /// @inheritdoc ITimeOracle
    function cards() external view returns (bytes32[] memory) {
        return _cardList;
    }

    /// @inheritdoc ITimeOracle
    function maxAttestationAge() external view returns (uint64) {
        return _settings.maxAttestationAgeNs;
    }

    /// @inheritdoc ITimeOracle
    function maxFutureDrift() external view returns (uint64) {
        return _settings.maxFutureDriftNs;
    }

    /// @inheritdoc ITimeOracle
    function maxAcceptableDrift() external view returns (uint64) {
        return _settings.maxAcceptableDriftNs;
    }

    /// @inheritdoc ITimeOracle
    function nodeQuorum() external view returns (uint64) {
        return _settings.nodeQuorum;
    }

    /// @inheritdoc ITimeOracle
    function snapshot() external view returns (address) {
        return _snapshot.pointer;
    }

    /// @inheritdoc ITimeOracle
    function registryEpoch() external view returns (uint64) {
        return _snapshot.registryEpoch;
    }

    // ================================================================================================ verification

    /**
     * @dev docs/protocol.md §6; never reverts on malformed proof bytes. Hot path {_verifyFast} is written in assembly
     * to meet the gas goals (scripts/bench-gas.ts); it computes exactly what {TimeProofLib}'s readable functions
     * compute (hwDigest, hardwareSignatureHash, timeAttestationDigest, recoverNode), and the tests check both
     * against the same golden vectors. The result does not depend on the order of the checks, so the cheap ones
     * run first and the P-256 precompile last.
     */
    function _isValidTimeProof(TimeProof calldata proof) private view returns (bool) {
        (uint256 outcome, uint256 p256Input) = _verifyFast(proof, _clockNs(), false);
        return _conclude(outcome, p256Input);
    }

    /// @dev The outcome of {_verifyFast} as a boolean.
    function _conclude(uint256 outcome, uint256 p256Input) private view returns (bool) {
        // Every rule held but the precompile did not confirm the card signature: either it is invalid or the
        // precompile is absent. The library tells the two apart and falls back to OpenZeppelin's Solidity verifier.
        if (outcome == _UNCONFIRMED) return _verifyP256At(p256Input);
        return outcome == _VALID;
    }

    /// @dev The chain clock in nanoseconds.
    function _clockNs() private view returns (uint256 nowNs) {
        // Cannot overflow: clients keep block timestamps as 64-bit integers, and 2^64 · 10^9 < 2^94. Unchecked also
        // keeps verification free of reverts.
        unchecked {
            nowNs = _now() * TimeProofLib.NS_PER_SECOND;
        }
    }

    /// @dev The chain clock, seconds. The one overridable clock of the oracle (TimeOracleHarness pins it).
    function _now() internal view virtual returns (uint256) {
        return block.timestamp;
    }

    /**
     * @dev All of docs/protocol.md §6 in one pass over calldata and the snapshot. Runs before anything is allocated
     * (its callers, {verifyTimeProof} and {_isValidTimeProof} from {submitTimeProof}, take only calldata and call it
     * first), so the free memory pointer is 0x80 and its scratch memory sits at fixed addresses from there on
     * (`_SCRATCH_*`): a constant is one PUSH where an offset from a pointer on the stack costs three opcodes, at
     * each memory access. A free memory pointer past 0x80 fails the proof before any write.
     * @param answerCaller set only by {verifyTimeProof}: a final outcome (_INVALID or _VALID) then ends the call
     * at once with the ABI-encoded bool (assembly `return`), which skips the Solidity epilogue on the hot path
     * @return outcome _INVALID, _VALID, or _UNCONFIRMED (all rules hold except that the P-256 precompile did not
     * answer "valid")
     * @return p256Input memory address of the precompile input h ‖ r ‖ s ‖ x ‖ y (5 words), when _UNCONFIRMED
     */
    // solhint-disable-next-line function-max-lines
    function _verifyFast(
        TimeProof calldata proof,
        uint256 nowNs,
        bool answerCaller
    ) private view returns (uint256 outcome, uint256 p256Input) {
        assembly ("memory-safe") {
            // One pass; every `break` leaves outcome = _INVALID (0). Checks whose operands are at hand are OR-ed
            // into one `failed` flag tested by a single branch (an OR is cheaper than a branch); the result does
            // not depend on their order. Every check that guards a later memory read or loop bound is tested
            // before that read or loop.
            //
            // Memory, at fixed addresses (see @dev; 0x80 = _SCRATCH_STRUCT):
            //   0x80..0x140   abi.encode(TIME_ATTESTATION_TYPEHASH, cardId, nanoMoment, accuracy,
            //                 hardwareSignatureHash, nodeTimestamp): the struct hash input, nodeTimestamp per entry
            //   0x140..0x182  0x1901 ‖ DOMAIN_SEPARATOR ‖ structHash: the EIP-712 digest input, structHash per entry
            //   0x180..0x200  digest ‖ v ‖ r ‖ s: the ecrecover input (its digest overwrites the last 2 bytes of
            //                 structHash once hashed)
            //   0x200..       the snapshot copy (header, node records, card records)
            //   0x80..0x120   after the entries: sha256's input (56 bytes), then P256VERIFY's h ‖ r ‖ s ‖ x ‖ y
            //   0x00..0x20    the precompiles' output (scratch space)
            for {} 1 {} {
                if xor(mload(0x40), _SCRATCH_STRUCT) { break } // memory already allocated: see @dev
                // Offsets relative to `proof` of the hardware signature and of the node entries (checked below).
                let hw := calldataload(add(proof, 0x20))
                let entry := calldataload(add(proof, 0x40))
                let entriesEnd
                let nodesEnd
                let card // the card's record in the snapshot copy, once found
                let failed
                {
                    // ---- The snapshot, copied to memory. SnapshotRef packs the address in the low 160 bits, the
                    // uint32 size above it and the registry epoch above that; the size is what _writeSnapshot stored
                    // (≤ 4,768 bytes). EXTCODECOPY reads its address operand modulo 2^160 (Yellow Paper), so the bits
                    // above need no mask there. Nothing here depends on the proof.
                    let header
                    {
                        let ref := sload(_snapshot.slot)
                        extcodecopy(ref, _SCRATCH_SNAPSHOT, _DATA_OFFSET, and(shr(160, ref), 0xffffffff))
                        header := mload(_SCRATCH_SNAPSHOT)
                    }
                    // header = maxAttestationAgeNs u64 ‖ maxFutureDriftNs u64 ‖ maxAcceptableDriftNs u64 ‖ quorum u8
                    // ‖ nodeCount u8 ‖ cardCount u8 (bytes 24, 25 and 26, read with `byte`). Records: nodeCount × 36
                    // bytes from _SCRATCH_NODES, then cardCount × 112 bytes ({SnapshotLib}).
                    nodesEnd := add(_SCRATCH_NODES, mul(byte(_NODE_COUNT_BYTE, header), _NODE_RECORD_LENGTH))

                    // ---- The proof's shape, read straight from calldata (cheaper than Solidity's accessors, and
                    // never reverting). Tuple at `proof`: nanoMoment, offset of hardwareSignature, offset of
                    // nodeSignature, accuracy; offsets are relative to `proof` and point at a length word followed
                    // by the bytes. Offsets are bounded (< 2^32) and every byte string must end inside the calldata,
                    // so a proof that passes reads exactly what Solidity's accessors would. A dirty uint128/uint32
                    // word is malformed input: false. Sums computed from operands that fail a check may wrap; they
                    // only feed checks OR-ed into the same flag, so they cannot make a failing proof pass.
                    {
                        let nanoMoment := calldataload(proof)
                        let accuracy := calldataload(add(proof, 0x60))
                        // Into the struct hash input at once (a failing proof never hashes it).
                        mstore(add(_SCRATCH_STRUCT, 0x40), nanoMoment)
                        mstore(add(_SCRATCH_STRUCT, 0x60), accuracy)
                        // (Shifts instead of comparisons with masks: a clean uint128 has nothing above bit 127, etc.)
                        failed := or(or(shr(128, nanoMoment), shr(32, accuracy)), shr(32, or(hw, entry)))
                        // Rules 3 and 4 (sums of a u128 and a u64 cannot overflow 256 bits).
                        failed := or(
                            failed,
                            or(
                                or(
                                    // rule 3: more than maxAttestationAge old
                                    lt(add(nanoMoment, shr(_MAX_ATTESTATION_AGE_SHIFT, header)), nowNs),
                                    // rule 3: more than maxFutureDrift ahead
                                    gt(
                                        nanoMoment,
                                        add(nowNs, and(shr(_MAX_FUTURE_DRIFT_SHIFT, header), 0xffffffffffffffff))
                                    )
                                ),
                                // rule 4: above maxAcceptableDrift
                                gt(accuracy, and(shr(_MAX_ACCEPTABLE_DRIFT_SHIFT, header), 0xffffffffffffffff))
                            )
                        )
                    }
                    hw := add(add(proof, hw), 0x20) // the 96 bytes, after their length word
                    entry := add(proof, entry) // the length word, then the entries
                    {
                        let length := calldataload(entry)
                        let entryCount := div(length, _NODE_ENTRY_LENGTH)
                        entry := add(entry, 0x20)
                        entriesEnd := add(entry, length)
                        failed := or(
                            or(
                                failed,
                                // Rule 1: exactly HARDWARE_SIGNATURE_LENGTH (96) bytes, inside the calldata.
                                or(
                                    xor(calldataload(sub(hw, 0x20)), _HARDWARE_SIGNATURE_LENGTH),
                                    gt(add(hw, _HARDWARE_SIGNATURE_LENGTH), calldatasize())
                                )
                            ),
                            or(
                                // Rule 2: a whole number of NODE_ENTRY_LENGTH (80) byte entries, at most
                                // MAX_NODE_ENTRIES (so the loop is bounded), inside the calldata, and at least
                                // nodeQuorum of them: the quorum is at least 1 (the constructor's default, and
                                // setNodeQuorum's lower bound), so an empty list fails too.
                                or(mod(length, _NODE_ENTRY_LENGTH), gt(entryCount, MAX_NODE_ENTRIES)),
                                or(gt(entriesEnd, calldatasize()), lt(entryCount, byte(_NODE_QUORUM_BYTE, header)))
                            )
                        )
                    }
                    // ---- Rule 1: the card is among the snapshot's card records (so registered and not revoked).
                    // The search stops at a copy of the cardId written just past the records (free scratch memory),
                    // so it needs no bound check: reaching that copy means unknown or revoked.
                    {
                        let cardId := calldataload(hw)
                        mstore(add(_SCRATCH_STRUCT, 0x20), cardId) // into the struct hash input
                        let cardsEnd := add(nodesEnd, mul(byte(_CARD_COUNT_BYTE, header), _CARD_RECORD_LENGTH))
                        mstore(cardsEnd, cardId)
                        card := nodesEnd
                        for {} xor(mload(card), cardId) { card := add(card, _CARD_RECORD_LENGTH) } {}
                        failed := or(failed, eq(card, cardsEnd))
                    }
                }
                // ---- Rule 1, continued: the card is valid now, and its signature's r and s are in range, s low (the
                // precompile would accept a high s). When the card is absent (card = cardsEnd) the words read at
                // card + 96..112 lie in free scratch memory after the copy, and the result is discarded.
                failed := or(
                    or(
                        failed,
                        // not valid now: validFromNs u64 at card + 96, validUntilNs u64 at card + 104
                        or(
                            lt(nowNs, shr(192, mload(add(card, _CARD_VALID_FROM_OFFSET)))),
                            gt(nowNs, shr(192, mload(add(card, _CARD_VALID_UNTIL_OFFSET))))
                        )
                    ),
                    or(
                        // r outside [1, n − 1] (r − 1 wraps for 0)
                        gt(sub(calldataload(add(hw, 32)), 1), sub(_P256_N, 2)),
                        // s outside [1, n / 2]: zero or high (s − 1 wraps for 0)
                        gt(sub(calldataload(add(hw, 64)), 1), sub(_P256_HALF_N, 1))
                    )
                )
                if failed { break }

                // A sentinel closes the node records: a word of ones over the first card record's cardId (no
                // longer read: the card was found, and only its key and window are read, further on). The node
                // search below then stops at nodesEnd at the latest, as at any address ≥ the signer, without a
                // bound check; and the sentinel never passes for a node: it would need the signer 0xff…ff, and its
                // validFromNs (ones) lies after any chain clock before the year 2554.
                mstore(nodesEnd, not(0))

                // ---- Rule 2: each entry of nodeSignature (calldata [entry, entriesEnd), whole 80-byte entries)
                // recovers (low-S) to an active node valid now, addresses strictly ascending. The node records
                // (closed by the sentinel) are sorted by address and distinct, so one merge-style pass finds every
                // node: `cursor` only moves forward, past each node found. That also enforces the strict order: a
                // signer at or below the previous one meets a record above it (the one after the previous signer's)
                // and fails the equality, as does address 0, since no record holds it (registerNode refuses it).
                calldatacopy(add(_SCRATCH_STRUCT, 0x80), add(hw, 32), 64) // the card's r ‖ s
                mstore(add(_SCRATCH_STRUCT, 0x80), keccak256(add(_SCRATCH_STRUCT, 0x80), 64)) // hardwareSignatureHash
                mstore(_SCRATCH_STRUCT, _TIME_ATTESTATION_TYPEHASH)
                mstore(_SCRATCH_TYPED, _TYPED_DATA_PREFIX) // left-aligned, as every bytesN constant in assembly
                mstore(add(_SCRATCH_TYPED, 2), _DOMAIN_SEPARATOR)
                // ecrecover answers nothing for an invalid signature, which leaves the output word as it was: zero
                // for the first entry, then the previous entry's signer, which the pass above rejects.
                mstore(0x00, 0)
                {
                    let cursor := _SCRATCH_NODES
                    for {} lt(entry, entriesEnd) { entry := add(entry, _NODE_ENTRY_LENGTH) } {
                        // entry = nodeTimestamp (16) ‖ r (32) ‖ yParityAndS (32)
                        mstore(add(_SCRATCH_STRUCT, 0xa0), shr(128, calldataload(entry)))
                        mstore(add(_SCRATCH_TYPED, 0x22), keccak256(_SCRATCH_STRUCT, 0xc0)) // structHash
                        mstore(_SCRATCH_RECOVER, keccak256(_SCRATCH_TYPED, 0x42)) // EIP-712 digest
                        let s := calldataload(add(entry, 0x30)) // yParityAndS
                        mstore(add(_SCRATCH_RECOVER, 0x20), add(27, shr(255, s))) // v
                        mstore(add(_SCRATCH_RECOVER, 0x40), calldataload(add(entry, 0x10))) // r
                        s := and(s, _S_MASK)
                        mstore(add(_SCRATCH_RECOVER, 0x60), s)
                        // The call itself only fails out of gas. (A high s is rejected after the call: the outcome is
                        // the same, and the valid path branches once.)
                        if iszero(staticcall(gas(), 0x01, _SCRATCH_RECOVER, 0x80, 0x00, 0x20)) { revert(0, 0) }
                        let signer := mload(0x00)
                        // Advance to the first record with an address ≥ signer: at the latest the sentinel at nodesEnd.
                        let record := shr(96, mload(cursor))
                        for {} lt(record, signer) {} {
                            cursor := add(cursor, _NODE_RECORD_LENGTH)
                            record := shr(96, mload(cursor))
                        }
                        if or(
                            or(
                                gt(s, _SECP256K1_HALF_N), // high-S (EIP-2)
                                // unknown, inactive or out of order: a different address (or the sentinel)
                                xor(record, signer)
                            ),
                            // not valid now: validFromNs u64 at cursor + 20, validUntilNs u64 at cursor + 28
                            or(
                                lt(nowNs, shr(192, mload(add(cursor, _NODE_VALID_FROM_OFFSET)))),
                                gt(nowNs, shr(192, mload(add(cursor, _NODE_VALID_UNTIL_OFFSET))))
                            )
                        ) { break }
                        cursor := add(cursor, _NODE_RECORD_LENGTH)
                    }
                }
                if lt(entry, entriesEnd) { break } // an entry failed

                // ---- Rule 1: the P-256 signature, last. h = sha256("ATS/1 HW" ‖ cardId ‖ nanoMoment) is written
                // over the first word of the input (the 56 message bytes fit in the 160 bytes used; the precompile
                // reads its input before writing its output). cardId and nanoMoment are still in the struct hash
                // input, read before the message overwrites them.
                {
                    let nanoMoment := mload(add(_SCRATCH_STRUCT, 0x40))
                    let cardId := mload(add(_SCRATCH_STRUCT, 0x20))
                    mstore(_SCRATCH_STRUCT, _HW_MESSAGE_TAG) // bytes 0..8 (zeros up to 32)
                    mstore(add(_SCRATCH_STRUCT, 8), cardId) // bytes 8..40
                    mstore(add(_SCRATCH_STRUCT, 40), shl(128, nanoMoment)) // bytes 40..56, big-endian uint128
                }
                // The call cannot fail but out of gas (the precompile takes any input), and its success is not
                // tested: it costs 84 gas, so failing means under 84 gas was forwarded, i.e. 63/64 of what
                // remained, which leaves under 2 gas here. The next instruction then runs out of gas, reverting
                // the whole call as a test would.
                pop(staticcall(gas(), 0x02, _SCRATCH_STRUCT, _HW_MESSAGE_LENGTH, _SCRATCH_STRUCT, 0x20))
                calldatacopy(add(_SCRATCH_STRUCT, 0x20), add(hw, 32), 64) // r ‖ s
                // public key x ‖ y (validated at registration), from the card record
                mcopy(add(_SCRATCH_STRUCT, 0x60), add(card, _CARD_PUBLIC_KEY_OFFSET), 64)
                p256Input := _SCRATCH_STRUCT
                // P256VERIFY answers the word 1 for a valid signature and nothing otherwise (or when absent). A
                // failed call (out of gas) leaves the zeroed word too: "unconfirmed", for {_conclude} to settle.
                // (The word holds the last signer until zeroed: a node address may be 1.) Yul evaluates arguments
                // right to left, so the call is its own statement before the read.
                mstore(0x00, 0)
                pop(staticcall(gas(), 0x100, _SCRATCH_STRUCT, 0xa0, 0x00, 0x20))
                outcome := sub(_UNCONFIRMED, eq(mload(0x00), 1)) // _VALID (1) when confirmed, else _UNCONFIRMED (2)
                break
            }
            // Safe: only {verifyTimeProof} sets answerCaller, an external view function whose sole remaining work
            // would be to ABI-encode `outcome == _VALID` as its bool result; _INVALID (0) and _VALID (1) are exactly
            // the encodings of false and true. Nothing is skipped but that encoding and the returns leading to it.
            if and(answerCaller, lt(outcome, _UNCONFIRMED)) {
                mstore(0x00, outcome)
                return(0x00, 0x20)
            }
            // Back to Solidity: allocate the precompile input read by {_verifyP256At} (only reached with the
            // free memory pointer at 0x80: an earlier allocation fails the proof before `outcome` is set).
            if eq(outcome, _UNCONFIRMED) { mstore(0x40, add(_SCRATCH_STRUCT, 0xa0)) }
        }
    }

    /// @dev {TimeProofLib.verifyP256} on the precompile input prepared by {_verifyFast}.
    function _verifyP256At(uint256 p256Input) private view returns (bool) {
        bytes32 h;
        bytes32 r;
        bytes32 s;
        bytes32 qx;
        bytes32 qy;
        assembly ("memory-safe") {
            // Reads the 5 words allocated and written by _verifyFast.
            h := mload(p256Input)
            r := mload(add(p256Input, 0x20))
            s := mload(add(p256Input, 0x40))
            qx := mload(add(p256Input, 0x60))
            qy := mload(add(p256Input, 0x80))
        }
        return TimeProofLib.verifyP256(h, r, s, qx, qy);
    }

    // ================================================================================================ snapshot

    /**
     * @dev Writes a new snapshot of the settings and the active nodes and cards ({SnapshotLib.write}, which sorts
     * the nodes). Bounded: at most 32 + 32·36 + 32·112 = 4,768 bytes. Returns the node records it wrote (the
     * listed nodes with their windows), for callers that count the active ones.
     */
    function _writeSnapshot() private returns (SnapshotLib.Node[] memory nodeRecords) {
        uint256 nodeCount = _nodeList.length; // ≤ MAX_NODES
        uint256 cardCount = _cardList.length; // ≤ MAX_CARDS
        nodeRecords = new SnapshotLib.Node[](nodeCount);
        for (uint256 i = 0; i < nodeCount; ++i) {
            address node = _nodeList[i];
            NodeRecord storage record = _nodes[node];
            nodeRecords[i] = SnapshotLib.Node({
                node: node,
                validFromNs: record.validFromNs,
                validUntilNs: record.validUntilNs
            });
        }
        SnapshotLib.Card[] memory cardRecords = new SnapshotLib.Card[](cardCount);
        for (uint256 i = 0; i < cardCount; ++i) {
            bytes32 cardId = _cardList[i];
            CardRecord storage record = _cards[cardId];
            cardRecords[i] = SnapshotLib.Card({
                cardId: cardId,
                publicKeyX: record.publicKeyX,
                publicKeyY: record.publicKeyY,
                validFromNs: record.validFromNs,
                validUntilNs: record.validUntilNs
            });
        }
        (address pointer, uint256 size) = SnapshotLib.write(_settings, nodeRecords, cardRecords);
        if (pointer == address(0)) revert TimeOracleSnapshotWriteFailed();
        // Field by field: the registry epoch in the same slot stays.
        _snapshot.pointer = pointer;
        _snapshot.size = uint32(size); // ≤ 4,768
        emit SnapshotWritten(pointer, nodeCount, cardCount);
    }

    // ================================================================================================ helpers

    /**
     * @dev Of `nodeRecords` (the snapshot's: the listed nodes, i.e. registered and not deactivated), those inside
     * their validity window at this chain clock: exactly the nodes {_verifyFast} accepts as signers now.
     */
    function _activeNodeCount(SnapshotLib.Node[] memory nodeRecords) private view returns (uint256 count) {
        uint256 nowNs = _clockNs();
        uint256 listed = nodeRecords.length; // ≤ MAX_NODES
        for (uint256 i = 0; i < listed; ++i) {
            SnapshotLib.Node memory record = nodeRecords[i];
            if (record.validFromNs <= nowNs && nowNs <= record.validUntilNs) ++count;
        }
    }

    /**
     * @dev After a node lost trust: evidence ({NodeQuorumUnreachable}) when the quorum can no longer be met. Not a
     * revert: refusing to remove a compromised node until a replacement is registered would keep it trusted.
     */
    function _reportUnreachableQuorum(SnapshotLib.Node[] memory nodeRecords) private {
        uint64 quorum = _settings.nodeQuorum;
        uint256 activeNodes = _activeNodeCount(nodeRecords);
        if (quorum > activeNodes) emit NodeQuorumUnreachable(quorum, activeNodes);
    }

    function _checkRegistrarOrGuardian() private view {
        if (!hasRole(GUARDIAN_ROLE, msg.sender) && !hasRole(REGISTRAR_ROLE, msg.sender)) {
            revert AccessControlUnauthorizedAccount(msg.sender, GUARDIAN_ROLE);
        }
    }

    function _checkRange(Setting setting, uint256 value, uint256 min, uint256 max) private pure {
        if (value < min || value > max) revert TimeOracleSettingOutOfRange(setting, value, min, max);
    }

    /// @dev Swap-and-pop removal from the active card list.
    function _removeCardFromList(CardRecord storage card) private {
        uint256 index = card.listIndex - 1; // listed: listIndex ≥ 1
        bytes32 last = _cardList[_cardList.length - 1];
        _cardList[index] = last;
        _cards[last].listIndex = uint32(index + 1);
        _cardList.pop();
        card.listIndex = 0;
    }

    /// @dev Swap-and-pop removal from the active node list.
    function _removeNodeFromList(NodeRecord storage record) private {
        uint256 index = record.listIndex - 1; // listed: listIndex ≥ 1
        address last = _nodeList[_nodeList.length - 1];
        _nodeList[index] = last;
        _nodes[last].listIndex = uint32(index + 1);
        _nodeList.pop();
        record.listIndex = 0;
    }
}
