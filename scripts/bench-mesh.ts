/**
 * `npm run bench:mesh`: a 5-node mesh on loopback (docs/protocol.md §7), the numbers of the mesh issue's table.
 *
 * Node 0 runs inside this process (so each of its rounds can be timed exactly: service.attestNow() runs one round
 * and returns its proof); nodes 1–4 are `ats-node start` processes of the built CLI, each with its own keys, meshed
 * by config (1 s background rounds of their own). Measured, in this order:
 *   1. round latency p50/p99 at a steady 100 rounds/s from node 0 (card reading → co-signed proof), and the
 *      signed accuracy and §7 deviation of those proofs, the accuracy as a ratio to the physical floor measured right
 *      after (benchUdpRoundTrip.ts: half the best bare cross-process UDP round trip plus the card accuracy);
 *   2. the most rounds/s node 0 completes back to back, one at a time and pipelined, beside the ceiling the signatures of a round set on this
 *      machine (measured here: P-256 sign, secp256k1 sign and recover, P-256 verify);
 *   3. GET /time/current throughput of node 1 while its own rounds run at 100/s, as a ratio to a bare node:http
 *      server answering a body of the same size (bench-node.ts --baseline-http) on the same pinned core, with the
 *      load generator on the other core; BENCH_MESH_RUNS alternating runs (default 3), reported as a range.
 * Phases 1 and 2 leave the five processes to the OS scheduler on this machine's cores; phase 3 pins node 1 (then
 * the baseline) to core 0 and everything else to core 1.
 * Environment: BENCH_MESH_S (seconds of the steady phase, default 10), BENCH_MESH_RUNS, BENCH_PIN=0 (no pinning).
 * Every process binds 127.0.0.1 on free ports and is stopped at the end, also on failure.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { createDevIdentity, createDevManufacturerCa, type DevIdentity } from "../protocol/devca";
import { decodeHardwareSignature, hwMessage, timeAttestationForProof } from "../protocol/codec";
import { saveKeyDir } from "../protocol/keystore";
import { recoverNodeAddress, signNodeEntry } from "../protocol/sign";
import { createP256KeyCache, verifyP256Signature } from "../protocol/verify";
import { DevTimeCard } from "../node/card/dev";
import { freeUdpPorts } from "../node/cluster";
import { loadConfig } from "../node/config";
import { createTimeService } from "../node/compose";
import type { CoreTimeService } from "../node/core";
import { createMeshStage } from "../node/mesh";
import { alternatingRatio, fmt, fmtRange, percentile, pin, PINNING, WRK } from "./benchUtil";
import { measureUdpRoundTrip } from "./benchUdpRoundTrip";
import { startNodeProcess, stopNodeProcess, type NodeProcess } from "./nodeProcess";

const MEMBERS = 5;
const STEADY_S = Number(process.env.BENCH_MESH_S ?? 10);
const RUNS = Number(process.env.BENCH_MESH_RUNS ?? 3);
const LOAD_S = 8;
/** Node 0's meshMaxRoundsInFlight in phase 2 (the setting's default), and how many callers ask for rounds at once. */
const ROUNDS_IN_FLIGHT = 4;
const PIPELINED_CALLERS = 8;
/** The signed accuracy goal on loopback: its p50 at most this many times the physical floor (issue 31). */
const GOAL_ACCURACY_TO_FLOOR = 1.5;
const NODE_CORE = 0;
const OTHER_CORE = 1;
const ROOT = join(__dirname, "..");
const BASELINE_SCRIPT = join(ROOT, "dist-bench", "scripts", "bench-node.js");

type Row = [string, string, string];

interface Cluster {
  root: string;
  identities: DevIdentity[];
  ports: number[];
  trustedRootPem: string;
}

/** Settings every member shares (config-file shapes). */
function memberSettings(cluster: Cluster, index: number): Record<string, unknown> {
  const others = cluster.identities.map((other, otherIndex) => ({ other, otherIndex })).filter(({ otherIndex }) => otherIndex !== index);
  return {
    host: "127.0.0.1",
    restPort: 0,
    grpcEnabled: false,
    dataDir: join(cluster.root, `data-${index}`),
    trustedRootsPem: [cluster.trustedRootPem],
    trustedNodeAddresses: others.map(({ other }) => other.nodeAddress),
    meshPort: cluster.ports[index],
    meshPeers: others.map(({ other, otherIndex }) => `${other.nodeAddress}@127.0.0.1:${cluster.ports[otherIndex]}`),
    meshWindowNs: "1000000",
    meshProbeIntervalMs: 100,
    maxAcceptableDriftNs: "10000000",
    maxRequestsPerSecond: 0,
    logLevel: "error",
  };
}

