/**
 * relayer/worker.ts's rule for terminal decisions: a "done" or "dead" read at the chain head (an observation, a
 * simulation's revert, or the same revert N times in a row) stands only when the safe block (head − confirmations)
 * shows the same, because a reorg can take back what only the head shows. The worker runs against a stub chain
 * (what the head and the safe block answer is set by the test) and a real store, on guardian revocations and
 * proof pushes; the end-to-end case (another party's delivery taken back by a reorg) is in chaos.test.ts. And the
 * look at a bridge message's source event just before its send (the end-to-end case is in reorg.test.ts).
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import type { ChainClient, ContractCall, Simulation } from "../../relayer/chain";
import { createRelayerMetrics } from "../../relayer/metrics";
import { RelayerStore, type NewItem } from "../../relayer/store";
import { ChainWorker, pushItem } from "../../relayer/worker";
import type { CardStatusName, TimeProof } from "../../protocol/types";

const HEAD = 100n;
const CHAIN_ID = 7;
const NOW_MS = 1_800_000_000_000;
const NOW_NS = BigInt(NOW_MS) * 1_000_000n;
const DETERMINISTIC_REVERT_LIMIT = 3;
const BRIDGE = "0x00000000000000000000000000000000000000b1";
const PROOF = { nanoMoment: NOW_NS, hardwareSignature: "0x", accuracy: 50, nodeSignature: "0x" } as unknown as TimeProof;

/** What the stub chain answers, at the head and at the safe block. */
interface StubChainState {
  confirmations: number;
  cardAtHead: CardStatusName;
  cardAtSafe: CardStatusName;
  storedAtHeadNs: bigint | null;
  /** simulate()'s answer (at the head). */
  simulation: Simulation;
  /** revertNameAt()'s answer (at the safe block). */
  revertAtSafe: string | null;
  /** Blocks at which a read other than at the head was asked. */
  readsAt: bigint[];
  /** Whether the chain still holds a message's TimeSent where it was indexed (timeSentIn). */
  sourceEventThere: boolean;
  /** The stub's calls on a message's way to a send, in order. */
  calls: string[];
}

function stubChain(state: StubChainState): ChainClient {
  const at = <T>(blockNumber: bigint | undefined, head: T, safe: T): Promise<T> => {
    if (blockNumber === undefined) return Promise.resolve(head);
    state.readsAt.push(blockNumber);
    return Promise.resolve(safe);
  };
  const stub = {
    config: { chainId: CHAIN_ID, name: "stub", confirmations: state.confirmations, oracle: "0x0000000000000000000000000000000000000001", bridge: BRIDGE },
    headBlock: () => Promise.resolve(HEAD),
    safeBlock: (head: bigint) => Promise.resolve(head - BigInt(state.confirmations)),
    cardStatus: (_cardId: string, blockNumber?: bigint) => at(blockNumber, state.cardAtHead, state.cardAtSafe),
    nodeStatus: () => Promise.resolve("Active"),
    storedNanoMomentNs: (blockNumber?: bigint) => at(blockNumber, state.storedAtHeadNs, null),
    simulate: (_call: ContractCall) => {
      state.calls.push("simulate");
      return Promise.resolve(state.simulation);
    },
    deliveredBlock: () => Promise.resolve(0n),
    latestNetworkTimeNs: () => Promise.resolve(0n),
    timeSentIn: (bridge: string, messageId: string, blockNumber: bigint) => {
      state.calls.push(`timeSentIn ${bridge} ${messageId} ${blockNumber}`);
      return Promise.resolve(state.sourceEventThere);
    },
    // The submitter's first read: as far as a stub goes (it cannot sign); reaching it means the send went ahead.
    fees: () => {
      state.calls.push("fees");
      return Promise.reject(new Error("stub: no fee market"));
    },
    revertNameAt: (_call: ContractCall, blockNumber: bigint) => at(blockNumber, null, state.revertAtSafe),
  };
  return stub as unknown as ChainClient;
}

