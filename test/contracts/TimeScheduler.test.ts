/**
 * TimeScheduler, its own deployment holding an oracle: first against TimeOracleStub (whose verifyTimeProof answers
 * what the test sets) with SchedulerHarness's pinned chain clock, driven by SchedulerCallee, a contract that
 * schedules calls back to itself and misbehaves on request; then against a real TimeOracle with real proofs, the
 * production TimeScheduler included.
 */
import hre from "hardhat";
import { expect } from "chai";
import {
  decodeErrorResult,
  encodeErrorResult,
  encodeFunctionData,
  getAddress,
  toFunctionSelector,
  zeroAddress,
  type Abi,
  type AbiFunction,
  type Address,
  type Hex,
  type TransactionReceipt,
} from "viem";
import { iTimeSchedulerAbi, timeOracleAbi, timeSchedulerAbi } from "../../abi";
import { NS_PER_SECOND, type TimeProof } from "../../protocol";
import { countEvents, eventOf } from "./apps-helpers";
import { deployOracleFixture, expectRevert, FIXTURE_NOW_NS, FIXTURE_NOW_SECONDS, loadFixture } from "./fixtures";
import { decodeRevert } from "../../lib/revert";
import type { ScheduledCall } from "../../deploy";

const NOW_SECONDS = 1_800_000_000n;
const NOW_NS = NOW_SECONDS * NS_PER_SECOND;
const EXECUTE_AT = NOW_NS + 60n * NS_PER_SECOND;
const WINDOW = 30n * NS_PER_SECOND;
const DEADLINE = EXECUTE_AT + WINDOW;
const GAS_LIMIT = 200_000;
const BOUNTY = 10n ** 15n;

enum Status {
  None,
  Scheduled,
  Executed,
  Failed,
  Cancelled,
  Expired,
}

/** A proof for the harness: only its moment matters there (validity is a switch). */
function proofAt(nanoMoment: bigint): TimeProof {
  return { nanoMoment, hardwareSignature: "0x", nodeSignature: "0x", accuracy: 0 };
}


/** The decoded arguments of the custom error `promise` reverts with. */
/** The ABI's functions called `name` (all its overloads). */
function functionsNamed(abi: Abi, name: string): AbiFunction[] {
  return abi.filter((item): item is AbiFunction => item.type === "function" && item.name === name);
}

async function revertArgs(promise: Promise<unknown>, abi: Abi): Promise<readonly unknown[]> {
  try {
    await promise;
  } catch (error) {
    const decoded = decodeRevert(error, abi);
    if (decoded !== undefined) return decoded.args;
  }
  return expect.fail("expected a revert with revert data");
}

async function deploySchedulerFixture() {
  const [deployer, executor, stranger] = await hre.viem.getWalletClients();
  const publicClient = await hre.viem.getPublicClient();
  const oracle = await hre.viem.deployContract("TimeOracleStub", []);
  const scheduler = await hre.viem.deployContract("SchedulerHarness", [oracle.address]);
  await scheduler.write.setNow([NOW_SECONDS]);
  const callee = await hre.viem.deployContract("SchedulerCallee", [scheduler.address]);
  const asExecutor = await hre.viem.getContractAt("SchedulerHarness", scheduler.address, {
    client: { wallet: executor },
  });
  const asStranger = await hre.viem.getContractAt("SchedulerHarness", scheduler.address, {
    client: { wallet: stranger },
  });

  /** Has the callee schedule a call to itself with `data`; returns the request from the event. */
  async function schedule(
    data: Hex,
    options: { gasLimit?: number; bounty?: bigint; executeAt?: bigint; window?: bigint } = {},
  ): Promise<{ callId: Hex; request: ScheduledCall; receipt: TransactionReceipt }> {
    const hash = await callee.write.schedule(
      [options.executeAt ?? EXECUTE_AT, options.window ?? WINDOW, options.gasLimit ?? GAS_LIMIT, data],
      { value: options.bounty ?? BOUNTY },
    );
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    const args = eventOf(scheduler.abi, receipt, "CallScheduled");
    return { callId: args.callId as Hex, request: args.request as ScheduledCall, receipt };
  }

  /** Executes as `executor`; returns the receipt. */
  async function execute(request: ScheduledCall, nanoMoment = EXECUTE_AT, gas?: bigint): Promise<TransactionReceipt> {
    const hash = await asExecutor.write.executeCall([request, proofAt(nanoMoment)], gas === undefined ? {} : { gas });
    return publicClient.waitForTransactionReceipt({ hash });
  }

  /**
   * A cancel or expire transaction ended the call: it emitted `event` with the bounty refunded to the callee, the
   * status is `status`, and the call can be neither executed (even with a proof inside its window) nor cancelled.
   */
  async function expectEnded(hash: Hex, event: "CallCancelled" | "CallExpired", callId: Hex, request: ScheduledCall, status: number): Promise<void> {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    expect(eventOf(scheduler.abi, receipt, event)).to.deep.equal({ callId, refund: BOUNTY });
    expect(await scheduler.read.callStatus([callId])).to.equal(status);
    expect(await publicClient.getBalance({ address: callee.address })).to.equal(BOUNTY);
    await expectRevert(asExecutor.simulate.executeCall([request, proofAt(EXECUTE_AT)]), "SchedulerCallNotScheduled", [callId, status]);
    await expectRevert(callee.simulate.cancel([request]), "SchedulerCallNotScheduled", [callId, status]);
  }

  const calldata = {
    ping: (value: bigint) => encodeFunctionData({ abi: callee.abi, functionName: "ping", args: [value] }),
    fail: (code: bigint) => encodeFunctionData({ abi: callee.abi, functionName: "fail", args: [code] }),
    burnAllGas: () => encodeFunctionData({ abi: callee.abi, functionName: "burnAllGas" }),
    recordGas: () => encodeFunctionData({ abi: callee.abi, functionName: "recordGas" }),
    returnHugeBlob: (size: bigint) => encodeFunctionData({ abi: callee.abi, functionName: "returnHugeBlob", args: [size] }),
    revertHugeBlob: (size: bigint) => encodeFunctionData({ abi: callee.abi, functionName: "revertHugeBlob", args: [size] }),
    reenter: () => encodeFunctionData({ abi: callee.abi, functionName: "reenter" }),
  };

  return { oracle, scheduler, asExecutor, asStranger, callee, publicClient, deployer, executor, stranger, schedule, execute, expectEnded, calldata };
}