async function startMemberProcess(cluster: Cluster, index: number, roundIntervalMs: number): Promise<NodeProcess> {
  const keyDir = join(cluster.root, `keys-${index}`);
  await saveKeyDir(keyDir, cluster.identities[index]!);
  const file = join(cluster.root, `node-${index}-${roundIntervalMs}.json`);
  writeFileSync(file, JSON.stringify({ ...memberSettings(cluster, index), keyDir, meshRoundIntervalMs: roundIntervalMs }));
  return startNodeProcess(file);
}

/** Node 0, in this process: its rounds are driven by the benchmark (no background rounds). */
async function startInProcessMember(cluster: Cluster): Promise<CoreTimeService> {
  const identity = cluster.identities[0]!;
  const config = loadConfig({ env: {}, cwd: cluster.root, overrides: { ...memberSettings(cluster, 0), meshRoundIntervalMs: 60_000, meshMaxRoundsInFlight: ROUNDS_IN_FLIGHT } });
  const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
  const logger = pino({ level: "error" });
  const consensus = createMeshStage({ config, nodeKey: identity.nodeKey, card, logger })!;
  const service = createTimeService({ config, card, nodeKey: identity.nodeKey, logger, ownsCard: true, consensus });
  await service.start();
  return service;
}

interface RoundSample {
  durationNs: bigint;
  accuracyNs: number;
  deviationNs: number;
}

async function steadyRounds(service: CoreTimeService, perSecond: number, durationS: number): Promise<{ samples: RoundSample[]; failures: Map<string, number> }> {
  const samples: RoundSample[] = [];
  const failures = new Map<string, number>();
  const intervalNs = 1_000_000_000n / BigInt(perSecond);
  const startNs = process.hrtime.bigint();
  for (let round = 0; round < perSecond * durationS; round += 1) {
    const dueNs = startNs + BigInt(round) * intervalNs;
    const waitMs = Number(dueNs - process.hrtime.bigint()) / 1e6;
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
    const t0 = process.hrtime.bigint();
    try {
      const signed = await service.attestNow();
      samples.push({ durationNs: process.hrtime.bigint() - t0, accuracyNs: signed.proof.accuracy, deviationNs: Number(signed.json.consensus?.deviationNs ?? "0") });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      failures.set(message, (failures.get(message) ?? 0) + 1);
    }
  }
  return { samples, failures };
}

/**
 * Distinct rounds/s node 0 completes with `callers` asking back to back: one caller runs rounds one after another;
 * more pipeline up to meshMaxRoundsInFlight rounds (callers beyond the rounds in flight join the newest, so rounds
 * are counted by their moments, not by answers).
 */
