/**
 * The finalized head, live, and the latest final blocks with every transaction's canonical timestamp
 * (temporal_getBlockTransactionTimestamps); a transaction lookup by hash (temporal_getTransactionTimestamp) and a
 * block by number (`#tx=0x…`, `#block=N` in the page's address).
 * Blocks come from the gateway only: chain_getFinalizedHead, eth_getBlockByHash, temporal_getBlockMetadata.
 */
import { durationNs, shortHex, utcWithNs } from "../format";
import { h, render } from "../dom";
import { errorText, every } from "../poll";
import type { Rpc } from "../rpc";

/** Final blocks listed at most. */
const BLOCKS_SHOWN = 8;
const POLL_MS = 1_000;

interface BlockMetadata {
  number: string;
  hash: string;
  parentHash: string;
  observedAtNs: string | null;
  transactionCount: number;
  maxTimestampNs: string | null;
}

interface TxTimestamp {
  ethHash: string;
  extrinsicIndex: number;
  timestampNs: string;
}

interface FinalBlock {
  number: bigint;
  hash: string;
  metadata: BlockMetadata | null;
  txs: TxTimestamp[] | null;
}

/** A ns value both ways: the lossless decimal string, and UTC with its nine digits. */
export function nsCell(ns: string | null, testId?: string): HTMLElement {
  if (ns === null) return h("span", { class: "muted" }, "unknown");
  return h("span", { class: "ns", ...(testId === undefined ? {} : { "data-testid": testId }) }, h("code", { class: "ns-decimal" }, ns), h("span", { class: "ns-utc" }, utcWithNs(ns)));
}

function txLink(hash: string, onSelect: (hash: string) => void): HTMLElement {
  const link = h("a", { href: `#tx=${hash}`, title: hash, class: "hash" }, shortHex(hash, 8));
  link.addEventListener("click", () => onSelect(hash));
  return link;
}

async function readBlock(rpc: Rpc, number: bigint, hash: string): Promise<FinalBlock> {
  const [metadata, txs] = await Promise.all([
    rpc.call<BlockMetadata | null>("temporal_getBlockMetadata", [number.toString()]),
    rpc.call<TxTimestamp[] | null>("temporal_getBlockTransactionTimestamps", [number.toString()]),
  ]);
  return { number, hash, metadata, txs };
}

/** A final block: its hash, when the gateway observed it, and every transaction with its canonical timestamp. */
function blockArticle(block: FinalBlock, onSelectTx: (hash: string) => void): HTMLElement {
  return h(
    "article",
    { class: "block", "data-testid": "block", "data-number": block.number.toString() },
    h("header", {}, h("strong", {}, `#${block.number}`), " ", h("code", { title: block.hash, class: "hash" }, shortHex(block.hash, 10))),
    h("div", { class: "kv" }, h("span", {}, "observed"), nsCell(block.metadata?.observedAtNs ?? null)),
    h("div", { class: "kv" }, h("span", {}, "transactions"), String(block.metadata?.transactionCount ?? block.txs?.length ?? "?")),
    block.txs === null || block.txs.length === 0
      ? null
      : h(
          "table",
          { class: "txs" },
          h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "transaction"), h("th", {}, "canonical timestamp (ns, UTC)"))),
          h("tbody", {}, ...block.txs.map((tx) => h("tr", { "data-testid": "block-tx", "data-hash": tx.ethHash }, h("td", {}, tx.extrinsicIndex), h("td", {}, txLink(tx.ethHash, onSelectTx)), h("td", {}, nsCell(tx.timestampNs))))),
        ),
  );
}

