/**
 * client/temporal.ts (createTemporalClient) against a real gateway (gateway/) in front of a Hardhat node
 * process: lossless numbers (the legacy mode's integers above 2^53 included), hashes refused before sending,
 * retries with backoff, chain identity against the manifest, the degraded typed result, and the finality helper.
 */
import { expect } from "chai";
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createTemporalClient, parseLossless } from "../../client";
import type { MeshStateReport } from "../../wire/meshState";
import { startTemporalGateway, type RunningGateway } from "../../gateway/server";
import { ProtocolError, UnavailableError, ValidationError } from "../../protocol/errors";
import { freeTcpPort, startChainProcess, stopChainProcess, type ChainProcess } from "../../scripts/chainProcess";
import { HARDHAT_DEV_KEYS } from "../../scripts/network";

const NS = 1_000_000n;

describe("client/temporal: createTemporalClient against a gateway", function () {
  this.timeout(120_000);
  let chain: ChainProcess;
  let dir: string;
  let gateway: RunningGateway;
  let legacy: RunningGateway;
  let meshState: MeshStateReport;
  let genesis: Hex;

  function start(legacyNumbers: boolean, subdir: string): Promise<RunningGateway> {
    return startTemporalGateway({
      host: "127.0.0.1",
      port: 0,
      upstreamUrl: chain.rpcUrl,
      dataDir: join(dir, subdir),
      time: { consensusNowNs: () => BigInt(Date.now()) * NS, meshState: () => meshState },
      limits: { maxBodyBytes: 65_536, maxBatchItems: 10, maxBatchMs: 10_000, maxResponseBytes: 1_048_576, requestsPerSecondPerClient: 0, maxConnections: 64 },
      confirmations: 1,
      chainName: "local",
      legacyNumbers,
      pollIntervalMs: 100,
      logger: pino({ level: "silent" }),
    });
  }

  before(async () => {
    chain = await startChainProcess(31337);
    dir = mkdtempSync(join(tmpdir(), "ats-temporal-client-"));
    meshState = { convergenceState: "Converged", timeQuality: 9_000, peerCount: 3, members: 4, threshold: 3, consensusOffsetNs: "-1200", lastError: null, role: "primary", roundsSucceeded: 10, roundsFailed: {}, peers: [], tamperAlerts: [], contradictions: [], refused: { packets: {}, coSignRequests: 0, coSignRequestsByRule: {}, relayedProofs: {} } };
    gateway = await start(false, "a");
    legacy = await start(true, "b");
    const answer = await fetch(chain.rpcUrl, { method: "POST", body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: ["0x0", false] }) });
    genesis = ((await answer.json()) as { result: { hash: Hex } }).result.hash;
  });

  after(async () => {
    await gateway?.close();
    await legacy?.close();
    await stopChainProcess(chain);
    rmSync(dir, { recursive: true, force: true });
  });

  async function sendThrough(url: string): Promise<Hex> {
    const user = privateKeyToAccount(HARDHAT_DEV_KEYS.user);
    const client = createTemporalClient({ url });
    const nonce = Number(BigInt((await client.call("eth_getTransactionCount", [user.address, "pending"])) as string));
    const raw = await user.signTransaction({ type: "eip1559", chainId: 31337, nonce, to: user.address, value: 1n, gas: 21_000n, maxFeePerGas: 10_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n });
    return (await client.call("eth_sendRawTransaction", [raw])) as Hex;
  }

  it("parses integers beyond 2^53 as exact bigints, never floats", () => {
    const parsed = parseLossless('{"a":1795600000000000123,"b":42,"c":"1795600000000000123"}') as { a: bigint; b: number; c: string };
    expect(parsed.a).to.equal(1_795_600_000_000_000_123n);
    expect(parsed.b).to.equal(42);
    expect(parsed.c).to.equal("1795600000000000123");
  });

  it("reads the same nanoseconds from the string mode and the legacy (bare integer) mode", async () => {
    const hash = await sendThrough(gateway.url);
    await sendThrough(legacy.url);
    const client = createTemporalClient({ url: gateway.url });
    const legacyClient = createTemporalClient({ url: legacy.url });
    const stamped = await client.getTransactionTimestamp(hash);
    expect(typeof stamped).to.equal("bigint");
    let watermark: bigint | null = null;
    for (let i = 0; i < 100 && watermark === null; i++) {
      watermark = (await legacyClient.getWatermarkInfo()).watermarkNs;
      if (watermark === null) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(typeof watermark).to.equal("bigint");
    expect(watermark! > BigInt(Number.MAX_SAFE_INTEGER)).to.equal(true);
    const text = await (await fetch(legacy.url, { method: "POST", body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "temporal_getWatermarkInfo", params: [] }) })).text();
    expect(text).to.include(`"watermarkNs":${watermark!.toString()}`); // bare, exact
  });

  it("refuses a malformed hash before sending anything", async () => {
    const port = await freeTcpPort(); // nothing listens: a request would fail as Unavailable, not as Validation
    const client = createTemporalClient({ url: `http://127.0.0.1:${port}`, retries: 0 });
    for (const bad of [`0x${"ab".repeat(31)}`, `0x${"ab".repeat(33)}`, "0xzz", "deadbeef"]) {
      const error = await client.getTransactionTimestamp(bad as Hex).catch((e: unknown) => e);
      expect(error, bad).to.be.instanceOf(ValidationError);
    }
    expect(await client.getTransactionTimestamp(`0x${"ab".repeat(32)}`).catch((e: unknown) => e)).to.be.instanceOf(UnavailableError);
  });

  it("retries a failing endpoint with backoff, then answers; gives up with Unavailable after its retries", async () => {
    let requests = 0;
    const flaky: Server = createServer((request, response) => {
      requests += 1;
      if (requests <= 2) return void response.writeHead(503).end();
      let body = "";
      request.on("data", (chunk: Buffer) => (body += chunk.toString()));
      request.on("end", () => {
        const { id } = JSON.parse(body) as { id: number };
        response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, result: "0x7a69" }));
      });
    });
    await new Promise<void>((resolve) => flaky.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(flaky.address() as AddressInfo).port}`;
    try {
      const started = Date.now();
      expect(await createTemporalClient({ url, retries: 3 }).call("eth_chainId")).to.equal("0x7a69");
      expect(requests).to.equal(3);
      expect(Date.now() - started).to.be.at.least(300); // 100 ms, then 200 ms
      requests = 0;
      const error = await createTemporalClient({ url, retries: 1 }).call("eth_chainId").catch((e: unknown) => e);
      expect(error).to.be.instanceOf(UnavailableError);
      expect((error as Error).message).to.match(/HTTP 503 \(after 2 attempts\)/);
    } finally {
      await new Promise<void>((resolve) => flaky.close(() => resolve()));
    }
  });

  it("checks chain identity against the manifest before trusting the endpoint", async () => {
    const good = createTemporalClient({ url: gateway.url, expected: { chainId: 31337, genesisHash: genesis } });
    await good.verifyChainIdentity();
    const wrongId = createTemporalClient({ url: gateway.url, expected: { chainId: 1, genesisHash: genesis } });
    const idError = await wrongId.getConsensusTime().catch((e: unknown) => e);
    expect(idError).to.be.instanceOf(ProtocolError);
    expect((idError as Error).message).to.include("serves chain id 31337, the manifest says 1");
    const wrongGenesis = createTemporalClient({ url: gateway.url, expected: { chainId: 31337, genesisHash: `0x${"11".repeat(32)}` } });
    expect(((await wrongGenesis.call("eth_blockNumber").catch((e: unknown) => e)) as Error).message).to.include(`has genesis ${genesis}`);
  });

  it("answers a typed degraded result when the mesh is not Converged, has too few peers or too low a quality", async () => {
    const client = createTemporalClient({ url: gateway.url, minPeers: 3, minTimeQuality: 5_000 });
    const good = await client.getConsensusTime();
    expect(good.ok).to.equal(true);
    if (good.ok) {
      expect(typeof good.consensusTimeNs).to.equal("bigint");
      expect(good.consensusOffsetNs).to.equal(-1_200n);
    }
    meshState = { ...meshState, convergenceState: "Degraded" };
    expect(await client.getConsensusTime()).to.deep.include({ ok: false, degraded: "not-converged" });
    meshState = { ...meshState, convergenceState: "Converged", peerCount: 1 };
    expect(await client.getConsensusTime()).to.deep.include({ ok: false, degraded: "too-few-peers" });
    meshState = { ...meshState, peerCount: 3, timeQuality: 100 };
    expect(await client.getConsensusTime()).to.deep.include({ ok: false, degraded: "low-quality" });
    meshState = { ...meshState, timeQuality: 9_000 };
  });

  it("follows finalized blocks and correlates a transaction's timestamp by either hash", async () => {
    const client = createTemporalClient({ url: gateway.url });
    const hash = await sendThrough(gateway.url);
    const stamped = await client.getTransactionTimestamp(hash);
    const receipt = (await client.call("eth_getTransactionReceipt", [hash])) as { blockNumber: string };
    await client.call("eth_blockNumber"); // the chain mines the next block on the next transaction: send one
    await sendThrough(gateway.url);
    const controller = new AbortController();
    let found: bigint | undefined;
    const following = client.followFinalized(BigInt(receipt.blockNumber), (block) => {
      found ??= block.timestampOf(hash);
      if (found !== undefined) controller.abort();
    }, { signal: controller.signal, pollMs: 100 });
    const timeout = setTimeout(() => controller.abort(), 20_000);
    await following;
    clearTimeout(timeout);
    expect(found).to.equal(stamped);
  });
});
