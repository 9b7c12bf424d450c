/**
 * The temporal gateway's /metrics (gateway/metrics.ts) in front of a real Hardhat node on loopback: requests by
 * transport, method family and outcome, batch sizes, the chain's answer times, open subscriptions and connections,
 * rate-limit refusals; and its WebSocket's Origin rule (rpcCorsAllowedOrigins, as the node's stream applies
 * corsAllowedOrigins): a browser page from an origin not on the list is refused with 403 before the upgrade.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { WebSocket } from "ws";
import { LONE_NODE_MESH } from "./fixtures";
import { methodFamily } from "../../gateway/metrics";
import { startTemporalGateway, type RunningGateway, type TemporalGatewayOptions } from "../../gateway/server";
import { startChainProcess, stopChainProcess, type ChainProcess } from "../../scripts/chainProcess";

const LIMITS = { maxBodyBytes: 65_536, maxBatchItems: 10, maxBatchMs: 10_000, maxResponseBytes: 65_536, requestsPerSecondPerClient: 0, maxConnections: 8 };

function startGateway(upstreamUrl: string, dataDir: string, overrides: Partial<TemporalGatewayOptions> = {}): Promise<RunningGateway> {
  return startTemporalGateway({
    host: "127.0.0.1",
    port: 0,
    upstreamUrl,
    dataDir,
    time: { consensusNowNs: () => BigInt(Date.now()) * 1_000_000n, meshState: () => LONE_NODE_MESH },
    limits: LIMITS,
    confirmations: 1,
    chainName: "local",
    legacyNumbers: false,
    pollIntervalMs: 100,
    logger: pino({ level: "silent" }),
    ...overrides,
  });
}

function post(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });
}

/** The value of one series of the exposition text (0 when absent), its labels in the order prom-client prints them. */
function sample(text: string, series: string): number {
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

async function scrape(gateway: RunningGateway): Promise<string> {
  const response = await fetch(`${gateway.url}/metrics`);
  expect(response.status).to.equal(200);
  expect(response.headers.get("content-type")).to.match(/^text\/plain/);
  return response.text();
}

function upgrade(url: string, headers: Record<string, string>): Promise<{ status: number; body: string } | WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url.replace(/^http/, "ws"), { headers });
    socket.once("open", () => resolve(socket));
    socket.once("unexpected-response", (_request, response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body }));
    });
    socket.once("error", reject);
  });
}

describe("gateway/metrics methodFamily", () => {
  it("is the method's namespace for the served ones, and 'other' for anything else (bounded label values)", () => {
    expect(["eth_call", "net_version", "web3_clientVersion", "chain_getFinalizedHead", "temporal_getLimits"].map(methodFamily)).to.deep.equal(["eth", "net", "web3", "chain", "temporal"]);
    for (const method of ["debug_traceTransaction", "other_x", "eth", "_eth_call", "", undefined, "x".repeat(10_000)]) expect(methodFamily(method), String(method).slice(0, 20)).to.equal("other");
  });
});

