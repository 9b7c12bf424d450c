// SPDX-License-Identifier: MIT
// Floating: dApps compile this file with their own compiler, 0.8.24 or later (test/contracts/pragma.test.ts).
// solhint-disable-next-line compiler-version
pragma solidity ^0.8.24;

/**
 * @notice The proof as contracts see it (docs/protocol.md §5). Declared once, here; import it with
 * `import {TimeProof} from "./interfaces/ITimeOracle.sol";`.
 * @param nanoMoment the card's timestamp, ns since the Unix epoch
 * @param hardwareSignature cardId (32) ‖ r (32) ‖ s (32): exactly 96 bytes, P-256, low-S
 * @param nodeSignature k ≥ 1 entries of 80 bytes: nodeTimestamp (16, big-endian) ‖ r (32) ‖ yParityAndS (32),
 * EIP-712 `TimeAttestation` signatures (EIP-2098 compact), strictly ascending by recovered node address
 * @param accuracy ns: the largest deviation among the nodes that agreed
 */
struct TimeProof {
    uint128 nanoMoment;
    bytes hardwareSignature;
    bytes nodeSignature;
    uint32 accuracy;
}

/**
 * @title ITimeOracle
 * @notice On-chain verifier and store of attested time: a registry of time cards (P-256 keys) and attesting
 * nodes (secp256k1 addresses), the verification rules of docs/protocol.md §6, and the latest verified proof.
 * @dev Every time value is nanoseconds since the Unix epoch unless its name says otherwise; the chain clock in ns
 * is `block.timestamp * 1e9`. Validity windows are inclusive at both ends.
 */
interface ITimeOracle {
    /// @notice Lifecycle of a card in the registry. A revoked card can never be registered again.
    enum CardStatus {
        None,
        Active,
        Revoked
    }

    /// @notice Lifecycle of a node in the registry. An inactive node can be registered (activated) again.
    enum NodeStatus {
        None,
        Active,
        Inactive
    }

    /// @notice The settings an administrator may change (used in events and errors).
    enum Setting {
        MaxAttestationAge,
        MaxFutureDrift,
        MaxAcceptableDrift,
        NodeQuorum
    }

    /**
     * @notice A registered time card.
     * @param publicKeyX P-256 public key, affine x
     * @param publicKeyY P-256 public key, affine y
     * @param validFromNs the card is not valid before this moment (inclusive, ns)
     * @param validUntilNs the card is not valid after this moment (inclusive, ns)
     * @param status None (never registered), Active or Revoked
     */
    struct Card {
        bytes32 publicKeyX;
        bytes32 publicKeyY;
        uint64 validFromNs;
        uint64 validUntilNs;
        CardStatus status;
    }

    /**
     * @notice A registered attesting node.
     * @param validFromNs the node is not valid before this moment (inclusive, ns)
     * @param validUntilNs the node is not valid after this moment (inclusive, ns)
     * @param status None (never registered), Active or Inactive
     */
    struct Node {
        uint64 validFromNs;
        uint64 validUntilNs;
        NodeStatus status;
    }

    // ---------------------------------------------------------------------------------------------- events

    /// @notice A card was registered, or its validity window was updated.
    event CardRegistered(
        bytes32 indexed cardId,
        bytes32 publicKeyX,
        bytes32 publicKeyY,
        uint64 validFromNs,
        uint64 validUntilNs
    );

    /// @notice A card was revoked for good, by a registrar or a guardian.
    event CardRevoked(bytes32 indexed cardId, address indexed revokedBy);

    /// @notice A node was registered or re-activated, or its validity window was updated.
    event NodeRegistered(address indexed node, uint64 validFromNs, uint64 validUntilNs);

    /// @notice A node was deactivated, by a registrar or a guardian.
    event NodeDeactivated(address indexed node, address indexed deactivatedBy);

    /// @notice An administrator changed a setting.
    event SettingChanged(Setting indexed setting, uint256 oldValue, uint256 newValue);

    /**
     * @notice The verification snapshot (settings, active nodes, active cards) was rewritten; every registry or
     * settings change writes a new one.
     */
    event SnapshotWritten(address indexed snapshot, uint256 nodeCount, uint256 cardCount);

    /// @notice A verified proof newer than the stored one was submitted and is now the oracle's current time.
    event TimeProofSubmitted(
        uint128 indexed nanoMoment,
        bytes32 indexed cardId,
        uint32 accuracy,
        address indexed submitter
    );

    /**
     * @notice The stored proof was discarded because a card was revoked or a node deactivated (it may have been
     * signed by the key just removed, and a proof dated ahead by a compromised key must not block honest ones), a
     * registered key's validity window narrowed, or a setting tightened (quorum raised, accuracy or future-drift
     * bound lowered): it may no longer pass {verifyTimeProof}, and {getCurrentTime} never serves such a proof.
     */
    event TimeProofCleared(uint128 indexed nanoMoment);

    /// @notice A key lost trust and a new registry epoch began, `epoch` ({registryEpoch}).
    event RegistryEpochStarted(uint64 epoch);

