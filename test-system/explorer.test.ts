/**
 * The time explorer (explorer/, docs/explorer.md) in a real headless browser: Chromium from the Debian package,
 * driven by playwright-core (no browser download), as a newcomer meets it: `npm start` (scripts/start.ts, left
 * running: a mesh of 4 attesting nodes, the gateway, two chains, the relayer, the catalog, on free 127.0.0.1 ports)
 * and the explorer URL it writes into its network file (the catalog's `explorer`). It checks what a user sees: the finalized head and a transaction sent through the gateway
 * with its nanosecond timestamp, the mesh plot's points, the failing rule of a bad proof in the inspector, the
 * relayer's latest delivery, the page at a phone's width, and no console error anywhere. Screenshots are kept in
 * test-system/artifacts/explorer/ (gitignored; the path is printed).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { chromium, type Browser, type Page } from "playwright-core";
import { createWalletClient, defineChain, http, parseEther } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { NetworkFileJson } from "../wire/network";
import { HARDHAT_DEV_KEYS, LOCAL_RELAYER_API_KEY } from "../scripts/network";
import { RunningStart } from "../test/scripts/runningStart";
import { waitUntil } from "./chronyd";

const ROOT = join(__dirname, "..");
const ARTIFACTS = join(ROOT, "test-system", "artifacts", "explorer");
const CHROMIUM = "/usr/bin/chromium";
/** How long the page may take to show what the network did (a block a second; polls every 1–2 s). */
const UI_TIMEOUT_MS = 30_000;

async function rpc<T>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
  const answer = (await response.json()) as { result?: T; error?: { message: string } };
  if (answer.error !== undefined) throw new Error(`${method}: ${answer.error.message}`);
  return answer.result as T;
}

