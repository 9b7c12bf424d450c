import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../protocol/constants";
import { expect } from "chai";
import { createClusterClient, hardwareAccuracyOf, nodeScore, selectionOrder, SELECTION_POOL } from "../../client";
import { startTestNode, type TestNode } from "../node/api/helpers";
import { seededRandom } from "../mesh/simulator";

describe("client node selection (docs/protocol.md §8)", function () {
  it("scores by the formula, each input clamped to its range", function () {
    expect(nodeScore({ hardwareAccuracy: 1, avgLatencyMs: 0, recentAccuracyScore: 1, currentLoad: 0 })).to.equal(100);
    expect(nodeScore({ hardwareAccuracy: 0, avgLatencyMs: 100, recentAccuracyScore: 0, currentLoad: 1 })).to.equal(0);
    // 0.9 × 40 + (100 − 20) × 0.3 + 0.5 × 20 + (1 − 0.25) × 10 = 36 + 24 + 10 + 7.5
    expect(nodeScore({ hardwareAccuracy: 0.9, avgLatencyMs: 20, recentAccuracyScore: 0.5, currentLoad: 0.25 })).to.be.closeTo(77.5, 1e-9);
    expect(nodeScore({ hardwareAccuracy: 7, avgLatencyMs: 500, recentAccuracyScore: -1, currentLoad: Number.NaN })).to.equal(40 + 0 + 0 + 10);
  });

  it("hardwareAccuracy: 1 − min(accuracyNs, 1 ms)/1 ms, 0 when unknown", function () {
    expect(hardwareAccuracyOf(50)).to.be.closeTo(0.99995, 1e-12);
    expect(hardwareAccuracyOf(100_000)).to.be.closeTo(0.9, 1e-12);
    expect(hardwareAccuracyOf(5_000_000)).to.equal(0);
    expect(hardwareAccuracyOf(undefined)).to.equal(0);
  });

  it("picks uniformly among the five best, then fails over best first", function () {
    const scores = [10, 90, 80, 70, 60, 50, 40];
    const counts = new Map<number, number>();
    const random = seededRandom(7);
    for (let i = 0; i < 10_000; i += 1) {
      const order = selectionOrder(scores, (score) => score, random);
      counts.set(order[0]!, (counts.get(order[0]!) ?? 0) + 1);
      expect(order).to.have.length(scores.length);
    }
    expect([...counts.keys()].sort((a, b) => b - a)).to.deep.equal([90, 80, 70, 60, 50]); // never 40 or 10 first
    for (const count of counts.values()) expect(count).to.be.within(1_800, 2_200); // 10,000 / 5 each
    // After the pick, the rest by descending score.
    expect(selectionOrder(scores, (score) => score, () => 0.999)).to.deep.equal([50, 90, 80, 70, 60, 40, 10]);
    expect(SELECTION_POOL).to.equal(5);
  });

  describe("createClusterClient against real nodes on loopback", function () {
    this.timeout(30_000);
    const nodes: TestNode[] = [];
    afterEach(async function () {
      await Promise.all(nodes.splice(0).map((node) => node.close()));
    });

    it("reads each node's accuracy and load, measures answers, and fails over when the picked node is down", async function () {
      for (let i = 0; i < 3; i += 1) nodes.push(await startTestNode());
      const client = createClusterClient({ endpoints: nodes.map((node) => node.node.endpoints.rest), timeoutMs: 2_000, random: () => 0 });
      try {
        const first = await client.getCurrentTime();
        expect(nodes.map((node) => node.node.endpoints.rest)).to.include(first.endpoint);
        const states = client.nodes();
        for (const state of states) {
          expect(state.inputs.hardwareAccuracy).to.be.closeTo(hardwareAccuracyOf(DEV_CARD_DRIVER_ACCURACY_NS), 1e-9);
          expect(state.inputs.currentLoad).to.be.within(0, 1);
        }
        // Stop the node the client ranks first: the next request is answered by another one.
        const best = [...states].sort((a, b) => b.score - a.score)[0]!.endpoint;
        await nodes.find((node) => node.node.endpoints.rest === best)!.close();
        nodes.splice(nodes.findIndex((node) => node.node.endpoints.rest === best), 1);
        const next = await client.getCurrentTime();
        expect(next.endpoint).to.not.equal(best);
        const down = client.nodes().find((state) => state.endpoint === best)!;
        expect(down.lastError).to.be.a("string");
        expect(down.inputs.recentAccuracyScore).to.be.below(1);
      } finally {
        client.close();
      }
    });

    it("names every node's failure when all are down", async function () {
      nodes.push(await startTestNode());
      const endpoint = nodes[0]!.node.endpoints.rest;
      await nodes.pop()!.close();
      const client = createClusterClient({ endpoints: [endpoint, "http://127.0.0.1:9"], timeoutMs: 1_000 });
      try {
        const error = await client.getCurrentTime().catch((e: unknown) => e);
        expect((error as Error).message).to.match(/^all 2 nodes failed: /);
        expect((error as Error).message).to.contain(endpoint);
      } finally {
        client.close();
      }
    });
  });
});
