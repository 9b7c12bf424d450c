// SPDX-License-Identifier: MIT
// Floating: dApps compile this file with their own compiler, 0.8.24 or later (test/contracts/pragma.test.ts).
// solhint-disable-next-line compiler-version
pragma solidity ^0.8.24;

import {ITimeOracle, TimeProof} from "./interfaces/ITimeOracle.sol";
import {ITimeConsumer} from "./interfaces/ITimeConsumer.sol";

/**
 * @title TimeConsumer
 * @notice Base contract for dApps that act on attested time. Inherit it, pass the oracle and the largest signed
 * accuracy you accept to the constructor, and guard state-changing functions with {consumesTime}, {onlyAfter},
 * {onlyBefore} or {onlyWithin}, passing the caller-supplied {TimeProof} through:
 *
 * ```solidity
 * constructor(ITimeOracle oracle) TimeConsumer(oracle, AccuracyTiers.SOFTWARE_MESH_NS) {}
 *
 * function claim(uint256 lockId, TimeProof calldata proof) external onlyAfter(proof, bytes32(lockId), unlockAt) { ... }
 * ```
 *
 * The accuracy bound has no default on purpose: a bound tighter than the network can honestly sign refuses every
 * proof it makes (`Insufficient accuracy`), and one looser than the action needs trusts a moment more than it
 * deserves. {AccuracyTiers} names what each kind of network signs (table in docs/protocol.md §6.7).
 *
 * Every guard verifies the proof with the oracle (reverting `Invalid time proof`), demands
 * `accuracy <= _maxAccuracyNs()` (reverting `Insufficient accuracy`; the constructor's bound unless overridden) and
 * refuses a proof that is not strictly newer than the last one consumed **for the same action key**
 * ({TimeConsumerProofNotNewer}): the oracle accepts any proof up to `maxAttestationAge` old, so without that rule a
 * caller could replay an older, still fresh proof to act "before a deadline" after it passed. The key is the
 * consumer's choice; make it one that only the party it protects can advance: the acting account (one key per
 * bidder, as the example auction does), or a lock only its owner may open. Proofs are public, so under a key anyone
 * may act for (one watermark shared by every user, or one per auction) anyone can consume a newer proof first, for
 * instance one copied from another bidder's pending transaction, and make that bidder's proof "not newer"
 * (docs/protocol.md §6.7). Each watermark remembers the oracle's registry epoch it was set in; once a key has lost
 * trust since (a card revoked, a node deactivated), the watermark reads as at most the chain clock plus the oracle's
 * `maxFutureDrift`, a bound no proof consumed before can exceed, so none can be replayed ({_effectiveWatermark},
 * {ITimeOracle-registryEpoch}, docs/protocol.md §14.17).
 *
 * Time windows are half-open: "after t" means `nanoMoment >= t`, "before t" means `nanoMoment < t`, so the two
 * partition time and `[start, end)` is {onlyWithin}. A "before" guard also bounds the chain clock: a proof stays
 * fresh for `maxAttestationAge` after the moment it shows, so without it a proof of a moment 1 ns before the
 * deadline could act long after the deadline ({TimeConsumerChainPastDeadline}).
 */