export function startBlocks(rpc: Rpc, elements: { head: HTMLElement; blocks: HTMLElement; status: HTMLElement }, onSelectTx: (hash: string) => void): { stop(): void } {
  const blocks: FinalBlock[] = [];
  let headHash: string | null = null;

  const draw = () => {
    const head = blocks[0];
    render(
      elements.head,
      head === undefined
        ? h("span", { class: "muted" }, "waiting for the first final block…")
        : h(
            "div",
            { class: "head" },
            h("span", { class: "head-label" }, "finalized head"),
            h("strong", { "data-testid": "head-number" }, `#${head.number}`),
            h("code", { title: head.hash, class: "hash" }, shortHex(head.hash, 10)),
            h("span", { class: "head-observed" }, "observed ", nsCell(head.metadata?.observedAtNs ?? null, "head-observed-ns")),
          ),
    );
    render(elements.blocks, ...blocks.map((block) => blockArticle(block, onSelectTx)));
  };

  const poll = every(
    POLL_MS,
    async () => {
      const hash = await rpc.call<string | null>("chain_getFinalizedHead");
      if (hash === null || (hash === headHash && blocks.every((block) => block.metadata !== null && block.txs !== null))) return;
      const header = await rpc.call<{ number: string } | null>("eth_getBlockByHash", [hash, false]);
      if (header === null) return; // reorged away between the two calls: the next poll sees the new head
      const number = BigInt(header.number);
      // Read again: blocks not read yet, and those the gateway had not processed when read (it follows the chain
      // by polling, so a block can be final upstream a moment before its timestamps are recorded).
      const complete = new Set(blocks.filter((block) => block.metadata !== null && block.txs !== null).map((block) => block.number));
      const wanted: bigint[] = [];
      for (let n = number; n >= 0n && n > number - BigInt(BLOCKS_SHOWN); n--) if (!complete.has(n)) wanted.push(n);
      const read = await Promise.all(
        wanted.map(async (n) => {
          if (n === number) return readBlock(rpc, n, hash);
          const older = await rpc.call<{ hash: string } | null>("eth_getBlockByNumber", [`0x${n.toString(16)}`, false]);
          return older === null ? null : readBlock(rpc, n, older.hash);
        }),
      );
      const merged = new Map(blocks.map((block) => [block.number, block]));
      for (const block of read) if (block !== null) merged.set(block.number, block);
      blocks.splice(0, blocks.length, ...[...merged.values()].sort((a, b) => (a.number > b.number ? -1 : 1)).slice(0, BLOCKS_SHOWN));
      headHash = hash;
      render(elements.status);
      draw();
    },
    (error) => render(elements.status, h("span", { class: "error" }, `blocks: ${errorText(error)}`)),
  );
  draw();
  return poll;
}

interface WaitTime {
  included: boolean;
  waitNs: string;
}

/** Looks a transaction up: its canonical timestamp, its block and (when it arrived through this gateway) its wait. */
export async function showTransaction(rpc: Rpc, hash: string, target: HTMLElement): Promise<void> {
  if (!/^0x[0-9a-fA-F]{64}$/.test(hash)) {
    render(target, h("p", { class: "error" }, "a transaction hash is 0x and 64 hex digits"));
    return;
  }
  render(target, h("p", { class: "muted" }, "looking up…"));
  try {
    const [timestampNs, wait, tx] = await Promise.all([
      rpc.call<string | null>("temporal_getTransactionTimestamp", [hash]),
      rpc.call<WaitTime | null>("temporal_getTransactionWaitTime", [hash]),
      rpc.call<{ blockNumber: string | null; from: string; to: string | null } | null>("eth_getTransactionByHash", [hash]),
    ]);
    render(
      target,
      h(
        "div",
        { class: "tx", "data-testid": "tx-result" },
        h("div", { class: "kv" }, h("span", {}, "transaction"), h("code", { class: "hash" }, hash)),
        h("div", { class: "kv" }, h("span", {}, "canonical timestamp"), timestampNs === null ? h("span", { class: "muted" }, "none: the gateway has not seen it") : nsCell(timestampNs, "tx-timestamp")),
        h("div", { class: "kv" }, h("span", {}, "block"), tx === null ? "unknown to the chain" : tx.blockNumber === null ? "pending" : h("a", { href: `#block=${BigInt(tx.blockNumber)}`, "data-testid": "tx-block" }, `#${BigInt(tx.blockNumber)}`)),
        tx === null ? null : h("div", { class: "kv" }, h("span", {}, "from → to"), h("code", { class: "hash" }, `${shortHex(tx.from)} → ${tx.to === null ? "(contract creation)" : shortHex(tx.to)}`)),
        wait === null ? null : h("div", { class: "kv" }, h("span", {}, wait.included ? "waited for inclusion" : "waiting so far"), h("span", { title: `${wait.waitNs} ns` }, durationNs(wait.waitNs))),
      ),
    );
  } catch (error) {
    render(target, h("p", { class: "error" }, errorText(error)));
  }
}

/** Shows one block by number (a link from a transaction, or #block=N): its transactions and their timestamps. */
export async function showBlock(rpc: Rpc, number: bigint, target: HTMLElement, onSelectTx: (hash: string) => void): Promise<void> {
  render(target, h("p", { class: "muted" }, "looking up…"));
  try {
    const header = await rpc.call<{ hash: string } | null>("eth_getBlockByNumber", [`0x${number.toString(16)}`, false]);
    if (header === null) {
      render(target, h("p", { class: "error" }, `the chain has no block #${number} yet`));
      return;
    }
    render(target, blockArticle(await readBlock(rpc, number, header.hash), onSelectTx));
  } catch (error) {
    render(target, h("p", { class: "error" }, errorText(error)));
  }
}
