/**
 * Helpers of the relayer's end-to-end tests: waiting for the relayer to settle, its operator API, chain RPCs; the
 * user's actions and the exactly-once counts are scripts/localUser.ts (shared with bench:relayer); the chains'
 * controls (mining, snapshots, reorgs) are each LocalChain's `control` (scripts/chainControl.ts).
 */
import { expect } from "chai";
import { join } from "node:path";
import { RelayerStore } from "../../relayer/store";
import { localRelayerAddress, type LocalNetwork } from "../../scripts/network";

export { deliveredIds, deliveriesOf, executionsOf, pollUntil, scheduleCall, sendFreshTime } from "../../scripts/localUser";
import { pollUntil } from "../../scripts/localUser";

export interface ApiItem {
  id: string;
  status: string;
  outcome: string | null;
  lastError: string | null;
}

export async function apiItems(api: string, query = ""): Promise<ApiItem[]> {
  const response = await fetch(`${api}/items?limit=500${query}`);
  expect(response.status).to.equal(200);
  return ((await response.json()) as { items: ApiItem[] }).items;
}

/** Waits until the relayer has nothing pending or submitted, then returns every item. */
export async function settledItems(network: LocalNetwork, expectedIds: readonly string[], timeoutMs = 90_000): Promise<ApiItem[]> {
  let last: ApiItem[] = [];
  try {
    return await pollUntil(async () => {
      const items = await apiItems(network.relayer!.api);
      last = items;
      const open = items.filter((item) => item.status === "pending" || item.status === "submitted");
      const known = new Set(items.map((item) => item.id));
      return open.length === 0 && expectedIds.every((id) => known.has(id)) ? items : undefined;
    }, "the relayer's queue to empty", timeoutMs);
  } catch (error) {
    // The evidence for whoever reads the failure: what was still open, and what never appeared.
    const known = new Set(last.map((item) => item.id));
    const open = last.filter((item) => item.status === "pending" || item.status === "submitted");
    throw new Error(
      `${(error as Error).message}; open: ${JSON.stringify(open)}; missing: ${JSON.stringify(expectedIds.filter((id) => !known.has(id)))}; relayer log: ${network.relayer?.stderrTail().slice(-1_500) ?? "none"}`,
    );
  }
}

/**
 * After the relayer settled every transaction and stopped: nothing open in its store (the database in
 * `dir`/relayer-data), and its next nonce on each chain is the chain's.
 */
export async function expectStoreSettled(network: LocalNetwork, dir: string): Promise<void> {
  // The tracker settles a nonce once its block is confirmed: give it the blocks and the ticks to do so.
  let open: unknown[] = [];
  await pollUntil(async () => {
    const reader = new RelayerStore(join(dir, "relayer-data"));
    try {
      open = network.chains.flatMap((chain) => reader.openTxs(chain.chainId).map((tx) => ({ chainId: tx.chainId, nonce: tx.nonce, state: tx.state, item: tx.itemId })));
      return open.length === 0 ? true : undefined;
    } finally {
      reader.close();
    }
  }, "every open transaction's settlement").catch((error: Error) => {
    throw new Error(`${error.message}; still open: ${JSON.stringify(open)}; relayer log: ${network.relayer?.stderrTail().slice(-1_500) ?? "none"}`);
  });
  await network.stopRelayer("SIGTERM");
  const store = new RelayerStore(join(dir, "relayer-data"));
  try {
    for (const chain of network.chains) {
      expect(store.openTxs(chain.chainId), `open transactions on ${chain.name}`).to.deep.equal([]);
      const chainNonce = await chain.publicClient.getTransactionCount({ address: localRelayerAddress() });
      expect(store.nextNonce(chain.chainId), `next nonce on ${chain.name}`).to.equal(chainNonce);
    }
  } finally {
    store.close();
  }
}
