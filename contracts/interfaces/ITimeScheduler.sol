// SPDX-License-Identifier: MIT
// Floating: dApps compile this file with their own compiler, 0.8.24 or later (test/contracts/pragma.test.ts).
// solhint-disable-next-line compiler-version
pragma solidity ^0.8.24;

import {ITimeOracle, TimeProof} from "./ITimeOracle.sol";

/**
 * @title ITimeScheduler
 * @notice Calls scheduled for an attested moment: a contract schedules a call back to itself, to run once an
 * attested time proof shows that the moment has come; anyone may execute it with such a proof and earns the
 * bounty the scheduler attached. The scheduler is its own deployment next to the chain's oracle ({timeOracle}),
 * which it asks to verify every proof (`ITimeOracle.verifyTimeProof`: registry, freshness, accuracy, quorum).
 *
 * Lifecycle of a call: `None` → `Scheduled` → exactly one of `Executed` | `Failed` | `Cancelled` | `Expired`,
 * each with its own event. The contract stores only the call's status, keyed by `callId = keccak256(abi.encode
 * (request))`; the full request is emitted in {CallScheduled} and passed back by whoever executes, cancels or
 * expires the call.
 *
 * Time values are nanoseconds since the Unix epoch (docs/protocol.md §1); gas values are gas units; bounties are wei.
 */
interface ITimeScheduler {
    /// @notice Life-cycle state of a scheduled call. `None` means "never scheduled here".
    enum CallStatus {
        None,
        Scheduled,
        Executed,
        Failed,
        Cancelled,
        Expired
    }

    /**
     * @notice A scheduled call, exactly as emitted in {CallScheduled} and as executors pass it back.
     * @param caller The address that scheduled the call: the call goes back to it, and only it may cancel.
     * @param nonce Scheduler-wide sequence number, so that two otherwise identical requests differ.
     * @param executeAt First attested moment (ns) at which the call may run.
     * @param window Length (ns) of the execution window: the call may run with a proof whose nanoMoment lies in
     * `[executeAt, executeAt + window]` while the chain clock has not passed that deadline; once it has, the call
     * may only be expired.
     * @param gasLimit Gas the callee receives, exactly (the executor must supply it, see {SchedulerInsufficientGas}).
     * @param bounty Wei paid to whoever executes the call; refunded to `caller` on cancellation or expiry.
     * @param data Calldata sent to `caller`.
     */
    struct ScheduledCall {
        address caller;
        uint64 nonce;
        uint128 executeAt;
        uint64 window;
        uint32 gasLimit;
        uint96 bounty;
        bytes data;
    }

    /// @notice A call was scheduled; `request` is everything an executor needs to run it.
    event CallScheduled(bytes32 indexed callId, address indexed caller, ScheduledCall request);

    /// @notice The call ran and returned; `returnData` holds at most {MAX_RETURN_DATA} bytes of what it returned.
    event CallExecuted(bytes32 indexed callId, address indexed executor, uint128 nanoMoment, bytes returnData);

    /// @notice The call ran and reverted; `revertData` holds at most {MAX_RETURN_DATA} bytes of the revert data.
    event CallFailed(bytes32 indexed callId, address indexed executor, uint128 nanoMoment, bytes revertData);

    /// @notice The scheduler cancelled the call before it ran; its bounty went back to it.
    event CallCancelled(bytes32 indexed callId, uint256 refund);

    /// @notice The call's deadline passed before anyone ran it; its bounty went back to the scheduler.
    event CallExpired(bytes32 indexed callId, uint256 refund);

    /// @notice A payment (bounty or refund) could not be pushed to `payee` and is now owed to it ({withdrawOwed}).
    event PaymentDeferred(address indexed payee, uint256 amount);

    /// @notice `payee` withdrew what it was owed to `to`.
    event OwedWithdrawn(address indexed payee, address indexed to, uint256 amount);

    /// @notice The oracle address given to the constructor is the zero address.
    error SchedulerZeroOracle();

    /// @notice `gasLimit` is outside `[min, max]`.
    error SchedulerGasLimitOutOfRange(uint32 gasLimit, uint32 min, uint32 max);

    /// @notice `window` (ns) is outside `[min, max]`.
    error SchedulerWindowOutOfRange(uint64 window, uint64 min, uint64 max);

    /// @notice The bounty (`msg.value`, wei) does not fit in 96 bits.
    error SchedulerBountyTooLarge(uint256 bounty);

    /// @notice The call's deadline (`executeAt + window`, ns) is already behind the chain clock (`nowNs`).
    error SchedulerDeadlinePassed(uint256 deadline, uint256 nowNs);

    /// @notice The call is not in the `Scheduled` state (never scheduled, or already settled).
    error SchedulerCallNotScheduled(bytes32 callId, CallStatus status);

    /// @notice Only the address that scheduled a call may cancel it.
    error SchedulerNotCaller(bytes32 callId, address caller, address sender);

