/**
 * relayer/decide.ts: the relayer's pure decisions; the revert policies and the contracts' status names pinned to
 * the contracts (the ABIs themselves are the generated abi/, pinned to the artifacts by test/abi.test.ts).
 */
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { timeBridgeAbi, timeOracleAbi, timeSchedulerAbi } from "../../abi";
import { CALL_STATUS, CARD_STATUS, NODE_STATUS } from "../../protocol/types";
import { backoffMs, classifyRevert, decideCall, decideMessage, decidePush, decideRevoke, decideSource, isDeterministic, pushDue, REVERT_POLICY } from "../../relayer/decide";

const ROOT = join(__dirname, "..", "..");
const NS = 1_000_000n;

describe("relayer: revert policies and status names match the contracts", () => {
  it("every error a revert policy names is an error of the contract the item calls", () => {
    const kinds = { message: timeBridgeAbi, call: timeSchedulerAbi, push: timeOracleAbi, revoke: timeOracleAbi } as const;
    for (const [kind, policies] of Object.entries(REVERT_POLICY)) {
      const abi: readonly { type: string; name?: string }[] = kinds[kind as keyof typeof kinds];
      const errors = new Set(abi.filter((item) => item.type === "error").map((item) => item.name));
      for (const name of Object.keys(policies)) expect(errors, `${kind}: ${name}`).to.include(name);
    }
  });

  for (const [file, enumName, names] of [
    ["ITimeScheduler.sol", "CallStatus", CALL_STATUS],
    ["ITimeOracle.sol", "CardStatus", CARD_STATUS],
    ["ITimeOracle.sol", "NodeStatus", NODE_STATUS],
  ] as const) {
    it(`protocol/types.ts lists ${enumName} in the order of ${file}`, () => {
      const source = readFileSync(join(ROOT, "contracts", "interfaces", file), "utf8");
      const body = new RegExp(`enum ${enumName} \\{([^}]*)\\}`).exec(source)![1]!;
      expect(body.split(",").map((name) => name.trim())).to.deep.equal([...names]);
    });
  }
});

