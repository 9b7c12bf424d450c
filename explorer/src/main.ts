/**
 * The time explorer's page (docs/explorer.md): reads `config.json` beside it for the endpoints, then keeps every
 * panel live by polling. It reads only public endpoints and holds no key.
 */
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { byId, h, render } from "./dom";
import { errorText } from "./poll";
import { createRpc } from "./rpc";
import type { ExplorerConfig } from "./types";
import { showBlock, showTransaction, startBlocks } from "./views/blocks";
import { startInspector } from "./views/inspector";
import { createMeshPlot } from "./views/meshPlot";
import { startNodes } from "./views/nodes";
import { startRelayer } from "./views/relayer";

async function loadConfig(): Promise<ExplorerConfig> {
  const response = await fetch("config.json", { cache: "no-store" });
  if (!response.ok) throw new Error(`config.json: HTTP ${response.status}`);
  return (await response.json()) as ExplorerConfig;
}

/** What the page's address asks for: `#tx=0x…` or `#block=N`. */
function lookupInLocation(): { tx: string } | { block: bigint } | null {
  const tx = /^#tx=(0x[0-9a-fA-F]{64})$/.exec(window.location.hash);
  if (tx !== null) return { tx: tx[1]! };
  const block = /^#block=(0|[1-9][0-9]{0,18})$/.exec(window.location.hash);
  return block === null ? null : { block: BigInt(block[1]!) };
}

async function main(): Promise<void> {
  const config = await loadConfig();
  render(byId("network"), `${config.chain.name} (chain ${config.chain.chainId}) · gateway ${config.gateway}`);
  const rpc = createRpc(config.gateway);

  const txInput = byId<HTMLInputElement>("tx-hash");
  const lookupResult = byId("tx-result");
  const lookUp = (hash: string) => {
    txInput.value = hash;
    void showTransaction(rpc, hash, lookupResult);
  };
  const follow = () => {
    const asked = lookupInLocation();
    if (asked === null) return;
    if ("tx" in asked) lookUp(asked.tx);
    else void showBlock(rpc, asked.block, lookupResult, lookUp);
  };
  byId<HTMLFormElement>("tx-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const asked = txInput.value.trim();
    window.location.hash = /^[0-9]+$/.test(asked) ? `block=${asked}` : `tx=${asked}`;
  });
  window.addEventListener("hashchange", follow);
  follow();

  startBlocks(rpc, { head: byId("head"), blocks: byId("blocks"), status: byId("blocks-status") }, lookUp);
  const plot = createMeshPlot(config.nodes, { select: byId<HTMLSelectElement>("mesh-node"), plot: byId("mesh-plot"), legend: byId("mesh-legend") });
  startNodes(config.nodes, byId("nodes"), (endpoint, state) => plot.add(endpoint, state, Date.now()));
  startRelayer(config.relayer, byId("relayer"));
  startInspector(config.explain, config.nodes[0], {
    input: byId<HTMLTextAreaElement>("proof-input"),
    run: byId<HTMLButtonElement>("proof-run"),
    fetchLatest: byId<HTMLButtonElement>("proof-latest"),
    result: byId("proof-result"),
  });
}

main().catch((error: unknown) => render(byId("network"), h("span", { class: "error" }, `the explorer could not start: ${errorText(error)}`)));
