// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle, TimeProof} from "./interfaces/ITimeOracle.sol";
import {ITimeConsumer} from "./interfaces/ITimeConsumer.sol";

/**
 * @title TimeConsumer
 * @notice Base contract for dApps that act on attested time. Inherit it, pass the oracle to the constructor and
 * guard state-changing functions with {consumesTime}, {onlyAfter}, {onlyBefore} or {onlyWithin}, passing the
 * caller-supplied {TimeProof} through:
 *
 * ```solidity
 * function claim(TimeProof calldata proof) external onlyAfter(proof, unlockAt) { ... }
 * ```
 *
 * Every guard verifies the proof with the oracle (reverting `Invalid time proof`), demands
 * `accuracy <= _maxAccuracyNs()` (reverting `Insufficient accuracy`; 100 ns unless overridden) and refuses a proof
 * that is not strictly newer than the last one the contract acted on ({TimeConsumerProofNotNewer}): the oracle
 * accepts any proof up to `maxAttestationAge` old, so without that rule a caller could replay an older, still
 * fresh proof to act "before a deadline" after it passed. The rule is per contract, so two actions cannot use the
 * same proof; callers fetch a fresh one per transaction.
 *
 * Time windows are half-open: "after t" means `nanoMoment >= t`, "before t" means `nanoMoment < t`, so the two
 * partition time and `[start, end)` is {onlyWithin}.
 */
abstract contract TimeConsumer is ITimeConsumer {
    /// @dev The accuracy bound of the example consumer of docs/protocol.md §6.7, in ns.
    uint32 private constant _DEFAULT_MAX_ACCURACY_NS = 100;

    ITimeOracle private immutable _TIME_ORACLE;
    uint128 private _lastConsumedNanoMoment;

    /// @param oracle The oracle whose registry and settings decide which proofs are valid.
    constructor(ITimeOracle oracle) {
        if (address(oracle) == address(0)) revert TimeConsumerZeroOracle();
        _TIME_ORACLE = oracle;
    }

    /// @notice Verifies and consumes `proof` (see {_consumeTime}).
    modifier consumesTime(TimeProof calldata proof) {
        _consumeTime(proof);
        _;
    }

    /// @notice Verifies and consumes `proof`, which must show a moment at or after `notBefore` (ns).
    modifier onlyAfter(TimeProof calldata proof, uint128 notBefore) {
        _requireNotBefore(_consumeTime(proof), notBefore);
        _;
    }

    /// @notice Verifies and consumes `proof`, which must show a moment strictly before `deadline` (ns).
    modifier onlyBefore(TimeProof calldata proof, uint128 deadline) {
        _requireBefore(_consumeTime(proof), deadline);
        _;
    }

    /// @notice Verifies and consumes `proof`, which must show a moment in `[notBefore, deadline)` (ns).
    modifier onlyWithin(TimeProof calldata proof, uint128 notBefore, uint128 deadline) {
        _consumeTimeWithin(proof, notBefore, deadline);
        _;
    }

    /// @inheritdoc ITimeConsumer
    function timeOracle() public view returns (ITimeOracle) {
        return _TIME_ORACLE;
    }

    /// @inheritdoc ITimeConsumer
    function lastConsumedNanoMoment() public view returns (uint128) {
        return _lastConsumedNanoMoment;
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
     * @dev {_verifiedTime}, then refuses a proof not strictly newer than the last consumed one
     * ({TimeConsumerProofNotNewer}), records it and emits {TimeConsumed}. Returns the attested moment (ns).
     */
    function _consumeTime(TimeProof calldata proof) internal returns (uint128 nanoMoment) {
        nanoMoment = _verifiedTime(proof);
        uint128 last = _lastConsumedNanoMoment;
        if (nanoMoment <= last) revert TimeConsumerProofNotNewer(nanoMoment, last);
        _lastConsumedNanoMoment = nanoMoment;
        emit TimeConsumed(nanoMoment, proof.accuracy);
    }

    /// @dev {_consumeTime}, requiring the moment to lie in `[notBefore, deadline)`.
    function _consumeTimeWithin(
        TimeProof calldata proof,
        uint128 notBefore,
        uint128 deadline
    ) internal returns (uint128 nanoMoment) {
        nanoMoment = _consumeTime(proof);
        _requireNotBefore(nanoMoment, notBefore);
        _requireBefore(nanoMoment, deadline);
    }

    /// @dev Reverts with {TimeConsumerTooEarly} unless `nanoMoment >= notBefore`.
    function _requireNotBefore(uint128 nanoMoment, uint128 notBefore) internal pure {
        if (nanoMoment < notBefore) revert TimeConsumerTooEarly(nanoMoment, notBefore);
    }

    /// @dev Reverts with {TimeConsumerTooLate} unless `nanoMoment < deadline`.
    function _requireBefore(uint128 nanoMoment, uint128 deadline) internal pure {
        if (nanoMoment >= deadline) revert TimeConsumerTooLate(nanoMoment, deadline);
    }

    /// @dev The largest accepted `accuracy` (ns). Override to demand more or less than 100 ns.
    function _maxAccuracyNs() internal view virtual returns (uint32) {
        return _DEFAULT_MAX_ACCURACY_NS;
    }
}
