import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDevIdentity } from "../../../protocol/devca";
import { saveKeyDir } from "../../../protocol/keystore";
import { loadConfig } from "../../../node/config";
import { startNode } from "../../../node/server";
import { handshakesWhileBlocked, kernelAcceptQueueCap, startTestNode, testLogger } from "./helpers";

describe("node/server startNode", function () {
  it("builds the service from config (key directory), listens on free loopback ports, and closes everything", async function () {
    const dir = mkdtempSync(join(tmpdir(), "ats-nodeapi-server-"));
    try {
      const identity = await createDevIdentity();
      await saveKeyDir(join(dir, "keys"), {
        ca: identity.ca,
        cardKey: identity.cardKey,
        certificateChainPem: identity.certificateChainPem,
        nodeKey: identity.nodeKey,
      });
      const config = loadConfig({
        env: {},
        cwd: dir,
        overrides: { restPort: 0, grpcPort: 0, keyDir: join(dir, "keys"), dataDir: join(dir, "data"), tickIntervalNs: "5000000" },
      });
      const node = await startNode({ config, logger: testLogger() });
      let closed = false;
      try {
        expect(node.endpoints.rest).to.match(/^http:\/\/127\.0\.0\.1:[1-9][0-9]*$/);
        expect(node.endpoints.ws).to.match(/^ws:\/\/127\.0\.0\.1:[1-9][0-9]*\/v1\/stream$/);
        expect(node.endpoints.grpc).to.match(/^127\.0\.0\.1:[1-9][0-9]*$/);
        const response = await fetch(`${node.endpoints.rest}/time/current`);
        expect(response.status).to.equal(200);
        expect(((await response.json()) as { proof: { hardwareId: string } }).proof.hardwareId).to.equal(identity.cardId);
        await node.close();
        closed = true;
        expect(node.service.health().status).to.equal("starting");
        let refused = false;
        await fetch(`${node.endpoints.rest}/health`).catch(() => {
          refused = true;
        });
        expect(refused).to.equal(true);
      } finally {
        if (!closed) await node.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("node/server listen backlog (listenBacklog)", function () {
  this.timeout(30_000);

  // 600 connections: more than Node's default backlog (511) would queue, within a default `ulimit -n` of 1,024. A
  // kernel whose somaxconn is lower caps every backlog, the default's included: then that cap + 1 is what fits.
  const queued = Math.min(600, kernelAcceptQueueCap() + 1);
  for (const [label, backlog, attempts, check] of [
    ["the default (4,096) queues a burst of connections beyond Node's 511 that the node has not accepted yet", undefined, 600, (n: number) => expect(n).to.equal(queued)],
    // Linux holds backlog + 1; a handshake already under way when the queue fills may still complete client-side.
    ["a small backlog drops the SYNs beyond it (the setting reaches listen)", 4, 40, (n: number) => expect(n).to.be.within(1, 20)],
  ] as const) {
    it(label, async function () {
      const node = await startTestNode(backlog === undefined ? {} : { overrides: { listenBacklog: backlog } });
      try {
        expect(node.config.listenBacklog).to.equal(backlog ?? 4_096);
        check(await handshakesWhileBlocked(Number(new URL(node.node.endpoints.rest).port), attempts, 300));
      } finally {
        await node.close();
      }
    });
  }
});
