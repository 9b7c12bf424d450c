/**
 * The temporal JSON-RPC gateway (gateway/) in front of a real chain process on loopback, once a Hardhat node and
 * once anvil (CHAIN_KINDS): the temporal methods, automatic timestamping (received and observed), restart
 * persistence, a reorg, every bad-input class, limits, legacy numbers, and a property: no answer (outside the legacy
 * mode) holds a JSON number above 2^53 − 1. On anvil also a real reorg (anvil_reorg) under a finalized-heads
 * subscription.
 */
import { expect } from "chai";
import fc from "fast-check";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isLosslessNumber, parse } from "lossless-json";
import pino from "pino";
import { WebSocket } from "ws";
import { createWalletClient, http, parseEther, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { runCli } from "../../node/cli";
import { startDevNode } from "../../node/devNode";
import { MANIFEST_VERSION } from "../../wire/manifest";
import { LONE_NODE_MESH } from "./fixtures";
import { METHODS } from "../../gateway/methods";
import { startTemporalGateway, type RunningGateway } from "../../gateway/server";
import { CHAIN_TRAITS, ChainControl } from "../../scripts/chainControl";
import { CHAIN_KINDS, startChainProcess, stopChainProcess, type ChainProcess } from "../../scripts/chainProcess";
import { HARDHAT_DEV_KEYS } from "../../scripts/network";

const LIMITS = { maxBodyBytes: 8_192, maxBatchItems: 5, maxBatchMs: 10_000, maxResponseBytes: 65_536, requestsPerSecondPerClient: 0, maxConnections: 64 };
const nowNs = () => BigInt(Date.now()) * 1_000_000n;

interface Answer {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

async function post(url: string, body: unknown): Promise<{ status: number; text: string; json: unknown }> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, text, json: text === "" ? null : JSON.parse(text) };
}

async function call(url: string, method: string, params: unknown[] = []): Promise<Answer> {
  return (await post(url, { jsonrpc: "2.0", id: 1, method, params })).json as Answer;
}

