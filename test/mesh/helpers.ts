/**
 * In-process mesh members for tests: real dev cards, real keys, real UDP sockets on 127.0.0.1 (free ports), the
 * real Mesh and TimeService. Each member's transport and card are reachable, so a test can stop a member, skew its
 * clock, tamper its card or replace one of its answers with a lie. Every test closes what it starts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { createDevIdentity, createDevManufacturerCa, type DevIdentity } from "../../protocol/devca";
import { DevTimeCard } from "../../node/card/dev";
import { createAnchoredClock } from "../../node/card/hostClock";
import { freeUdpPorts } from "../../node/cluster";
import { loadConfig, type NodeConfig, type SettingName } from "../../node/config";
import { createTimeService } from "../../node/compose";
import type { CoreTimeService } from "../../node/core";
import { createMesh, type Mesh, type MeshTransport } from "../../node/mesh";

export interface MeshMember {
  readonly identity: DevIdentity;
  readonly card: DevTimeCard;
  readonly transport: MeshTransport;
  readonly mesh: Mesh;
  readonly service: CoreTimeService;
  readonly config: NodeConfig;
  readonly port: number;
  /** Stops the member (service, mesh, socket) and removes its folder; idempotent. */
  stop(): Promise<void>;
}

export interface StartMeshOptions {
  /** Per member index: ns added to that member's card clock (a skewed clock). */
  readonly skewNs?: Readonly<Record<number, bigint>>;
  /** Per member index: its role (default primary). */
  readonly roles?: Readonly<Record<number, "primary" | "secondary" | "archive" | "bridge">>;
  /** Settings for every member (config-file shapes). */
  readonly overrides?: Partial<Record<SettingName, unknown>>;
  /** The host clock every member's card reads (default: one anchored host clock); a test may step it for all. */
  readonly hostClockNs?: () => bigint;
}

/** Settings of a fast, tolerant test mesh: rounds every 20 ms, a 1 ms window (one shared event loop). */
export const TEST_MESH_SETTINGS: Partial<Record<SettingName, unknown>> = {
  meshRoundIntervalMs: 20,
  meshProbeIntervalMs: 50,
  meshRoundTimeoutMs: 200,
  meshWindowNs: "1000000",
  meshMaxProofAgeNs: "300000000",
  maxAcceptableDriftNs: "10000000",
};

export async function startMesh(count: number, options: StartMeshOptions = {}): Promise<MeshMember[]> {
  const ca = await createDevManufacturerCa();
  const identities = await Promise.all(Array.from({ length: count }, () => createDevIdentity({ ca })));
  const ports = await freeUdpPorts(count);
  const logger = pino({ level: process.env.ATS_TEST_LOG ?? "silent" });
  const members: MeshMember[] = [];
  // One host clock for every member: in one process they read the same clock, so what differs between them is
  // only what the test injects (skew) and what the loopback exchanges measure.
  const hostClock = options.hostClockNs ?? createAnchoredClock();
  try {
    for (const [index, identity] of identities.entries()) {
      const dir = mkdtempSync(join(tmpdir(), "ats-mesh-"));
      const others = identities.filter((_, other) => other !== index);
      const config = loadConfig({
        env: {},
        cwd: dir,
        overrides: {
          host: "127.0.0.1",
          restPort: 0,
          grpcPort: 0,
          dataDir: join(dir, "data"),
          trustedRootsPem: [ca.certificatePem],
          trustedNodeAddresses: others.map((other) => other.nodeAddress),
          meshPort: ports[index],
          // Each member states every other member's role in its own configuration (primary: the default, unsaid).
          meshPeers: others.map((other) => {
            const otherIndex = identities.indexOf(other);
            const role = options.roles?.[otherIndex] ?? "primary";
            return `${other.nodeAddress}@127.0.0.1:${ports[otherIndex]}${role === "primary" ? "" : `/${role}`}`;
          }),
          logLevel: "silent",
          role: options.roles?.[index] ?? "primary",
          ...TEST_MESH_SETTINGS,
          ...options.overrides,
        },
      });
      const skewNs = options.skewNs?.[index] ?? 0n;
      const card = new DevTimeCard({
        cardKey: identity.cardKey,
        certificateChainPem: identity.certificateChainPem,
        clockNs: skewNs === 0n ? hostClock : () => hostClock() + skewNs,
      });
      let mesh: Mesh | undefined;
      let transport: MeshTransport | undefined;
      // The node's own composition (node/mesh createMesh), keeping the parts a test reaches into.
      const service = createTimeService({
        config,
        card,
        nodeKey: identity.nodeKey,
        logger,
        ownsCard: true,
        consensus: (deps) => {
          ({ mesh, transport } = createMesh({ config, nodeKey: identity.nodeKey, card, logger }, deps));
          return mesh;
        },
      });
      await service.start();
      let stopped = false;
      members.push({
        identity,
        card,
        transport: transport!,
        mesh: mesh!,
        service,
        config,
        port: ports[index]!,
        stop: async () => {
          if (stopped) return;
          stopped = true;
          try {
            await service.stop();
          } finally {
            rmSync(dir, { recursive: true, force: true });
          }
        },
      });
    }
  } catch (error) {
    await stopAll(members);
    throw error;
  }
  return members;
}

export async function stopAll(members: readonly MeshMember[]): Promise<void> {
  await Promise.all(members.map((member) => member.stop()));
}

/** Waits (bounded) until `predicate` holds; for events, not for timing assertions. */
export async function waitUntil(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * Settings for tests about who answers, who signs and what is served, not about how closely clocks agree. The
 * members share one event loop, so on a loaded machine a round of TEST_MESH_SETTINGS can fail for reasons that are
 * not the test's subject: a reading more than 1 ms off the median ("Time divergence too high"), an exchange more
 * than 20 ms behind its moment (the co-signers' transit slack), an answer after 200 ms. Here a round's outcome
 * depends only on which members answer: a 50 ms window, a 100 ms reading uncertainty, a 500 ms transit slack and a
 * 1 s timeout are far beyond what a loaded loopback adds (tens of ms), so no retry is needed to see a round succeed.
 */
export const TOLERANT_MESH_SETTINGS: Partial<Record<SettingName, unknown>> = {
  meshWindowNs: "50000000",
  meshMaxPeerUncertaintyNs: "100000000",
  meshCoSignSlackNs: "500000000",
  meshRoundTimeoutMs: 1_000,
};

/**
 * Waits (bounded) until every member has a session with every other and has measured its path to each: before that
 * a round can lack readings, and co-signers refuse a proposer they have no recent measurement of.
 */
export async function waitUntilMeasured(members: readonly MeshMember[], timeoutMs = 10_000): Promise<void> {
  await waitUntil(() => members.every((member) => member.transport.peers.every((peer) => member.transport.hasSession(peer.nodeId))), "every session", timeoutMs);
  await waitUntil(() => members.every((member) => member.service.meshState().peers.every((peer) => peer.offsetNs !== null)), "every path measured", timeoutMs);
}
