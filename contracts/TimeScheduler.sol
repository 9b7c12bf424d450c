// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {ITimeOracle, TimeProof} from "./interfaces/ITimeOracle.sol";
import {ITimeScheduler} from "./interfaces/ITimeScheduler.sol";

/**
 * @title TimeScheduler
 * @notice Calls scheduled for an attested moment (see {ITimeScheduler}). Its own deployment, holding the chain's
 * oracle as {TimeBridge} and {TimeConsumer} do: every proof is verified by `ITimeOracle.verifyTimeProof`, so the
 * scheduler can change without touching the oracle's code, function dispatch or gas. The chain clock (deadlines,
 * expiry) is read through the one overridable {_now}.
 *
 * Storage: one slot per call (`callId → status`, `callId = keccak256(abi.encode(request))`), one shared counter
 * (the nonce) and a map of payments that could not be pushed. The request itself lives only in the
 * {CallScheduled} event and in the calldata of whoever executes, cancels or expires it.
 *
 * Safety of the call-out ({executeCall}):
 * - checks-effects-interactions: the status leaves `Scheduled` before the callee runs, so a re-entering callee
 *   finds the call settled; the mutating entry points are also `nonReentrant` (OpenZeppelin {ReentrancyGuard};
 *   its transient variant would save ~2,000 gas per entry, but its `tstore` trips a compiler warning, and
 *   warnings fail the build).
 *   {scheduleCall} is deliberately not guarded, so a callee may schedule its next run (recurring jobs).
 * - exact gas: the callee gets exactly `gasLimit`; the executor must leave enough gas for that under the 63/64
 *   rule of EIP-150, else the execution is refused with {SchedulerInsufficientGas} (and a post-call check catches
 *   a callee starved by a miscounted overhead, as OpenZeppelin's ERC2771Forwarder does).
 * - bounded return data: the call copies no return data; at most {MAX_RETURN_DATA} bytes are copied afterwards,
 *   so a callee returning a huge blob pays for it itself.
 * - payments never block: bounties and refunds are pushed with a gas stipend and, if that fails, owed to the
 *   payee, who pulls them with {withdrawOwed}.
 */
