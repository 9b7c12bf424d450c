/**
 * relayer/store.ts: the nonce claim, nonce settlement, reorg rewinds and operator transitions, on a real SQLite
 * file (closed and reopened where durability matters).
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Hex } from "viem";
import { RelayerStore, type NewItem, type TxRecord } from "../../relayer/store";

function item(id: string, sourceBlock: bigint | null = 5n): NewItem {
  return { id, kind: "message", chainId: 2, sourceChainId: 1, sourceBlock, payload: "{}", nextAttemptMs: 0 };
}

/** A scheduled call of chain `chainId` (source and target are the same chain). */
function callItem(id: string, sourceBlock: bigint, chainId = 1): NewItem {
  return { id, kind: "call", chainId, sourceChainId: chainId, sourceBlock, payload: "{}", nextAttemptMs: 0 };
}

function hashOf(n: number): Hex {
  return `0x${n.toString(16).padStart(64, "0")}`;
}

function tx(nonce: number, hashNumber: number, itemId: string | null): Omit<TxRecord, "state" | "minedBlock"> {
  return { chainId: 2, nonce, hash: hashOf(hashNumber), itemId, raw: "0x01", maxFeePerGas: 10n, maxPriorityFeePerGas: 1n, gas: 21_000n, to: hashOf(0).slice(0, 42) as Hex, data: "0x", sentMs: 0 };
}