describe("time explorer in Chromium (test-system)", function () {
  this.timeout(600_000);

  let start: RunningStart | null = null;
  /** What npm start wrote into its network file: the chains, nodes, gateway and every program's endpoints. */
  let network: NetworkFileJson;
  let relayerApi = "";
  let browser: Browser | null = null;
  let explorerUrl = "";
  const consoleErrors: string[] = [];

  before(async () => {
    // The bundle npm start serves (`npm start` builds it first when stale, as `npm run build:explorer --if-stale`).
    const { execFileSync } = await import("node:child_process");
    execFileSync(process.execPath, [join(ROOT, "bin", "build-explorer.js"), "--if-stale"], { stdio: "inherit" });
    mkdirSync(ARTIFACTS, { recursive: true });
    start = new RunningStart();
    network = await start.started();
    // The URL the newcomer opens: printed by npm start, and the catalog's `explorer` in the network file.
    explorerUrl = start.endpointsOf("catalog").explorer!;
    expect(start.stdout).to.include(`time explorer: open ${explorerUrl} in a browser`);
    relayerApi = start.endpointsOf("relayer").api!;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"], headless: true });
    console.log(`      explorer ${explorerUrl}; screenshots in ${ARTIFACTS}`);
  });

  after(async () => {
    await browser?.close();
    await start?.cleanUp();
  });

  let current: Page | null = null;
  afterEach(async function () {
    if (current !== null) {
      // A failed test leaves what the page showed, as a picture and as text.
      if (this.currentTest?.state === "failed") {
        await current.screenshot({ path: join(ARTIFACTS, `failed-${this.currentTest.title.slice(0, 40).replace(/[^a-z0-9]+/gi, "-")}.png`), fullPage: true });
        console.log((await current.locator("main").innerText()).slice(0, 4_000));
      }
      await current.close();
      current = null;
    }
    // Every page of every test: nothing the page logged as an error, no uncaught exception.
    expect(consoleErrors, "console errors").to.deep.equal([]);
  });

  /** Waits until the mesh plot holds at least `count` offsets (its data-points attribute). */
  async function meshPoints(page: Page, count: number): Promise<void> {
    await waitUntil(`${count} points in the mesh plot`, UI_TIMEOUT_MS, async () => (Number(await page.locator("#mesh-plot").getAttribute("data-points")) >= count ? true : null));
  }

  async function open(width: number, height: number, path = ""): Promise<Page> {
    const page = await browser!.newPage({ viewport: { width, height } });
    page.on("console", (message) => {
      if (message.type() === "error") consoleErrors.push(`${message.text()} (${message.location().url})`);
    });
    page.on("pageerror", (error) => consoleErrors.push(`uncaught: ${error.message}`));
    current = page;
    await page.goto(`${explorerUrl}${path}`);
    return page;
  }

  it("shows the latest finalized block, and a transaction sent through the gateway with its nanosecond timestamp", async () => {
    const gateway = network.temporalRpc![0]!;
    const chain = network.chains[0]!;
    const viemChain = defineChain({ id: chain.chainId, name: chain.name, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [gateway] } } });
    const wallet = createWalletClient({ account: privateKeyToAccount(HARDHAT_DEV_KEYS.user), chain: viemChain, transport: http(gateway) });
    const hash = await wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: parseEther("0.001") });
    const timestampNs = await rpc<string>(gateway, "temporal_getTransactionTimestamp", [hash]);
    expect(timestampNs).to.match(/^[1-9][0-9]{18}$/);
    const finalizedBefore = BigInt((await rpc<{ number: string }>(gateway, "eth_getBlockByHash", [await rpc<string>(gateway, "chain_getFinalizedHead"), false])).number);

    const page = await open(1280, 1000, `#tx=${hash}`);
    // The lookup: the exact decimal string, and its UTC reading with all nine digits.
    const looked = page.locator("[data-testid=tx-timestamp]");
    await looked.locator(".ns-decimal").filter({ hasText: timestampNs }).waitFor({ timeout: UI_TIMEOUT_MS });
    expect(await looked.locator(".ns-utc").textContent()).to.match(new RegExp(`^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\.${timestampNs.slice(-9)} UTC$`));
    // The finalized head: at least the one final before the page opened.
    await waitUntil(`the finalized head #${finalizedBefore} or later`, UI_TIMEOUT_MS, async () => {
      const shown = await page.locator("[data-testid=head-number]").textContent({ timeout: UI_TIMEOUT_MS });
      return shown !== null && BigInt(shown.slice(1)) >= finalizedBefore ? shown : null;
    });
    await page.screenshot({ path: join(ARTIFACTS, "blocks-desktop.png"), fullPage: true });
    // Its block, one click away: the transaction in the block's list, with the same timestamp.
    await page.locator("[data-testid=tx-block]").click();
    await page.locator(`[data-testid=block-tx][data-hash="${hash.toLowerCase()}"] .ns-decimal`).filter({ hasText: timestampNs }).first().waitFor({ timeout: UI_TIMEOUT_MS });
    await page.locator("#blocks-section").screenshot({ path: join(ARTIFACTS, "block.png") });
  });

  it("draws each mesh peer's offset as points, and lists every node with its role, convergence, quality and signed accuracy", async () => {
    const page = await open(1280, 1000);
    await meshPoints(page, 4);
    // Points on the canvas in the first peer's colour (#0072B2), not only data handed to the library.
    const coloured = await page.locator("#mesh-plot canvas").evaluate((canvas) => {
      const { width, height } = canvas as unknown as { width: number; height: number };
      const context = (canvas as unknown as { getContext(kind: "2d"): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } }).getContext("2d");
      const pixels = context.getImageData(0, 0, width, height).data;
      let count = 0;
      // Near the colour (anti-aliased edges blend it with the white background and the peer's pale band).
      const near = (value: number, target: number) => Math.abs(value - target) <= 40;
      for (let i = 0; i < pixels.length; i += 4) if (near(pixels[i]!, 0x00) && near(pixels[i + 1]!, 0x72) && near(pixels[i + 2]!, 0xb2) && pixels[i + 3] === 255) count++;
      return count;
    });
    expect(coloured, "pixels of the first peer's points and line").to.be.greaterThan(20);
    const rows = page.locator("[data-testid=node-row]");
    // The mesh converged: every node Converged and signing (a node signs only then).
    await waitUntil("every node Converged and signing", UI_TIMEOUT_MS * 2, async () => {
      const cells = await Promise.all((await rows.all()).map((row) => row.locator("td").allTextContents()));
      return cells.length === network.nodes.length && cells.every((texts) => texts[2] === "Converged" && texts[4]!.startsWith("±")) ? cells : null;
    });
    const first = (await rows.first().locator("td").allTextContents()).map((text) => text.trim());
    expect(first[1], "role").to.match(/^(primary|secondary|archive|bridge)$/);
    expect(first[2], "convergence").to.equal("Converged");
    expect(first[3], "time quality").to.match(/^[\d,]+$/);
    expect(first[4], "signed accuracy").to.match(/^±[\d.]+ (ns|µs|ms|s)$/);
    await page.locator("#mesh-section").screenshot({ path: join(ARTIFACTS, "mesh.png") });
  });

  it("shows the failing §6.2 rule of a bad proof pasted into the inspector", async () => {
    // A real proof whose signed accuracy was changed after signing: its entries recover to nobody registered.
    const proof = (await (await fetch(`${network.nodes[0]}/time/current`)).json()) as { proof: { accuracyNs: number } };
    proof.proof.accuracyNs += 1;
    const page = await open(1280, 1000);
    await page.locator("#proof-input").fill(JSON.stringify(proof, null, 2));
    await page.locator("#proof-run").click();
    const failed = page.locator("[data-testid=inspector-rule][data-status=fail]");
    await failed.waitFor({ timeout: UI_TIMEOUT_MS });
    expect(await failed.getAttribute("data-reason")).to.equal("unknown-node");
    expect(await failed.locator("td").first().textContent()).to.equal("2c");
    expect(await page.locator("[data-testid=inspector-rule][data-status=pass]").count(), "rules 0 to 2b pass").to.equal(9);
    expect(await page.locator("[data-testid=inspector-verdict]").textContent()).to.match(/^invalid: unknown-node/);
    await page.locator("#inspector-section").screenshot({ path: join(ARTIFACTS, "inspector.png") });
  });

  it("shows the relayer at work: a push it delivered appears among its recent deliveries", async () => {
    const response = await fetch(`${relayerApi}/push/${network.chains[0]!.chainId}`, { method: "POST", headers: { "x-api-key": LOCAL_RELAYER_API_KEY } });
    expect(response.status).to.equal(202);
    const page = await open(1280, 1000);
    await page.locator(`[data-testid=relayer-deliveries] code`, { hasText: `push:${network.chains[0]!.chainId}:` }).first().waitFor({ timeout: UI_TIMEOUT_MS * 2 });
    expect(await page.locator("[data-testid=relayer-health]").textContent()).to.equal("healthy");
    expect(await page.locator("[data-testid=queue-dead] strong").textContent()).to.match(/^\d+\+?$/);
    await page.locator("#relayer-section").screenshot({ path: join(ARTIFACTS, "relayer.png") });
  });

  it("works at a phone's width (390×844): every panel fits, nothing scrolls sideways", async () => {
    const page = await open(390, 844);
    await page.locator("[data-testid=head-number]").waitFor({ timeout: UI_TIMEOUT_MS });
    await meshPoints(page, 1);
    const pageWidth = await page.locator("html").evaluate((html) => (html as unknown as { scrollWidth: number }).scrollWidth);
    expect(pageWidth, "page width").to.be.at.most(390);
    for (const section of await page.locator("section").all()) {
      const box = await section.boundingBox();
      expect(box, "a panel").to.not.equal(null);
      expect(box!.x + box!.width, "a panel's right edge").to.be.at.most(390);
    }
    await page.screenshot({ path: join(ARTIFACTS, "phone.png"), fullPage: true });
  });
});
