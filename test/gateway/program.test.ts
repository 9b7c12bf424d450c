/**
 * `ats-gateway`, the gateway as a program of its own: its settings (each error names the setting and its
 * variable), and consensus time read from attesting nodes over REST (gateway/nodeTime.ts): the offset applied to
 * this host's clock, the next node taken when one stops answering, and "unknown" (-32003) rather than a stale
 * offset when none answers. The nodes are small HTTP servers serving GET /mesh/state, so each case is exact.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { runGatewayCli, type GatewayCliIo } from "../../gateway/cli";
import { followNodeTime } from "../../gateway/nodeTime";
import type { MeshStateReport } from "../../wire/meshState";

const STATE: MeshStateReport = {
  convergenceState: "Converged",
  timeQuality: 9_000,
  peerCount: 3,
  members: 4,
  threshold: 3,
  consensusOffsetNs: "-1500",
  lastError: null,
  role: "primary",
  roundsSucceeded: 12,
  roundsFailed: {},
  peers: [],
  tamperAlerts: [],
  contradictions: [],
  refused: { packets: {}, coSignRequests: 0, coSignRequestsByRule: {}, relayedProofs: {} },
};

interface FakeNode {
  url: string;
  body: unknown;
  close(): Promise<void>;
}

async function fakeNode(body: unknown = STATE): Promise<FakeNode> {
  const node = { url: "", body, close: () => Promise.resolve() };
  const server: Server = createServer((request, response) => {
    if (request.url !== "/mesh/state") return void response.writeHead(404).end();
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(node.body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  node.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  node.close = () => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  return node;
}

/** A URL nothing listens on: a port taken and released. */
async function deadUrl(): Promise<string> {
  const node = await fakeNode();
  await node.close();
  return node.url;
}

const silent = pino({ level: "silent" });

describe("ats-gateway: the gateway as a program of its own", function () {
  this.timeout(30_000);
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  describe("consensus time from the nodes (gateway/nodeTime.ts)", () => {
    it("applies the node's consensus offset to this host's clock and passes its mesh state on", async () => {
      const node = await fakeNode();
      cleanups.push(() => node.close());
      const time = await followNodeTime({ nodeUrls: [node.url], apiKey: "", pollIntervalMs: 50, staleAfterMs: 1_000, logger: silent, hostNowNs: () => 1_000_000n });
      cleanups.push(() => time.close());
      expect(time.consensusNowNs()).to.equal(1_000_000n - 1_500n);
      expect(time.meshState()).to.deep.equal(STATE);
      expect(time.currentNodeUrl()).to.equal(node.url);
    });

    it("reads the next node when the first does not answer, and keeps it", async () => {
      const node = await fakeNode();
      cleanups.push(() => node.close());
      const dead = await deadUrl();
      const time = await followNodeTime({ nodeUrls: [dead, node.url], apiKey: "", pollIntervalMs: 50, staleAfterMs: 1_000, logger: silent, hostNowNs: () => 0n });
      cleanups.push(() => time.close());
      expect(time.currentNodeUrl()).to.equal(node.url);
      expect(time.meshState().members).to.equal(4);
    });

    it("says consensus time is unknown (UnavailableError) once no node has answered for staleAfterMs, and when an answer is not a mesh state", async () => {
      const node = await fakeNode();
      cleanups.push(() => node.close());
      const time = await followNodeTime({ nodeUrls: [node.url], apiKey: "", pollIntervalMs: 50, staleAfterMs: 300, logger: silent, hostNowNs: () => 0n });
      cleanups.push(() => time.close());
      expect(time.consensusNowNs()).to.equal(-1_500n);
      node.body = { ...STATE, consensusOffsetNs: 12 }; // a number, not a decimal string: refused by the schema
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(() => time.consensusNowNs()).to.throw("Consensus time unknown: no attesting node answered");
      expect(() => time.meshState()).to.throw("Consensus time unknown");
    });
  });

  describe("the command line (gateway/cli.ts)", () => {
    function io(env: NodeJS.ProcessEnv, untilStopped?: () => Promise<unknown>): GatewayCliIo & { out: string[]; err: string[] } {
      const out: string[] = [];
      const err: string[] = [];
      return { out, err, stdout: (line) => out.push(line), stderr: (line) => err.push(line), env, cwd: process.cwd(), ...(untilStopped === undefined ? {} : { untilStopped }) };
    }

    it("refuses to start without a chain or a node, or with a bad URL, naming the setting and its variable", async () => {
      const noChain = io({});
      expect(await runGatewayCli(["start"], noChain)).to.equal(1);
      expect(noChain.err.join("\n")).to.contain("rpcUpstreamUrl").and.contain("is required");
      const noNode = io({ ATS_RPC_UPSTREAM_URL: "http://127.0.0.1:8545" });
      expect(await runGatewayCli(["start"], noNode)).to.equal(1);
      expect(noNode.err.join("\n")).to.contain("nodeUrls").and.contain("is required");
      const badUrl = io({ ATS_RPC_UPSTREAM_URL: "http://127.0.0.1:8545", ATS_GATEWAY_NODE_URLS: "ftp://node" });
      expect(await runGatewayCli(["start"], badUrl)).to.equal(1);
      expect(badUrl.err.join("\n")).to.contain("ATS_GATEWAY_NODE_URLS").and.contain("an http(s) URL");
      const usage = io({});
      expect(await runGatewayCli(["serve"], usage)).to.equal(2);
      expect(usage.err.join("\n")).to.contain("unknown command: serve");
    });

    it("starts, prints its endpoints, serves the node's consensus time over JSON-RPC, and stops on its signal", async () => {
      const node = await fakeNode();
      cleanups.push(() => node.close());
      const dir = mkdtempSync(join(tmpdir(), "ats-gateway-program-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      let stop!: () => void;
      const stopped = new Promise<void>((resolve) => (stop = resolve));
      const cli = io(
        {
          // The chain is not needed for temporal_getConsensusTime: its follower retries quietly.
          ATS_RPC_UPSTREAM_URL: await deadUrl(),
          ATS_RPC_PORT: "0",
          ATS_GATEWAY_NODE_URLS: node.url,
          ATS_GATEWAY_DATA_DIR: dir,
          ATS_LOG_LEVEL: "silent",
        },
        () => stopped,
      );
      const exit = runGatewayCli(["start"], cli);
      cleanups.push(async () => {
        stop();
        await exit;
      });
      const deadline = Date.now() + 10_000;
      while (cli.out.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      const printed = JSON.parse(cli.out.join("\n")) as { endpoints: { rpc: string; ws: string; metrics: string }; node: string };
      expect(printed.node).to.equal(node.url);
      expect(printed.endpoints.rpc).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(printed.endpoints.ws).to.equal(printed.endpoints.rpc.replace("http", "ws"));
      expect(printed.endpoints.metrics).to.equal(`${printed.endpoints.rpc}/metrics`);
      expect(await (await fetch(printed.endpoints.metrics)).text()).to.match(/^# TYPE ats_gateway_requests_total counter$/m);
      const response = await fetch(printed.endpoints.rpc, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "temporal_getConsensusTime", params: [] }) });
      const { result } = (await response.json()) as { result: { consensusTimeNs: string; consensusOffsetNs: string; convergenceState: string } };
      expect(result.convergenceState).to.equal("Converged");
      expect(result.consensusOffsetNs).to.equal("-1500");
      expect(Math.abs(Number(BigInt(result.consensusTimeNs) / 1_000_000n) - Date.now())).to.be.below(5_000);
      stop();
      expect(await exit).to.equal(0);
    });
  });
});
