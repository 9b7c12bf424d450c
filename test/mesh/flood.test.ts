import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import pino from "pino";
import { freeUdpPorts } from "../../node/cluster";
import { MESH_STRANGER_DATAGRAMS_PER_SECOND, StrangerSocket } from "../../node/mesh/strangerSocket";
import { startMesh, stopAll, TOLERANT_MESH_SETTINGS, waitUntil, waitUntilMeasured, type MeshMember } from "./helpers";

/**
 * 600 × 8 KiB = 4.8 MiB: more than twice what one socket's receive buffer held (the kernel doubles the 1 MiB asked
 * for), and under the 1,000 datagrams the kernel's backlog queue holds when its softirq runs late.
 */
const BURST_DATAGRAMS = 600;
const DATAGRAM_BYTES = 8_192;
const BURSTS = 10;

/** A stranger on loopback, connected to `port` (so each send leaves in the call, without a DNS lookup). */
async function strangerSocket(port: number): Promise<Socket> {
  const socket = createSocket("udp4");
  socket.on("error", () => undefined); // ICMP port unreachable while the target sheds strangers: expected
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", () => resolve()));
  await new Promise<void>((resolve) => socket.connect(port, "127.0.0.1", () => resolve()));
  return socket;
}

/** One burst, then this thread stands still 20 ms so that the kernel has delivered it before anything else runs. */
function burst(socket: Socket): void {
  const junk = randomBytes(DATAGRAM_BYTES);
  for (let i = 0; i < BURST_DATAGRAMS; i += 1) socket.send(junk);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
}

describe("mesh: a stranger flooding a member's mesh port (issue 31.3)", function () {
  this.timeout(30_000);
  let members: MeshMember[] = [];
  const sockets: Socket[] = [];
  afterEach(async function () {
    for (const socket of sockets.splice(0)) socket.close();
    await stopAll(members);
    members = [];
  });

  it("the flooded member's rounds keep succeeding, and the stranger's datagrams are counted, never decoded", async function () {
    // Rounds only on demand, one at a time, so that each burst lands inside the round the test starts. Tolerant
    // settings (their transit slack is far above the 20 ms the burst stands the process still): what decides a round
    // here is whether the peers' answers reach the proposer, not how fast this machine is.
    members = await startMesh(4, { overrides: { ...TOLERANT_MESH_SETTINGS, meshRoundIntervalMs: 60_000, meshMaxRoundsInFlight: 1, meshMaxProofAgeNs: "5000000000" } });
    const [a] = members as [MeshMember];
    await waitUntilMeasured(members);
    await a.mesh.roundNow(); // the mesh works before the flood
    const stranger = await strangerSocket(a.port);
    sockets.push(stranger);

    const roundsBefore = a.service.meshState().roundsSucceeded;
    for (let index = 0; index < BURSTS; index += 1) {
      // The round's exchanges leave first; the burst fills the port while the peers' answers are on their way.
      const round = a.mesh.roundNow();
      burst(stranger);
      const signed = await round;
      expect(signed.json.consensus!.responders, `round ${index}`).to.be.at.least(3);
    }
    const state = a.service.meshState();
    expect(state.roundsSucceeded - roundsBefore).to.equal(BURSTS);
    // Counted before any decoding: none of them was parsed as a packet ("malformed") or looked up as a sender.
    expect(state.refused.packets["unknown-source"]).to.be.at.least(1);
    expect(state.refused.packets).to.include({ malformed: 0, "unknown-sender": 0 });
  });
});

describe("mesh: the catch-all socket's budget (strangerSocket.ts)", function () {
  this.timeout(10_000);

  it("past its budget it stops reading strangers for a pause (the kernel drops them), then listens again", async function () {
    const [port] = (await freeUdpPorts(1)) as [number];
    let counted = 0;
    // A clock that stands still: one budget window for the whole test.
    const socket = new StrangerSocket({ type: "udp4", host: "127.0.0.1", port, onDatagram: () => (counted += 1), nowMs: () => 0, logger: pino({ level: "silent" }) });
    await socket.open();
    const stranger = await strangerSocket(port);
    try {
      // In batches the small receive buffer holds, each read before the next: exactly the budget is counted.
      for (let sent = 0; socket.listening && sent < 2 * MESH_STRANGER_DATAGRAMS_PER_SECOND; sent += 100) {
        for (let i = 0; i < 100; i += 1) stranger.send(Buffer.alloc(16));
        await waitUntil(() => counted >= Math.min(sent + 100, MESH_STRANGER_DATAGRAMS_PER_SECOND + 1), "the batch read");
      }
      expect(socket.listening).to.equal(false);
      expect(socket.pauses).to.equal(1);
      expect(counted).to.equal(MESH_STRANGER_DATAGRAMS_PER_SECOND + 1);
      for (let i = 0; i < 100; i += 1) stranger.send(Buffer.alloc(16)); // nobody reads these
      await waitUntil(() => socket.listening, "the socket bound again after its pause", 3_000);
      expect(counted).to.equal(MESH_STRANGER_DATAGRAMS_PER_SECOND + 1);
    } finally {
      stranger.close();
      await socket.close();
    }
  });
});