    /**
     * @notice After a node was deactivated or its validity window narrowed, fewer nodes are active now
     * (`activeNodes`: registered, not deactivated, inside their validity window at the chain clock) than
     * `quorum` requires: no proof verifies until nodes are registered again or the admin lowers the quorum.
     * Emitted, not refused: removing a compromised node must never wait for a replacement.
     */
    event NodeQuorumUnreachable(uint64 quorum, uint256 activeNodes);

    // ---------------------------------------------------------------------------------------------- errors

    /// @notice `(x, y)` is not a point on the P-256 curve.
    error TimeOracleInvalidPublicKey(bytes32 publicKeyX, bytes32 publicKeyY);

    /// @notice A validity window ends before it starts.
    error TimeOracleInvalidValidityWindow(uint64 validFromNs, uint64 validUntilNs);

    /// @notice The card was revoked; it cannot be registered or revoked again.
    error TimeOracleCardRevoked(bytes32 cardId);

    /// @notice The card was never registered.
    error TimeOracleUnknownCard(bytes32 cardId);

    /// @notice The node address is the zero address.
    error TimeOracleInvalidNode(address node);

    /// @notice The node is not active (never registered, or already deactivated).
    error TimeOracleNodeNotActive(address node);

    /// @notice Registering one more active card would exceed the cap.
    error TimeOracleTooManyCards(uint256 maxCards);

    /// @notice Registering one more active node would exceed the cap.
    error TimeOracleTooManyNodes(uint256 maxNodes);

    /// @notice A setting is outside its allowed range `[min, max]`.
    error TimeOracleSettingOutOfRange(Setting setting, uint256 value, uint256 min, uint256 max);

    /**
     * @notice `setNodeQuorum(quorum)` asks for more co-signing nodes than are active now (`activeNodes`: registered,
     * not deactivated, inside their validity window at the chain clock, exactly the nodes verification accepts):
     * every proof would fail. Register (or open the windows of) enough nodes first.
     */
    error TimeOracleQuorumAboveActiveNodes(uint64 quorum, uint256 activeNodes);

    /// @notice Deploying the verification snapshot failed (out of gas).
    error TimeOracleSnapshotWriteFailed();

    /// @notice `submitTimeProof` was given a proof that `verifyTimeProof` rejects.
    error TimeOracleInvalidTimeProof(uint128 nanoMoment);

    /// @notice `submitTimeProof` was given a proof that is not newer than the stored one.
    error TimeOracleTimeProofNotNewer(uint128 nanoMoment, uint128 latestNanoMoment);

    /// @notice No proof has been submitted yet.
    error TimeOracleNoTime();

    /// @notice The stored proof is older than the caller accepts.
    error TimeOracleTimeTooOld(uint128 latestNanoMoment, uint128 maxAgeNs, uint256 nowNs);

    // ---------------------------------------------------------------------------------------------- registry

    /**
     * @notice Registers a card by its P-256 public key, or updates the validity window of a registered card.
     * The card id is computed here: `sha256(0x04 ‖ x ‖ y)`. Only `REGISTRAR_ROLE`. Check the card's certificate
     * chain off-chain first (docs/protocol.md §2).
     * @param publicKeyX affine x of the public key
     * @param publicKeyY affine y of the public key
     * @param validFromNs start of the validity window (inclusive, ns)
     * @param validUntilNs end of the validity window (inclusive, ns); `type(uint64).max` for "no expiry"
     * @return cardId the card's identifier
     */
    function registerCard(
        bytes32 publicKeyX,
        bytes32 publicKeyY,
        uint64 validFromNs,
        uint64 validUntilNs
    ) external returns (bytes32 cardId);

    /// @notice Revokes a card for good, and discards the stored proof ({TimeProofCleared}).
    /// `REGISTRAR_ROLE` or `GUARDIAN_ROLE`.
    function revokeCard(bytes32 cardId) external;

    /**
     * @notice Registers (or re-activates) a node, or updates its validity window. Only `REGISTRAR_ROLE`.
     * @param node the node's Ethereum address (its secp256k1 key)
     * @param validFromNs start of the validity window (inclusive, ns)
     * @param validUntilNs end of the validity window (inclusive, ns); `type(uint64).max` for "no expiry"
     */
    function registerNode(address node, uint64 validFromNs, uint64 validUntilNs) external;

    /// @notice Deactivates a node, and discards the stored proof ({TimeProofCleared}).
    /// `REGISTRAR_ROLE` or `GUARDIAN_ROLE`.
    /// @dev Deactivating below `nodeQuorum` active nodes is allowed on purpose: it is the guardian's emergency
    /// brake, after which no proof verifies until nodes are registered again or the admin lowers the quorum. It
    /// then emits {NodeQuorumUnreachable}, as does a {registerNode} that narrows a window below the quorum.
    function deactivateNode(address node) external;

    /// @notice Sets how old (ns, against the chain clock) an accepted proof may be. Only `DEFAULT_ADMIN_ROLE`.
    function setMaxAttestationAge(uint64 maxAttestationAgeNs) external;