    /// @notice The proof's moment is before the call's `executeAt`.
    error SchedulerTooEarly(uint128 executeAt, uint128 nanoMoment);

    /// @notice The proof's moment is after the call's deadline (`executeAt + window`).
    error SchedulerTooLate(uint256 deadline, uint128 nanoMoment);

    /**
     * @notice The chain clock (`nowNs`, `block.timestamp` in ns) is already past the call's deadline
     * (`executeAt + window`, ns), even though the proof's moment is inside the window: a proof stays fresh for the
     * oracle's `maxAttestationAge` after the moment it shows, so without this the callee could run after its
     * window closed. From this chain clock on the call can only be expired ({expireCall}): at every chain clock
     * exactly one of the two is allowed (execute while `nowNs <= deadline`, expire once `nowNs > deadline`).
     */
    error SchedulerChainPastDeadline(uint256 deadline, uint256 nowNs);

    /// @notice The oracle ({timeOracle}) rejects the time proof offered to execute the call.
    error SchedulerInvalidProof(bytes32 callId, uint128 nanoMoment);

    /**
     * @notice The executor did not supply enough gas for the callee to receive `gasLimit` under the 63/64 rule
     * (EIP-150): `gasRequired` were needed at the call, only `gasAvailable` were left.
     */
    error SchedulerInsufficientGas(uint256 gasLimit, uint256 gasRequired, uint256 gasAvailable);

    /// @notice The chain clock (`nowNs`) has not yet passed the call's deadline, so it cannot be expired.
    error SchedulerNotExpired(uint256 deadline, uint256 nowNs);

    /// @notice `payee` is owed nothing.
    error SchedulerNothingOwed(address payee);

    /// @notice Sending `amount` wei to `to` failed.
    error SchedulerWithdrawFailed(address to, uint256 amount);

    /**
     * @notice Schedules a call back to `msg.sender` with calldata `data` for the attested moment `executeAt` (ns),
     * with the defaults: an execution window of 1 hour (`DEFAULT_EXECUTION_WINDOW_NS`, 3,600 s: the call may run
     * with a proof whose moment lies in `[executeAt, executeAt + 1 h]`), a gas limit of 200,000
     * (`DEFAULT_CALL_GAS_LIMIT`), and `msg.value` as the bounty (none sent: no bounty). The service description's
     * `scheduleCall(uint128 executeAt, bytes data)`; the full form below sets the window and gas limit.
     * @return callId The call's identifier, `keccak256(abi.encode(request))`.
     */
    function scheduleCall(uint128 executeAt, bytes calldata data) external payable returns (bytes32 callId);

    /**
     * @notice Schedules a call back to `msg.sender` with calldata `data`, to run with exactly `gasLimit` gas once
     * an attested proof shows a moment in `[executeAt, executeAt + window]`. `msg.value` is the executor's bounty.
     * Reverts with {SchedulerGasLimitOutOfRange}, {SchedulerWindowOutOfRange}, {SchedulerBountyTooLarge} or
     * {SchedulerDeadlinePassed}.
     * @return callId The call's identifier, `keccak256(abi.encode(request))`.
     */
    function scheduleCall(
        uint128 executeAt,
        uint64 window,
        uint32 gasLimit,
        bytes calldata data
    ) external payable returns (bytes32 callId);

    /**
     * @notice Runs a scheduled call. Anyone may call this with the request (from {CallScheduled}) and a time proof
     * the oracle accepts whose moment lies in the call's window, while the chain clock is not past the call's
     * deadline ({SchedulerChainPastDeadline}; then only {expireCall} settles it). The call is marked before it runs;
     * a reverting callee marks it `Failed` without reverting this transaction. The executor (`msg.sender`) receives
     * the bounty either way.
     * @return success Whether the callee returned without reverting.
     */
    function executeCall(ScheduledCall calldata request, TimeProof calldata proof) external returns (bool success);

    /// @notice Cancels a call that has not run yet; only its scheduler may. The bounty is refunded to it.
    function cancelCall(ScheduledCall calldata request) external;

    /// @notice Marks a call whose deadline the chain clock has passed as `Expired`; anyone may. Refunds the bounty.
    function expireCall(ScheduledCall calldata request) external;

    /// @notice Sends everything owed to `msg.sender` (deferred bounties and refunds) to `to`.
    function withdrawOwed(address payable to) external;

    /// @notice The oracle this scheduler verifies proofs with.
    function timeOracle() external view returns (ITimeOracle);

    /// @notice Status of a call.
    function callStatus(bytes32 callId) external view returns (CallStatus);

    /// @notice Identifier of a request: `keccak256(abi.encode(request))`.
    function callIdOf(ScheduledCall calldata request) external pure returns (bytes32);

    /// @notice Wei owed to `payee` (payments that could not be pushed).
    function owedTo(address payee) external view returns (uint256);

    /// @notice Number of calls scheduled so far (the next request's nonce).
    function scheduledCallCount() external view returns (uint64);
}
