/**
 * Helpers of the relayer's end-to-end tests: waiting for the relayer to settle, its operator API, chain RPCs; the
 * user's actions and the exactly-once counts are scripts/localUser.ts (shared with bench:relayer).
 */
import { expect } from "chai";
import type { LocalChain, LocalNetwork } from "../../scripts/network";

export { deliveredIds, deliveriesOf, executionsOf, pollUntil, scheduleCall, sendFreshTime } from "../../scripts/localUser";
import { pollUntil } from "../../scripts/localUser";

export interface ApiItem {
  id: string;
  status: string;
  outcome: string | null;
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

/** Mines `count` blocks on a chain. */
export async function mine(chain: LocalChain, count = 1): Promise<void> {
  for (let i = 0; i < count; i++) await chain.publicClient.request({ method: "evm_mine" as never });
}

/** A Hardhat JSON-RPC method without viem typings. */
export function rpc(chain: LocalChain, method: string, params: unknown[] = []): Promise<unknown> {
  return chain.publicClient.request({ method: method as never, params: params as never });
}
