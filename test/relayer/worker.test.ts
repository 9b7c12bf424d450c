/**
 * relayer/worker.ts's rule for terminal decisions: a "done" or "dead" read at the chain head stands only when the
 * safe block (head − confirmations) shows the same, because a reorg can take back what only the head shows. The
 * worker runs against a stub chain (what each block answers is set by the test) and a real store; the end-to-end
 * case (another party's delivery taken back by a reorg) is in chaos.test.ts.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import type { ChainClient, ContractCall, Simulation } from "../../relayer/chain";
import { createRelayerMetrics } from "../../relayer/metrics";
import { RelayerStore } from "../../relayer/store";
import { pushItem, ChainWorker } from "../../relayer/worker";
import type { TimeProof } from "../../protocol/types";

const HEAD = 100n;
const NOW_MS = 1_800_000_000_000;
const NOW_NS = BigInt(NOW_MS) * 1_000_000n;
const PROOF = { nanoMoment: NOW_NS, hardwareSignature: "0x", accuracy: 50, nodeSignature: "0x" } as unknown as TimeProof;

/** What the stub chain answers: the oracle's stored moment and the push's revert, at the head and at the safe block. */
interface StubChainState {
  confirmations: number;
  storedAtHeadNs: bigint | null;
  storedAtSafeNs: bigint | null;
  /** simulate()'s answer (at the head). */
  simulation: Simulation;
  /** revertNameAt()'s answer (at the safe block). */
  revertAtSafe: string | null;
  /** Blocks at which revertNameAt was asked. */
  revertReadsAt: bigint[];
}

function stubChain(state: StubChainState): ChainClient {
  const stub = {
    config: { chainId: 7, name: "stub", confirmations: state.confirmations, oracle: "0x0000000000000000000000000000000000000001" },
    headBlock: () => Promise.resolve(HEAD),
    safeBlock: (head: bigint) => Promise.resolve(head - BigInt(state.confirmations)),
    storedNanoMomentNs: (blockNumber?: bigint) => Promise.resolve(blockNumber === undefined ? state.storedAtHeadNs : state.storedAtSafeNs),
    simulate: (_call: ContractCall) => Promise.resolve(state.simulation),
    revertNameAt: (_call: ContractCall, blockNumber: bigint) => {
      state.revertReadsAt.push(blockNumber);
      return Promise.resolve(state.revertAtSafe);
    },
  };
  return stub as unknown as ChainClient;
}

describe("relayer/worker: terminal decisions wait for the safe block", () => {
  let dir: string;
  let store: RelayerStore;
  let state: StubChainState;
  let worker: ChainWorker;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-worker-"));
    store = new RelayerStore(dir, () => NOW_MS);
    state = {
      confirmations: 2,
      storedAtHeadNs: null,
      storedAtSafeNs: null,
      simulation: { ok: false, errorName: "TimeOracleTimeProofNotNewer", message: "TimeOracleTimeProofNotNewer()" },
      revertAtSafe: null,
      revertReadsAt: [],
    };
    const chain = stubChain(state);
    const settings = { maxLogRange: 100, pushHeartbeatMs: 60_000, keeperEnabled: false, bridgeEnabled: false, retryBaseMs: 100, retryMaxMs: 1_000, deterministicRevertLimit: 3, waitMs: 50 };
    const proofs = { getCurrentTime: () => Promise.resolve({ proof: PROOF }) } as unknown as ConstructorParameters<typeof ChainWorker>[3];
    worker = new ChainWorker(chain, new Map([[7, chain]]), store, proofs, settings, createRelayerMetrics(() => ({})), pino({ level: "silent" }), () => NOW_MS, { feeBumpAfterMs: 1_000, maxFeePerGasWei: 10n ** 12n });
  });

  afterEach(() => {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Decides a fresh push item once and returns it as stored. */
  async function decidePush() {
    const item = pushItem(7, NOW_MS, false);
    store.insertItem(item);
    await worker.process(store.item(item.id)!);
    return store.item(item.id)!;
  }

  it("a fresh proof only the head holds: the push waits, naming the safe block; once the safe block holds it, done", async () => {
    state.storedAtHeadNs = NOW_NS; // fresh at the head: "done, skipped" there
    const waiting = await decidePush();
    expect(waiting.status).to.equal("pending");
    expect(waiting.lastError).to.contain("not yet at the safe block 98");
    state.storedAtSafeNs = NOW_NS;
    await worker.process(waiting);
    expect(store.item(waiting.id)!.status).to.equal("done");
  });

  it("a revert that says done at the head (TimeOracleTimeProofNotNewer) waits while the safe block would take the call", async () => {
    const waiting = await decidePush(); // nothing stored: send; the simulation at the head reverts NotNewer
    expect(waiting.status).to.equal("pending");
    expect(waiting.lastError).to.contain("TimeOracleTimeProofNotNewer").and.to.contain("not yet at the safe block 98");
    expect(state.revertReadsAt).to.deep.equal([98n]);
    state.revertAtSafe = "TimeOracleTimeProofNotNewer";
    await worker.process(waiting);
    const done = store.item(waiting.id)!;
    expect(done.status).to.equal("done");
    expect(done.outcome).to.contain("TimeOracleTimeProofNotNewer");
  });

  it("with confirmations 0 the head's word is final: done at once, no read at another block", async () => {
    state.confirmations = 0;
    const done = await decidePush();
    expect(done.status).to.equal("done");
    expect(state.revertReadsAt).to.deep.equal([]);
  });
});
