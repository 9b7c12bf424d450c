/**
 * The upgrade agent: one plan (upgrade/plan.ts) in, one value-free receipt (upgrade/receipt.ts) out.
 *
 * 1. Verify the release (upgrade/fetchRelease.ts) and the trusted node's chain against the manifest.
 * 2. Preflight every node before touching any: unit and install, executable digest, chain identity, finalized
 *    head, peers, sync, role, mesh state, identity and registration. Refuse a downgrade, a node not in the shape
 *    the plan says, a degraded network, or finality that does not advance.
 * 3. One node at a time, in the plan's order: stage the install beside the old one, stop the unit, point its
 *    install.env at the new install (the old record kept), start, and run the acceptance gates (upgrade/gates.ts).
 * 4. At the first failed gate: roll back that node (the saved install, its digest verified first; never chain
 *    data), run every gate again for the old release, and stop the rollout.
 *
 * What it can do to a host is the list above and nothing else: the only files it writes are staged installs and
 * install.env; it has no code path that writes a node's keys, config or data, deletes anything outside its own
 * temporary folder, moves a tag or changes a bind address (test/upgrade/plan.test.ts checks the sources).
 * A node that already runs the target release (a rollout restarted after the agent was killed) is accepted again,
 * or rolled back, before anything else moves, so a restarted agent never leaves two nodes down; the killed run may
 * have left it stopped or still starting, so it is started if stopped and its first answer taken as its baseline.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Address } from "viem";
import { parseManifest } from "../wire/manifest";
import { treeDigestOfDirectory } from "./digest";
import { UpgradeRefusal } from "./errors";
import { fetchVerifiedRelease, type VerifiedRelease } from "./fetchRelease";
import { firstFailure, runAcceptance, type AcceptanceContext, type AcceptanceTarget, type GateResult } from "./gates";
import { readInstallEnv, writeInstallEnv, type InstallRecord } from "./installEnv";
import { installedMetadata, installedRevision, stageInstall } from "./installs";
import { createLocalUnit } from "./localUnit";
import { isImagePlan, type BundlePlan, type ImagePlan, type PlanNode, type UpgradePlan } from "./plan";
import { blockHashOf, createProbe, finalizedNumberOf, rpcClient, type NodeReading, type Probe } from "./probe";
import { assertValueFree, RECEIPT_VERSION, valueFreeText, type NodeReceipt, type Receipt } from "./receipt";
import { createSystemdUnit } from "./systemdUnit";
import type { NodeUnit } from "./unit";
import { compareVersions } from "./version";

export interface RunUpgradeOptions {
  plan: UpgradePlan;
  /** The plan file's bytes, for the receipt's plan digest. */
  planText: string;
  /** Anything outside the plan (an install the agent did not stage) is asked here; default: no. */
  confirm?: (question: string) => Promise<boolean>;
  log?: (line: string) => void;
  /** Between two gate evaluations, ms. */
  pollMs?: number;
}

interface NodeState {
  node: PlanNode;
  unit: NodeUnit;
  probe: Probe;
  installed: InstallRecord;
  /** The preflight reading; null only for a resumed node the killed run left stopped or still starting. */
  reading: NodeReading | null;
  receipt: NodeReceipt;
  /** The unit already names the target release (a rollout restarted after the agent was killed). */
  resumed: boolean;
}

/** Registered and active on the oracle: node and card status 1 (upgrade/probe.ts `registration`). */
const REGISTERED = /^getNode:1:.*\|getCard:1:/;

const nowIso = () => new Date().toISOString();

export function unitOf(node: PlanNode): NodeUnit {
  return node.unit.kind === "local" ? createLocalUnit(node.unit.dir) : createSystemdUnit({ name: node.unit.name, installEnvFile: node.unit.installEnvFile });
}

function emptyNodeReceipt(node: Pick<PlanNode, "host" | "role">, unitName: string, artifactSha256: string): NodeReceipt {
  return { host: node.host, unit: unitName, role: node.role, outcome: "not-started", preflight: null, old: null, new: null, artifact_sha256: artifactSha256, started_at: null, finished_at: null, gates: [], rollback: null, note: null };
}

