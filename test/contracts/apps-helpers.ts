/**
 * Event helpers of the APPS contract tests (scheduler, consumer, example, bridge). Reverts are asserted with
 * fixtures.ts's `expectRevert`.
 */
import { expect } from "chai";
import { parseEventLogs, type Abi, type TransactionReceipt } from "viem";

/** The one event named `eventName` in `receipt`, decoded with `abi`. */
export function eventOf(abi: Abi, receipt: TransactionReceipt, eventName: string): Record<string, unknown> {
  const logs = parseEventLogs({ abi, logs: receipt.logs, eventName }) as unknown as { args: Record<string, unknown> }[];
  expect(logs, `${eventName} events`).to.have.length(1);
  return logs[0]!.args;
}

/** How many events named `eventName` `receipt` holds. */
export function countEvents(abi: Abi, receipt: TransactionReceipt, eventName: string): number {
  return parseEventLogs({ abi, logs: receipt.logs, eventName }).length;
}