contract TimeScheduler is ITimeScheduler, ReentrancyGuard {
    /// @notice Smallest gas limit a call may ask for.
    uint32 public constant MIN_CALL_GAS_LIMIT = 10_000;
    /// @notice Largest gas limit a call may ask for (well below the 2^24 transaction gas cap of EIP-7825).
    uint32 public constant MAX_CALL_GAS_LIMIT = 10_000_000;
    /// @notice Shortest execution window (ns): one 12-second slot, since the chain clock moves in such steps.
    uint64 public constant MIN_EXECUTION_WINDOW_NS = 12 * 1e9;
    /// @notice Longest execution window (ns): 365 days.
    uint64 public constant MAX_EXECUTION_WINDOW_NS = 365 days * 1e9;
    /// @notice Most bytes of a callee's return (or revert) data copied into the settlement event.
    uint256 public constant MAX_RETURN_DATA = 256;
    /// @notice Gas forwarded with a pushed payment; a payee that needs more is paid through {withdrawOwed}.
    uint256 public constant PAYMENT_GAS_STIPEND = 20_000;
    /// @notice Execution window (ns) of `scheduleCall(executeAt, data)`: 1 hour, time for keepers to act.
    uint64 public constant DEFAULT_EXECUTION_WINDOW_NS = 3_600 * 1e9;
    /// @notice Gas limit of `scheduleCall(executeAt, data)`: enough for a callback that writes a few slots.
    uint32 public constant DEFAULT_CALL_GAS_LIMIT = 200_000;

    /// @dev Gas the CALL itself charges before the callee's share is computed, plus the opcodes between the check
    /// and the CALL: a cold account access (2,600), a second one when the callee is an EIP-7702 delegated account
    /// (2,600), rounded up. Over-estimating only asks the executor for a little more gas; under-estimating is
    /// caught by the post-call check.
    uint256 private constant _CALL_OVERHEAD_GAS = 5_700;
    uint256 private constant _NS_PER_SECOND = 1e9;

    ITimeOracle private immutable _TIME_ORACLE;

    mapping(bytes32 callId => CallStatus) private _callStatus;
    mapping(address payee => uint256 amount) private _owed;
    uint64 private _callCount;

    /// @param oracle This chain's oracle: it verifies the proofs that execute calls.
    constructor(ITimeOracle oracle) {
        if (address(oracle) == address(0)) revert SchedulerZeroOracle();
        _TIME_ORACLE = oracle;
    }

    /// @inheritdoc ITimeScheduler
    function scheduleCall(uint128 executeAt, bytes calldata data) external payable returns (bytes32 callId) {
        return _scheduleCall(executeAt, DEFAULT_EXECUTION_WINDOW_NS, DEFAULT_CALL_GAS_LIMIT, data);
    }

    /// @inheritdoc ITimeScheduler
    function scheduleCall(
        uint128 executeAt,
        uint64 window,
        uint32 gasLimit,
        bytes calldata data
    ) external payable returns (bytes32 callId) {
        return _scheduleCall(executeAt, window, gasLimit, data);
    }

    /// @inheritdoc ITimeScheduler
    function executeCall(
        ScheduledCall calldata request,
        TimeProof calldata proof
    ) external nonReentrant returns (bool success) {
        bytes32 callId = _requireScheduled(request);
        uint128 nanoMoment = proof.nanoMoment;
        // Cheap window checks first, the oracle's verification last.
        if (nanoMoment < request.executeAt) revert SchedulerTooEarly(request.executeAt, nanoMoment);
        uint256 deadline = uint256(request.executeAt) + request.window;
        if (nanoMoment > deadline) revert SchedulerTooLate(deadline, nanoMoment);
        // The chain clock too: a proof stays fresh for the oracle's maxAttestationAge after its moment, so a proof
        // from inside the window could otherwise run the callee after the window closed, racing {expireCall}. The
        // boundary is expireCall's own (it needs nowNs > deadline), so at any chain clock exactly one of the two can
        // settle the call.
        uint256 nowNs = _nowNs();
        if (nowNs > deadline) revert SchedulerChainPastDeadline(deadline, nowNs);
        // A view call: the oracle cannot re-enter here, and it never reverts on a malformed proof (it answers false).
        if (!_TIME_ORACLE.verifyTimeProof(proof)) revert SchedulerInvalidProof(callId, nanoMoment);

        // Effects before the interaction: a re-entering callee finds the call settled.
        _callStatus[callId] = CallStatus.Executed;
        bytes memory returnData;
        (success, returnData) = _callWithExactGas(request.caller, request.gasLimit, request.data);
        if (success) {
            emit CallExecuted(callId, msg.sender, nanoMoment, returnData);
        } else {
            _callStatus[callId] = CallStatus.Failed;
            emit CallFailed(callId, msg.sender, nanoMoment, returnData);
        }
        // The executor did its part either way; a callee that reverts cannot withhold the bounty.
        _pay(msg.sender, request.bounty);
    }

    /// @inheritdoc ITimeScheduler
    function cancelCall(ScheduledCall calldata request) external nonReentrant {
        bytes32 callId = _requireScheduled(request);
        if (msg.sender != request.caller) revert SchedulerNotCaller(callId, request.caller, msg.sender);
        _callStatus[callId] = CallStatus.Cancelled;
        emit CallCancelled(callId, request.bounty);
        _pay(msg.sender, request.bounty);
    }

    /// @inheritdoc ITimeScheduler
    function expireCall(ScheduledCall calldata request) external nonReentrant {
        bytes32 callId = _requireScheduled(request);
        uint256 deadline = uint256(request.executeAt) + request.window;
        uint256 nowNs = _nowNs();
        if (nowNs <= deadline) revert SchedulerNotExpired(deadline, nowNs);
        _callStatus[callId] = CallStatus.Expired;
        emit CallExpired(callId, request.bounty);
        _pay(request.caller, request.bounty);
    }

    /// @inheritdoc ITimeScheduler
    function withdrawOwed(address payable to) external nonReentrant {
        uint256 amount = _owed[msg.sender];
        if (amount == 0) revert SchedulerNothingOwed(msg.sender);
        _owed[msg.sender] = 0;
        emit OwedWithdrawn(msg.sender, to, amount);
        bool ok;
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            // No return data is copied: the receiver cannot make us pay for a huge blob.
            ok := call(gas(), to, amount, 0, 0, 0, 0)
        }
        if (!ok) revert SchedulerWithdrawFailed(to, amount);
    }

    /// @inheritdoc ITimeScheduler
    function timeOracle() external view returns (ITimeOracle) {
        return _TIME_ORACLE;
    }

    /// @inheritdoc ITimeScheduler
    function callStatus(bytes32 callId) external view returns (CallStatus) {
        return _callStatus[callId];
    }

    /// @inheritdoc ITimeScheduler
    function callIdOf(ScheduledCall calldata request) external pure returns (bytes32) {
        return keccak256(abi.encode(request));
    }

    /// @inheritdoc ITimeScheduler
    function owedTo(address payee) external view returns (uint256) {
        return _owed[payee];
    }

    /// @inheritdoc ITimeScheduler
    function scheduledCallCount() external view returns (uint64) {
        return _callCount;
    }

    /// @dev The chain clock in seconds: `block.timestamp`. The one overridable clock (SchedulerHarness pins it).
    function _now() internal view virtual returns (uint256) {
        return block.timestamp;
    }

    /// @dev Both forms of {scheduleCall}: validates, records the call as `Scheduled` and emits the request.
    function _scheduleCall(
        uint128 executeAt,
        uint64 window,
        uint32 gasLimit,
        bytes calldata data
    ) private returns (bytes32 callId) {
        if (gasLimit < MIN_CALL_GAS_LIMIT || gasLimit > MAX_CALL_GAS_LIMIT) {
            revert SchedulerGasLimitOutOfRange(gasLimit, MIN_CALL_GAS_LIMIT, MAX_CALL_GAS_LIMIT);
        }
        if (window < MIN_EXECUTION_WINDOW_NS || window > MAX_EXECUTION_WINDOW_NS) {
            revert SchedulerWindowOutOfRange(window, MIN_EXECUTION_WINDOW_NS, MAX_EXECUTION_WINDOW_NS);
        }
        if (msg.value > type(uint96).max) revert SchedulerBountyTooLarge(msg.value);
        uint256 deadline = uint256(executeAt) + window;
        uint256 nowNs = _nowNs();
        if (nowNs > deadline) revert SchedulerDeadlinePassed(deadline, nowNs);

        ScheduledCall memory request = ScheduledCall({
            caller: msg.sender,
            nonce: _callCount++,
            executeAt: executeAt,
            window: window,
            gasLimit: gasLimit,
            bounty: uint96(msg.value), // fits: checked above
            data: data
        });
        callId = keccak256(abi.encode(request));
        _callStatus[callId] = CallStatus.Scheduled;
        emit CallScheduled(callId, msg.sender, request);
    }

    /// @dev The chain clock in nanoseconds.
    function _nowNs() private view returns (uint256) {
        return _now() * _NS_PER_SECOND;
    }

    /// @dev Returns the request's id, reverting unless the call is in the `Scheduled` state.
    function _requireScheduled(ScheduledCall calldata request) private view returns (bytes32 callId) {
        callId = keccak256(abi.encode(request));
        CallStatus status = _callStatus[callId];
        if (status != CallStatus.Scheduled) revert SchedulerCallNotScheduled(callId, status);
    }

    /**
     * @dev Calls `target` with exactly `gasLimit` gas and returns at most {MAX_RETURN_DATA} bytes of its output.
     * Reverts with {SchedulerInsufficientGas} when the gas left cannot provide `gasLimit` under the 63/64 rule.
     */
    function _callWithExactGas(
        address target,
        uint256 gasLimit,
        bytes memory data
    ) private returns (bool success, bytes memory returnData) {
        // At the CALL, after its own costs, `g - g/64 >= gasLimit` must hold: g >= gasLimit + ceil(gasLimit/63).
        uint256 gasRequired = gasLimit + (gasLimit + 62) / 63 + _CALL_OVERHEAD_GAS;
        uint256 gasAvailable = gasleft();
        if (gasAvailable < gasRequired) revert SchedulerInsufficientGas(gasLimit, gasRequired, gasAvailable);
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            // Output size 0: nothing is copied by the CALL itself, whatever the callee returns.
            success := call(gasLimit, target, 0, add(data, 0x20), mload(data), 0, 0)
            let size := returndatasize()
            if gt(size, MAX_RETURN_DATA) {
                size := MAX_RETURN_DATA
            }
            returnData := mload(0x40)
            mstore(returnData, size)
            returndatacopy(add(returnData, 0x20), 0, size)
            // Round the free memory pointer up to a whole word.
            mstore(0x40, add(add(returnData, 0x20), and(add(size, 0x1f), not(0x1f))))
        }
        // Safety net: a callee that ran out of gas while we hold less than gasLimit/63 may have been starved
        // (it received less than gasLimit); refuse rather than record a failure the executor caused.
        if (!success && gasleft() < gasLimit / 63) {
            revert SchedulerInsufficientGas(gasLimit, gasRequired, gasAvailable);
        }
    }

    /// @dev Pushes `amount` wei to `payee` with a gas stipend; if that fails, records it as owed instead.
    function _pay(address payee, uint256 amount) private {
        if (amount == 0) return;
        bool ok;
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            // Bounded gas and no return data copied: the payee can neither block nor grief the payer.
            ok := call(PAYMENT_GAS_STIPEND, payee, amount, 0, 0, 0, 0)
        }
        if (!ok) {
            _owed[payee] += amount;
            emit PaymentDeferred(payee, amount);
        }
    }
}