async function maxRounds(service: CoreTimeService, durationS: number, callers: number): Promise<number> {
  const endNs = process.hrtime.bigint() + BigInt(durationS) * 1_000_000_000n;
  const moments = new Set<bigint>();
  const caller = async (): Promise<void> => {
    while (process.hrtime.bigint() < endNs) {
      try {
        moments.add((await service.attestNow()).proof.nanoMoment);
      } catch {
        // a failed round does not count
      }
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
  return moments.size / durationS;
}

/** Mean µs of `fn` over `iterations` after a warm-up. */
function microUs(iterations: number, fn: () => void): number {
  for (let i = 0; i < Math.min(200, iterations); i += 1) fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i += 1) fn();
  return Number(process.hrtime.bigint() - t0) / 1e3 / iterations;
}

/** The signatures of one round, timed on this machine: the rounds/s they allow. */
function signatureCeiling(identity: DevIdentity): { rows: Row[]; proposerCeiling: number; machineCeiling: number } {
  const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
  const moment = card.readTimeNs();
  const hardwareSignature = card.signHardware(moment);
  const base = { nanoMoment: moment, hardwareSignature, accuracy: 1_000 };
  const attestation = timeAttestationForProof(base, moment);
  const entry = signNodeEntry(identity.nodeKey, attestation);
  const decoded = decodeHardwareSignature(hardwareSignature);
  const p256SignUs = microUs(2_000, () => card.signHardware(moment));
  const secpSignUs = microUs(2_000, () => signNodeEntry(identity.nodeKey, attestation));
  const recoverUs = microUs(2_000, () => recoverNodeAddress(attestation, entry));
  const keyCache = createP256KeyCache(); // as a mesh member keeps its peers' card keys parsed
  const p256VerifyUs = microUs(2_000, () => verifyP256Signature({ message: hwMessage(decoded.cardId, moment) }, decoded.r, decoded.s, card.publicKey, keyCache));
  const peers = MEMBERS - 1;
  // The proposer: its card's signature, its own entry, and one recovery per co-signature it checks.
  const proposerUs = p256SignUs + secpSignUs + peers * recoverUs;
  // Each peer: the card signature it checks and the entry it signs.
  const responderUs = p256VerifyUs + secpSignUs;
  const cores = Math.min(2, cpus().length);
  const proposerCeiling = 1e6 / proposerUs;
  const machineCeiling = (cores * 1e6) / (proposerUs + peers * responderUs);
  return {
    rows: [
      ["signature costs (one core, this machine)", `P-256 sign ${fmt(p256SignUs, 1)} µs, verify ${fmt(p256VerifyUs, 1)} µs; secp256k1 sign ${fmt(secpSignUs, 1)} µs, recover ${fmt(recoverUs, 1)} µs`, ""],
    ],
    proposerCeiling,
    machineCeiling,
  };
}

async function startBaseline(): Promise<{ child: ChildProcess; rest: string }> {
  const child = fork(BASELINE_SCRIPT, ["--baseline-http"], { execArgv: [], stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const rest = await new Promise<string>((resolve, reject) => {
    child.once("message", (message) => resolve((message as { endpoints: { rest: string } }).endpoints.rest));
    child.once("exit", (code) => reject(new Error(`baseline exited early (${code})`)));
  });
  pin(child.pid, NODE_CORE);
  return { child, rest };
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "ats-bench-mesh-"));
  const ca = await createDevManufacturerCa();
  const cluster: Cluster = {
    root,
    identities: await Promise.all(Array.from({ length: MEMBERS }, () => createDevIdentity({ ca }))),
    ports: await freeUdpPorts(MEMBERS),
    trustedRootPem: ca.certificatePem,
  };
  // Phases 1 and 2 leave scheduling to the OS (five processes on two cores); phase 3 pins.
  const members: Array<NodeProcess | undefined> = [];
  let node0: CoreTimeService | undefined;
  const rows: Row[] = [];
  try {
    node0 = await startInProcessMember(cluster);
    for (let index = 1; index < MEMBERS; index += 1) members[index] = await startMemberProcess(cluster, index, 1_000);
    // Sessions and a first round (hellos are answered within a probe interval).
    for (let attempt = 0; ; attempt += 1) {
      try {
        await node0.attestNow();
        break;
      } catch (error) {
        if (attempt > 100) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }

    const steady = await steadyRounds(node0, 100, STEADY_S);
    const durationsMs = steady.samples.map((sample) => Number(sample.durationNs) / 1e6).sort((a, b) => a - b);
    const accuracyUs = steady.samples.map((sample) => sample.accuracyNs / 1e3).sort((a, b) => a - b);
    const deviationUs = steady.samples.map((sample) => sample.deviationNs / 1e3).sort((a, b) => a - b);
    const failed = [...steady.failures.entries()].map(([message, count]) => `${count} × ${message}`).join("; ");
    rows.push([`round latency at a steady 100 rounds/s (${steady.samples.length} rounds${failed === "" ? "" : `; failed: ${failed}`})`, `p50 ${fmt(percentile(durationsMs, 50), 2)} ms, p99 ${fmt(percentile(durationsMs, 99), 2)} ms`, "≤ 5 / ≤ 15 ms (published 50 / 150 ms)"]);
    // The floor under those proofs, measured now, beside the running mesh: half the best bare round trip between two
    // processes plus the card accuracy (docs/protocol.md §7.2), what a perfect mesh on this machine would sign.
    const bare = await measureUdpRoundTrip();
    const cardAccuracyUs = loadConfig({ env: {}, cwd: cluster.root, overrides: memberSettings(cluster, 0) }).accuracyNs / 1e3;
    const floorUs = Math.ceil(bare.minNs / 2) / 1e3 + cardAccuracyUs;
    const accuracyRatio = percentile(accuracyUs, 50) / floorUs;
    rows.push([
      "physical floor (§7.2): half the best bare cross-process UDP round trip + card accuracy",
      `${fmt(floorUs, 1)} µs (bare round trip: best ${fmt(bare.minNs / 1e3, 1)} µs, p50 ${fmt(bare.p50Ns / 1e3, 1)} µs, ${fmt(bare.samples)} pings; card ${fmt(cardAccuracyUs, 1)} µs)`,
      "",
    ]);
    rows.push([
      "signed accuracy (docs/protocol.md §7.2) of those proofs",
      `p50 ${fmt(percentile(accuracyUs, 50), 1)} µs (**${fmt(accuracyRatio, 2)}× the floor**), p99 ${fmt(percentile(accuracyUs, 99), 1)} µs`,
      `p50 ≤ ${GOAL_ACCURACY_TO_FLOOR}× the floor — ${accuracyRatio <= GOAL_ACCURACY_TO_FLOOR ? "met" : "not met"}`,
    ]);
    rows.push(["§7 deviation (largest |reading − median|) of those proofs", `p50 ${fmt(percentile(deviationUs, 50), 1)} µs, p99 ${fmt(percentile(deviationUs, 99), 1)} µs`, ""]);

    const peerDelaysUs = node0
      .meshState()
      .peers.map((peer) => (peer.delayNs === null ? Number.NaN : Number(peer.delayNs) / 1e3))
      .sort((a, b) => a - b);
    rows.push(["clock filter: best-sample round-trip delay to each peer (node 0's view)", peerDelaysUs.map((us) => `${fmt(us, 1)} µs`).join(", "), ""]);

    const oneAtATime = await maxRounds(node0, 5, 1);
    const pipelined = await maxRounds(node0, 5, PIPELINED_CALLERS);
    const ceiling = signatureCeiling(cluster.identities[0]!);
    rows.push(...ceiling.rows);
    rows.push(["most rounds/s from one proposer, one round at a time (5 members)", `${fmt(oneAtATime)} rounds/s`, ""]);
    rows.push([
      `most rounds/s from one proposer, pipelined (${PIPELINED_CALLERS} callers, up to ${ROUNDS_IN_FLIGHT} rounds in flight)`,
      `${fmt(pipelined)} rounds/s`,
      "≥ 1,000 (published)",
    ]);
    rows.push(["ceiling the signatures of a round set", `${fmt(ceiling.proposerCeiling)} rounds/s on the proposer's core; ${fmt(ceiling.machineCeiling)} rounds/s for the whole mesh on ${Math.min(2, cpus().length)} cores`, ""]);

    // Throughput of a mesh node's GET /time/current: node 1 again, with its own rounds at 100/s.
    await stopNodeProcess(members[1]);
    pin(process.pid, OTHER_CORE);
    for (const member of members) pin(member?.child.pid, OTHER_CORE);
    const serving = await alternatingRatio({
      runs: RUNS,
      durationS: LOAD_S,
      startSubject: async () => {
        const meshNode = await startMemberProcess(cluster, 1, 10);
        pin(meshNode.child.pid, NODE_CORE);
        members[1] = meshNode;
        await new Promise((resolve) => setTimeout(resolve, 1_000)); // sessions and the first rounds
        return { url: `${meshNode.rest}/time/current`, stop: () => stopNodeProcess(meshNode) };
      },
      startBaseline: async () => {
        const baseline = await startBaseline();
        return { url: baseline.rest, stop: () => stopNodeProcess(baseline) };
      },
    });
    rows.push([
      `GET /time/current of a mesh node (its rounds at 100/s), ${WRK ? "wrk" : "autocannon"}, 100 connections, ${RUNS} runs`,
      `${fmtRange(serving.subject)} req/s; bare node:http ${fmtRange(serving.baseline)} req/s; ratio ${fmtRange(serving.ratios, 2)}, median ${fmt(percentile([...serving.ratios].sort((a, b) => a - b), 50), 2)}`,
      "ratio ≥ 0.8 as the median of the pairs",
    ]);
  } finally {
    await node0?.stop();
    await Promise.all(members.map((member) => stopNodeProcess(member)));
    rmSync(root, { recursive: true, force: true });
  }

  const cpu = cpus()[0]?.model ?? "unknown CPU";
  console.log(`\nbench:mesh — ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, ${cpus().length} × ${cpu}, Node ${process.version}, ${PINNING ? "pinned (node core 0, load core 1)" : "not pinned"}\n`);
  console.log("| measure | result | goal |");
  console.log("|---|---|---|");
  for (const [measure, result, goal] of rows) console.log(`| ${measure} | ${result} | ${goal} |`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