describe("relayer/decide", () => {
  describe("classifyRevert", () => {
    it("finishes an item someone else settled, dead-letters what can never succeed, waits on 'not yet'", () => {
      expect(classifyRevert("message", "TimeBridgeAlreadyDelivered").verdict).to.equal("done");
      expect(classifyRevert("message", "TimeBridgeNotNewer").verdict).to.equal("dead");
      expect(classifyRevert("message", "TimeBridgeInvalidProof").verdict).to.equal("dead");
      expect(classifyRevert("call", "SchedulerCallNotScheduled").verdict).to.equal("done");
      expect(classifyRevert("call", "SchedulerTooEarly").verdict).to.equal("wait");
      expect(classifyRevert("call", "SchedulerNotExpired").verdict).to.equal("wait");
      // Past the deadline on the chain clock the call is never executed, but it still has to be expired: decided
      // again, decideCall then expires it.
      expect(classifyRevert("call", "SchedulerChainPastDeadline").verdict).to.equal("wait");
      expect(classifyRevert("call", "SchedulerTooLate").verdict).to.equal("wait");
      expect(classifyRevert("push", "TimeOracleTimeProofNotNewer").verdict).to.equal("done");
    });

    it("treats an error the table does not name as a counted retry that names it", () => {
      expect(classifyRevert("call", "SomethingNew")).to.deep.equal({ verdict: "retry", note: "reverted with SomethingNew" });
    });
  });

  it("backoffMs doubles from the base, stops at the cap and adds at most 10 % of jitter", () => {
    expect([1, 2, 3, 4].map((attempt) => backoffMs(attempt, 100, 10_000, 0))).to.deep.equal([100, 200, 400, 800]);
    expect(backoffMs(40, 100, 10_000, 0)).to.equal(10_000);
    expect(backoffMs(1, 1_000, 10_000, 0.999)).to.equal(1_100);
  });

  it("isDeterministic holds from the limit on", () => {
    expect(isDeterministic(2, 3)).to.equal(false);
    expect(isDeterministic(3, 3)).to.equal(true);
  });

  describe("decideMessage", () => {
    it("is done when the target bridge already delivered it", () => {
      expect(decideMessage({ deliveredBlock: 7n, latestNetworkTimeNs: 0n, networkTimeNs: 5n })).to.deep.equal({ action: "done", outcome: "delivered (block 7)" });
    });
    it("dead-letters a message older than what the target holds", () => {
      const decision = decideMessage({ deliveredBlock: 0n, latestNetworkTimeNs: 6n, networkTimeNs: 5n });
      expect(decision.action).to.equal("dead");
    });
    it("is done when another message delivered the same moment (other node entries, another id)", () => {
      expect(decideMessage({ deliveredBlock: 0n, latestNetworkTimeNs: 5n, networkTimeNs: 5n })).to.deep.equal({ action: "done", outcome: "its moment was delivered by another message" });
    });
    it("sends a newer, undelivered message", () => {
      expect(decideMessage({ deliveredBlock: 0n, latestNetworkTimeNs: 4n, networkTimeNs: 5n })).to.deep.equal({ action: "send" });
    });
  });

  describe("decideSource", () => {
    const source = { sourceChain: "alpha", sourceBlock: 12n, eventName: "TimeSent" };
    it("sends while the source event is where it was indexed", () => {
      expect(decideSource({ ...source, eventCanonical: true })).to.deep.equal({ action: "send" });
    });
    it("orphans, never sends, once the source event is gone, and says which event of which block", () => {
      expect(decideSource({ ...source, eventCanonical: false })).to.deep.equal({
        action: "orphan",
        reason: "orphaned: its source event (TimeSent in block 12 of alpha) is no longer on the canonical chain (a reorg deeper than the confirmations took it back): never sent",
      });
    });
  });

  describe("decideCall", () => {
    const base = { status: "Scheduled" as const, executeAtNs: 1_000n * NS, deadlineNs: 2_000n * NS, chainNowNs: 1_500n * NS, nowNs: 1_500n * NS };
    it("executes inside the window", () => expect(decideCall(base)).to.deep.equal({ action: "execute" }));
    it("waits until executeAt (rounded up to the millisecond)", () => {
      expect(decideCall({ ...base, nowNs: 999n * NS, executeAtNs: 1_000n * NS + 1n })).to.deep.equal({ action: "wait", untilMs: 1_001, note: "before executeAt" });
    });
    it("expires once the chain clock is past the deadline", () => expect(decideCall({ ...base, chainNowNs: 2_000n * NS + 1n })).to.deep.equal({ action: "expire" }));
    it("is done when the call is settled, whatever the clocks say", () => {
      for (const status of ["Executed", "Failed", "Cancelled", "Expired"] as const) {
        expect(decideCall({ ...base, status })).to.deep.equal({ action: "done", outcome: `settled: ${status}` });
      }
    });
    it("dead-letters a call the scheduler does not know", () => expect(decideCall({ ...base, status: "None" }).action).to.equal("dead"));
  });

  describe("decideRevoke", () => {
    it("revokes an active card on the word of an active node, once; refuses any other signer", () => {
      expect(decideRevoke({ cardStatus: "Active", alertSignerStatus: "Active" })).to.deep.equal({ action: "send" });
      expect(decideRevoke({ cardStatus: "Revoked", alertSignerStatus: "Active" }).action).to.equal("done");
      expect(decideRevoke({ cardStatus: "None", alertSignerStatus: "Active" }).action).to.equal("dead");
      for (const status of ["None", "Inactive"] as const) {
        expect(decideRevoke({ cardStatus: "Active", alertSignerStatus: status })).to.deep.equal({
          action: "dead",
          reason: `the alert's signer is not an active node on this chain (${status})`,
        });
      }
    });
  });

  describe("decidePush and pushDue", () => {
    it("skips a fresh stored proof unless forced, and pushes a stale or missing one", () => {
      const observed = { storedNanoMomentNs: 100n * NS, nowNs: 110n * NS, heartbeatNs: 30n * NS, forced: false };
      expect(decidePush(observed).action).to.equal("done");
      expect(decidePush({ ...observed, forced: true })).to.deep.equal({ action: "send" });
      expect(decidePush({ ...observed, nowNs: 130n * NS })).to.deep.equal({ action: "send" });
      expect(decidePush({ ...observed, storedNanoMomentNs: null })).to.deep.equal({ action: "send" });
      expect(pushDue(null, 0n, 1n)).to.equal(true);
      expect(pushDue(100n, 129n, 30n)).to.equal(false);
      expect(pushDue(100n, 130n, 30n)).to.equal(true);
    });
  });
});
