import { expect } from "chai";
import { startMesh, stopAll, TOLERANT_MESH_SETTINGS, waitUntil, waitUntilMeasured, type MeshMember } from "./helpers";

/** Exchanges a peer may leave unanswered in a row before rounds stop waiting for it (node/mesh/peers.ts). */
const MISSES_BEFORE_ABSENT = 3;
const ROUND_TIMEOUT_MS = 1_000;

describe("mesh: a member that is down (issue 31.4)", function () {
  this.timeout(30_000);
  let members: MeshMember[] = [];
  afterEach(async function () {
    await stopAll(members);
    members = [];
  });

  it("after it missed its recent exchanges, rounds no longer wait for it; it still counts in n, and rejoins once it answers a probe", async function () {
    // Rounds only on demand, one at a time; tolerant settings: what decides a round here is who answers.
    members = await startMesh(4, {
      overrides: {
        ...TOLERANT_MESH_SETTINGS,
        meshRoundIntervalMs: 60_000,
        meshMaxRoundsInFlight: 1,
        meshRoundTimeoutMs: ROUND_TIMEOUT_MS,
        meshProbeIntervalMs: 200,
        meshMaxProofAgeNs: "60000000000",
      },
    });
    const [a, , , d] = members as [MeshMember, MeshMember, MeshMember, MeshMember];
    const dAtA = () => a.service.meshState().peers.find((peer) => peer.nodeId === d.identity.nodeAddress)!;
    await waitUntilMeasured(members);
    expect((await a.mesh.roundNow()).json.consensus!.readings).to.have.length(4);

    // D's sockets close, as a stopped process's do: the port answers nothing (the kernel: port unreachable).
    await d.transport.close();
    for (let round = 0; round < MISSES_BEFORE_ABSENT; round += 1) {
      const signed = await a.mesh.roundNow(); // each still succeeds (3 of 4), after waiting out D's exchange
      expect(signed.json.consensus!.readings).to.have.length(3);
    }
    expect(dAtA().absent).to.equal(true);

    const skippedBefore = a.mesh.stats().roundExchangesSkippedTotal;
    const signed = await a.mesh.roundNow();
    // Not sent to D, so not waited for: the round's duration is far from the timeout, and the skip is counted.
    expect(a.mesh.stats().roundExchangesSkippedTotal - skippedBefore).to.equal(1);
    expect(Number(a.mesh.stats().lastRoundDurationNs!) / 1e6).to.be.below(ROUND_TIMEOUT_MS / 2);
    // D still counts in n: the threshold stays 3 of 4.
    expect(signed.json.consensus).to.include({ members: 4, threshold: 3 });

    // D comes back (same identity, port and session): A's next probe of it is answered and it rejoins the rounds.
    await d.transport.start();
    await waitUntil(() => !dAtA().absent, "D answering a probe", 5_000);
    const rejoined = await a.mesh.roundNow();
    expect(rejoined.json.consensus!.readings.map((reading) => reading.nodeId)).to.include(d.identity.nodeAddress);
  });
});
