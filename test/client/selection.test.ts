import { expect } from "chai";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { AuthError, UnavailableError, ValidationError } from "../../protocol/errors";
import { createClusterClient, createTimeClient, type ClusterClient } from "../../client";
import { nodeInfoFromJson } from "../../client/rest";
import { parseJsonLossless } from "../../protocol/json";
import {
  hardwareAccuracyOf,
  nextAvgLatencyMs,
  nodeScore,
  recentAccuracyScoreOf,
  scoreInputsOf,
  selectionOrder,
  withOutcome,
  RECENT_ANSWERS,
  SELECTION_POOL,
} from "../../client/selection";
import { startTestNode, waitFor, type TestNode } from "../node/api/helpers";
import { seededRandom } from "../mesh/simulator";

describe("client node selection (docs/protocol.md §8)", function () {
  describe("the score", function () {
    it("is the formula of §8", function () {
      expect(nodeScore({ hardwareAccuracy: 1, avgLatencyMs: 0, recentAccuracyScore: 1, currentLoad: 0 })).to.equal(100);
      expect(nodeScore({ hardwareAccuracy: 0, avgLatencyMs: 100, recentAccuracyScore: 0, currentLoad: 1 })).to.equal(0);
      // 0.8 × 40 + (100 − 2) × 0.3 + 0.95 × 20 + (1 − 0.1) × 10 = 32 + 29.4 + 19 + 9
      expect(nodeScore({ hardwareAccuracy: 0.8, avgLatencyMs: 2, recentAccuracyScore: 0.95, currentLoad: 0.1 })).to.be.closeTo(89.4, 1e-9);
      // 0.6 × 40 + (100 − 20) × 0.3 + 0.5 × 20 + (1 − 0.25) × 10 = 24 + 24 + 10 + 7.5
      expect(nodeScore({ hardwareAccuracy: 0.6, avgLatencyMs: 20, recentAccuracyScore: 0.5, currentLoad: 0.25 })).to.be.closeTo(65.5, 1e-9);
    });

    it("clamps each input to its range and refuses NaN", function () {
      expect(nodeScore({ hardwareAccuracy: 7, avgLatencyMs: 500, recentAccuracyScore: -1, currentLoad: -3 })).to.equal(40 + 0 + 0 + 10);
      expect(nodeScore({ hardwareAccuracy: -1, avgLatencyMs: -5, recentAccuracyScore: 2, currentLoad: 4 })).to.equal(0 + 30 + 20 + 0);
      expect(() => nodeScore({ hardwareAccuracy: 1, avgLatencyMs: 0, recentAccuracyScore: 1, currentLoad: Number.NaN })).to.throw(RangeError, "currentLoad is NaN");
    });

    it("hardwareAccuracy: log10(1 ms / accuracyNs) / 5, 1 at 10 ns and better, 0 at 1 ms and worse or unknown", function () {
      expect(hardwareAccuracyOf(0)).to.equal(1);
      expect(hardwareAccuracyOf(10)).to.equal(1);
      expect(hardwareAccuracyOf(100)).to.be.closeTo(0.8, 1e-12);
      expect(hardwareAccuracyOf(1_000)).to.be.closeTo(0.6, 1e-12);
      expect(hardwareAccuracyOf(50)).to.be.closeTo(Math.log10(20_000) / 5, 1e-12);
      expect(hardwareAccuracyOf(100_000)).to.be.closeTo(0.2, 1e-12);
      expect(hardwareAccuracyOf(1_000_000)).to.equal(0);
      expect(hardwareAccuracyOf(5_000_000)).to.equal(0);
      expect(hardwareAccuracyOf(undefined)).to.equal(0);
      expect(() => hardwareAccuracyOf(-1)).to.throw(RangeError, "accuracyNs must be a number ≥ 0, got -1");
      expect(() => hardwareAccuracyOf(Number.NaN)).to.throw(RangeError);
    });

    it("recentAccuracyScore: the share of the last 20 outcomes, 0.5 before any", function () {
      expect(recentAccuracyScoreOf([])).to.equal(0.5);
      let outcomes: boolean[] = [];
      for (let i = 0; i < 5; i += 1) outcomes = withOutcome(outcomes, false);
      expect(recentAccuracyScoreOf(outcomes)).to.equal(0);
      for (let i = 0; i < 15; i += 1) outcomes = withOutcome(outcomes, true);
      expect(recentAccuracyScoreOf(outcomes)).to.equal(15 / 20);
      for (let i = 0; i < 5; i += 1) outcomes = withOutcome(outcomes, true); // the five misses leave the window
      expect(outcomes).to.have.length(RECENT_ANSWERS);
      expect(recentAccuracyScoreOf(outcomes)).to.equal(1);
    });

    it("avgLatencyMs: the first answer as is, then each new one weighs 0.2", function () {
      expect(nextAvgLatencyMs(undefined, 10)).to.equal(10);
      expect(nextAvgLatencyMs(10, 20)).to.equal(12);
      expect(nextAvgLatencyMs(12, 2)).to.be.closeTo(10, 1e-12);
      expect(() => nextAvgLatencyMs(10, -1)).to.throw(RangeError);
    });

    it("scores an unknown node with the documented unknowns: 0, 100 ms, 0.5, load 1", function () {
      const inputs = scoreInputsOf({ recentOutcomes: [] });
      expect(inputs).to.deep.equal({ hardwareAccuracy: 0, avgLatencyMs: 100, recentAccuracyScore: 0.5, currentLoad: 1 });
      expect(nodeScore(inputs)).to.equal(10);
      const known = scoreInputsOf({ accuracyNs: 100, avgLatencyMs: 2, recentOutcomes: [true, true, true, false], currentLoad: 0.1 });
      expect(nodeScore(known)).to.be.closeTo(32 + 29.4 + 15 + 9, 1e-9);
    });
  });

  describe("the pick", function () {
    const byValue = (score: number): number => score;

    it("picks uniformly among the five best (seeded draws), then fails over best first", function () {
      const scores = [10, 90, 80, 70, 60, 50, 40];
      const draws = 10_000;
      const counts = new Map<number, number>();
      const random = seededRandom(7);
      for (let i = 0; i < draws; i += 1) {
        const order = selectionOrder(scores, byValue, random);
        expect(order).to.have.length(scores.length);
        counts.set(order[0]!, (counts.get(order[0]!) ?? 0) + 1);
      }
      expect([...counts.keys()].sort((a, b) => b - a)).to.deep.equal([90, 80, 70, 60, 50]); // never 40 or 10 first
      const expected = draws / SELECTION_POOL;
      for (const count of counts.values()) expect(count).to.be.within(expected - 200, expected + 200); // ± 5 σ
      // Pearson's χ² with 4 degrees of freedom: 18.47 is its 0.1 % tail.
      const chiSquare = [...counts.values()].reduce((sum, count) => sum + (count - expected) ** 2 / expected, 0);
      expect(chiSquare).to.be.below(18.47);
      // The draw maps to the ranked pool; after the pick, the rest by descending score.
      expect(selectionOrder(scores, byValue, () => 0)).to.deep.equal([90, 80, 70, 60, 50, 40, 10]);
      expect(selectionOrder(scores, byValue, () => 0.5)).to.deep.equal([70, 90, 80, 60, 50, 40, 10]);
      expect(selectionOrder(scores, byValue, () => 0.999)).to.deep.equal([50, 90, 80, 70, 60, 40, 10]);
    });

    it("with fewer than five nodes picks among all; ties keep the given order", function () {
      const counts = [0, 0, 0];
      const random = seededRandom(11);
      for (let i = 0; i < 3_000; i += 1) counts[selectionOrder([0, 1, 2], (index) => [5, 99, 42][index]!, random)[0]!]! += 1;
      for (const count of counts) expect(count).to.be.within(800, 1_200);
      const tied = ["a", "b", "c", "d", "e", "f"];
      expect(selectionOrder(tied, () => 50, () => 0.999)).to.deep.equal(["e", "a", "b", "c", "d", "f"]);
      expect(selectionOrder([], byValue, () => 0)).to.deep.equal([]);
    });

    it("refuses a random source outside [0, 1) and a NaN score", function () {
      expect(() => selectionOrder([1, 2], byValue, () => 1)).to.throw(RangeError, "must return a number in [0, 1), got 1");
      expect(() => selectionOrder([1, 2], byValue, () => -0.1)).to.throw(RangeError);
      expect(() => selectionOrder([1, Number.NaN], byValue, () => 0)).to.throw(RangeError, "the score of node 1 is NaN");
    });
  });

  describe("createClusterClient options", function () {
    const bad: Array<[string, Parameters<typeof createClusterClient>[0]]> = [
      ["endpoints: must list at least one node URL", { endpoints: [] }],
      ['endpoints[1]: must be an http:// or https:// URL, got "127.0.0.1:8080"', { endpoints: ["http://127.0.0.1:8080", "127.0.0.1:8080"] }],
      ["endpoints[1]: repeats endpoints[0] (http://127.0.0.1:8080/)", { endpoints: ["http://127.0.0.1:8080", "http://127.0.0.1:8080/"] }],
      ["requiredAccuracyNs: must be a positive integer, got 1.5", { endpoints: ["http://127.0.0.1:8080"], requiredAccuracyNs: 1.5 }],
      ["infoRefreshMs: must be a positive number, got -1", { endpoints: ["http://127.0.0.1:8080"], infoRefreshMs: -1 }],
      ["timeoutMs: must be a positive number, got 0", { endpoints: ["http://127.0.0.1:8080"], timeoutMs: 0 }],
    ];
    for (const [message, options] of bad) {
      it(`refuses: ${message}`, function () {
        expect(() => createClusterClient(options)).to.throw(ValidationError, message);
      });
    }
  });

  describe("node info as the client reads it", function () {
    it("turns the lossless parse's fractional numbers into numbers and refuses a body off its schema", function () {
      const info = {
        nodeId: "0x0", cardId: "0x0", certificateChainPem: [], version: "1", protocol: "ATS/1", accuracyNs: 50,
        tickIntervalNs: "5000000", maxAttestationAgeNs: "1", maxFutureDriftNs: "1", maxAcceptableDriftNs: "1",
        nodeQuorum: 1, archiveIntervalNs: "1", archiveCapacity: 1, authRequired: false, maxRequestsPerSecond: 2.5,
        currentLoad: 0.125, role: "primary",
      };
      const parsed = nodeInfoFromJson(parseJsonLossless(JSON.stringify(info)));
      expect(parsed.currentLoad).to.equal(0.125);
      expect(parsed.maxRequestsPerSecond).to.equal(2.5);
      expect(() => nodeInfoFromJson(parseJsonLossless(JSON.stringify({ ...info, currentLoad: 1.5 })))).to.throw(ValidationError, "nodeInfo.currentLoad: ");
      const { currentLoad: _omitted, ...withoutLoad } = info;
      expect(() => nodeInfoFromJson(withoutLoad)).to.throw(ValidationError, "nodeInfo.currentLoad: ");
    });
  });

  describe("createClusterClient against real nodes on loopback", function () {
    this.timeout(30_000);
    const nodes: TestNode[] = [];
    const clients: ClusterClient[] = [];
    afterEach(async function () {
      for (const client of clients.splice(0)) client.close();
      await Promise.all(nodes.splice(0).map((node) => node.close()));
    });

    function restOf(node: TestNode): string {
      return node.node.endpoints.rest;
    }

    it("scores every node from its info and answers, and fails over when the picked node is stopped", async function () {
      for (let i = 0; i < 3; i += 1) nodes.push(await startTestNode());
      // The draw 0 always picks the best score: the stopped node is tried first.
      // A generous timeout: a busy host must not turn a slow info read into an unknown node (a stopped node is refused at once).
      const client = createClusterClient({ endpoints: nodes.map(restOf), timeoutMs: 30_000, random: () => 0 });
      clients.push(client);
      // Every answer the client times (the info reads, then the proof) happens within this call.
      const callStartedMs = performance.now();
      const first = await client.getCurrentTime();
      const callMs = performance.now() - callStartedMs;
      expect(nodes.map(restOf)).to.include(first.endpoint);

      for (const [index, state] of client.nodes().entries()) {
        const single = createTimeClient({ endpoint: restOf(nodes[index]!), retries: 0 });
        const info = await single.info();
        single.close();
        expect(info.currentLoad).to.be.a("number").within(0, 1);
        expect(state.inputs.hardwareAccuracy).to.equal(hardwareAccuracyOf(info.accuracyNs));
        expect(state.inputs.currentLoad).to.be.within(0, 1);
        // Measured (the info read at least), so within the call; not the unknown node's 100 ms, which a busy host can pass.
        expect(state.inputs.avgLatencyMs).to.be.above(0).and.at.most(callMs);
        expect(state.answers).to.equal(state.endpoint === first.endpoint ? 1 : 0);
        expect(state.inputs.recentAccuracyScore).to.equal(state.endpoint === first.endpoint ? 1 : 0.5);
      }

      const best = [...client.nodes()].sort((a, b) => b.score - a.score)[0]!;
      const stopped = nodes.splice(nodes.findIndex((node) => restOf(node) === best.endpoint), 1)[0]!;
      await stopped.close();
      const next = await client.getCurrentTime();
      expect(next.endpoint).to.not.equal(best.endpoint);
      expect(nodes.map(restOf)).to.include(next.endpoint);
      const down = client.nodes().find((state) => state.endpoint === best.endpoint)!;
      expect(down.lastError).to.be.a("string").and.not.equal("");
      expect(down.answers).to.equal(best.answers + 1);
      expect(down.score).to.be.below(best.score);
    });

    it("counts a proof less accurate than required as a miss, and still returns it", async function () {
      nodes.push(await startTestNode());
      const client = createClusterClient({ endpoints: [restOf(nodes[0]!)], requiredAccuracyNs: 1, timeoutMs: 2_000 });
      clients.push(client);
      const fetched = await client.getCurrentTime();
      expect(fetched.proof.accuracy).to.be.above(1);
      expect(client.nodes()[0]!.inputs.recentAccuracyScore).to.equal(0);
    });
  });

  describe("createClusterClient: which failures fail over", function () {
    this.timeout(30_000);
    let node: TestNode;
    let stub: Server;
    let stubAnswer: (response: ServerResponse) => void;
    let infoReads = 0;
    const clients: ClusterClient[] = [];

    before(async function () {
      node = await startTestNode();
    });
    after(async function () {
      await node?.close();
    });
    beforeEach(async function () {
      infoReads = 0;
      // A node that is not one: GET /node/info fails (so it scores as unknown) and /time/current answers stubAnswer.
      stub = createServer((request: IncomingMessage, response: ServerResponse) => {
        if (request.url === "/node/info") {
          infoReads += 1;
          answerJson(response, 404, { message: "not here" });
        } else stubAnswer(response);
      });
      await new Promise<void>((resolve) => stub.listen(0, "127.0.0.1", resolve));
    });
    afterEach(async function () {
      for (const client of clients.splice(0)) client.close();
      stub.closeAllConnections();
      await new Promise<void>((resolve) => stub.close(() => resolve()));
    });

    function stubUrl(): string {
      return `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
    }

    /** The real node first in `endpoints`; the draw 0.99 picks the second best of two, the stub (scored unknown). */
    function stubFirst(): ClusterClient {
      const client = createClusterClient({ endpoints: [node.node.endpoints.rest, stubUrl()], timeoutMs: 2_000, random: () => 0.99 });
      clients.push(client);
      return client;
    }

    for (const [what, answer] of [
      ["a 503", (response: ServerResponse) => answerJson(response, 503, { message: "busy" })],
      ["a 429", (response: ServerResponse) => answerJson(response, 429, { message: "Rate limit exceeded" })],
      ["a malformed proof in a 200", (response: ServerResponse) => answerJson(response, 200, { nanoMoment: "1" })],
      ["a cut connection", (response: ServerResponse) => response.socket?.destroy()],
    ] as const) {
      it(`fails over after ${what}`, async function () {
        stubAnswer = answer;
        const client = stubFirst();
        const fetched = await client.getCurrentTime();
        expect(fetched.endpoint).to.equal(node.node.endpoints.rest);
        const [real, failed] = client.nodes();
        expect(failed!.answers).to.equal(1);
        expect(failed!.inputs.recentAccuracyScore).to.equal(0);
        expect(failed!.lastError).to.be.a("string");
        expect(real!.answers).to.equal(1);
      });
    }

    it("does not fail over after another 4xx: that error, as a single-node client raises it", async function () {
      stubAnswer = (response) => answerJson(response, 401, { message: "Missing or invalid API key" });
      const client = stubFirst();
      const error = await client.getCurrentTime().catch((caught: unknown) => caught);
      expect(error).to.be.instanceOf(AuthError);
      expect((error as AuthError).message).to.equal("Missing or invalid API key");
      expect(client.nodes().map((state) => state.answers)).to.deep.equal([0, 1]); // the real node was not asked
    });

    it("when every node fails: UnavailableError naming each, the last node's error as cause", async function () {
      stubAnswer = (response) => answerJson(response, 503, { message: "busy" });
      const closed = await closedPortUrl();
      const client = createClusterClient({ endpoints: [stubUrl(), closed], timeoutMs: 2_000, random: () => 0 });
      clients.push(client);
      const error = (await client.getCurrentTime().catch((caught: unknown) => caught)) as UnavailableError;
      expect(error).to.be.instanceOf(UnavailableError);
      expect(error.message).to.match(/^all 2 nodes failed: /);
      expect(error.message).to.contain(`${stubUrl()}: busy`);
      expect(error.message).to.contain(`${closed}: connect ECONNREFUSED`);
      const failures = error.details["failures"] as Array<{ endpoint: string; code: string }>;
      expect(failures.map((failure) => failure.code)).to.deep.equal(["UNAVAILABLE", "UNAVAILABLE"]);
      expect(error.cause).to.be.instanceOf(UnavailableError);
      expect((error.cause as Error).message).to.contain(failures[1]!.endpoint === closed ? "ECONNREFUSED" : "busy");
    });

    it("reads node info once before the first requests, then again when it is older than infoRefreshMs", async function () {
      stubAnswer = (response) => answerJson(response, 503, { message: "busy" });
      let nowMs = 1_000;
      const client = createClusterClient({ endpoints: [stubUrl()], timeoutMs: 2_000, infoRefreshMs: 50, nowMs: () => nowMs });
      clients.push(client);
      const both = await Promise.allSettled([client.getCurrentTime(), client.getCurrentTime()]);
      expect(both.map((outcome) => outcome.status)).to.deep.equal(["rejected", "rejected"]);
      expect(infoReads).to.equal(1);
      expect(client.nodes()[0]!.lastError).to.equal("busy");
      await client.getCurrentTime().catch(() => undefined); // fresh: no read
      expect(infoReads).to.equal(1);
      nowMs += 49;
      await client.getCurrentTime().catch(() => undefined); // still fresh at 49 ms: no read
      expect(infoReads).to.equal(1);
      nowMs += 1;
      await client.getCurrentTime().catch(() => undefined); // stale at 50 ms: a read in the background
      await waitFor(() => infoReads === 2, "the second node info read");
    });
  });
});

function answerJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(JSON.stringify(body));
}

/** The URL of a port on 127.0.0.1 that was free a moment ago and is closed now (fetch refuses ports like 1 or 9). */
async function closedPortUrl(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
