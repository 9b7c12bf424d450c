// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeScheduler} from "../interfaces/ITimeScheduler.sol";

/**
 * @notice Test harness: a contract that schedules calls back to itself and behaves, when called, as the test
 * asks: well, reverting, burning all its gas, returning or reverting with a huge blob, measuring the gas it got,
 * re-entering the scheduler; and, when paid, accepting, reverting or burning gas.
 */
contract SchedulerCallee {
    enum PaymentMode {
        Accept,
        Revert,
        BurnGas
    }

    error CalleeFailed(uint256 code);
    error CalleeNotScheduler(address sender);

    ITimeScheduler public immutable SCHEDULER;

    uint256 public pings;
    uint256 public gasAtEntry;
    PaymentMode public paymentMode;
    bytes public reentryCalldata;
    bool public reentryOk;
    bytes public reentryResult;
    ITimeScheduler.CallStatus public statusDuringCall;
    bytes32 public lastScheduledCallId;
    bytes32 private probeCallId_;

    constructor(ITimeScheduler scheduler) {
        SCHEDULER = scheduler;
    }

    // solhint-disable-next-line no-complex-fallback
    receive() external payable {
        if (paymentMode == PaymentMode.Revert) revert CalleeFailed(0);
        if (paymentMode == PaymentMode.BurnGas) {
            // solhint-disable-next-line no-empty-blocks
            while (true) {}
        }
    }

    // ------------------------------------------------------------------ driving the scheduler

    function schedule(
        uint128 executeAt,
        uint64 window,
        uint32 gasLimit,
        bytes calldata data
    ) external payable returns (bytes32 callId) {
        callId = SCHEDULER.scheduleCall{value: msg.value}(executeAt, window, gasLimit, data);
        lastScheduledCallId = callId;
    }

    /// @notice Schedules with the scheduler's defaults: `scheduleCall(uint128 executeAt, bytes data)`.
    function scheduleWithDefaults(uint128 executeAt, bytes calldata data) external payable returns (bytes32 callId) {
        callId = SCHEDULER.scheduleCall{value: msg.value}(executeAt, data);
        lastScheduledCallId = callId;
    }

    function cancel(ITimeScheduler.ScheduledCall calldata request) external {
        SCHEDULER.cancelCall(request);
    }

    function withdrawOwed(address payable to) external {
        SCHEDULER.withdrawOwed(to);
    }

    function setPaymentMode(PaymentMode mode) external {
        paymentMode = mode;
    }

    /// @notice Calldata the callee sends to the scheduler from inside {reenter}, and the call whose status
    /// {reenter} records first.
    function setReentry(bytes calldata data, bytes32 probeCallId) external {
        reentryCalldata = data;
        probeCallId_ = probeCallId;
    }

    // ------------------------------------------------------------------ callbacks

    function ping(uint256 value) external returns (uint256) {
        if (msg.sender != address(SCHEDULER)) revert CalleeNotScheduler(msg.sender);
        pings += value;
        return value * 2;
    }

    function recordGas() external {
        gasAtEntry = gasleft();
    }

    function fail(uint256 code) external pure {
        revert CalleeFailed(code);
    }

    function burnAllGas() external pure {
        // solhint-disable-next-line no-inline-assembly
        assembly {
            invalid()
        }
    }

    function returnHugeBlob(uint256 size) external pure {
        // solhint-disable-next-line no-inline-assembly
        assembly {
            return(0, size)
        }
    }

    function revertHugeBlob(uint256 size) external pure {
        // solhint-disable-next-line no-inline-assembly
        assembly {
            revert(0, size)
        }
    }

    function reenter() external {
        statusDuringCall = SCHEDULER.callStatus(probeCallId_);
        (reentryOk, reentryResult) = address(SCHEDULER).call(reentryCalldata);
    }

    /// @notice Schedules its next run from inside a scheduled call (a recurring job).
    function reschedule(uint128 executeAt, uint64 window, uint32 gasLimit) external {
        lastScheduledCallId = SCHEDULER.scheduleCall(executeAt, window, gasLimit, abi.encodeCall(this.ping, (1)));
    }
}