    /// @notice Sets how far (ns) ahead of the chain clock an accepted proof may be. Only `DEFAULT_ADMIN_ROLE`.
    function setMaxFutureDrift(uint64 maxFutureDriftNs) external;

    /// @notice Sets the largest accepted `accuracy` (ns). Only `DEFAULT_ADMIN_ROLE`.
    function setMaxAcceptableDrift(uint64 maxAcceptableDriftNs) external;

    /**
     * @notice Sets how many distinct active nodes must co-sign a proof: 1 ≤ quorum ≤ MAX_NODES
     * ({TimeOracleSettingOutOfRange}), and at most the nodes active now ({TimeOracleQuorumAboveActiveNodes}).
     * Only `DEFAULT_ADMIN_ROLE`.
     * @dev "Active now" is what verification accepts at this chain clock: registered, not deactivated, and inside
     * the node's validity window. A node whose window opens later does not count yet, so register nodes (and let
     * their windows open) before raising the quorum; a quorum above them would make every proof invalid until
     * then. The count can still fall below the quorum afterwards: by a deactivation or a narrowed window (which
     * emit {NodeQuorumUnreachable}) or by a window that closes with time, which no transaction marks.
     */
    function setNodeQuorum(uint64 quorum) external;

    // ---------------------------------------------------------------------------------------------- time

    /**
     * @notice Checks a proof against every rule of docs/protocol.md §6: the card's P-256 signature (registered, not
     * revoked, within its validity window, low-S), the node entries (registered, active, within their windows,
     * strictly ascending addresses, at least `nodeQuorum`), freshness (at most `maxAttestationAge` old and at most
     * `maxFutureDrift` ahead of the chain clock) and `accuracy ≤ maxAcceptableDrift`.
     * @dev Never reverts on malformed proof bytes: any failure returns false.
     * @return valid true when every rule holds
     */
    function verifyTimeProof(TimeProof calldata proof) external view returns (bool valid);

    /**
     * @notice Verifies a proof and stores it as the oracle's current time when it is newer than the stored one.
     * Reverts with `TimeOracleInvalidTimeProof` or `TimeOracleTimeProofNotNewer` otherwise. Anyone may submit.
     */
    function submitTimeProof(TimeProof calldata proof) external;

    /// @notice The latest submitted proof; reverts with `TimeOracleNoTime` when there is none.
    function getCurrentTime() external view returns (TimeProof memory proof);

    /**
     * @notice The latest submitted proof if it is at most `maxAgeNs` older than the chain clock; reverts with
     * `TimeOracleTimeTooOld` otherwise and with `TimeOracleNoTime` when there is none.
     */
    function getTimeNoOlderThan(uint128 maxAgeNs) external view returns (TimeProof memory proof);

    // ---------------------------------------------------------------------------------------------- views

    /// @notice A card's registry record (status None when unknown).
    function getCard(bytes32 cardId) external view returns (Card memory card);

    /// @notice A node's registry record (status None when unknown).
    function getNode(address node) external view returns (Node memory info);

    /// @notice The active nodes, in no particular order.
    function nodes() external view returns (address[] memory);

    /// @notice The ids of the registered, non-revoked cards, in no particular order.
    function cards() external view returns (bytes32[] memory);

    /// @notice ns: the oldest accepted proof, against the chain clock.
    function maxAttestationAge() external view returns (uint64);

    /// @notice ns: how far ahead of the chain clock an accepted proof may be.
    function maxFutureDrift() external view returns (uint64);

    /// @notice ns: the largest accepted `accuracy`.
    function maxAcceptableDrift() external view returns (uint64);

    /// @notice The number of distinct active nodes that must co-sign a proof.
    function nodeQuorum() external view returns (uint64);

    /// @notice The address of the current verification snapshot (a data contract, SSTORE2 pattern).
    function snapshot() external view returns (address);

    /**
     * @notice The registry epoch: the end (last ns) of the chain clock's second in which a key last lost trust (a card
     * revoked, a node deactivated, a validity window narrowed), made strictly increasing; 0 before the first.
     * @dev A contract that keeps "strictly newer" watermarks ({TimeConsumer}, {TimeBridge}) records the epoch with
     * each, and once the epoch has moved reads a watermark set before as at most `chain clock + maxFutureDrift` (the
     * current setting), the latest moment accepted now. A proof consumed before lies at or below its watermark and
     * can only pass again at or below that bound, so it stays refused: no replay across any registry change, a
     * routine one included. For the same reason the bound lets nothing through that the watermark itself would
     * refuse: a watermark a compromised key (with a node quorum) dated ahead blocks honest proofs until real time
     * passes it, at most the `maxFutureDrift` in force when it was consumed (15 s by default, a day at the allowed
     * maximum; lowering the setting afterwards does not shorten it). What the epoch changes is what such a contract
     * reports (never a time beyond what is accepted now; a delivery no longer vouched for), so a reported watermark
     * is monotonic within an epoch, not across one. The epoch's value matters to them only as "changed".
     */
    function registryEpoch() external view returns (uint64);
}
