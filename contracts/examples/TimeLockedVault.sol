// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {ITimeOracle, TimeProof} from "../interfaces/ITimeOracle.sol";
import {TimeConsumer} from "../TimeConsumer.sol";
import {AccuracyTiers} from "../libraries/AccuracyTiers.sol";

/**
 * @title TimeLockedVault
 * @notice Example dApp on attested time: ether deposited here stays locked until an attested moment, chosen by the
 * depositor, and only a valid, accurate, fresh time proof showing that moment releases it.
 *
 * **It accepts only proofs from hardware-timestamped networks**: accuracy ≤ 100 ns
 * ({AccuracyTiers-HARDWARE_TIMESTAMPED_NS}: PTP-capable NICs, GPS/PPS-disciplined time cards). A mesh of software
 * clocks, the local network's included, honestly signs ~0.1 ms or more, and this vault refuses its proofs with
 * `Insufficient accuracy`; that is the sample's point, not a fault. A consumer meant for such a network passes
 * {AccuracyTiers-SOFTWARE_MESH_NS} instead (as {AttestedCheckpoint} does).
 *
 * How it uses {TimeConsumer}:
 * - the constructor passes the oracle on;
 * - {withdraw} takes the {TimeProof} the caller fetched from an attesting node (any transport; docs/protocol.md §9) and
 *   checks it with `_consumeTime` + `_requireNotBefore` (what the `onlyAfter` modifier does, spelled out so
 *   that the lock is read once and the owner checked first): the oracle must accept it
 *   (`Invalid time proof`), its accuracy must be at most 100 ns (`Insufficient accuracy`), it must be newer than
 *   the last proof consumed for the same lock (the action key is the lock id: {TimeConsumerProofNotNewer}), and its
 *   moment must be at or after the lock's `unlockAt` ({TimeConsumerTooEarly}).
 *
 * Why attested time rather than `block.timestamp`: the block proposer picks the timestamp within loose bounds, and
 * it moves in 12-second steps; the attested moment is signed by a time card and co-signed by nodes, to the
 * nanosecond. Every time value is nanoseconds since the Unix epoch.
 */
contract TimeLockedVault is TimeConsumer, ReentrancyGuard {
    /// @notice One deposit. `amount` and `unlockAt` share a slot.
    struct Lock {
        address owner;
        uint128 amount;
        uint128 unlockAt;
    }

    /// @notice `owner` locked `amount` wei until the attested moment `unlockAt` (ns).
    event Deposited(uint256 indexed lockId, address indexed owner, uint256 amount, uint128 unlockAt);

    /// @notice `owner` withdrew lock `lockId` on the strength of a proof of `nanoMoment` (ns).
    event Withdrawn(uint256 indexed lockId, address indexed owner, uint256 amount, uint128 nanoMoment);

    /// @notice A deposit of zero wei, or of more than 2^128 - 1 wei.
    error VaultInvalidAmount(uint256 amount);

    /// @notice The lock does not exist or was already withdrawn.
    error VaultUnknownLock(uint256 lockId);

    /// @notice Only the lock's owner may withdraw it.
    error VaultNotOwner(uint256 lockId, address owner, address sender);

    /// @notice Sending the funds failed.
    error VaultTransferFailed(address to, uint256 amount);

    mapping(uint256 lockId => Lock) private _locks;
    uint256 private _lockCount;

    /// @param oracle The oracle that verifies the proofs presented to {withdraw}.
    constructor(ITimeOracle oracle) TimeConsumer(oracle, AccuracyTiers.HARDWARE_TIMESTAMPED_NS) {}

    /**
     * @notice Locks `msg.value` wei until the attested moment `unlockAt` (ns since the Unix epoch).
     * @return lockId The lock's identifier, for {withdraw}.
     */
    function deposit(uint128 unlockAt) external payable returns (uint256 lockId) {
        if (msg.value == 0 || msg.value > type(uint128).max) revert VaultInvalidAmount(msg.value);
        lockId = _lockCount++;
        _locks[lockId] = Lock({owner: msg.sender, amount: uint128(msg.value), unlockAt: unlockAt});
        emit Deposited(lockId, msg.sender, msg.value, unlockAt);
    }

    /**
     * @notice Releases lock `lockId` to its owner, on the strength of `proof`: a proof the oracle accepts, with
     * accuracy ≤ 100 ns, newer than the last one consumed for this lock, and showing a moment at or after `unlockAt`.
     */
    function withdraw(uint256 lockId, TimeProof calldata proof) external nonReentrant {
        Lock memory lock = _locks[lockId];
        if (lock.owner == address(0)) revert VaultUnknownLock(lockId);
        if (lock.owner != msg.sender) revert VaultNotOwner(lockId, lock.owner, msg.sender);
        // One watermark per lock: a newer proof another depositor consumed for their own lock never blocks this one.
        uint128 nanoMoment = _consumeTime(proof, bytes32(lockId));
        _requireNotBefore(nanoMoment, lock.unlockAt);

        delete _locks[lockId]; // effects before the transfer
        emit Withdrawn(lockId, msg.sender, lock.amount, nanoMoment);
        (bool ok, ) = payable(msg.sender).call{value: lock.amount}("");
        if (!ok) revert VaultTransferFailed(msg.sender, lock.amount);
    }

    /// @notice A lock's record (owner zero when unknown or withdrawn).
    function getLock(uint256 lockId) external view returns (Lock memory) {
        return _locks[lockId];
    }

    /// @notice Number of deposits made so far (the next lock id).
    function lockCount() external view returns (uint256) {
        return _lockCount;
    }
}