abstract contract TimeConsumer is ITimeConsumer {
    /// @dev A watermark and the registry epoch it was set in: one slot.
    struct Watermark {
        uint128 nanoMoment;
        uint64 registryEpoch;
    }

    ITimeOracle private immutable _TIME_ORACLE;
    uint32 private immutable _MAX_ACCURACY_NS;
    mapping(bytes32 actionKey => Watermark) private _lastConsumed;

    /**
     * @param oracle The oracle whose registry and settings decide which proofs are valid.
     * @param maxAccuracyNs_ The largest signed `accuracy` (ns) accepted; at least what the network honestly signs
     * ({AccuracyTiers}), and at most what the action can tolerate. Not 0 ({TimeConsumerZeroMaxAccuracy}).
     */
    constructor(ITimeOracle oracle, uint32 maxAccuracyNs_) {
        if (address(oracle) == address(0)) revert TimeConsumerZeroOracle();
        if (maxAccuracyNs_ == 0) revert TimeConsumerZeroMaxAccuracy();
        _TIME_ORACLE = oracle;
        _MAX_ACCURACY_NS = maxAccuracyNs_;
    }

    /// @notice Verifies and consumes `proof` for `actionKey` (see {_consumeTime}).
    modifier consumesTime(TimeProof calldata proof, bytes32 actionKey) {
        _consumeTime(proof, actionKey);
        _;
    }

    /// @notice Verifies and consumes `proof` for `actionKey`; it must show a moment at or after `notBefore` (ns).
    modifier onlyAfter(TimeProof calldata proof, bytes32 actionKey, uint128 notBefore) {
        _requireNotBefore(_consumeTime(proof, actionKey), notBefore);
        _;
    }

    /**
     * @notice Verifies and consumes `proof` for `actionKey`; it must show a moment strictly before `deadline` (ns),
     * and the chain clock must not have reached the deadline either.
     */
    modifier onlyBefore(TimeProof calldata proof, bytes32 actionKey, uint128 deadline) {
        _requireBefore(_consumeTime(proof, actionKey), deadline);
        _;
    }

    /// @notice Verifies and consumes `proof` for `actionKey`; it must show a moment in `[notBefore, deadline)` (ns).
    modifier onlyWithin(TimeProof calldata proof, bytes32 actionKey, uint128 notBefore, uint128 deadline) {
        _consumeTimeWithin(proof, actionKey, notBefore, deadline);
        _;
    }

    /// @inheritdoc ITimeConsumer
    function timeOracle() public view returns (ITimeOracle) {
        return _TIME_ORACLE;
    }

    /// @inheritdoc ITimeConsumer
    function lastConsumedNanoMoment(bytes32 actionKey) public view returns (uint128) {
        return _effectiveWatermark(_lastConsumed[actionKey], _TIME_ORACLE.registryEpoch());
    }

    /// @inheritdoc ITimeConsumer
    function maxAccuracyNs() external view returns (uint32) {
        return _maxAccuracyNs();
    }

    /**
     * @dev Reverts with `Invalid time proof` unless the oracle accepts `proof`, and with `Insufficient accuracy`
     * when its accuracy exceeds {_maxAccuracyNs}. A view: for reads that do not change state on the proof's
     * strength. Returns the attested moment (ns).
     */
    function _verifiedTime(TimeProof calldata proof) internal view returns (uint128 nanoMoment) {
        // docs/protocol.md §11.3 fixes these two revert strings, so they are strings, not custom errors.
        // solhint-disable-next-line gas-custom-errors
        require(_TIME_ORACLE.verifyTimeProof(proof), "Invalid time proof");
        // solhint-disable-next-line gas-custom-errors
        require(proof.accuracy <= _maxAccuracyNs(), "Insufficient accuracy");
        return proof.nanoMoment;
    }

    /**
     * @dev {_verifiedTime}, then refuses a proof not strictly newer than the last one consumed for `actionKey`
     * ({TimeConsumerProofNotNewer}), records it for that key and emits {TimeConsumed}. Returns the attested moment
     * (ns). Other keys are untouched: a newer proof consumed for one key never blocks another.
     */
    function _consumeTime(TimeProof calldata proof, bytes32 actionKey) internal returns (uint128 nanoMoment) {
        nanoMoment = _verifiedTime(proof);
        uint64 epoch = _TIME_ORACLE.registryEpoch();
        uint128 last = _effectiveWatermark(_lastConsumed[actionKey], epoch);
        if (nanoMoment <= last) revert TimeConsumerProofNotNewer(actionKey, nanoMoment, last);
        _lastConsumed[actionKey] = Watermark({nanoMoment: nanoMoment, registryEpoch: epoch});
        emit TimeConsumed(actionKey, nanoMoment, proof.accuracy);
    }

    /**
     * @dev The watermark as it stands in registry epoch `epoch`. Set in this epoch: as recorded (the common path,
     * no further read). Set in an earlier one, before a key lost trust: at most `_chainNowNs() + maxFutureDrift`,
     * the latest moment the oracle accepts now (the current setting is read, on this path only).
     *
     * No replay: the recorded moment is the newest proof ever consumed for the key, and a proof consumed before can
     * only act again if the oracle accepts it now, i.e. if it lies at or below `_chainNowNs() + maxFutureDrift`; it
     * is then at or below both terms of the minimum, so it stays refused, whatever the epoch change was (a routine
     * end date for an unrelated node too). For the same reason no proof the oracle accepts lies between the clamped
     * value and the recorded one: for acceptance the clamp equals the recorded watermark, and a watermark a removed
     * key dated ahead stops blocking once real time passes it, at most the `maxFutureDrift` of its own block after
     * it was consumed (lowering the setting does not shorten that: it lowers what the oracle accepts by as much).
     * What the clamp changes is what {lastConsumedNanoMoment} reports: never a time beyond what the oracle accepts
     * now (docs/protocol.md §14.17). All of this holds because {_chainNowNs} is the oracle's own freshness clock.
     */
    function _effectiveWatermark(Watermark memory watermark, uint64 epoch) private view returns (uint128) {
        uint128 nanoMoment = watermark.nanoMoment;
        if (watermark.registryEpoch == epoch) return nanoMoment;
        uint256 chainNowNs = _chainNowNs();
        // Not ahead of the chain clock (a key never used, or used long ago): below the bound, no setting to read.
        if (nanoMoment <= chainNowNs) return nanoMoment;
        uint256 boundNs = chainNowNs + _TIME_ORACLE.maxFutureDrift();
        return nanoMoment <= boundNs ? nanoMoment : uint128(boundNs); // boundNs < nanoMoment: fits
    }

    /// @dev {_consumeTime}, requiring the moment (and the chain clock, for the deadline) in `[notBefore, deadline)`.
    function _consumeTimeWithin(
        TimeProof calldata proof,
        bytes32 actionKey,
        uint128 notBefore,
        uint128 deadline
    ) internal returns (uint128 nanoMoment) {
        nanoMoment = _consumeTime(proof, actionKey);
        _requireNotBefore(nanoMoment, notBefore);
        _requireBefore(nanoMoment, deadline);
    }

    /// @dev Reverts with {TimeConsumerTooEarly} unless `nanoMoment >= notBefore`.
    function _requireNotBefore(uint128 nanoMoment, uint128 notBefore) internal pure {
        if (nanoMoment < notBefore) revert TimeConsumerTooEarly(nanoMoment, notBefore);
    }

    /**
     * @dev Reverts with {TimeConsumerTooLate} unless `nanoMoment < deadline`, and with
     * {TimeConsumerChainPastDeadline} once the chain clock (`block.timestamp` in ns) has reached `deadline`: a
     * proof of an earlier moment is still fresh then, but the action would happen after the deadline.
     */
    function _requireBefore(uint128 nanoMoment, uint128 deadline) internal view {
        if (nanoMoment >= deadline) revert TimeConsumerTooLate(nanoMoment, deadline);
        uint256 chainNs = _chainNowNs();
        if (chainNs >= deadline) revert TimeConsumerChainPastDeadline(chainNs, deadline);
    }

    /// @dev The chain clock in ns: `block.timestamp * 1e9` (the oracle's freshness clock too). Virtual for tests.
    function _chainNowNs() internal view virtual returns (uint256) {
        return block.timestamp * 1e9;
    }

    /// @dev The largest accepted `accuracy` (ns): the constructor's bound. Override for a bound that changes.
    function _maxAccuracyNs() internal view virtual returns (uint32) {
        return _MAX_ACCURACY_NS;
    }
}