async function until<T>(read: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

for (const chainKind of CHAIN_KINDS) describe(`temporal JSON-RPC gateway (gateway/) in front of ${chainKind}`, function () {
  this.timeout(120_000);
  let chain: ChainProcess;
  let control: ChainControl;
  let dir: string;
  let gateway: RunningGateway;

  function start(overrides: { legacyNumbers?: boolean; limits?: Partial<typeof LIMITS>; dataDir?: string; confirmations?: number } = {}): Promise<RunningGateway> {
    return startTemporalGateway({
      host: "127.0.0.1",
      port: 0,
      upstreamUrl: chain.rpcUrl,
      dataDir: overrides.dataDir ?? dir,
      time: { consensusNowNs: nowNs, meshState: () => LONE_NODE_MESH },
      limits: { ...LIMITS, ...overrides.limits },
      confirmations: overrides.confirmations ?? 1,
      chainName: "local",
      legacyNumbers: overrides.legacyNumbers ?? false,
      pollIntervalMs: 100,
      logger: pino({ level: "silent" }),
    });
  }

  const user = privateKeyToAccount(HARDHAT_DEV_KEYS.user);

  async function signedTransfer(nonceOffset = 0): Promise<Hex> {
    const nonce = Number(BigInt(((await call(chain.rpcUrl, "eth_getTransactionCount", [user.address, "pending"])).result as string))) + nonceOffset;
    return user.signTransaction({ type: "eip1559", chainId: 31337, nonce, to: user.address, value: 1n, gas: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n });
  }

  before(async () => {
    chain = await startChainProcess(31337, chainKind);
    control = new ChainControl(chainKind, chain.rpcUrl);
    await control.setIntervalMining(500); // anvil: 1 s, its shortest
    dir = mkdtempSync(join(tmpdir(), "ats-gateway-"));
    gateway = await start();
  });

  after(async () => {
    // Each step guarded: a before() that failed half-way leaves the later ones unset.
    const started = { chain: chain as ChainProcess | undefined, dir: dir as string | undefined };
    await gateway?.close();
    if (started.chain !== undefined) await stopChainProcess(started.chain);
    if (started.dir !== undefined) rmSync(started.dir, { recursive: true, force: true });
  });

  it("temporal_getConsensusTime: consensus time as a decimal string, and the mesh's state (a lone node says Initializing, 0 peers)", async () => {
    const { result } = await call(gateway.url, "temporal_getConsensusTime");
    const time = result as { consensusTimeNs: string; timeQuality: number; convergenceState: string; peerCount: number; consensusOffsetNs: null };
    expect(time.consensusTimeNs).to.match(/^[1-9][0-9]{18}$/);
    expect(Math.abs(Number(BigInt(time.consensusTimeNs) / 1_000_000n) - Date.now())).to.be.below(5_000);
    expect(time).to.include({ convergenceState: "Initializing", peerCount: 0, timeQuality: 0, consensusOffsetNs: null });
    expect((await call(gateway.url, "temporal_getMeshState")).result).to.deep.equal(LONE_NODE_MESH);
    expect((await call(gateway.url, "system_health")).result).to.deep.equal({ peers: 0, isSyncing: false, shouldHavePeers: false });
    expect((await call(gateway.url, "system_chain")).result).to.equal("local");
    expect((await call(gateway.url, "eth_chainId")).result).to.equal("0x7a69");
    const genesis = (await call(gateway.url, "chain_getBlockHash", [0])).result as string;
    expect(genesis).to.match(/^0x[0-9a-f]{64}$/);
    expect(genesis).to.equal(((await call(chain.rpcUrl, "eth_getBlockByNumber", ["0x0", false])).result as { hash: string }).hash);
  });

  it("timestamps a transaction it forwards at arrival, keeps that time when the block includes it, and reports its wait", async () => {
    const before = nowNs();
    const { result: hash } = await call(gateway.url, "eth_sendRawTransaction", [await signedTransfer()]);
    const after = nowNs();
    const stamped = BigInt((await call(gateway.url, "temporal_getTransactionTimestamp", [hash])).result as string);
    expect(stamped >= before && stamped <= after).to.equal(true);
    const receipt = await until(async () => ((await call(chain.rpcUrl, "eth_getTransactionReceipt", [hash])).result as { blockNumber: string } | null) ?? undefined, "its receipt");
    const block = await until(async () => ((await call(gateway.url, "temporal_getBlockMetadata", [receipt.blockNumber])).result as { transactionCount: number; maxTimestampNs: string } | null) ?? undefined, "the block's metadata");
    expect(block.transactionCount).to.equal(1);
    expect(block.maxTimestampNs).to.equal(stamped.toString());
    expect(BigInt((await call(gateway.url, "temporal_getTransactionTimestamp", [hash])).result as string)).to.equal(stamped);
    const wait = (await call(gateway.url, "temporal_getTransactionWaitTime", [hash])).result as { included: boolean; waitNs: string };
    expect(wait.included).to.equal(true);
    expect(BigInt(wait.waitNs) >= 0n).to.equal(true);
    const watermark = (await call(gateway.url, "temporal_getWatermarkInfo")).result as { watermarkNs: string };
    expect(BigInt(watermark.watermarkNs) >= stamped).to.equal(true);
    // Final once a block is on top: its transactions, by either hash.
    await until(async () => {
      const answer = await call(gateway.url, "temporal_getBlockTransactionTimestamps", [receipt.blockNumber]);
      return answer.result === undefined ? undefined : answer.result;
    }, "finality", 10_000).then((rows) => {
      expect(rows).to.deep.equal([{ nativeHash: hash, ethHash: hash, extrinsicIndex: 0, timestampNs: stamped.toString() }]);
    });
  });

  it("timestamps a transaction first seen in a block when it observes the block; a reorg drops that timestamp and the orphaned block", async () => {
    const snapshot = await control.snapshot();
    const direct = (await call(chain.rpcUrl, "eth_sendRawTransaction", [await signedTransfer()])).result as Hex;
    const observed = await until(async () => ((await call(gateway.url, "temporal_getTransactionTimestamp", [direct])).result as string | null) ?? undefined, "the observation");
    expect(observed).to.match(/^[1-9][0-9]{18}$/);
    const receipt = (await call(chain.rpcUrl, "eth_getTransactionReceipt", [direct])).result as { blockNumber: string; blockHash: string };
    expect(await control.revert(snapshot)).to.equal(true);
    await control.mine(3);
    await until(async () => ((await call(gateway.url, "temporal_getTransactionTimestamp", [direct])).result === null ? true : undefined), "the orphaned timestamp's removal");
    const block = (await call(gateway.url, "temporal_getBlockMetadata", [receipt.blockNumber])).result as { hash: string } | null;
    expect(block?.hash).to.not.equal(receipt.blockHash);
    expect(gateway.observer.reorgsTotal).to.be.greaterThan(0);
  });

  it("answers the queue, wait-time, validator-quality and finalized-head methods with their documented shapes", async () => {
    const queue = (await call(gateway.url, "temporal_getQueueStats")).result as { scope: string; pending: number; oldestPendingAgeNs: string | null };
    expect(queue.scope).to.match(/^node-local/);
    expect(queue.pending).to.be.a("number");
    const waits = (await call(gateway.url, "temporal_getRecentWaitTimes", [5])).result as { hash: string; waitNs: string }[];
    expect(waits.length).to.be.at.least(1); // the transaction of the test above
    for (const wait of waits) expect(wait.waitNs).to.match(/^(0|[1-9][0-9]*)$/);
    expect((await call(gateway.url, "temporal_getRecentWaitTimes", [101])).error).to.include({ code: -32602 });
    const quality = (await call(gateway.url, "temporal_getValidatorTimeQuality")).result as { scope: string; timeQuality: number; peers: unknown[] };
    expect(quality).to.deep.include({ timeQuality: 0, peers: [] });
    expect(quality.scope).to.match(/^node-local/);
    const head = BigInt((await call(chain.rpcUrl, "eth_blockNumber")).result as string);
    const finalized = (await call(gateway.url, "chain_getFinalizedHead")).result as string;
    const block = (await call(chain.rpcUrl, "eth_getBlockByHash", [finalized, false])).result as { number: string };
    expect(head - BigInt(block.number) >= 1n).to.equal(true); // one confirmation
    expect((await call(gateway.url, "temporal_getTransactionWaitTime", [`0x${"00".repeat(32)}`])).result).to.equal(null);
    const notFinal = await call(gateway.url, "temporal_getBlockTransactionTimestamps", [`0x${(head + 5n).toString(16)}`]);
    expect(notFinal.error).to.include({ code: -32602 });
    expect(String(notFinal.error!.data)).to.match(/is not final yet/);
  });

  it("keeps its timestamps across a restart", async () => {
    const { result: hash } = await call(gateway.url, "eth_sendRawTransaction", [await signedTransfer()]);
    const stamped = (await call(gateway.url, "temporal_getTransactionTimestamp", [hash])).result;
    await gateway.close();
    gateway = await start();
    expect((await call(gateway.url, "temporal_getTransactionTimestamp", [hash])).result).to.equal(stamped);
  });

  describe("bad input: a clear error per item, never a crash", () => {
    it("parse error, invalid requests, wrong arity and types, unknown and unsafe methods", async () => {
      expect(((await post(gateway.url, "{ not json")).json as Answer).error).to.include({ code: -32700 });
      expect((await call(gateway.url, "temporal_getTransactionTimestamp", [])).error).to.include({ code: -32602 });
      expect(((await post(gateway.url, { jsonrpc: "1.0", id: 1, method: "eth_chainId" })).json as Answer).error).to.include({ code: -32600 });
      expect(((await post(gateway.url, { jsonrpc: "2.0", id: 1 })).json as Answer).error).to.include({ code: -32600 });
      expect(((await post(gateway.url, { jsonrpc: "2.0", id: { a: 1 }, method: "eth_chainId" })).json as Answer).error).to.include({ code: -32600 });
      expect(((await post(gateway.url, { jsonrpc: "2.0", id: 1, method: "eth_chainId", extra: true })).json as Answer).error).to.include({ code: -32600 });
      expect(((await post(gateway.url, { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: 7 })).json as Answer).error).to.include({ code: -32600 });
      const short = await call(gateway.url, "temporal_getTransactionTimestamp", [`0x${"ab".repeat(31)}`]);
      expect(short.error).to.deep.include({ code: -32602, data: "hash must be 32 bytes, got 31" });
      const long = await call(gateway.url, "temporal_getTransactionTimestamp", [`0x${"ab".repeat(33)}`]);
      expect(long.error).to.deep.include({ code: -32602, data: "hash must be 32 bytes, got 33" });
      expect((await call(gateway.url, "temporal_getTransactionTimestamp", [`0x${"zz".repeat(32)}`])).error).to.deep.include({ code: -32602, data: "hash must be 0x-prefixed hex" });
      expect((await call(gateway.url, "temporal_getTransactionTimestamp", [123])).error).to.include({ code: -32602 });
      expect((await call(gateway.url, "temporal_getBlockMetadata", [-1])).error).to.include({ code: -32602 });
      expect((await call(gateway.url, "temporal_nope")).error).to.include({ code: -32601, message: "Method not found" });
      for (const unsafe of ["eth_sendTransaction", "eth_sign", "personal_sign", "evm_mine", "hardhat_setBalance", "anvil_reorg", "anvil_rollback", "debug_traceTransaction", "admin_peers"]) {
        expect((await call(gateway.url, unsafe)).error, unsafe).to.include({ code: -32601, message: "Method not allowed" });
      }
      expect((await call(gateway.url, "temporal_getTransactionTimestamp", [`0x${"00".repeat(32)}`])).result).to.equal(null);
    });

    it("a batch answers each item on its own: invalid ones, an unknown method, and notifications (no answer)", async () => {
      const items = [
        { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
        { jsonrpc: "2.0", id: 2, method: "temporal_nope" },
        "not an object",
        { jsonrpc: "2.0", method: "eth_chainId" }, // a notification
        { jsonrpc: "2.0", id: 5, method: "system_chain" },
      ];
      const { status, json } = await post(gateway.url, items);
      expect(status).to.equal(200);
      const answers = json as Answer[];
      expect(answers.map((a) => a.id)).to.deep.equal([1, 2, null, 5]);
      expect(answers[0]!.result).to.equal("0x7a69");
      expect(answers[1]!.error!.code).to.equal(-32601);
      expect(answers[2]!.error!.code).to.equal(-32600);
      expect(answers[3]!.result).to.equal("local");
      expect(((await post(gateway.url, [])).json as Answer).error!.code).to.equal(-32600);
      expect((await post(gateway.url, { jsonrpc: "2.0", method: "eth_chainId" })).status).to.equal(204);
    });

    it("refuses a batch over the item limit as a whole with one short error, however many items it holds (no amplification)", async () => {
      const six = await post(gateway.url, [1, 2, 3, 4, 5, 6].map((id) => ({ jsonrpc: "2.0", id, method: "eth_chainId" })));
      expect(six.status).to.equal(200);
      expect(six.json).to.deep.equal({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request", data: "a batch of more than 5 items" } });
      // The attack: thousands of `1`s in a body within the size limit once earned an error object each.
      const ones = `[${Array.from({ length: 4_000 }, () => "1").join(",")}]`;
      expect(Buffer.byteLength(ones)).to.be.below(LIMITS.maxBodyBytes);
      const flood = await post(gateway.url, ones);
      expect(flood.json).to.deep.equal({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request", data: "a batch of more than 5 items" } });
      expect(flood.text.length).to.be.below(200);
    });

    it("keeps a batch's whole answer within maxResponseBytes: items past it get -32006 with their ids", async () => {
      const small = await start({ limits: { maxResponseBytes: 2_048 } });
      try {
        const batch = [1, 2, 3, 4, 5].map((id) => ({ jsonrpc: "2.0", id, method: "eth_getBlockByNumber", params: ["0x0", false] }));
        const { text, json } = await post(small.url, batch);
        const answers = json as Answer[];
        expect(answers.map((a) => a.id)).to.deep.equal([1, 2, 3, 4, 5]);
        expect(answers[0]!.result).to.be.an("object");
        const refused = answers.filter((a) => a.error?.code === -32006);
        expect(refused.length).to.be.greaterThan(0);
        for (const answer of refused) expect(answer.error!.data).to.equal("the batch's answer would exceed 2048 bytes; split the batch");
        expect(Buffer.byteLength(text)).to.be.below(2_048 + refused.length * 160);
      } finally {
        await small.close();
      }
    });

    it("refuses invalid UTF-8 (-32700) and params nested 10,000 deep (-32600, not an upstream error), over HTTP and WebSocket", async () => {
      const wide = await start({ limits: { maxBodyBytes: 65_536 } });
      try {
        const invalid = Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"system_chain","params":["'), Buffer.from([0xc3, 0x28]), Buffer.from('"]}')]);
        const response = await fetch(wide.url, { method: "POST", headers: { "content-type": "application/json" }, body: invalid });
        expect(await response.json()).to.deep.equal({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error", data: "the body is not valid UTF-8" } });
        const deep = `{"jsonrpc":"2.0","id":1,"method":"eth_call","params":${"[".repeat(10_000)}${"]".repeat(10_000)}}`;
        expect((await post(wide.url, deep)).json).to.deep.equal({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request", data: "arrays and objects nested deeper than 32 levels" } });
        const socket = new WebSocket(wide.url.replace(/^http/, "ws"));
        try {
          await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
          const answers: unknown[] = [];
          const received = new Promise<void>((resolve) => socket.on("message", (data: Buffer) => answers.push(JSON.parse(data.toString())) === 2 && resolve()));
          socket.send(invalid, { binary: true });
          socket.send(deep);
          await received;
          expect(answers.map((a) => (a as Answer).error!.code)).to.deep.equal([-32700, -32600]);
        } finally {
          socket.close();
        }
      } finally {
        await wide.close();
      }
    });

    it("a body over the limit is HTTP 413 with a JSON-RPC error; GET is 405", async () => {
      const big = await post(gateway.url, { jsonrpc: "2.0", id: 1, method: "eth_call", params: [{ data: `0x${"00".repeat(8_192)}` }] });
      expect(big.status).to.equal(413);
      expect((big.json as Answer).error!.code).to.equal(-32600);
      expect((await fetch(gateway.url)).status).to.equal(405);
      // Still serving.
      expect((await call(gateway.url, "eth_chainId")).result).to.equal("0x7a69");
    });

    it("publishes its limits, and beyond the per-client rate each item gets -32005 while the others are answered", async () => {
      const limited = await start({ limits: { requestsPerSecondPerClient: 3 } });
      try {
        const limits = (await call(limited.url, "temporal_getLimits")).result as Record<string, number>;
        expect(limits).to.include({ maxBatchItems: 5, requestsPerSecondPerClient: 3, rateLimitErrorCode: -32005, responseTooLargeErrorCode: -32006 });
        const batch = [1, 2, 3, 4, 5].map((id) => ({ jsonrpc: "2.0", id, method: "system_chain" }));
        const answers = (await post(limited.url, batch)).json as Answer[];
        expect(answers.filter((a) => a.error?.code === -32005).length).to.be.greaterThan(0);
        expect(answers.filter((a) => a.error?.code === -32005).every((a) => a.error!.message === "Rate limit exceeded")).to.equal(true);
      } finally {
        await limited.close();
      }
    });

    it("refuses a client over its rate with HTTP 429 before parsing its body, and a body refused whole takes a token", async () => {
      const limited = await start({ limits: { requestsPerSecondPerClient: 1 } });
      try {
        // The one token (burst 1) goes to a body refused whole: a parse error.
        expect(((await post(limited.url, "[")).json as Answer).error!.code).to.equal(-32700);
        // Within the next second the bucket is empty: the next body, however malformed, is not even parsed.
        const refused = await fetch(limited.url, { method: "POST", headers: { "content-type": "application/json" }, body: "[" });
        expect(refused.status).to.equal(429);
        expect(refused.headers.get("retry-after")).to.equal("1");
        expect(await refused.json()).to.deep.equal({ jsonrpc: "2.0", id: null, error: { code: -32005, message: "Rate limit exceeded", data: "at most 1 requests per second per client" } });
      } finally {
        await limited.close();
      }
    });

    it("counts every batch item against the rate limit, invalid ones too", async () => {
      const limited = await start({ limits: { requestsPerSecondPerClient: 3 } });
      try {
        // One turn takes every item's token: three invalid items empty the bucket (burst 3), so the valid call after
        // them, and the invalid one after it, are over the rate.
        const mixed = await post(limited.url, [1, 2, 3, { jsonrpc: "2.0", id: 4, method: "system_chain" }, 5]);
        const answers = mixed.json as Answer[];
        expect(answers.map((a) => a.error!.code)).to.deep.equal([-32600, -32600, -32600, -32005, -32005]);
        expect(answers[3]!.id).to.equal(4);
      } finally {
        await limited.close();
      }
    });
  });

  it("no answer holds a JSON number above 2^53 − 1 (property over methods and params); the legacy mode does, losslessly", async () => {
    // Every method the gateway answers itself, and forwarded ones.
    const methods = [...Object.keys(METHODS).filter((name) => name !== "eth_sendRawTransaction"), "eth_blockNumber", "eth_chainId", "eth_getBlockByNumber", "eth_gasPrice"];
    const numbersIn = (value: unknown, found: unknown[] = []): unknown[] => {
      if (isLosslessNumber(value)) found.push(value);
      else if (Array.isArray(value)) value.forEach((item) => numbersIn(item, found));
      else if (typeof value === "object" && value !== null) Object.values(value).forEach((item) => numbersIn(item, found));
      return found;
    };
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...methods), fc.array(fc.oneof(fc.integer({ min: 0, max: 50 }), fc.constant(`0x${"11".repeat(32)}`), fc.constant("latest"), fc.constant("0x1"), fc.boolean()), { maxLength: 2 }), async (method, params) => {
        const { text } = await post(gateway.url, { jsonrpc: "2.0", id: 1, method, params });
        for (const number of numbersIn(parse(text))) expect(Number.isSafeInteger(Number(String(number))), `${method}: ${String(number)}`).to.equal(true);
      }),
      { numRuns: 120 },
    );
    const legacy = await start({ legacyNumbers: true });
    try {
      const { text } = await post(legacy.url, { jsonrpc: "2.0", id: 1, method: "temporal_getWatermarkInfo", params: [] });
      const watermark = (parse(text) as { result: { watermarkNs: unknown } }).result.watermarkNs;
      expect(isLosslessNumber(watermark), text).to.equal(true);
      expect(BigInt(String(watermark)) > BigInt(Number.MAX_SAFE_INTEGER)).to.equal(true);
    } finally {
      await legacy.close();
    }
  });

  describe("WebSocket: the same methods, and finalized heads in order, resumable from a cursor", () => {
    function open(url: string): Promise<{ socket: WebSocket; messages: unknown[]; next: (predicate: (m: Record<string, unknown>) => boolean) => Promise<Record<string, unknown>> }> {
      const socket = new WebSocket(url.replace(/^http/, "ws"));
      const messages: unknown[] = [];
      const waiters: { predicate: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] = [];
      socket.on("message", (data: Buffer) => {
        const message = JSON.parse(data.toString()) as Record<string, unknown>;
        const waiter = waiters.find((w) => w.predicate(message));
        if (waiter !== undefined) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(message);
        } else messages.push(message);
      });
      const next = (predicate: (m: Record<string, unknown>) => boolean) =>
        new Promise<Record<string, unknown>>((resolve, reject) => {
          const index = messages.findIndex((m) => predicate(m as Record<string, unknown>));
          if (index >= 0) return resolve(messages.splice(index, 1)[0] as Record<string, unknown>);
          const timer = setTimeout(() => reject(new Error("no such message within 15 s")), 15_000);
          waiters.push({ predicate, resolve: (m) => (clearTimeout(timer), resolve(m)) });
        });
      return new Promise((resolve, reject) => {
        socket.once("open", () => resolve({ socket, messages, next }));
        socket.once("error", reject);
      });
    }
    const heads = (m: Record<string, unknown>) => m.method === "chain_finalizedHead";
    const numberOf = (m: Record<string, unknown>) => BigInt((m.params as { result: { number: string } }).result.number);

    it("answers a call, streams every final block once and in order, and a reconnect with a cursor resumes without a gap", async () => {
      const first = await open(gateway.url);
      first.socket.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }));
      expect((await first.next((m) => m.id === 1)).result).to.equal("0x7a69");
      first.socket.send(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "chain_subscribeFinalizedHeads", params: [] }));
      const subscription = (await first.next((m) => m.id === 2)).result;
      expect(subscription).to.match(/^0x[0-9a-f]+$/);
      const received = [await first.next(heads), await first.next(heads), await first.next(heads)];
      const numbers = received.map(numberOf);
      expect(numbers[1]! - numbers[0]!).to.equal(1n);
      expect(numbers[2]! - numbers[1]!).to.equal(1n);
      const results = received.map((m) => (m.params as { result: { hash: string; parentHash: string } }).result);
      expect(results[1]!.parentHash).to.equal(results[0]!.hash);
      first.socket.close();
      await new Promise((resolve) => setTimeout(resolve, 1_200)); // blocks keep coming while away
      const second = await open(gateway.url);
      second.socket.send(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "chain_subscribeFinalizedHeads", params: [numbers[2]!.toString()] }));
      await second.next((m) => m.id === 3);
      expect(numberOf(await second.next(heads))).to.equal(numbers[2]! + 1n);
      second.socket.close();
    });

    it("refuses a cursor before its history, a batch in one message and a seventeenth subscription, each with a clear error", async () => {
      // A gateway started now: its history begins at the current head, long after block 0.
      const late = await start({ dataDir: join(dir, "late") });
      try {
        await until(async () => late.store.firstBlock(), "its first block");
        const lateClient = await open(late.url);
        lateClient.socket.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "chain_subscribeFinalizedHeads", params: [0] }));
        const refused = (await lateClient.next((m) => m.id === 1)).error as { code: number; data: string };
        expect(refused.code).to.equal(-32602);
        expect(refused.data).to.match(/^cursor 0 is before this gateway's history \(it starts at block \d+\)$/);
        lateClient.socket.close();
      } finally {
        await late.close();
      }
      const client = await open(gateway.url);
      client.socket.send(JSON.stringify([{ jsonrpc: "2.0", id: 2, method: "eth_chainId" }]));
      expect(((await client.next((m) => (m.error as { data?: string } | undefined)?.data === "one call per WebSocket message")).error as { code: number }).code).to.equal(-32600);
      for (let id = 10; id < 26; id++) client.socket.send(JSON.stringify({ jsonrpc: "2.0", id, method: "chain_subscribeFinalizedHeads", params: [] }));
      for (let id = 10; id < 26; id++) expect((await client.next((m) => m.id === id)).result).to.match(/^0x/);
      client.socket.send(JSON.stringify({ jsonrpc: "2.0", id: 26, method: "chain_subscribeFinalizedHeads", params: [] }));
      expect((await client.next((m) => m.id === 26)).error).to.deep.equal({ code: -32600, message: "Invalid Request", data: "at most 16 subscriptions per connection" });
      client.socket.close();
    });

    // Hardhat has no competing history (evm_revert only shortens the chain): the reorg case runs where one exists.
    if (CHAIN_TRAITS[chainKind].realReorgs) {
      it("across a real reorg shallower than its confirmations (anvil_reorg): the finalized heads never go back, and the unfinalized view reports the new branch", async () => {
        const confirmations = 3;
        const gatewayOf3 = await start({ dataDir: join(dir, "reorg"), confirmations });
        const client = await open(gatewayOf3.url);
        await control.setIntervalMining(0);
        await control.setAutomine(false); // blocks only from mine and reorg: every depth is this test's
        try {
          const chainHash = async (number: bigint) => ((await call(chain.rpcUrl, "eth_getBlockByNumber", [`0x${number.toString(16)}`, false])).result as { hash: string }).hash;
          const observed = (number: bigint) =>
            until(async () => {
              const recorded = gatewayOf3.store.block(number);
              return recorded !== undefined && gatewayOf3.store.latestBlock()?.number === number && recorded.hash === (await chainHash(number)) ? recorded : undefined;
            }, `the gateway at block ${number}`);
          await control.mine(confirmations + 2);
          const startHead = BigInt((await call(chain.rpcUrl, "eth_blockNumber")).result as string);
          await observed(startHead);
          client.socket.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "chain_subscribeFinalizedHeads", params: [] }));
          await client.next((m) => m.id === 1);
          // A transfer in the next block, seen by the gateway there.
          const direct = (await call(chain.rpcUrl, "eth_sendRawTransaction", [await signedTransfer()])).result as Hex;
          await control.mine(1);
          const head = startHead + 1n;
          const before = await observed(head);
          expect((await call(gatewayOf3.url, "temporal_getTransactionTimestamp", [direct])).result).to.match(/^[1-9][0-9]{18}$/);
          const reorgsBefore = gatewayOf3.observer.reorgsTotal;

          // The last 2 blocks replaced by empty ones: shallower than the 3 confirmations, so nothing final changes.
          await control.reorg(2);
          const after = await observed(head);
          expect(after.hash, "the unfinalized head is the new branch's").to.not.equal(before.hash);
          const metadata = (await call(gatewayOf3.url, "temporal_getBlockMetadata", [head.toString()])).result as { hash: string; transactionCount: number };
          expect(metadata).to.include({ hash: after.hash, transactionCount: 0 });
          expect((await call(gatewayOf3.url, "temporal_getTransactionTimestamp", [direct])).result, "the orphaned transaction's timestamp").to.equal(null);
          expect(gatewayOf3.observer.reorgsTotal).to.be.greaterThan(reorgsBefore);

          // Blocks on top until the replaced ones are final: the stream goes on from where it was, on the new branch.
          await control.mine(confirmations + 1);
          const lastFinal = head + 1n;
          const finals: { number: bigint; hash: string; parentHash: string }[] = [];
          while (finals.length === 0 || finals.at(-1)!.number < lastFinal) {
            const message = await client.next(heads);
            const result = (message.params as { result: { number: string; hash: string; parentHash: string } }).result;
            finals.push({ number: BigInt(result.number), hash: result.hash, parentHash: result.parentHash });
          }
          expect(finals[0]!.number).to.equal(startHead - BigInt(confirmations) + 1n);
          for (const [index, final] of finals.entries()) {
            if (index > 0) {
              expect(final.number, "in order, none twice").to.equal(finals[index - 1]!.number + 1n);
              expect(final.parentHash, "each the child of the one before").to.equal(finals[index - 1]!.hash);
            }
            expect(final.hash, `final block ${final.number} is on the chain`).to.equal(await chainHash(final.number));
          }
          expect(finals.map((final) => final.hash)).to.not.include(before.hash);
        } finally {
          client.socket.close();
          await gatewayOf3.close();
          await control.setAutomine(true);
          await control.setIntervalMining(500);
        }
      });
    }
  });

  it("ats-node manifest verify: a manifest whose chain the endpoint serves passes; another chain id or genesis fails, naming both", async () => {
    const genesis = ((await call(chain.rpcUrl, "eth_getBlockByNumber", ["0x0", false])).result as { hash: string }).hash;
    const manifest = (chainId: number, genesisHash: string) => ({
      version: MANIFEST_VERSION,
      name: "local",
      chain: { evmChainId: chainId, genesisHash, ntsVerified: false },
      services: { rpc: chain.rpcUrl, time: gateway.url },
      bootnodes: [],
      meshPeers: [],
      contracts: {},
      trustedCardRootsPem: [],
    });
    const run = async (json: unknown) => {
      const file = join(dir, `manifest-${Math.random()}.json`);
      writeFileSync(file, JSON.stringify(json));
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli(["manifest", "verify", file], { stdout: (line) => out.push(line), stderr: (line) => err.push(line), env: {}, cwd: dir });
      return { code, out: out.join("\n"), err: err.join("\n") };
    };
    const good = await run(manifest(31337, genesis));
    expect(good.code, good.err).to.equal(0);
    expect(JSON.parse(good.out)).to.include({ ok: true, evmChainId: 31337, genesisHash: genesis });
    const wrongId = await run(manifest(1, genesis));
    expect(wrongId.code).to.equal(1);
    expect(wrongId.err).to.include("serves chain id 31337, the manifest says 1");
    const wrongGenesis = await run(manifest(31337, `0x${"11".repeat(32)}`));
    expect(wrongGenesis.code).to.equal(1);
    expect(wrongGenesis.err).to.include(`has genesis ${genesis}`);
    const secret = await run({ ...manifest(31337, genesis), signerPrivateKey: "x" });
    expect(secret.code).to.equal(1);
    expect(secret.err).to.include("manifest/signerPrivateKey: looks like a secret");
  });

  it("a node serves it on rpcPort when rpcUpstreamUrl is set, and reports it in its endpoints", async () => {
    const dev = await startDevNode({ env: {}, cwd: process.cwd(), logger: () => pino({ level: "silent" }), overrides: { rpcUpstreamUrl: chain.rpcUrl, rpcPort: 0, grpcEnabled: false } });
    try {
      expect(dev.node.endpoints.rpc ?? "").to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
      const time = (await call(dev.node.endpoints.rpc!, "temporal_getConsensusTime")).result as { consensusTimeNs: string; convergenceState: string };
      expect(time.convergenceState).to.equal("Initializing");
      expect(Math.abs(Number(BigInt(time.consensusTimeNs) / 1_000_000n) - Date.now())).to.be.below(5_000);
      const wallet = createWalletClient({ account: user, transport: http(dev.node.endpoints.rpc!) });
      const hash = await wallet.sendTransaction({ to: user.address, value: parseEther("0.0001"), chain: null });
      expect((await call(dev.node.endpoints.rpc!, "temporal_getTransactionTimestamp", [hash])).result).to.match(/^[1-9][0-9]{18}$/);
    } finally {
      await dev.close();
    }
  });
});