function installSummary(record: InstallRecord): NonNullable<NodeReceipt["old"]> {
  return { release_id: record.releaseId, source_revision: installedMetadata(record.installDir)?.source_revision ?? null, install_sha256: record.installSha256 };
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number, pollMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/**
 * An image plan is refused by `run` before anything is read: the container path's pieces (upgrade/registry.ts,
 * upgrade/containerSwitch.ts) are built, but the preflight and acceptance gates still read install.env and
 * installs, so a container rollout through them would check the wrong things (docs/upgrade.md §4a).
 */
function refuseImagePlan(plan: ImagePlan, planText: string): Receipt {
  const at = nowIso();
  const artifactSha256 = plan.release.artifact.digest.slice("sha256:".length);
  const message = "image plans are not run by the agent yet: its preflight and acceptance gates check installs, not container images (docs/upgrade.md)";
  const receipt: Receipt = {
    version: RECEIPT_VERSION,
    plan_sha256: createHash("sha256").update(planText).digest("hex"),
    release_tag: plan.release.tag,
    release_id: plan.release.release_id,
    source_revision: plan.release.source_revision,
    artifact_sha256: artifactSha256,
    started_at: at,
    finished_at: at,
    outcome: "refused",
    refusal: { code: "plan-invalid", message },
    nodes: plan.rolloutOrder.map((host) => emptyNodeReceipt(plan.nodes.find((node) => node.host === host)!, "-", artifactSha256)),
  };
  assertValueFree(receipt);
  return receipt;
}

export async function runUpgrade(options: RunUpgradeOptions): Promise<Receipt> {
  const { plan } = options;
  if (isImagePlan(plan)) return refuseImagePlan(plan, options.planText);
  const log = options.log ?? (() => undefined);
  const confirm = options.confirm ?? (async () => false);
  const pollMs = options.pollMs ?? 500;
  const receipt: Receipt = {
    version: RECEIPT_VERSION,
    plan_sha256: createHash("sha256").update(options.planText).digest("hex"),
    release_tag: plan.release.tag,
    release_id: plan.release.release_id,
    source_revision: plan.release.source_revision,
    artifact_sha256: plan.release.artifact.sha256,
    started_at: nowIso(),
    finished_at: nowIso(),
    outcome: "completed",
    refusal: null,
    nodes: [],
  };
  const ordered = plan.rolloutOrder.map((host) => plan.nodes.find((node) => node.host === host)!);
  const states: NodeState[] = [];
  let release: VerifiedRelease | undefined;
  try {
    release = fetchVerifiedRelease(plan.release);
    log(`release ${release.metadata.release_id} verified (bundle ${release.metadata.bundle.sha256.slice(0, 12)}…)`);
    const manifest = parseManifest(JSON.parse(readFileSync(plan.network.manifest, "utf8")));
    const oracle = manifest.contracts.TimeOracle as Address | undefined;
    if (oracle === undefined) throw new UpgradeRefusal("plan-invalid", "the manifest names no TimeOracle: on-chain registration cannot be checked");
    const trusted = rpcClient(plan.network.trustedRpc);
    const trustedView = { finalizedNumber: () => finalizedNumberOf(trusted), blockHash: (number: bigint) => blockHashOf(trusted, number) };
    if (String(await trusted.call("chain_getBlockHash", [0])).toLowerCase() !== manifest.chain.genesisHash) {
      throw new UpgradeRefusal("preflight-failed", "the trusted node serves another chain than the manifest's");
    }

    // Preflight: every node, before any changes.
    const finalizedBefore = await trustedView.finalizedNumber();
    for (const node of ordered) states.push(await preflight(node, release, manifest.chain.genesisHash, oracle, confirm));
    for (const state of states) receipt.nodes.push(state.receipt);
    for (const state of states) {
      if (state.resumed || state.reading === null || healthy(state.reading)) continue;
      // A mesh leaves Converged for a round or two when a peer restarts (the end of a previous rollout): degraded
      // means not back within timeoutMs, as finality below. The healthy reading becomes the node's baseline.
      const reading = await waitFor(() => state.probe.read().catch(() => null), (value) => value !== null && healthy(value), plan.acceptance.timeoutMs, pollMs);
      if (reading === null || !healthy(reading)) {
        const what = reading === null ? "not answering" : reading.isSyncing ? "syncing" : `mesh ${reading.convergenceState}`;
        throw new UpgradeRefusal("network-degraded", `${state.node.host} is ${what} after ${plan.acceptance.timeoutMs} ms: the network is already degraded`, { host: state.node.host });
      }
      state.reading = reading;
      state.receipt.preflight = preflightSummary(reading);
    }
    const finalizedAfter = await waitFor(trustedView.finalizedNumber, (number) => number !== null && finalizedBefore !== null && number > finalizedBefore, plan.acceptance.timeoutMs, pollMs);
    if (finalizedAfter === null || finalizedBefore === null || finalizedAfter <= finalizedBefore) {
      throw new UpgradeRefusal("network-degraded", `finality is not advancing (finalized ${String(finalizedAfter)} after ${plan.acceptance.timeoutMs} ms)`);
    }

    // Rollout: one node at a time; the first failure stops it.
    for (const state of [...states].sort((a, b) => Number(b.resumed) - Number(a.resumed))) {
      const accepted = await upgradeNode(state, release, manifest.chain.genesisHash, trustedView, plan, pollMs, log);
      if (!accepted) {
        receipt.outcome = "stopped";
        break;
      }
    }
  } catch (error) {
    if (!(error instanceof UpgradeRefusal)) throw error;
    log(`refused: ${error.message}`);
    receipt.outcome = "refused";
    receipt.refusal = { code: error.code, message: valueFreeText(error.message) };
    for (const node of ordered) if (!receipt.nodes.some((entry) => entry.host === node.host)) receipt.nodes.push(emptyNodeReceipt(node, "-", plan.release.artifact.sha256));
  } finally {
    release?.dispose();
  }
  receipt.finished_at = nowIso();
  assertValueFree(receipt);
  return receipt;
}

/** A node a rollout may start from: mesh Converged, not syncing. */
function healthy(reading: NodeReading): boolean {
  return reading.convergenceState === "Converged" && !reading.isSyncing;
}

/** What the receipt keeps of a preflight reading: comparisons and counts (genesis was checked against the manifest). */
function preflightSummary(reading: NodeReading): NonNullable<NodeReceipt["preflight"]> {
  return {
    at: nowIso(),
    genesis_matches_manifest: true,
    finalized_number: reading.finalizedNumber === null ? null : reading.finalizedNumber.toString(),
    peers: reading.peers,
    syncing: reading.isSyncing,
    mesh_state: reading.convergenceState,
    time_quality_reported: reading.timeQuality !== null,
    registered: REGISTERED.test(reading.registration),
  };
}

async function preflight(node: PlanNode, release: VerifiedRelease, genesisHash: string, oracle: Address, confirm: (question: string) => Promise<boolean>): Promise<NodeState> {
  const unit = unitOf(node);
  const installed = readInstallEnv(unit.installEnvFile);
  if (installed === null) {
    // A node whose install this agent did not record: outside the plan, so an operator decides.
    if (!(await confirm(`${node.host}: ${unit.name} has no install.env; adopt it?`))) throw new UpgradeRefusal("not-confirmed", `${node.host}: ${unit.name} has no install record, and adopting it was not confirmed`, { host: node.host });
    throw new UpgradeRefusal("preflight-failed", `${node.host}: adopting a node without an install record is not implemented`, { host: node.host });
  }
  const executableSha256 = treeDigestOfDirectory(installed.installDir);
  if (executableSha256 !== installed.installSha256) {
    throw new UpgradeRefusal("preflight-failed", `${node.host}: install ${installed.releaseId} was modified in place (tree ${executableSha256}, recorded ${installed.installSha256})`, { host: node.host });
  }
  const resumed = installed.releaseId === release.metadata.release_id;
  const status = await unit.status();
  const probe = createProbe({ rest: node.rest, rpc: node.rpc }, oracle);
  const receipt = emptyNodeReceipt(node, unit.name, release.metadata.bundle.sha256);
  const previous = resumed ? readInstallEnv(`${unit.installEnvFile}.previous`) : null;
  receipt.old = installSummary(previous ?? installed);
  if (!status.active) {
    // A killed run stops a node only after staging the target and before pointing install.env at it, or after:
    // a stopped node already on the target is the one it left down, resumed first; any other stopped node is
    // not ours to start.
    if (!resumed) throw new UpgradeRefusal("network-degraded", `${node.host}: ${unit.name} is not running`, { host: node.host });
    receipt.note = "stopped by an interrupted rollout; resumed first";
    return { node, unit, probe, installed, reading: null, receipt, resumed };
  }
  let reading: NodeReading;
  try {
    reading = await probe.read();
  } catch (error) {
    if (resumed) {
      // Started by the killed run a moment before it died: still opening. Its acceptance waits for its first answer.
      receipt.note = "not answering yet after an interrupted rollout started it; resumed first";
      return { node, unit, probe, installed, reading: null, receipt, resumed };
    }
    throw new UpgradeRefusal("network-degraded", `${node.host}: cannot read the node (${(error as Error).message})`, { host: node.host });
  }
  if (reading.genesisHash !== genesisHash) throw new UpgradeRefusal("preflight-failed", `${node.host} serves another chain than the manifest's`, { host: node.host });
  if (reading.role !== node.role) throw new UpgradeRefusal("preflight-failed", `${node.host} reports role ${reading.role}, the plan says ${node.role}`, { host: node.host });
  if (!resumed && compareVersions(release.metadata.node_version, reading.version) <= 0) {
    throw new UpgradeRefusal("downgrade", `${node.host} runs ${reading.version}; ${release.metadata.release_id} is ${release.metadata.node_version}, not newer: never downgrade`, {
      host: node.host,
      running: reading.version,
      target: release.metadata.node_version,
    });
  }
  receipt.preflight = preflightSummary(reading);
  return { node, unit, probe, installed, reading, receipt, resumed };
}

type Limits = { warmupMs: number; timeoutMs: number; pollMs: number };

/** The node's first answer after a start, or null when it does not answer within timeoutMs. */
async function firstReading(probe: Probe, limits: Limits): Promise<NodeReading | null> {
  return waitFor(() => probe.read().catch(() => null), (reading) => reading !== null, limits.timeoutMs, limits.pollMs);
}

/**
 * The "before" of a node whose stop this run did not see (a resumed node, or its rollback): the healthy mesh the
 * killed run left (Converged, every other member a peer) and the identity it shows now, which the identity gate
 * then also requires to be registered and active on the oracle.
 */
function unseenBaseline(reading: NodeReading): NodeReading {
  return { ...reading, convergenceState: "Converged", peers: reading.members - 1 };
}

async function upgradeNode(
  state: NodeState,
  release: VerifiedRelease,
  genesisHash: string,
  trusted: AcceptanceContext["trusted"],
  plan: BundlePlan,
  pollMs: number,
  log: (line: string) => void,
): Promise<boolean> {
  const { node, unit, receipt } = state;
  const limits: Limits = { warmupMs: plan.acceptance.warmupMs, timeoutMs: plan.acceptance.timeoutMs, pollMs };
  receipt.started_at = nowIso();
  const previous = state.resumed ? readInstallEnv(`${unit.installEnvFile}.previous`) : state.installed;
  const contextFor = (target: AcceptanceTarget, baseline: NodeReading, logCursor: string, finalizedAtStop: bigint): AcceptanceContext => ({
    unit,
    probe: state.probe,
    trusted,
    target,
    baseline,
    requireRegistered: state.resumed,
    manifestGenesisHash: genesisHash,
    finalizedAtStop,
    logCursor,
    maxLogErrors: plan.acceptance.maxLogErrors,
  });
  let target: InstallRecord;
  let cursor = await unit.logCursor();
  let finalizedAtStop = (await trusted.finalizedNumber()) ?? 0n;
  if (state.resumed) {
    target = state.installed;
    log(`${node.host}: already on ${target.releaseId}${state.reading === null ? ", left stopped or starting by an interrupted run" : ""}; accepting it again`);
  } else {
    target = stageInstall(node.installRoot, release);
    log(`${node.host}: staged ${target.releaseId}; stopping ${unit.name}`);
    cursor = await unit.logCursor();
    finalizedAtStop = (await trusted.finalizedNumber()) ?? 0n;
    await unit.stop();
    writeInstallEnv(unit.installEnvFile, target);
  }
  receipt.new = installSummary(target);
  const acceptanceTarget: AcceptanceTarget = { installDir: target.installDir, releaseId: target.releaseId, nodeVersion: release.metadata.node_version, sourceRevision: release.metadata.source_revision };
  let baseline: NodeReading | null = state.resumed ? null : state.reading;
  let gates: GateResult[];
  try {
    if (!state.resumed || !(await unit.status()).active) await unit.start();
    if (state.resumed) {
      const reading = state.reading ?? (await firstReading(state.probe, limits));
      baseline = reading === null ? null : unseenBaseline(reading);
    }
    if (baseline === null) gates = [{ gate: "unit-running", passed: false, detail: `the resumed node did not answer within ${limits.timeoutMs} ms` }];
    else ({ gates } = await runAcceptance(contextFor(acceptanceTarget, baseline, cursor, finalizedAtStop), limits));
  } catch (error) {
    gates = [{ gate: "unit-running", passed: false, detail: `start failed (${(error as Error).name})` }];
  }
  receipt.gates = gates;
  const failed = firstFailure(gates);
  if (failed === undefined) {
    receipt.outcome = state.resumed ? "already-current" : "upgraded";
    receipt.finished_at = nowIso();
    log(`${node.host}: accepted (${gates.length} gates)`);
    return true;
  }
  log(`${node.host}: gate ${failed.gate} failed (${failed.detail}); rolling back`);
  receipt.note = valueFreeText(`stopped at gate ${failed.gate}: ${failed.detail}`);
  const rolledBack = await rollback(state, previous, baseline, (saved, before, logCursor, stopAt) => contextFor(saved, before, logCursor, stopAt), trusted, limits, log);
  receipt.outcome = rolledBack ? "rolled-back" : "rollback-failed";
  receipt.finished_at = nowIso();
  return false;
}

/**
 * Restores the saved install (never data): verifies its digest, points install.env back, restarts, re-runs every
 * gate. `baseline` is the node's reading before the failed start, or null when this run never saw one (a resumed
 * node that did not answer): the restored node's first answer is taken then.
 */
async function rollback(
  state: NodeState,
  saved: InstallRecord | null,
  baseline: NodeReading | null,
  contextFor: (target: AcceptanceTarget, baseline: NodeReading, logCursor: string, finalizedAtStop: bigint) => AcceptanceContext,
  trusted: AcceptanceContext["trusted"],
  limits: Limits,
  log: (line: string) => void,
): Promise<boolean> {
  const { unit, receipt } = state;
  if (saved === null) {
    receipt.rollback = null;
    receipt.note = valueFreeText(`${receipt.note ?? ""}; no saved install to restore`);
    return false;
  }
  await unit.stop();
  const digestVerified = treeDigestOfDirectory(saved.installDir) === saved.installSha256;
  receipt.rollback = { restored_install_sha256: saved.installSha256, digest_verified: digestVerified, gates: [], passed: false };
  if (!digestVerified) return false; // the saved install changed: starting it would run unapproved code
  writeInstallEnv(unit.installEnvFile, saved);
  const logCursor = await unit.logCursor();
  const finalizedAtStop = (await trusted.finalizedNumber()) ?? 0n;
  await unit.start();
  const before = baseline ?? (await firstReading(state.probe, limits).then((reading) => (reading === null ? null : unseenBaseline(reading))));
  const oldVersion = installedMetadata(saved.installDir)?.node_version ?? before?.version ?? "unknown";
  let passed = false;
  let gates: GateResult[] = [{ gate: "unit-running", passed: false, detail: `the restored node did not answer within ${limits.timeoutMs} ms` }];
  if (before !== null) ({ passed, gates } = await runAcceptance(contextFor({ installDir: saved.installDir, releaseId: saved.releaseId, nodeVersion: oldVersion, sourceRevision: installedRevision(saved.installDir) }, before, logCursor, finalizedAtStop), limits));
  receipt.rollback = { restored_install_sha256: saved.installSha256, digest_verified: true, gates, passed };
  log(`${state.node.host}: rollback to ${saved.releaseId} ${passed ? "passed every gate" : "FAILED its gates"}`);
  return passed;
}
