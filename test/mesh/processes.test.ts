/**
 * The mesh across processes: five `ats-node start` processes (the built CLI) on real loopback sockets, each with
 * its own keys, meshed by config. A partition below the threshold (two killed) stops the proofs with the exact
 * error and Degraded; healing it (one restarted) brings co-signed proofs back. Every process binds 127.0.0.1 on
 * free ports and is killed by the test, also on failure.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDevIdentity, createDevManufacturerCa, type DevIdentity } from "../../protocol/devca";
import { saveKeyDir } from "../../protocol/keystore";
import { freeUdpPorts } from "../../node/cluster";
import { startNodeProcess, stopNodeProcess, type NodeProcess } from "../../scripts/nodeProcess";

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(url);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read().catch(() => undefined);
    if (value !== undefined && done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("mesh: five ats-node processes on loopback", function () {
  this.timeout(90_000);
  const root = mkdtempSync(join(tmpdir(), "ats-mesh-processes-"));
  const nodes: Array<NodeProcess | undefined> = [];
  const configFiles: string[] = [];
  let identities: DevIdentity[] = [];

  before(async function () {
    const ca = await createDevManufacturerCa();
    identities = await Promise.all(Array.from({ length: 5 }, () => createDevIdentity({ ca })));
    const ports = await freeUdpPorts(5);
    for (const [index, identity] of identities.entries()) {
      const keyDir = join(root, `keys-${index}`);
      await saveKeyDir(keyDir, identity);
      const others = identities.map((other, otherIndex) => ({ other, otherIndex })).filter(({ otherIndex }) => otherIndex !== index);
      const file = join(root, `node-${index}.json`);
      writeFileSync(
        file,
        JSON.stringify({
          host: "127.0.0.1",
          restPort: 0,
          grpcEnabled: false,
          keyDir,
          dataDir: join(root, `data-${index}`),
          trustedRootsPem: [ca.certificatePem],
          trustedNodeAddresses: others.map(({ other }) => other.nodeAddress),
          meshPort: ports[index],
          meshPeers: others.map(({ other, otherIndex }) => `${other.nodeAddress}@127.0.0.1:${ports[otherIndex]}`),
          meshWindowNs: "1000000",
          meshRoundIntervalMs: 50,
          meshProbeIntervalMs: 100,
          meshMaxProofAgeNs: "500000000",
          maxAcceptableDriftNs: "10000000",
          logLevel: "warn",
        }),
      );
      configFiles.push(file);
    }
    for (const file of configFiles) nodes.push(await startNodeProcess(file));
  });

  after(async function () {
    await Promise.all(nodes.map((node) => stopNodeProcess(node, "SIGKILL")));
    rmSync(root, { recursive: true, force: true });
  });

  it("serves proofs co-signed by ⌈2·5/3⌉ = 4 nodes; two killed: no proof, the exact error, Degraded; one back: proofs again", async function () {
    const first = nodes[0]!;
    const signed = await eventually(() => getJson(`${first.rest}/time/current`), (answer) => answer.status === 200, "a co-signed proof");
    const consensus = signed.body["consensus"] as { members: number; threshold: number; responders: number; nodeIds: string[] };
    expect(consensus).to.include({ members: 5, threshold: 4 });
    expect(consensus.responders).to.be.at.least(4);
    expect(consensus.nodeIds).to.include(identities[0]!.nodeAddress);

    await stopNodeProcess(nodes[3], "SIGKILL");
    await stopNodeProcess(nodes[4], "SIGKILL");
    const failing = await eventually(
      () => getJson(`${first.rest}/mesh/state`),
      (answer) => answer.body["convergenceState"] === "Degraded",
      "Degraded after a partition below the threshold",
    );
    expect(failing.body["lastError"]).to.equal("Insufficient node responses");
    const refused = await eventually(() => getJson(`${first.rest}/time/current`), (answer) => answer.status === 503, "no proof served");
    expect(String(refused.body["message"])).to.equal("no consensus proof: Insufficient node responses");

    nodes[3] = await startNodeProcess(configFiles[3]!);
    const healed = await eventually(() => getJson(`${first.rest}/time/current`), (answer) => answer.status === 200, "proofs after healing", 30_000);
    const healedConsensus = healed.body["consensus"] as { responders: number; nodeIds: string[] };
    expect(healedConsensus.responders).to.equal(4);
    expect(healedConsensus.nodeIds).to.not.include(identities[4]!.nodeAddress);
  });
});