/** A bridge message from the stub chain's own bridge to itself, indexed from block 90. */
function messageItem(): NewItem {
  const messageId = `0x${"4d".repeat(32)}`;
  const payload = { messageId, sourceChainId: CHAIN_ID, sourceBridge: BRIDGE, nonce: "1", message: { networkTime: String(NOW_NS), targetChain: String(CHAIN_ID), proof: "0x", targetBlock: "0" } };
  return { id: `message:${CHAIN_ID}:${messageId}`, kind: "message", chainId: CHAIN_ID, sourceChainId: CHAIN_ID, sourceBlock: 90n, payload: JSON.stringify(payload), nextAttemptMs: NOW_MS };
}

function revokeItem(): NewItem {
  const payload = { cardId: `0x${"ca".repeat(32)}`, nodeId: "0x00000000000000000000000000000000000000aa", reason: "tampered" };
  return { id: `revoke:${CHAIN_ID}:test`, kind: "revoke", chainId: CHAIN_ID, sourceChainId: null, sourceBlock: null, payload: JSON.stringify(payload), nextAttemptMs: NOW_MS };
}

describe("relayer/worker: terminal decisions wait for the safe block", () => {
  let dir: string;
  let store: RelayerStore;
  let state: StubChainState;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-worker-"));
    store = new RelayerStore(dir, () => NOW_MS);
    state = {
      confirmations: 2,
      cardAtHead: "Active",
      cardAtSafe: "Active",
      storedAtHeadNs: null,
      simulation: { ok: false, errorName: "TimeOracleCardRevoked", message: "TimeOracleCardRevoked()" },
      revertAtSafe: null,
      readsAt: [],
      sourceEventThere: true,
      calls: [],
    };
  });

  afterEach(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A worker for the state as it is now (each decision is one tick: head and safe block read afresh). */
  function worker(): ChainWorker {
    const chain = stubChain(state);
    const settings = { maxLogRange: 100, pushHeartbeatMs: 60_000, keeperEnabled: false, bridgeEnabled: false, retryBaseMs: 100, retryMaxMs: 1_000, deterministicRevertLimit: DETERMINISTIC_REVERT_LIMIT, waitMs: 50 };
    const proofs = { getCurrentTime: () => Promise.resolve({ proof: PROOF }) } as unknown as ConstructorParameters<typeof ChainWorker>[3];
    return new ChainWorker(chain, new Map([[CHAIN_ID, chain]]), store, proofs, settings, createRelayerMetrics(() => ({})), pino({ level: "silent" }), () => NOW_MS, { feeBumpAfterMs: 1_000, maxFeePerGasWei: 10n ** 12n });
  }

  /** Decides `item` once (inserting it first if new) and returns it as stored. */
  async function decide(item: NewItem = revokeItem()) {
    if (store.item(item.id) === undefined) store.insertItem(item);
    await worker().process(store.item(item.id)!);
    return store.item(item.id)!;
  }

  it("a card revoked only at the head: the item waits, naming the safe block and counting no failure; revoked there too, done", async () => {
    state.cardAtHead = "Revoked";
    const waiting = await decide();
    expect(waiting).to.deep.include({ status: "pending", attempts: 0, sameErrorCount: 0 });
    expect(waiting.lastError).to.contain("not yet at the safe block 98");
    expect(state.readsAt).to.deep.equal([98n]);
    state.cardAtSafe = "Revoked";
    const done = await decide();
    expect(done.status).to.equal("done");
    expect(done.outcome).to.equal("revoked (already)");
  });

  it("a card unknown only at the head (dead there): the item waits; unknown at the safe block too, dead-letter", async () => {
    state.cardAtHead = "None";
    expect((await decide()).status).to.equal("pending");
    state.cardAtSafe = "None";
    const dead = await decide();
    expect(dead.status).to.equal("dead");
    expect(dead.outcome).to.contain("not registered");
  });

  it("a revert that says done at the head (TimeOracleCardRevoked) waits while the safe block would take the call", async () => {
    const waiting = await decide(); // Active at both: send; the simulation at the head reverts CardRevoked
    expect(waiting.status).to.equal("pending");
    expect(waiting.lastError).to.contain("TimeOracleCardRevoked").and.to.contain("not yet at the safe block 98");
    state.revertAtSafe = "TimeOracleCardRevoked";
    const done = await decide();
    expect(done.status).to.equal("done");
    expect(done.outcome).to.contain("TimeOracleCardRevoked");
  });

  it("the same revert N times dead-letters only once the safe block reverts the same way", async () => {
    state.simulation = { ok: false, errorName: "SomethingOnlyTheHeadDoes", message: "SomethingOnlyTheHeadDoes()" };
    for (let attempt = 1; attempt <= DETERMINISTIC_REVERT_LIMIT + 1; attempt += 1) {
      expect(await decide(), `attempt ${attempt}`).to.deep.include({ status: "pending", sameErrorCount: attempt });
    }
    state.revertAtSafe = "SomethingOnlyTheHeadDoes";
    const dead = await decide();
    expect(dead.status).to.equal("dead");
    expect(dead.outcome).to.contain(`SomethingOnlyTheHeadDoes ${DETERMINISTIC_REVERT_LIMIT + 2} times in a row`);
  });

  it("on a chain still shorter than its confirmations nothing is deep: a terminal reading waits", async () => {
    state.confirmations = 200;
    state.cardAtHead = "Revoked";
    state.cardAtSafe = "Revoked";
    const waiting = await decide();
    expect(waiting.status).to.equal("pending");
    expect(state.readsAt).to.deep.equal([]); // no read at a negative block
  });

  it("with confirmations 0 the head's word is final: done at once, no read at another block", async () => {
    state.confirmations = 0;
    state.cardAtHead = "Revoked";
    expect((await decide()).status).to.equal("done");
    expect(state.readsAt).to.deep.equal([]);
  });

  it("a push's deterministic revert dead-letters on the head's word (its proof is fresh: replaying it at an older block says nothing)", async () => {
    state.simulation = { ok: false, errorName: "TimeOracleInvalidTimeProof", message: "TimeOracleInvalidTimeProof()" };
    const item = pushItem(CHAIN_ID, NOW_MS, false);
    for (let attempt = 1; attempt < DETERMINISTIC_REVERT_LIMIT; attempt += 1) expect((await decide(item)).status, `attempt ${attempt}`).to.equal("pending");
    expect((await decide(item)).status).to.equal("dead");
    expect(state.readsAt).to.deep.equal([]);
  });

  it("a push is decided at the head alone: a fresh proof there is done (the pusher makes a new item once it is stale)", async () => {
    state.storedAtHeadNs = NOW_NS;
    const done = await decide(pushItem(CHAIN_ID, NOW_MS, false));
    expect(done.status).to.equal("done");
    expect(state.readsAt).to.deep.equal([]);
  });

  it("a message is sent only while its source event is where it was indexed, looked at after the simulation, just before the submitter", async () => {
    state.simulation = { ok: true, gas: 100_000n };
    const item = messageItem();
    const look = `timeSentIn ${BRIDGE} 0x${"4d".repeat(32)} 90`;
    const sent = await decide(item);
    expect(state.calls).to.deep.equal(["simulate", look, "fees"]);
    expect(sent).to.deep.include({ status: "pending", lastErrorName: "Unavailable", lastError: "stub: no fee market" });
    state.calls = [];
    state.sourceEventThere = false; // a reorg deeper than the confirmations took the send back
    const orphaned = await decide(item);
    expect(state.calls, "no send").to.deep.equal(["simulate", look]);
    expect(orphaned).to.deep.include({
      status: "orphaned",
      outcome: "orphaned: its source event (TimeSent in block 90 of stub) is no longer on the canonical chain (a reorg deeper than the confirmations took it back): never sent",
    });
    expect(store.txsOfItem(item.id)).to.deep.equal([]);
  });
});
