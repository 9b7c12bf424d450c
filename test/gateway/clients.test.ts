/**
 * The temporal gateway (gateway/) driven by client libraries nobody here wrote, in front of a real chain process on
 * loopback, once a Hardhat node and once anvil (CHAIN_KINDS) (issue 28 points 1–3, issue 29.3): ethers v6 `WebSocketProvider.on('block')` and viem `watchBlocks` /
 * `watchEvent` over `eth_subscribe` receive every finalized block and event, across a gateway restart (each client
 * fills what passed while it was away, the client's job); viem's `http({ batch: true })` gets 1,000 answers to
 * 1,000 concurrent calls, and the gateway's per-item errors reach the caller through viem's parsing; the three
 * views of "finalized" agree; `temporal_getTransactionWaitTime` says included exactly when a receipt exists.
 *
 * Only standard eth_* methods touch the chain, besides its development controls (scripts/chainControl.ts: mining
 * per transaction, on an interval or on demand); what the two chains answer differently (their own `finalized`
 * tag) is read from CHAIN_TRAITS.
 */
import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { WebSocket } from "ws";
import { WebSocketProvider } from "ethers";
import {
  BaseError,
  createPublicClient,
  createWalletClient,
  encodeAbiParameters,
  hexToBigInt,
  http,
  keccak256,
  RpcRequestError,
  toHex,
  webSocket,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { LONE_NODE_MESH } from "./fixtures";
import { startTemporalGateway, type RunningGateway } from "../../gateway/server";
import { CHAIN_TRAITS, ChainControl } from "../../scripts/chainControl";
import { CHAIN_KINDS, startChainProcess, stopChainProcess, type ChainProcess } from "../../scripts/chainProcess";
import { HARDHAT_DEV_KEYS } from "../../scripts/network";

/** The node's defaults (node/config.ts) but for the rate, which each test sets. */
const LIMITS = { maxBodyBytes: 1_048_576, maxBatchItems: 1_000, maxBatchMs: 10_000, maxResponseBytes: 4_194_304, requestsPerSecondPerClient: 0, maxConnections: 64 };

/**
 * A contract that emits `Ping(uint256 value)` with its calldata's first word, written as bytecode so that the test
 * needs no compiler: runtime `CALLDATACOPY(0, 0, 32) LOG1(0, 32, topic) STOP`, behind an init code that returns it.
 */
const PING_TOPIC = keccak256(toHex("Ping(uint256)"));
const PING_RUNTIME = `602060006000377f${PING_TOPIC.slice(2)}60206000a100`;
const PING_INIT = `0x602e80600b6000396000f3${PING_RUNTIME}` as Hex;

interface Answer {
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

async function call(url: string, method: string, params: unknown[] = []): Promise<Answer> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
  return (await response.json()) as Answer;
}

/** Waits for a condition (not a retry of a flaky one: each condition holds for good once it holds). */
async function until<T>(read: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The numbers missing from a sorted list between its first and last (none for a gapless list). */
function gapsIn(numbers: readonly bigint[]): bigint[] {
  const missing: bigint[] = [];
  for (let i = 1; i < numbers.length; i++) for (let n = numbers[i - 1]! + 1n; n < numbers[i]!; n++) missing.push(n);
  return missing;
}

for (const chainKind of CHAIN_KINDS) describe(`temporal gateway with ethers v6 and viem in front of ${chainKind} (eth_subscribe, batches, one meaning of finalized)`, function () {
  this.timeout(180_000);
  let chain: ChainProcess;
  let control: ChainControl;
  let dir: string;
  const user = privateKeyToAccount(HARDHAT_DEV_KEYS.user);
  let ping: Address;
  const gateways: RunningGateway[] = [];

  function start(overrides: { port?: number; pollIntervalMs?: number; limits?: Partial<typeof LIMITS>; upstreamUrl?: string; dataDir?: string } = {}): Promise<RunningGateway> {
    return startTemporalGateway({
      host: "127.0.0.1",
      port: overrides.port ?? 0,
      upstreamUrl: overrides.upstreamUrl ?? chain.rpcUrl,
      dataDir: overrides.dataDir ?? dir,
      time: { consensusNowNs: () => BigInt(Date.now()) * 1_000_000n, meshState: () => LONE_NODE_MESH },
      limits: { ...LIMITS, ...overrides.limits },
      confirmations: 1,
      chainName: `${chainKind}-local`,
      legacyNumbers: false,
      pollIntervalMs: overrides.pollIntervalMs ?? 100,
      logger: pino({ level: process.env.GWETH_DEBUG ? "debug" : "silent" }),
    }).then((gateway) => {
      gateways.push(gateway);
      return gateway;
    });
  }

  async function stop(gateway: RunningGateway): Promise<void> {
    gateways.splice(gateways.indexOf(gateway), 1);
    await gateway.close();
  }

  const wallet = () => createWalletClient({ account: user, transport: http(chain.rpcUrl) });

  async function sendPing(value: bigint): Promise<Hex> {
    return wallet().sendTransaction({ to: ping, data: encodeAbiParameters([{ type: "uint256" }], [value]), chain: null });
  }

  before(async () => {
    chain = await startChainProcess(31337, chainKind);
    control = new ChainControl(chainKind, chain.rpcUrl);
    dir = mkdtempSync(join(tmpdir(), "ats-gateway-clients-"));
    const hash = await wallet().sendTransaction({ data: PING_INIT, chain: null });
    // Polled: anvil's automine answers eth_sendTransaction before the receipt can be read (Hardhat's does not).
    const receipt = await until(async () => ((await call(chain.rpcUrl, "eth_getTransactionReceipt", [hash])).result as { contractAddress: Address } | null) ?? undefined, "the Ping deployment's receipt");
    ping = receipt.contractAddress;
    expect((await call(chain.rpcUrl, "eth_getCode", [ping, "latest"])).result).to.equal(`0x${PING_RUNTIME}`);
  });

  afterEach(async () => {
    await control.setIntervalMining(0);
    await control.setAutomine(true);
  });

  after(async () => {
    for (const gateway of [...gateways]) await gateway.close();
    await stopChainProcess(chain);
    rmSync(dir, { recursive: true, force: true });
  });

  it("ethers v6 on('block') and viem watchBlocks / watchEvent get every finalized block and event, with no gap across a gateway restart", async () => {
    await control.setIntervalMining(200); // anvil: 1 s, its shortest
    let gateway = await start({ dataDir: join(dir, "restart") });
    const port = Number(new URL(gateway.url).port);
    const wsUrl = gateway.url.replace(/^http/, "ws");
    const stops: (() => Promise<void> | void)[] = [];
    try {
      // ethers v6 has no reconnect: the client reopens a provider when its socket closes, once the gateway
      // answers again, and fetches the blocks it missed by number when the first new one arrives.
      const ethersBlocks: bigint[] = [];
      const ethersFromSubscription: bigint[] = [];
      let ethersProvider: WebSocketProvider | undefined;
      let ethersStopped = false;
      let ethersQueue: Promise<void> = Promise.resolve();
      const ethersConnect = () => {
        const provider = new WebSocketProvider(wsUrl, 31337, { staticNetwork: true });
        ethersProvider = provider;
        const socket = provider.websocket as unknown as WebSocket;
        socket.on("error", () => undefined);
        socket.on("close", () => {
          if (ethersStopped) return;
          void until(async () => ((await fetch(gateway.url).catch(() => null)) === null ? undefined : true), "the gateway back", 60_000).then(ethersConnect);
        });
        void provider.on("block", (number: number) => {
          // One block at a time, each after the gap before it is filled. A failure leaves a gap the test reports.
          ethersQueue = ethersQueue.then(async () => {
            const last = ethersBlocks.at(-1);
            for (let missing = last === undefined ? BigInt(number) : last + 1n; missing < BigInt(number); missing++) {
              const block = await provider.getBlock(missing);
              ethersBlocks.push(BigInt(block!.number));
            }
            ethersFromSubscription.push(BigInt(number));
            ethersBlocks.push(BigInt(number));
          }).catch(() => undefined);
        });
      };
      ethersConnect();
      stops.push(async () => {
        ethersStopped = true;
        await ethersProvider?.destroy();
      });

      // viem reconnects and subscribes again by itself (its defaults: 5 attempts, 2 s apart; an attempt that
      // finds the port closed is its last, so the gateway is back within the 2 s); the client fills a gap from the
      // blocks it missed, and fetches the events of the blocks it may have missed once the socket is back.
      const client: PublicClient = createPublicClient({ transport: webSocket(wsUrl) });
      const viemBlocks: bigint[] = [];
      const viemFromSubscription: bigint[] = [];
      let viemQueue: Promise<void> = Promise.resolve();
      const unwatchBlocks = client.watchBlocks({
        onBlock: (block) => {
          viemQueue = viemQueue.then(async () => {
            const last = viemBlocks.at(-1);
            for (let missing = last === undefined ? block.number : last + 1n; missing < block.number; missing++) {
              viemBlocks.push((await client.getBlock({ blockNumber: missing })).number);
            }
            viemFromSubscription.push(block.number);
            viemBlocks.push(block.number);
          }).catch(() => undefined);
        },
        onError: () => undefined,
      });
      stops.push(unwatchBlocks);
      const events = new Map<string, bigint>();
      const eventsFromSubscription: string[] = [];
      let catchingUp: Promise<void> | undefined;
      const unwatchEvents = client.watchEvent({
        address: ping,
        onLogs: (logs) => {
          for (const log of logs) {
            const key = `${log.blockHash}:${log.logIndex}`;
            eventsFromSubscription.push(key);
            events.set(key, hexToBigInt(log.data)); // Ping's one word: the value
          }
        },
        onError: () => {
          // The socket closed: once it is back (viem has subscribed again first, on the same socket), the events
          // of every block final by then and not yet covered are fetched; the subscription covers the rest.
          const from = viemBlocks.at(-1) ?? 0n;
          catchingUp ??= until(
            async () => {
              try {
                return await client.getBlock({ blockTag: "finalized" });
              } catch {
                return undefined;
              }
            },
            "the socket back",
            60_000,
          ).then(async (final) => {
            for (const log of await client.getLogs({ address: ping, fromBlock: from + 1n, toBlock: final.number })) {
              events.set(`${log.blockHash}:${log.logIndex}`, hexToBigInt(log.data));
            }
          });
        },
      });
      stops.push(unwatchEvents);

      // newHeads for ethers and viem, and logs for viem.
      await until(() => (gateway.subscriptionCount() === 3 ? true : undefined), "three subscriptions");
      await until(() => (ethersBlocks.length > 0 && viemBlocks.length > 0 ? true : undefined), "a first block to each client");
      const sent = new Map<Hex, bigint>();
      for (let value = 1n; value <= 4n; value++) sent.set(await sendPing(value), value);
      await stop(gateway);
      for (let value = 5n; value <= 6n; value++) sent.set(await sendPing(value), value);
      await sleep(500); // blocks and events pass while the gateway is away
      gateway = await start({ port, dataDir: join(dir, "restart") });
      await until(() => (catchingUp === undefined ? undefined : true), "the events client noticing the restart");
      for (let value = 7n; value <= 10n; value++) sent.set(await sendPing(value), value);
      await catchingUp;

      const receipts = await Promise.all([...sent.keys()].map(async (hash) => (await call(chain.rpcUrl, "eth_getTransactionReceipt", [hash])).result as { blockNumber: Hex }));
      const lastPingBlock = receipts.reduce((max, receipt) => (BigInt(receipt.blockNumber) > max ? BigInt(receipt.blockNumber) : max), 0n);
      await until(() => (events.size >= 10 && (ethersBlocks.at(-1) ?? 0n) > lastPingBlock && (viemBlocks.at(-1) ?? 0n) > lastPingBlock ? true : undefined), "every event and block to the clients");

      expect([...events.values()].sort((a, b) => Number(a - b))).to.deep.equal([1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n, 10n]);
      expect(new Set(eventsFromSubscription).size, "no event delivered twice by the subscription").to.equal(eventsFromSubscription.length);
      for (const [name, blocks, fromSubscription] of [
        ["ethers", ethersBlocks, ethersFromSubscription],
        ["viem", viemBlocks, viemFromSubscription],
      ] as const) {
        expect(gapsIn(blocks), `${name}: blocks missing`).to.deep.equal([]);
        expect(new Set(blocks).size, `${name}: a block twice`).to.equal(blocks.length);
        // The subscription itself skipped nothing but across the restart: one gap at most, and each block once.
        const skips = fromSubscription.filter((number, i) => i > 0 && number !== fromSubscription[i - 1]! + 1n);
        expect(skips.length, `${name}: the subscription skipped blocks outside the restart: ${fromSubscription.join(",")}`).to.be.at.most(1);
      }
      // Only final blocks: the chain's head was never sent (one confirmation).
      const head = BigInt((await call(chain.rpcUrl, "eth_blockNumber")).result as string);
      expect(ethersFromSubscription.every((number) => number < head)).to.equal(true);
    } finally {
      for (const stopClient of stops.reverse()) await stopClient();
      await stop(gateway);
    }
  });

  it("eth_subscribe follows geth: a notification's shape, a logs filter (address, topics), unsubscribe, the limits, and a clear error over HTTP", async () => {
    const gateway = await start({ dataDir: join(dir, "shape") });
    const socket = new WebSocket(gateway.url.replace(/^http/, "ws"));
    const messages: Record<string, unknown>[] = [];
    socket.on("message", (data: Buffer) => messages.push(JSON.parse(data.toString()) as Record<string, unknown>));
    const answer = async (id: number) => until(() => messages.find((m) => m.id === id), `answer ${id}`);
    const send = (id: number, method: string, params: unknown[]) => socket.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    try {
      await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
      send(1, "eth_subscribe", ["newHeads"]);
      const heads = (await answer(1)).result as string;
      expect(heads).to.match(/^0x[0-9a-f]{32}$/);
      send(2, "eth_subscribe", ["logs", { address: ping, topics: [[PING_TOPIC, keccak256(toHex("Other()"))]] }]);
      const matching = (await answer(2)).result as string;
      send(3, "eth_subscribe", ["logs", { address: [ping], topics: [[keccak256(toHex("Other()"))]] }]);
      const other = (await answer(3)).result as string;
      const pinged = await sendPing(42n);
      await control.mine(1); // one confirmation on top
      const log = await until(() => messages.find((m) => (m.params as { subscription?: string } | undefined)?.subscription === matching), "the log");
      expect(log.method).to.equal("eth_subscription");
      const result = (log.params as { result: Record<string, unknown> }).result;
      expect(result).to.include({ address: ping.toLowerCase(), transactionHash: pinged, removed: false });
      expect(result.topics).to.deep.equal([PING_TOPIC]);
      expect(result.data).to.equal(encodeAbiParameters([{ type: "uint256" }], [42n]));
      const header = await until(() => messages.find((m) => (m.params as { subscription?: string; result?: { number?: string } } | undefined)?.subscription === heads), "a head");
      const headerResult = (header.params as { result: Record<string, unknown> }).result;
      expect(headerResult).to.include.keys("number", "hash", "parentHash", "timestamp", "logsBloom", "stateRoot", "gasLimit");
      expect(headerResult).to.not.have.any.keys("transactions", "uncles", "size");
      expect(messages.some((m) => (m.params as { subscription?: string } | undefined)?.subscription === other), "a filter on another topic gets nothing").to.equal(false);

      send(4, "eth_unsubscribe", [matching]);
      expect((await answer(4)).result).to.equal(true);
      send(5, "eth_unsubscribe", [matching]);
      expect((await answer(5)).error).to.deep.equal({ code: -32000, message: "subscription not found" });
      send(6, "eth_subscribe", ["newPendingTransactions"]);
      expect(((await answer(6)).error as { code: number; data: string }).data).to.equal('unsupported subscription "newPendingTransactions": this gateway serves newHeads and logs');
      send(7, "eth_subscribe", ["logs", { topics: [null, null, null, null, null] }]);
      expect((await answer(7)).error).to.deep.equal({ code: -32602, message: "Invalid params", data: "exceed max topics: at most 4 positions" });
      send(8, "eth_subscribe", ["logs", { fromBlock: "0x0" }]);
      expect(((await answer(8)).error as { code: number }).code).to.equal(-32602);
      send(9, "eth_subscribe", ["logs", { address: "0x1234" }]);
      expect(((await answer(9)).error as { data: string }).data).to.match(/^invalid address/);
      for (let id = 10; id < 24; id++) send(id, "eth_subscribe", ["newHeads"]); // 2 held + 14 = 16
      for (let id = 10; id < 24; id++) expect((await answer(id)).result).to.match(/^0x/);
      send(24, "eth_subscribe", ["newHeads"]);
      expect((await answer(24)).error).to.deep.equal({ code: -32600, message: "Invalid Request", data: "at most 16 subscriptions per connection" });

      expect((await call(gateway.url, "eth_subscribe", ["newHeads"])).error).to.deep.equal({
        code: -32601,
        message: "notifications not supported",
        data: "eth_subscribe needs a WebSocket connection: ws:// on this same port",
      });
    } finally {
      socket.close();
      await stop(gateway);
    }
  });

  it("viem's http({ batch: true }): 1,000 concurrent calls get 1,000 answers in one batch", async () => {
    // How long the batch takes is the chain's (1,000 calls to Hardhat: about 5 s on a loaded 2-core machine), not
    // what this test checks: viem's timeout and the batch's budget are wide, so that it checks the answers.
    const gateway = await start({ limits: { requestsPerSecondPerClient: 1_000, maxBatchMs: 60_000 }, dataDir: join(dir, "batch") });
    try {
      let posts = 0;
      const errors: unknown[] = [];
      const client = createPublicClient({
        transport: http(gateway.url, {
          batch: true,
          timeout: 60_000,
          onFetchRequest: () => void posts++,
          onFetchResponse: async (response) => {
            const answers = (await response.clone().json()) as Answer[] | Answer;
            for (const answer of Array.isArray(answers) ? answers : [answers]) if (answer.error !== undefined) errors.push(answer.error);
          },
        }),
      });
      const addresses = Array.from({ length: 1_000 }, (_, i) => `0x${(i + 1).toString(16).padStart(40, "0")}` as Address);
      const balances = await Promise.all(addresses.map((address) => client.getBalance({ address })));
      expect(balances).to.have.length(1_000);
      expect(balances.every((balance) => balance === 0n)).to.equal(true);
      expect(errors).to.deep.equal([]);
      expect(posts).to.equal(1);
      expect(await client.getBalance({ address: user.address })).to.equal(BigInt((await call(chain.rpcUrl, "eth_getBalance", [user.address, "latest"])).result as string));
    } finally {
      await stop(gateway);
    }
  });

  it("viem gets the gateway's own error per item: over the rate (-32005), past the batch's time budget (-32002), and a batch refused whole", async () => {
    // An upstream that holds eth_getCode for 3 s and passes everything else to the chain.
    const slow: Server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", async () => {
        const body = Buffer.concat(chunks).toString();
        if ((JSON.parse(body) as { method: string }).method === "eth_getCode") await sleep(3_000);
        try {
          const answered = await fetch(chain.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body });
          response.writeHead(200, { "content-type": "application/json" }).end(await answered.text());
        } catch {
          response.destroy(); // the held request outlived the test (its answer is past the budget): the chain may be gone
        }
      });
    });
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    const gateway = await start({ upstreamUrl: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`, limits: { requestsPerSecondPerClient: 10, maxBatchItems: 12, maxBatchMs: 500 }, dataDir: join(dir, "errors") });
    const codeOf = (error: unknown): { code: number | undefined; data: unknown } => {
      const request = (error as BaseError).walk((e) => e instanceof RpcRequestError) as RpcRequestError | null;
      return { code: (error as { code?: number }).code, data: (request as unknown as { data?: unknown } | null)?.data };
    };
    try {
      const client = createPublicClient({ transport: http(gateway.url, { batch: true, retryCount: 0 }) });
      const balanceOf = (i: number) => client.getBalance({ address: `0x${(i + 1).toString(16).padStart(40, "0")}` });
      const outcomes = await Promise.allSettled([client.getCode({ address: ping }), ...Array.from({ length: 11 }, (_, i) => balanceOf(i))]);
      // 10 tokens: the first ten items are answered or run out of time, the last two are over the rate.
      expect(outcomes[0]!.status).to.equal("rejected");
      expect(codeOf((outcomes[0] as PromiseRejectedResult).reason)).to.deep.equal({ code: -32002, data: "the batch's answer is due within 500 ms; split the batch" });
      expect(outcomes.slice(1, 10).map((o) => (o.status === "fulfilled" ? o.value : o.reason))).to.deep.equal(Array(9).fill(0n));
      for (const outcome of outcomes.slice(10)) {
        expect(codeOf((outcome as PromiseRejectedResult).reason)).to.deep.equal({ code: -32005, data: "at most 10 requests per second per client" });
      }
      await sleep(1_100); // a full bucket again
      const refused = await Promise.allSettled(Array.from({ length: 13 }, (_, i) => balanceOf(i)));
      for (const outcome of refused) expect(codeOf((outcome as PromiseRejectedResult).reason)).to.deep.equal({ code: -32600, data: "a batch of more than 12 items" });
    } finally {
      await stop(gateway);
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });

  it("one meaning of finalized: eth_getBlockByNumber('finalized' and 'safe'), chain_getFinalizedHead, both head subscriptions, and the tags of eth_getLogs, eth_call and eth_getBalance agree", async () => {
    const gateway = await start({ dataDir: join(dir, "finality") });
    const socket = new WebSocket(gateway.url.replace(/^http/, "ws"));
    const messages: Record<string, unknown>[] = [];
    socket.on("message", (data: Buffer) => messages.push(JSON.parse(data.toString()) as Record<string, unknown>));
    try {
      await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
      socket.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "chain_subscribeFinalizedHeads", params: [] }));
      socket.send(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "eth_subscribe", params: ["newHeads"] }));
      const [finalizedSub, newHeadsSub] = await until(() => {
        const ids = [1, 2].map((id) => messages.find((m) => m.id === id)?.result as string | undefined);
        return ids.every((id) => id !== undefined) ? (ids as string[]) : undefined;
      }, "two subscriptions");
      // A ping, a transfer, another ping, each in its own block: the transfer's block is final, the head is not.
      const final = await sendPing(1n);
      await wallet().sendTransaction({ to: user.address, value: 0n, chain: null });
      const notFinal = await sendPing(2n);
      const finalBlock = BigInt(((await call(chain.rpcUrl, "eth_getTransactionReceipt", [final])).result as { blockNumber: string }).blockNumber);
      const head = BigInt(((await call(chain.rpcUrl, "eth_getTransactionReceipt", [notFinal])).result as { blockNumber: string }).blockNumber);
      const lastOf = (subscription: string) =>
        messages
          .filter((m) => (m.params as { subscription?: string } | undefined)?.subscription === subscription)
          .map((m) => (m.params as { result: { number: string; hash: string } }).result)
          .at(-1);
      await until(() => (lastOf(finalizedSub!) !== undefined && BigInt(lastOf(finalizedSub!)!.number) === head - 1n && lastOf(newHeadsSub!)?.number === `0x${(head - 1n).toString(16)}` ? true : undefined), `both subscriptions at the final head ${head}: ${JSON.stringify(messages).slice(-3000)}`);

      const byTag = async (tag: string) => (await call(gateway.url, "eth_getBlockByNumber", [tag, false])).result as { number: string; hash: string };
      const finalizedHead = (await call(gateway.url, "chain_getFinalizedHead")).result as string;
      const views = { finalizedTag: (await byTag("finalized")).hash, safeTag: (await byTag("safe")).hash, chain_getFinalizedHead: finalizedHead, chain_finalizedHead: lastOf(finalizedSub!)!.hash, newHeads: lastOf(newHeadsSub!)!.hash };
      expect(new Set(Object.values(views)).size, JSON.stringify(views)).to.equal(1);
      expect(BigInt((await byTag("finalized")).number)).to.equal(head - 1n);
      // The chain's own answer for the tag is another block (Hardhat: its newest; anvil: two epochs back): the gateway
      // answered by its rule, not the chain's.
      const chainFinalized = head - BigInt(CHAIN_TRAITS[chainKind].finalizedLagBlocks);
      expect(chainFinalized).to.not.equal(head - 1n);
      expect(((await call(chain.rpcUrl, "eth_getBlockByNumber", ["finalized", false])).result as { number: string }).number).to.equal(`0x${chainFinalized.toString(16)}`);

      const logs = (await call(gateway.url, "eth_getLogs", [{ address: ping, fromBlock: `0x${(finalBlock - 1n).toString(16)}`, toBlock: "finalized" }])).result as { transactionHash: string }[];
      expect(logs.map((log) => log.transactionHash)).to.include(final).and.not.include(notFinal);
      const atFinal = (await call(gateway.url, "eth_getBalance", [user.address, "finalized"])).result;
      expect(atFinal).to.equal((await call(chain.rpcUrl, "eth_getBalance", [user.address, `0x${(head - 1n).toString(16)}`])).result);
      expect(atFinal).to.not.equal((await call(chain.rpcUrl, "eth_getBalance", [user.address, "latest"])).result);
      expect((await call(gateway.url, "eth_getBalance", [user.address, { blockNumber: "safe" }])).result).to.equal(atFinal);
      expect((await call(gateway.url, "eth_call", [{ to: ping, data: "0x" }, "finalized"])).result).to.equal("0x");
    } finally {
      socket.close();
      await stop(gateway);
    }
  });

  it("temporal_getTransactionWaitTime says included exactly when eth_getTransactionReceipt has a receipt, before the gateway observed the block", async () => {
    // The follower ticks once at start and not again during the test: inclusion can only come from the receipt.
    const gateway = await start({ pollIntervalMs: 600_000, dataDir: join(dir, "wait") });
    try {
      await control.setAutomine(false);
      const wallet = createWalletClient({ account: user, transport: http(gateway.url) });
      const hash = await wallet.sendTransaction({ to: user.address, value: 1n, chain: null });
      expect((await call(gateway.url, "eth_getTransactionReceipt", [hash])).result).to.equal(null);
      const pending = (await call(gateway.url, "temporal_getTransactionWaitTime", [hash])).result as { included: boolean; waitNs: string };
      expect(pending.included).to.equal(false);
      await control.mine(1);
      expect((await call(gateway.url, "eth_getTransactionReceipt", [hash])).result).to.not.equal(null);
      const included = (await call(gateway.url, "temporal_getTransactionWaitTime", [hash])).result as { included: boolean; waitNs: string };
      expect(included.included).to.equal(true);
      expect(BigInt(included.waitNs) >= BigInt(pending.waitNs)).to.equal(true);
      // Its wait ended when the receipt showed it: asked again later, the same.
      await sleep(50);
      expect((await call(gateway.url, "temporal_getTransactionWaitTime", [hash])).result).to.deep.equal(included);
    } finally {
      await stop(gateway);
    }
  });
});