describe("relayer/store", () => {
  let dir: string;
  let store: RelayerStore;
  let nowMs = 1_000;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-store-"));
    store = new RelayerStore(dir, () => nowMs);
  });
  afterEach(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("claims a job's nonce with its signed transaction and status in one commit that survives a reopen", () => {
    store.insertItem(item("message:2:a"));
    store.setNextNonce(2, 7);
    store.recordSigned(tx(7, 1, "message:2:a"), false);
    store.close();
    store = new RelayerStore(dir, () => nowMs);
    expect(store.nextNonce(2)).to.equal(8);
    expect(store.item("message:2:a")!.status).to.equal("submitted");
    expect(store.openTxs(2).map((t) => [t.nonce, t.state, t.itemId])).to.deep.equal([[7, "signed", "message:2:a"]]);
  });

  it("refuses a claim out of order and leaves nothing of it behind", () => {
    store.insertItem(item("message:2:a"));
    store.setNextNonce(2, 7);
    expect(() => store.recordSigned(tx(9, 1, "message:2:a"), false)).to.throw(/nonce claim out of order.*next 7, claimed 9/);
    expect(store.openTxs(2)).to.deep.equal([]);
    expect(store.item("message:2:a")!.status).to.equal("pending");
    expect(store.nextNonce(2)).to.equal(7);
  });

  it("settles a nonce: the winner is confirmed, a fee bump of the same job is replaced without reopening the job, another job's transaction sends it back to pending", () => {
    for (const id of ["message:2:a", "message:2:b"]) store.insertItem(item(id));
    store.setNextNonce(2, 0);
    store.recordSigned(tx(0, 1, "message:2:a"), false);
    store.recordSigned(tx(0, 2, "message:2:a"), true); // fee bump
    store.recordSigned(tx(1, 3, "message:2:b"), false);
    store.recordSigned(tx(1, 4, null), true); // a no-op at b's nonce
    store.settleNonce(2, 0, hashOf(2), 10n);
    store.settleNonce(2, 1, hashOf(4), 11n);
    expect(store.txsOfNonce(2, 0).map((t) => t.state)).to.deep.equal(["replaced", "confirmed"]);
    expect(store.item("message:2:a")!.status).to.equal("submitted"); // the worker finishes it from the receipt
    expect(store.item("message:2:b")!.status).to.equal("pending");
    expect(store.openTxs(2)).to.deep.equal([]);
  });

  it("reopens a nonce whose settled transaction a deep reorg took back: the confirmed transaction is broadcast again and its done item submitted; nothing else changes", () => {
    for (const id of ["message:2:a", "message:2:b"]) store.insertItem(item(id));
    store.setNextNonce(2, 0);
    store.recordSigned(tx(0, 1, "message:2:a"), false);
    store.recordSigned(tx(0, 2, "message:2:a"), true); // fee bump, the winner
    store.recordSigned(tx(1, 3, "message:2:b"), false);
    store.settleNonce(2, 0, hashOf(2), 10n);
    store.settleNonce(2, 1, hashOf(3), 11n);
    store.finish("message:2:a", "delivered in block 10");
    store.deadLetter("message:2:b", "TxReverted"); // not done: reopening leaves its status alone
    expect(store.reopenRevertedNonce(2, 0)).to.deep.equal(["message:2:a"]);
    expect(store.txsOfNonce(2, 0).map((t) => [t.state, t.minedBlock])).to.deep.equal([["replaced", null], ["broadcast", null]]);
    expect(store.item("message:2:a")).to.deep.include({ status: "submitted", outcome: null });
    expect(store.openTxs(2).map((t) => t.hash)).to.deep.equal([hashOf(2)]);
    expect(store.reopenRevertedNonce(2, 0), "nothing confirmed left at that nonce").to.deep.equal([]);
    expect(store.reopenRevertedNonce(2, 1), "the transaction goes back, the dead item does not").to.deep.equal([]);
    expect(store.item("message:2:b")!.status).to.equal("dead");
  });

  it("counts the same error in a row and starts over on another", () => {
    store.insertItem(item("message:2:a"));
    expect(store.recordFailure("message:2:a", "X", "x", 5)).to.equal(1);
    expect(store.recordFailure("message:2:a", "X", "x", 5)).to.equal(2);
    expect(store.recordFailure("message:2:a", "Y", "y", 5)).to.equal(1);
    expect(store.item("message:2:a")!.attempts).to.equal(3);
  });

  it("rewinds after a reorg: call items above the ancestor are orphaned, and a rescan of the same event revives them", () => {
    store.insertItem(callItem("call:1:low", 3n));
    store.insertItem(callItem("call:1:high", 8n));
    store.advanceCursor(1, { blockNumber: 5n, blockHash: hashOf(5) }, []);
    store.advanceCursor(1, { blockNumber: 9n, blockHash: hashOf(9) }, []);
    const orphaned = store.rewindCursor(1, { blockNumber: 5n, blockHash: hashOf(5) });
    expect(orphaned).to.deep.equal(["call:1:high"]);
    expect(store.cursor(1)).to.deep.equal({ blockNumber: 5n, blockHash: hashOf(5) });
    expect(store.item("call:1:low")!.status).to.equal("pending");
    expect(store.item("call:1:high")).to.include({ status: "orphaned", outcome: "orphaned: its source block 8 left the canonical chain (a reorg back to block 5)" });
    expect(store.item("call:1:low")!.outcome).to.equal(null);
    expect(store.advanceCursor(1, { blockNumber: 9n, blockHash: hashOf(99) }, [callItem("call:1:high", 7n)])).to.equal(1);
    expect(store.item("call:1:high")).to.include({ status: "pending", sourceBlock: 7n, outcome: null });
  });

  it("orphans a submitted bridge message (its transaction is to be cancelled) and leaves a pending one to the look at its source before its send", () => {
    store.insertItem(item("message:2:pending", 8n));
    store.insertItem(item("message:2:sent", 8n));
    store.setNextNonce(2, 0);
    store.recordSigned(tx(0, 1, "message:2:sent"), false);
    store.advanceCursor(1, { blockNumber: 9n, blockHash: hashOf(9) }, []);
    expect(store.rewindCursor(1, undefined)).to.deep.equal(["message:2:sent"]);
    expect(store.item("message:2:sent")).to.include({ status: "orphaned", outcome: "orphaned: its source block 8 left the canonical chain (a reorg back to the start block)" });
    expect(store.item("message:2:pending")!.status).to.equal("pending");
  });

  it("orphans an open item whose source event is gone, with the reason; finishes an orphaned one only when told its transaction was mined", () => {
    store.insertItem(item("message:2:a", 8n));
    store.orphan("message:2:a", "orphaned: gone");
    expect(store.item("message:2:a")).to.include({ status: "orphaned", outcome: "orphaned: gone" });
    store.finish("message:2:a", "delivered");
    expect(store.item("message:2:a")!.status).to.equal("orphaned");
    store.finish("message:2:a", "delivered late", true);
    expect(store.item("message:2:a")).to.include({ status: "done", outcome: "delivered late" });
    store.orphan("message:2:a", "orphaned: again");
    expect(store.item("message:2:a")!.status, "a finished item stays finished").to.equal("done");
  });

  it("moves an open item to its event's new place when a rescan finds it in another block, and leaves a finished one alone", () => {
    store.insertItem(item("message:2:open", 8n));
    store.insertItem(item("message:2:done", 8n));
    store.finish("message:2:done", "delivered");
    expect(store.insertItem(item("message:2:open", 11n)), "not new, not revived").to.equal(false);
    expect(store.insertItem(item("message:2:done", 11n))).to.equal(false);
    expect(store.item("message:2:open")).to.include({ status: "pending", sourceBlock: 11n });
    expect(store.item("message:2:done")!.sourceBlock).to.equal(8n);
  });

  it("sends a submitted item whose transaction settled without its outcome (a crash in between) back to pending, and no other", () => {
    store.insertItem(item("message:2:settled"));
    store.insertItem(item("message:2:open"));
    store.setNextNonce(2, 0);
    store.recordSigned(tx(0, 1, "message:2:settled"), false);
    store.recordSigned(tx(1, 2, "message:2:open"), false);
    store.settleNonce(2, 0, hashOf(1), 7n); // the crash: the nonce is settled, the item's outcome never recorded
    nowMs = 5_000;
    expect(store.reviveStrandedSubmissions(2)).to.deep.equal(["message:2:settled"]);
    expect(store.item("message:2:settled")).to.include({ status: "pending", nextAttemptMs: 5_000 });
    expect(store.item("message:2:open")!.status).to.equal("submitted");
    expect(store.reviveStrandedSubmissions(2)).to.deep.equal([]);
  });

  it("revives an orphaned item whose own transaction is still open as submitted, never as a second job", () => {
    store.insertItem(callItem("call:2:a", 8n, 2));
    store.setNextNonce(2, 0);
    store.recordSigned(tx(0, 1, "call:2:a"), false);
    store.advanceCursor(2, { blockNumber: 9n, blockHash: hashOf(9) }, []);
    expect(store.rewindCursor(2, undefined)).to.deep.equal(["call:2:a"]);
    expect(store.advanceCursor(2, { blockNumber: 9n, blockHash: hashOf(99) }, [callItem("call:2:a", 8n, 2)])).to.equal(1);
    expect(store.item("call:2:a")!.status).to.equal("submitted");
  });

  it("does not revive or duplicate an item that is not orphaned", () => {
    store.insertItem(item("message:2:a"));
    store.finish("message:2:a", "delivered");
    expect(store.insertItem(item("message:2:a"))).to.equal(false);
    expect(store.item("message:2:a")!.status).to.equal("done");
  });

  it("operator transitions: retry revives a dead item with fresh counters; skip refuses a submitted one", () => {
    store.insertItem(item("message:2:a"));
    store.recordFailure("message:2:a", "X", "x", 5);
    store.deadLetter("message:2:a", "never");
    nowMs = 2_000;
    expect(store.retry("message:2:a")).to.equal(true);
    expect(store.item("message:2:a")).to.include({ status: "pending", attempts: 0, sameErrorCount: 0, nextAttemptMs: 2_000, outcome: null });
    store.setNextNonce(2, 0);
    store.recordSigned(tx(0, 1, "message:2:a"), false);
    expect(store.skip("message:2:a")).to.equal(false);
    expect(store.retry("message:2:a")).to.equal(false);
  });

  it("keeps at most CURSOR_HISTORY cursor positions per chain", () => {
    for (let n = 1; n <= 600; n++) store.advanceCursor(1, { blockNumber: BigInt(n), blockHash: hashOf(n) }, []);
    const history = store.cursorHistory(1);
    expect(history.length).to.equal(512);
    expect(history[0]!.blockNumber).to.equal(600n);
  });
});
