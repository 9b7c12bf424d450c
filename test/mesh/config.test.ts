import { expect } from "chai";
import { loadConfig } from "../../node/config";
import { meshCardAccuracyNs, parseMeshPeer } from "../../node/mesh";

const PEER = `0x${"ab".repeat(20)}`;

describe("mesh settings: peers' roles and per-peer budgets (docs/protocol.md §7.3, §7.6)", function () {
  it("a meshPeers entry states the peer's role; without one it is a primary", function () {
    expect(parseMeshPeer(`${PEER}@10.0.0.2:50061/secondary`)).to.deep.equal({ nodeId: PEER, host: "10.0.0.2", port: 50061, role: "secondary" });
    expect(parseMeshPeer(`${PEER}@node-b.example:50061`)).to.include({ host: "node-b.example", port: 50061, role: "primary" });
    expect(() => loadConfig({ env: {}, overrides: { meshPeers: [`${PEER}@10.0.0.2:50061/leader`] } })).to.throw(/meshPeers/);
  });

  it("refuses per-peer budgets below one co-sign request and one relayed proof per round", function () {
    const base = { meshPeers: [`${PEER}@10.0.0.2:50061`], meshRoundIntervalMs: 4 };
    expect(() => loadConfig({ env: {}, overrides: { ...base, meshPeerCoSignRequestsPerSecond: 249 } })).to.throw(
      /meshPeerCoSignRequestsPerSecond.*at least 1000 \/ meshRoundIntervalMs \(250\)/,
    );
    expect(() => loadConfig({ env: {}, overrides: { ...base, meshPeerCoSignRequestsPerSecond: 250, meshPeerRelayedProofsPerSecond: 250 } })).to.not.throw();
  });

  it("a member's card accuracy in rounds is a chrony card's bound now, its maximum while it proves none, else accuracyNs", function () {
    const chrony = loadConfig({ env: {}, overrides: { cardDriver: "chrony", chronyMaxBoundNs: 500_000, maxAcceptableDriftNs: 500_000n } });
    let boundNs: number | null = 12_345;
    const chronyCard = { readTimeNs: () => 1n, accuracyBoundNs: () => boundNs };
    expect(meshCardAccuracyNs(chronyCard, chrony)).to.equal(12_345);
    boundNs = null; // degraded or starting: it signs nothing, and its maximum stands in
    expect(meshCardAccuracyNs(chronyCard, chrony)).to.equal(500_000);
    const dev = loadConfig({ env: {}, overrides: {} });
    expect(meshCardAccuracyNs({ readTimeNs: () => 1n }, dev)).to.equal(dev.accuracyNs);
  });
});