describe("TimeScheduler", () => {
  describe("scheduleCall", () => {
    it("records the call's status under the hash of the request and emits the full request", async () => {
      const { scheduler, callee, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(3n));
      expect(request).to.deep.equal({
        caller: getAddress(callee.address),
        nonce: 0n,
        executeAt: EXECUTE_AT,
        window: WINDOW,
        gasLimit: GAS_LIMIT,
        bounty: BOUNTY,
        data: calldata.ping(3n),
      });
      expect(await scheduler.read.callIdOf([request])).to.equal(callId);
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Scheduled);
      expect(await scheduler.read.scheduledCallCount()).to.equal(1n);
      const second = await schedule(calldata.ping(3n));
      expect(second.request.nonce).to.equal(1n);
      expect(second.callId).to.not.equal(callId);
    });

    it("refuses a gas limit outside [MIN_CALL_GAS_LIMIT, MAX_CALL_GAS_LIMIT]", async () => {
      const { callee, scheduler, calldata } = await loadFixture(deploySchedulerFixture);
      const min = (await scheduler.read.MIN_CALL_GAS_LIMIT()) as number;
      const max = (await scheduler.read.MAX_CALL_GAS_LIMIT()) as number;
      await expectRevert(
        callee.simulate.schedule([EXECUTE_AT, WINDOW, min - 1, calldata.ping(1n)]),
        "SchedulerGasLimitOutOfRange",
        [min - 1, min, max],
      );
      await expectRevert(
        callee.simulate.schedule([EXECUTE_AT, WINDOW, max + 1, calldata.ping(1n)]),
        "SchedulerGasLimitOutOfRange",
        [max + 1, min, max],
      );
    });

    it("refuses an execution window outside [MIN_EXECUTION_WINDOW_NS, MAX_EXECUTION_WINDOW_NS]", async () => {
      const { callee, scheduler, calldata } = await loadFixture(deploySchedulerFixture);
      const min = (await scheduler.read.MIN_EXECUTION_WINDOW_NS()) as bigint;
      const max = (await scheduler.read.MAX_EXECUTION_WINDOW_NS()) as bigint;
      await expectRevert(
        callee.simulate.schedule([EXECUTE_AT, min - 1n, GAS_LIMIT, calldata.ping(1n)]),
        "SchedulerWindowOutOfRange",
        [min - 1n, min, max],
      );
      await expectRevert(
        callee.simulate.schedule([EXECUTE_AT, max + 1n, GAS_LIMIT, calldata.ping(1n)]),
        "SchedulerWindowOutOfRange",
        [max + 1n, min, max],
      );
    });

    it("refuses a call whose deadline the chain clock has already passed", async () => {
      const { callee, calldata } = await loadFixture(deploySchedulerFixture);
      const executeAt = NOW_NS - WINDOW - 1n;
      await expectRevert(
        callee.simulate.schedule([executeAt, WINDOW, GAS_LIMIT, calldata.ping(1n)]),
        "SchedulerDeadlinePassed",
        [executeAt + WINDOW, NOW_NS],
      );
    });
  });

  describe("executeCall", () => {
    it("calls the scheduler back with the data, marks it Executed and pays the bounty to the executor", async () => {
      const { scheduler, callee, publicClient, executor, schedule, execute, calldata } =
        await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(21n));
      const before = await publicClient.getBalance({ address: executor.account.address });
      const receipt = await execute(request);
      const after = await publicClient.getBalance({ address: executor.account.address });

      expect(receipt.status).to.equal("success");
      expect(await callee.read.pings()).to.equal(21n);
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Executed);
      const executed = eventOf(scheduler.abi, receipt, "CallExecuted");
      expect(executed.callId).to.equal(callId);
      expect((executed.executor as Address).toLowerCase()).to.equal(executor.account.address.toLowerCase());
      expect(executed.nanoMoment).to.equal(EXECUTE_AT);
      expect(executed.returnData).to.equal(`0x${(42n).toString(16).padStart(64, "0")}`);
      expect(after - before).to.equal(BOUNTY - receipt.gasUsed * receipt.effectiveGasPrice);
      expect(await publicClient.getBalance({ address: scheduler.address })).to.equal(0n);
    });

    it("accepts a proof at the last moment of the window", async () => {
      const { scheduler, schedule, execute, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(1n));
      await execute(request, DEADLINE);
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Executed);
    });

    it("refuses a proof earlier than executeAt", async () => {
      const { asExecutor, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const { request } = await schedule(calldata.ping(1n));
      await expectRevert(
        asExecutor.simulate.executeCall([request, proofAt(EXECUTE_AT - 1n)]),
        "SchedulerTooEarly",
        [EXECUTE_AT, EXECUTE_AT - 1n],
      );
    });

    it("refuses a proof after the window", async () => {
      const { asExecutor, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const { request } = await schedule(calldata.ping(1n));
      await expectRevert(
        asExecutor.simulate.executeCall([request, proofAt(DEADLINE + 1n)]),
        "SchedulerTooLate",
        [DEADLINE, DEADLINE + 1n],
      );
    });

    it("refuses a proof that the oracle does not verify", async () => {
      const { oracle, asExecutor, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(1n));
      await oracle.write.setProofsValid([false]);
      await expectRevert(asExecutor.simulate.executeCall([request, proofAt(EXECUTE_AT)]), "SchedulerInvalidProof", [
        callId,
        EXECUTE_AT,
      ]);
    });

    it("refuses a second execution", async () => {
      const { asExecutor, schedule, execute, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(1n));
      await execute(request);
      await expectRevert(asExecutor.simulate.executeCall([request, proofAt(EXECUTE_AT + 1n)]), "SchedulerCallNotScheduled", [
        callId,
        Status.Executed,
      ]);
    });

    it("refuses a request that was never scheduled (altered data, bounty or gas limit)", async () => {
      const { scheduler, asExecutor, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const { request } = await schedule(calldata.ping(1n));
      for (const altered of [
        { ...request, data: calldata.ping(2n) },
        { ...request, bounty: request.bounty + 1n },
        { ...request, gasLimit: request.gasLimit + 1 },
      ]) {
        const alteredId = await scheduler.read.callIdOf([altered]);
        await expectRevert(asExecutor.simulate.executeCall([altered, proofAt(EXECUTE_AT)]), "SchedulerCallNotScheduled", [
          alteredId,
          Status.None,
        ]);
      }
    });

    it("marks a reverting callee Failed, keeps the executor's transaction and still pays the bounty", async () => {
      const { scheduler, callee, publicClient, executor, schedule, execute, calldata } =
        await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.fail(7n));
      const before = await publicClient.getBalance({ address: executor.account.address });
      const receipt = await execute(request);
      const after = await publicClient.getBalance({ address: executor.account.address });

      expect(receipt.status).to.equal("success");
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Failed);
      const failed = eventOf(scheduler.abi, receipt, "CallFailed");
      expect(failed.revertData).to.equal(encodeErrorResult({ abi: callee.abi, errorName: "CalleeFailed", args: [7n] }));
      expect(countEvents(scheduler.abi, receipt, "CallExecuted")).to.equal(0);
      expect(after - before).to.equal(BOUNTY - receipt.gasUsed * receipt.effectiveGasPrice);
    });

    it("lets a callee schedule its next run from inside the call (recurring job)", async () => {
      const { scheduler, callee, schedule, execute } = await loadFixture(deploySchedulerFixture);
      const next = encodeFunctionData({
        abi: callee.abi,
        functionName: "reschedule",
        args: [EXECUTE_AT + 3_600n * NS_PER_SECOND, WINDOW, GAS_LIMIT],
      });
      const { callId, request } = await schedule(next);
      await execute(request);
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Executed);
      const nextId = (await callee.read.lastScheduledCallId()) as Hex;
      expect(nextId).to.not.equal(callId);
      expect(await scheduler.read.callStatus([nextId])).to.equal(Status.Scheduled);
    });
  });

  describe("reentrancy", () => {
    for (const target of ["executeCall", "cancelCall"] as const) {
      it(`a callee re-entering ${target} for its own call is refused; the call was already marked Executed`, async () => {
        const { scheduler, callee, publicClient, executor, schedule, execute, calldata } =
          await loadFixture(deploySchedulerFixture);
        const { callId, request } = await schedule(calldata.reenter(), { gasLimit: 500_000 });
        // The request cannot carry itself in its data, so the re-entry calldata is stored in the callee.
        const reentry =
          target === "executeCall"
            ? encodeFunctionData({ abi: scheduler.abi, functionName: target, args: [request, proofAt(EXECUTE_AT)] })
            : encodeFunctionData({ abi: scheduler.abi, functionName: target, args: [request] });
        await callee.write.setReentry([reentry, callId]);
        const before = await publicClient.getBalance({ address: executor.account.address });
        const receipt = await execute(request);
        const after = await publicClient.getBalance({ address: executor.account.address });

        expect(await callee.read.statusDuringCall()).to.equal(Status.Executed);
        expect(await callee.read.reentryOk()).to.equal(false);
        expect(decodeErrorResult({ abi: scheduler.abi, data: (await callee.read.reentryResult()) as Hex }).errorName).to.equal(
          "ReentrancyGuardReentrantCall",
        );
        expect(await scheduler.read.callStatus([callId])).to.equal(Status.Executed);
        expect(countEvents(scheduler.abi, receipt, "CallExecuted")).to.equal(1);
        expect(after - before, "bounty paid once").to.equal(BOUNTY - receipt.gasUsed * receipt.effectiveGasPrice);
        expect(await publicClient.getBalance({ address: scheduler.address })).to.equal(0n);
      });
    }
  });

  describe("gas", () => {
    it("gives the callee exactly its gas limit, even when the executor supplies only the estimated gas", async () => {
      const { scheduler, callee, publicClient, executor, schedule, execute, calldata } =
        await loadFixture(deploySchedulerFixture);
      const gasLimit = 123_456;
      const { request } = await schedule(calldata.recordGas(), { gasLimit });
      const gas = await publicClient.estimateContractGas({
        address: scheduler.address,
        abi: scheduler.abi,
        functionName: "executeCall",
        args: [request, proofAt(EXECUTE_AT)],
        account: executor.account.address,
      });
      await execute(request, EXECUTE_AT, gas);
      const gasAtEntry = (await callee.read.gasAtEntry()) as bigint;
      // gasleft() is read after the callee's function dispatch (selector search, calldata checks): ~200 gas in.
      expect(gasAtEntry <= BigInt(gasLimit), `${gasAtEntry} <= ${gasLimit}`).to.equal(true);
      expect(BigInt(gasLimit) - gasAtEntry < 300n, `${gasLimit} - ${gasAtEntry} < 300`).to.equal(true);
    });

    it("refuses to execute when the executor leaves too little gas for the limit under the 63/64 rule", async () => {
      const { asExecutor, scheduler, executor, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const gasLimit = 1_000_000n;
      const { callId, request } = await schedule(calldata.burnAllGas(), { gasLimit: Number(gasLimit) });
      // gasLimit + ceil(gasLimit / 63) + the CALL's own overhead (two cold account accesses, rounded up).
      const gasRequired = gasLimit + (gasLimit + 62n) / 63n + 5_700n;
      const tooLittleGas = asExecutor.simulate.executeCall([request, proofAt(EXECUTE_AT)], {
        account: executor.account.address,
        gas: 600_000n,
      });
      await expectRevert(tooLittleGas, "SchedulerInsufficientGas");
      // The evidence: the gas available at the check depends on the code path before it; the rest is exact.
      const [limit, required, available] = await revertArgs(
        asExecutor.simulate.executeCall([request, proofAt(EXECUTE_AT)], { account: executor.account.address, gas: 600_000n }),
        scheduler.abi,
      );
      expect(limit).to.equal(gasLimit);
      expect(required).to.equal(gasRequired);
      expect((available as bigint) < gasRequired, `${available} < ${gasRequired}`).to.equal(true);
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Scheduled);
    });

    it("a callee that burns all its gas is marked Failed; the executor's transaction succeeds", async () => {
      const { scheduler, publicClient, executor, asExecutor, schedule, calldata } =
        await loadFixture(deploySchedulerFixture);
      const gasLimit = 1_000_000;
      const { callId, request } = await schedule(calldata.burnAllGas(), { gasLimit });
      // With just the gas the node estimates (the least that lets the transaction succeed).
      const gas = await publicClient.estimateContractGas({
        address: scheduler.address,
        abi: scheduler.abi,
        functionName: "executeCall",
        args: [request, proofAt(EXECUTE_AT)],
        account: executor.account.address,
      });
      const hash = await asExecutor.write.executeCall([request, proofAt(EXECUTE_AT)], { gas });
      const receipt = await publicClient.waitForTransactionReceipt({ hash });
      expect(receipt.status).to.equal("success");
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Failed);
      expect(eventOf(scheduler.abi, receipt, "CallFailed").revertData).to.equal("0x");
      expect(receipt.gasUsed >= BigInt(gasLimit), "the callee got (and burnt) its full limit").to.equal(true);
    });

    it("copies at most MAX_RETURN_DATA bytes of a huge returned blob", async () => {
      const { scheduler, schedule, execute, calldata } = await loadFixture(deploySchedulerFixture);
      const max = await scheduler.read.MAX_RETURN_DATA();
      const gasLimit = 2_000_000;
      const { callId, request } = await schedule(calldata.returnHugeBlob(400_000n), { gasLimit });
      const receipt = await execute(request);
      expect(receipt.status).to.equal("success");
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Executed);
      const returnData = eventOf(scheduler.abi, receipt, "CallExecuted").returnData as Hex;
      expect((returnData.length - 2) / 2).to.equal(Number(max));
      // The blob's memory was paid for inside the callee's limit; the executor paid no copying on top.
      expect(receipt.gasUsed < BigInt(gasLimit) + 150_000n, `${receipt.gasUsed}`).to.equal(true);
    });

    it("copies at most MAX_RETURN_DATA bytes of a huge revert blob and marks the call Failed", async () => {
      const { scheduler, schedule, execute, calldata } = await loadFixture(deploySchedulerFixture);
      const max = await scheduler.read.MAX_RETURN_DATA();
      const { callId, request } = await schedule(calldata.revertHugeBlob(400_000n), { gasLimit: 2_000_000 });
      const receipt = await execute(request);
      expect(receipt.status).to.equal("success");
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Failed);
      const revertData = eventOf(scheduler.abi, receipt, "CallFailed").revertData as Hex;
      expect((revertData.length - 2) / 2).to.equal(Number(max));
    });
  });

  describe("cancelCall", () => {
    it("lets the scheduler cancel before execution and refunds the bounty", async () => {
      const { callee, schedule, expectEnded, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(1n));
      await expectEnded(await callee.write.cancel([request]), "CallCancelled", callId, request, Status.Cancelled);
    });

    it("refuses a cancellation by anyone but the scheduler", async () => {
      const { asStranger, callee, stranger, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(1n));
      await expectRevert(asStranger.simulate.cancelCall([request], { account: stranger.account.address }), "SchedulerNotCaller", [
        callId,
        getAddress(callee.address),
        getAddress(stranger.account.address),
      ]);
    });

    it("refuses a cancellation after execution", async () => {
      const { callee, schedule, execute, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(1n));
      await execute(request);
      await expectRevert(callee.simulate.cancel([request]), "SchedulerCallNotScheduled", [callId, Status.Executed]);
    });
  });

  describe("expireCall", () => {
    it("refuses to expire a call before the chain clock passes its deadline", async () => {
      const { scheduler, asStranger, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const { request } = await schedule(calldata.ping(1n));
      await scheduler.write.setNow([DEADLINE / NS_PER_SECOND]);
      await expectRevert(asStranger.simulate.expireCall([request]), "SchedulerNotExpired", [DEADLINE, DEADLINE]);
    });

    it("lets anyone expire a call past its deadline and refunds the bounty to the scheduler", async () => {
      const { scheduler, asStranger, schedule, expectEnded, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(1n));
      await scheduler.write.setNow([DEADLINE / NS_PER_SECOND + 1n]);
      await expectEnded(await asStranger.write.expireCall([request]), "CallExpired", callId, request, Status.Expired);
    });

    for (const [mode, label] of [
      [1, "reverts"],
      [2, "burns all the gas it is given"],
    ] as const) {
      it(`owes the refund to a scheduler whose receive() ${label}, without blocking the expiry`, async () => {
        const { scheduler, callee, asStranger, publicClient, stranger, schedule, calldata } =
          await loadFixture(deploySchedulerFixture);
        const { callId, request } = await schedule(calldata.ping(1n));
        await callee.write.setPaymentMode([mode]);
        await scheduler.write.setNow([DEADLINE / NS_PER_SECOND + 1n]);
        const hash = await asStranger.write.expireCall([request]);
        const receipt = await publicClient.waitForTransactionReceipt({ hash });
        expect(receipt.status).to.equal("success");
        expect(await scheduler.read.callStatus([callId])).to.equal(Status.Expired);
        expect(eventOf(scheduler.abi, receipt, "PaymentDeferred")).to.deep.equal({
          payee: getAddress(callee.address),
          amount: BOUNTY,
        });
        expect(await scheduler.read.owedTo([callee.address])).to.equal(BOUNTY);

        // The scheduler pulls it to an address of its choice.
        const target = stranger.account.address;
        const balanceBefore = await publicClient.getBalance({ address: target });
        await callee.write.withdrawOwed([target]);
        expect(await publicClient.getBalance({ address: target })).to.equal(balanceBefore + BOUNTY);
        expect(await scheduler.read.owedTo([callee.address])).to.equal(0n);
        await expectRevert(callee.simulate.withdrawOwed([target]), "SchedulerNothingOwed", [getAddress(callee.address)]);
      });
    }
  });

  describe("the deadline on the chain clock: executeCall and expireCall never race", () => {
    // A proof stays fresh for the oracle's maxAttestationAge after its moment, so a proof from inside the window can
    // still be offered after the window closed. Execution therefore needs the chain clock at or before the deadline,
    // exactly where expiry is refused: at every chain clock one of the two settles the call, never both.

    it("past the deadline on the chain clock, a proof inside the window no longer executes; the call expires", async () => {
      const { scheduler, asExecutor, asStranger, schedule, expectEnded, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(1n));
      const pastNs = DEADLINE + NS_PER_SECOND;
      await scheduler.write.setNow([pastNs / NS_PER_SECOND]);
      for (const nanoMoment of [EXECUTE_AT, DEADLINE - 1n, DEADLINE]) {
        await expectRevert(asExecutor.simulate.executeCall([request, proofAt(nanoMoment)]), "SchedulerChainPastDeadline", [DEADLINE, pastNs]);
      }
      await expectEnded(await asStranger.write.expireCall([request]), "CallExpired", callId, request, Status.Expired);
    });

    it("at the deadline on the chain clock, a proof inside the window still executes and the call cannot be expired", async () => {
      const { scheduler, callee, asStranger, schedule, execute, calldata } = await loadFixture(deploySchedulerFixture);
      const { callId, request } = await schedule(calldata.ping(7n));
      await scheduler.write.setNow([DEADLINE / NS_PER_SECOND]);
      await expectRevert(asStranger.simulate.expireCall([request]), "SchedulerNotExpired", [DEADLINE, DEADLINE]);
      await execute(request, DEADLINE);
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Executed);
      expect(await callee.read.pings()).to.equal(7n);
      await expectRevert(asStranger.simulate.expireCall([request]), "SchedulerCallNotScheduled", [callId, Status.Executed]);
    });

    it("at every chain clock around the deadline exactly one of executeCall and expireCall is allowed", async () => {
      const { scheduler, asExecutor, asStranger, schedule, calldata } = await loadFixture(deploySchedulerFixture);
      const { request } = await schedule(calldata.ping(1n));
      const deadlineSeconds = DEADLINE / NS_PER_SECOND;
      for (const nowSeconds of [EXECUTE_AT / NS_PER_SECOND, deadlineSeconds - 1n, deadlineSeconds, deadlineSeconds + 1n, deadlineSeconds + 60n]) {
        await scheduler.write.setNow([nowSeconds]);
        const allowed = async (promise: Promise<unknown>): Promise<boolean> => promise.then(() => true, () => false);
        const canExecute = await allowed(asExecutor.simulate.executeCall([request, proofAt(DEADLINE)]));
        const canExpire = await allowed(asStranger.simulate.expireCall([request]));
        expect([canExecute, canExpire], `chain clock ${nowSeconds} s, deadline ${deadlineSeconds} s`).to.deep.equal(
          nowSeconds <= deadlineSeconds ? [true, false] : [false, true],
        );
      }
    });
  });

  describe("scheduleCall(uint128 executeAt, bytes data): the defaults", () => {
    it("offers exactly that signature, payable, beside the full form", async () => {
      const { scheduler } = await loadFixture(deploySchedulerFixture);
      for (const [name, abi] of [["TimeScheduler", timeSchedulerAbi], ["ITimeScheduler", iTimeSchedulerAbi]] as const) {
        const forms = functionsNamed(abi, "scheduleCall");
        expect(forms.map((item) => toFunctionSelector(item)), name).to.have.members([
          toFunctionSelector("scheduleCall(uint128,bytes)"),
          toFunctionSelector("scheduleCall(uint128,uint64,uint32,bytes)"),
        ]);
        for (const form of forms) expect(form.stateMutability, `${name} ${form.inputs.length} arguments`).to.equal("payable");
      }
      expect(await scheduler.read.DEFAULT_EXECUTION_WINDOW_NS()).to.equal(3_600n * NS_PER_SECOND);
      expect(await scheduler.read.DEFAULT_CALL_GAS_LIMIT()).to.equal(200_000);
    });

    it("schedules a call back to the sender with a 1-hour window, a 200,000 gas limit and msg.value as the bounty", async () => {
      const { scheduler, callee, publicClient, calldata } = await loadFixture(deploySchedulerFixture);
      const hash = await callee.write.scheduleWithDefaults([EXECUTE_AT, calldata.ping(4n)], { value: BOUNTY });
      const receipt = await publicClient.waitForTransactionReceipt({ hash });
      const { callId, caller, request } = eventOf(scheduler.abi, receipt, "CallScheduled");
      expect(caller).to.equal(getAddress(callee.address));
      expect(request).to.deep.equal({
        caller: getAddress(callee.address),
        nonce: 0n,
        executeAt: EXECUTE_AT,
        window: 3_600n * NS_PER_SECOND,
        gasLimit: 200_000,
        bounty: BOUNTY,
        data: calldata.ping(4n),
      });
      expect(callId).to.equal(await callee.read.lastScheduledCallId());
      expect(await scheduler.read.callIdOf([request as ScheduledCall])).to.equal(callId);
      expect(await scheduler.read.callStatus([callId as Hex])).to.equal(Status.Scheduled);
      expect(await publicClient.getBalance({ address: scheduler.address })).to.equal(BOUNTY);
    });

    it("without value: no bounty, and the call still runs for whoever executes it", async () => {
      const { scheduler, callee, publicClient, executor, execute, calldata } = await loadFixture(deploySchedulerFixture);
      const receipt = await publicClient.waitForTransactionReceipt({
        hash: await callee.write.scheduleWithDefaults([EXECUTE_AT, calldata.ping(2n)]),
      });
      const request = eventOf(scheduler.abi, receipt, "CallScheduled").request as ScheduledCall;
      expect(request.bounty).to.equal(0n);
      const before = await publicClient.getBalance({ address: executor.account.address });
      const executed = await execute(request);
      const after = await publicClient.getBalance({ address: executor.account.address });
      expect(await callee.read.pings()).to.equal(2n);
      expect(after - before).to.equal(-executed.gasUsed * executed.effectiveGasPrice);
      expect(countEvents(scheduler.abi, executed, "PaymentDeferred")).to.equal(0);
    });

    it("runs the callee with exactly the default 200,000 gas", async () => {
      const { scheduler, callee, publicClient, execute, calldata } = await loadFixture(deploySchedulerFixture);
      const receipt = await publicClient.waitForTransactionReceipt({
        hash: await callee.write.scheduleWithDefaults([EXECUTE_AT, calldata.recordGas()]),
      });
      await execute(eventOf(scheduler.abi, receipt, "CallScheduled").request as ScheduledCall);
      const gasAtEntry = (await callee.read.gasAtEntry()) as bigint;
      // As in the gas tests below: gasleft() is read ~200 gas into the callee.
      expect(gasAtEntry <= 200_000n && 200_000n - gasAtEntry < 300n, `${gasAtEntry}`).to.equal(true);
    });

    it("accepts a proof up to executeAt + 1 h, refuses one later, and expires the call once the chain clock passes that", async () => {
      const { scheduler, callee, asExecutor, asStranger, publicClient, calldata } = await loadFixture(deploySchedulerFixture);
      const receipt = await publicClient.waitForTransactionReceipt({
        hash: await callee.write.scheduleWithDefaults([EXECUTE_AT, calldata.ping(1n)], { value: BOUNTY }),
      });
      const { callId, request } = eventOf(scheduler.abi, receipt, "CallScheduled") as { callId: Hex; request: ScheduledCall };
      const deadline = EXECUTE_AT + 3_600n * NS_PER_SECOND;
      await asExecutor.simulate.executeCall([request, proofAt(deadline)]);
      await expectRevert(asExecutor.simulate.executeCall([request, proofAt(deadline + 1n)]), "SchedulerTooLate", [
        deadline,
        deadline + 1n,
      ]);
      await scheduler.write.setNow([deadline / NS_PER_SECOND]);
      await expectRevert(asStranger.simulate.expireCall([request]), "SchedulerNotExpired", [deadline, deadline]);
      await scheduler.write.setNow([deadline / NS_PER_SECOND + 1n]);
      await asStranger.write.expireCall([request]);
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Expired);
      expect(await publicClient.getBalance({ address: callee.address })).to.equal(BOUNTY);
    });

    it("refuses a call whose default deadline (executeAt + 1 h) the chain clock has already passed", async () => {
      const { callee, calldata } = await loadFixture(deploySchedulerFixture);
      const executeAt = NOW_NS - 3_600n * NS_PER_SECOND - 1n;
      await expectRevert(callee.simulate.scheduleWithDefaults([executeAt, calldata.ping(1n)]), "SchedulerDeadlinePassed", [
        executeAt + 3_600n * NS_PER_SECOND,
        NOW_NS,
      ]);
    });
  });

  describe("its own deployment, holding the oracle", () => {
    it("refuses the zero address as its oracle and reports the oracle it holds", async () => {
      const { oracle, scheduler } = await loadFixture(deploySchedulerFixture);
      await expectRevert(hre.viem.deployContract("TimeScheduler", [zeroAddress]), "SchedulerZeroOracle", []);
      expect(await scheduler.read.timeOracle()).to.equal(getAddress(oracle.address));
    });

    it("the oracle no longer offers any scheduling function", async () => {
      const oracleFunctions = new Set<string>(timeOracleAbi.filter((item) => item.type === "function").map((item) => item.name));
      for (const item of iTimeSchedulerAbi) {
        if (item.type === "function") expect(oracleFunctions.has(item.name), item.name).to.equal(false);
      }
    });
  });

  describe("with a real oracle (real proofs)", () => {
    /** SchedulerHarness on the fixture's TimeOracleHarness, both clocks pinned to the same second. */
    async function deployWithOracleFixture() {
      const fixture = await deployOracleFixture();
      const scheduler = await hre.viem.deployContract("SchedulerHarness", [fixture.oracle.address]);
      await scheduler.write.setNow([FIXTURE_NOW_SECONDS]);
      const callee = await hre.viem.deployContract("SchedulerCallee", [scheduler.address]);
      const asStranger = await hre.viem.getContractAt("SchedulerHarness", scheduler.address, {
        client: { wallet: fixture.accounts.stranger },
      });
      return { ...fixture, scheduler, callee, asStranger };
    }

    it("executes with a proof the oracle verifies; refuses an early one and forged ones", async () => {
      const { scheduler, callee, asStranger, proofAt: realProofAt, strangerNode, publicClient } =
        await loadFixture(deployWithOracleFixture);
      const executeAt = FIXTURE_NOW_NS - 5n * NS_PER_SECOND;
      const data = encodeFunctionData({ abi: callee.abi, functionName: "ping", args: [5n] });
      const hash = await callee.write.schedule([executeAt, WINDOW, GAS_LIMIT, data], { value: BOUNTY });
      const scheduled = eventOf(scheduler.abi, await publicClient.waitForTransactionReceipt({ hash }), "CallScheduled");
      const request = scheduled.request as ScheduledCall;
      const callId = scheduled.callId as Hex;

      const early = realProofAt(executeAt - 1n);
      await expectRevert(asStranger.simulate.executeCall([request, early]), "SchedulerTooEarly", [executeAt, early.nanoMoment]);
      const proof = realProofAt(executeAt + 1n);
      const altered = { ...proof, nanoMoment: proof.nanoMoment + 1n };
      await expectRevert(asStranger.simulate.executeCall([request, altered]), "SchedulerInvalidProof", [callId, altered.nanoMoment]);
      const unknownNode = realProofAt(executeAt + 1n, { nodes: [strangerNode] });
      await expectRevert(asStranger.simulate.executeCall([request, unknownNode]), "SchedulerInvalidProof", [callId, executeAt + 1n]);
      await asStranger.write.executeCall([request, proof]);
      expect(await scheduler.read.callStatus([callId])).to.equal(Status.Executed);
      expect(await callee.read.pings()).to.equal(5n);
    });

    it("follows the oracle's registry: a proof of a revoked card no longer executes", async () => {
      const { scheduler, callee, asStranger, asGuardian, dev, proofAt: realProofAt, publicClient } =
        await loadFixture(deployWithOracleFixture);
      const executeAt = FIXTURE_NOW_NS - 5n * NS_PER_SECOND;
      const data = encodeFunctionData({ abi: callee.abi, functionName: "ping", args: [1n] });
      const hash = await callee.write.scheduleWithDefaults([executeAt, data]);
      const scheduled = eventOf(scheduler.abi, await publicClient.waitForTransactionReceipt({ hash }), "CallScheduled");
      const proof = realProofAt(executeAt);
      await asStranger.simulate.executeCall([scheduled.request as ScheduledCall, proof]);
      await asGuardian.write.revokeCard([dev.cardId]);
      await expectRevert(asStranger.simulate.executeCall([scheduled.request as ScheduledCall, proof]), "SchedulerInvalidProof", [
        scheduled.callId,
        executeAt,
      ]);
    });

    it("a proof the oracle still finds fresh does not execute once the chain clock is past the deadline", async () => {
      const { oracle, scheduler, callee, asStranger, proofAt: realProofAt, publicClient } = await loadFixture(deployWithOracleFixture);
      const executeAt = FIXTURE_NOW_NS - 5n * NS_PER_SECOND;
      const data = encodeFunctionData({ abi: callee.abi, functionName: "ping", args: [1n] });
      const hash = await callee.write.schedule([executeAt, WINDOW, GAS_LIMIT, data], { value: BOUNTY });
      const scheduled = eventOf(scheduler.abi, await publicClient.waitForTransactionReceipt({ hash }), "CallScheduled");
      const request = scheduled.request as ScheduledCall;
      const deadline = executeAt + WINDOW;
      // Both clocks one second past the deadline: the proof of the deadline's moment is one second old, well inside
      // the oracle's maxAttestationAge (60 s).
      const pastSeconds = deadline / NS_PER_SECOND + 1n;
      await oracle.write.setNow([pastSeconds]);
      await scheduler.write.setNow([pastSeconds]);
      const proof = realProofAt(deadline);
      expect(await oracle.read.verifyTimeProof([proof])).to.equal(true);
      await expectRevert(asStranger.simulate.executeCall([request, proof]), "SchedulerChainPastDeadline", [deadline, pastSeconds * NS_PER_SECOND]);
      await asStranger.write.expireCall([request]);
      expect(await scheduler.read.callStatus([scheduled.callId as Hex])).to.equal(Status.Expired);
      expect(await callee.read.pings()).to.equal(0n);
    });

    it("the production TimeScheduler, on the chain clock, runs scheduleCall(executeAt, data) with a fresh proof", async () => {
      const { oracle, asStranger: oracleAsStranger, proofAt: realProofAt, accounts, publicClient } =
        await loadFixture(deployOracleFixture);
      await oracle.write.setNow([0n]); // the oracle back on block.timestamp, as the scheduler always is
      const scheduler = await hre.viem.deployContract("TimeScheduler", [oracle.address]);
      const callee = await hre.viem.deployContract("SchedulerCallee", [scheduler.address]);
      const nowNs = BigInt((await publicClient.getBlock()).timestamp) * NS_PER_SECOND;
      const data = encodeFunctionData({ abi: callee.abi, functionName: "ping", args: [3n] });
      const hash = await callee.write.scheduleWithDefaults([nowNs, data], { value: BOUNTY });
      const scheduled = eventOf(scheduler.abi, await publicClient.waitForTransactionReceipt({ hash }), "CallScheduled");
      const asKeeper = await hre.viem.getContractAt("TimeScheduler", scheduler.address, {
        client: { wallet: accounts.stranger },
      });
      const proof = realProofAt(nowNs + 1n);
      expect(await oracleAsStranger.read.verifyTimeProof([proof])).to.equal(true);
      await asKeeper.write.executeCall([scheduled.request as ScheduledCall, proof]);
      expect(await scheduler.read.callStatus([scheduled.callId as Hex])).to.equal(Status.Executed);
      expect(await callee.read.pings()).to.equal(3n);
      expect(await publicClient.getBalance({ address: scheduler.address })).to.equal(0n);
    });
  });
});