describe("temporal gateway /metrics and WebSocket Origin, in front of Hardhat", function () {
  this.timeout(120_000);
  let chain: ChainProcess;
  let dir: string;
  const gateways: RunningGateway[] = [];
  const sockets: WebSocket[] = [];

  before(async () => {
    chain = await startChainProcess(31337, "hardhat");
    dir = mkdtempSync(join(tmpdir(), "ats-gateway-metrics-"));
  });
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.terminate();
    for (const gateway of gateways.splice(0)) await gateway.close();
  });
  after(async () => {
    await stopChainProcess(chain);
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(name: string, overrides: Partial<TemporalGatewayOptions> = {}): Promise<RunningGateway> {
    const gateway = await startGateway(chain.rpcUrl, join(dir, name), overrides);
    gateways.push(gateway);
    return gateway;
  }

  it("counts requests by transport, family and outcome, batch sizes, the chain's answer times, subscriptions and connections", async () => {
    const gateway = await start("counts");
    const before = await scrape(gateway);
    expect(before).to.match(/^# TYPE ats_gateway_process_cpu_seconds_total counter$/m);
    await post(gateway.url, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] });
    await post(gateway.url, { jsonrpc: "2.0", id: 2, method: "nope_nothing", params: [] });
    await post(gateway.url, [
      { jsonrpc: "2.0", id: 3, method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", id: 4, method: "temporal_getLimits", params: [] },
      { jsonrpc: "2.0", id: 5 },
    ]);
    await post(gateway.url, "{not json");
    const socket = await upgrade(gateway.url, {});
    if (!(socket instanceof WebSocket)) throw new Error(`upgrade refused: ${socket.status}`);
    sockets.push(socket);
    const subscribed = new Promise((resolve) => socket.once("message", resolve));
    socket.send(JSON.stringify({ jsonrpc: "2.0", id: 6, method: "eth_subscribe", params: ["newHeads"] }));
    await subscribed;

    const text = await scrape(gateway);
    const requests = (transport: string, family: string, outcome: string) =>
      sample(text, `ats_gateway_requests_total{transport="${transport}",family="${family}",outcome="${outcome}"}`);
    expect(requests("http", "eth", "ok"), "eth_blockNumber, eth_chainId").to.equal(2);
    expect(requests("http", "temporal", "ok")).to.equal(1);
    expect(requests("http", "other", "error"), "an unknown method").to.equal(1);
    expect(requests("http", "other", "invalid"), "an item without a method, and a body that is not JSON").to.equal(2);
    expect(requests("ws", "eth", "ok"), "eth_subscribe").to.equal(1);
    expect(sample(text, "ats_gateway_batch_items_count"), "one batch").to.equal(1);
    expect(sample(text, "ats_gateway_batch_items_sum"), "of three items").to.equal(3);
    expect(sample(text, 'ats_gateway_batch_items_bucket{le="2"}')).to.equal(0);
    expect(sample(text, 'ats_gateway_batch_items_bucket{le="5"}')).to.equal(1);
    expect(sample(text, 'ats_gateway_upstream_duration_seconds_count{outcome="ok"}'), "the forwarded calls and the block follower's").to.be.at.least(2);
    expect(sample(text, 'ats_gateway_subscriptions{kind="newHeads"}')).to.equal(1);
    expect(sample(text, 'ats_gateway_subscriptions{kind="logs"}')).to.equal(0);
    expect(sample(text, "ats_gateway_websocket_connections")).to.equal(1);
    expect(sample(text, 'ats_gateway_rate_limited_total{transport="http"}')).to.equal(0);
    expect(text, "the label values are bounded: no client text").to.not.include("nope");
  });

  it("counts each refusal for the client's rate: an item answered -32005 and a request refused whole with 429", async () => {
    const gateway = await start("rate", { limits: { ...LIMITS, requestsPerSecondPerClient: 3 } });
    // The bucket holds 3 tokens: the batch takes them, its fourth and fifth items are refused (-32005).
    const batch = Array.from({ length: 5 }, (_, index) => ({ jsonrpc: "2.0", id: index, method: "eth_chainId", params: [] }));
    const answers = (await (await post(gateway.url, batch)).json()) as { error?: { code: number } }[];
    expect(answers.filter((answer) => answer.error?.code === -32005)).to.have.length(2);
    // Empty now: the next request is refused whole before its body is read (429).
    expect((await post(gateway.url, { jsonrpc: "2.0", id: 9, method: "eth_chainId", params: [] })).status).to.equal(429);
    await new Promise((resolve) => setTimeout(resolve, 400)); // a token for the scrape
    const text = await scrape(gateway);
    expect(sample(text, 'ats_gateway_rate_limited_total{transport="http"}')).to.equal(3);
    expect(sample(text, 'ats_gateway_requests_total{transport="http",family="eth",outcome="rate_limited"}')).to.equal(2);
  });

  it("serves /metrics without CORS headers, even to a listed origin (a page reads the JSON-RPC, never the metrics)", async () => {
    const gateway = await start("cors", { corsAllowedOrigins: ["https://explorer.example"] });
    const response = await fetch(`${gateway.url}/metrics`, { headers: { origin: "https://explorer.example" } });
    expect(response.status).to.equal(200);
    expect(response.headers.get("access-control-allow-origin")).to.equal(null);
    const rpc = await fetch(gateway.url, {
      method: "POST",
      headers: { "content-type": "application/json", origin: "https://explorer.example" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
    });
    expect(rpc.headers.get("access-control-allow-origin"), "while its JSON-RPC answers carry them").to.equal("https://explorer.example");
  });

  it("WebSocket: refuses a browser page whose Origin is not in rpcCorsAllowedOrigins (403 before the upgrade, naming the setting); admits a listed one and a client without Origin", async () => {
    const closed = await start("origin-default");
    const refused = await upgrade(closed.url, { origin: "https://evil.example" });
    expect(refused).to.not.be.instanceOf(WebSocket);
    const { status, body } = refused as { status: number; body: string };
    expect(status).to.equal(403);
    expect((JSON.parse(body) as { error: { data: string } }).error.data).to.equal(
      `Origin "https://evil.example" may not open a WebSocket: it is not in the gateway's rpcCorsAllowedOrigins`,
    );
    const plain = await upgrade(closed.url, {});
    expect(plain, "a client without Origin (not a browser)").to.be.instanceOf(WebSocket);
    sockets.push(plain as WebSocket);

    const listed = await start("origin-listed", { corsAllowedOrigins: ["https://explorer.example"] });
    const admitted = await upgrade(listed.url, { origin: "https://explorer.example" });
    expect(admitted).to.be.instanceOf(WebSocket);
    sockets.push(admitted as WebSocket);
    expect(await upgrade(listed.url, { origin: "https://other.example" })).to.deep.include({ status: 403 });
    // The Sec-WebSocket-Origin of protocol version 8 is read as Origin.
    expect(await upgrade(listed.url, { "sec-websocket-origin": "https://other.example" })).to.deep.include({ status: 403 });

    const any = await start("origin-any", { corsAllowedOrigins: ["*"] });
    const anyAdmitted = await upgrade(any.url, { origin: "https://anyone.example" });
    expect(anyAdmitted).to.be.instanceOf(WebSocket);
    sockets.push(anyAdmitted as WebSocket);
  });
});
