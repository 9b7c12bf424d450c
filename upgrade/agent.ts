/**
 * The upgrade agent: one plan (upgrade/plan.ts) in, one value-free receipt (upgrade/receipt.ts) out. Both paths,
 * bundles installed by local or systemd units and images run by container units, go through the same steps; what
 * differs (what a unit runs, how it is pointed at another release) is the target's (upgrade/target.ts).
 *
 * Detail: docs/upgrade.md §4 (its steps 1–6, and "What it never does": the only files it writes, and the
 * source check in test/upgrade/plan.test.ts that it has no code path for keys, config, data or bind addresses).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Address } from "viem";
import { parseManifest } from "../wire/manifest";
import type { ContainerRuntime } from "./containerRuntime";
import { verifyImageRelease } from "./containerSwitch";
import type { FetchOptions } from "./fetchRelease";
import { checkAdoption } from "./adopt";
import { errorText, UpgradeRefusal } from "./errors";
import { meshSafeParallel, rolloutBatches } from "./batches";
import { firstFailure, runAcceptance, type AcceptanceContext, type GateResult } from "./gates";
import { verifyBundleRelease } from "./installSwitch";
import { isImagePlan, type AnyPlanNode, type AnyRelease, type BundlePlan, type ImagePlan, type UpgradePlan } from "./plan";
import { blockHashOf, createProbe, finalizedNumberOf, rpcClient, type NodeReading, type Probe } from "./probe";
import { assertValueFree, RECEIPT_VERSION, valueFreeText, type NodeReceipt, type Receipt } from "./receipt";
import { restoredOf, summaryOf, type Deployment, type NodeTarget, type VerifiedArtifact } from "./target";
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
  /** Environment of the unit commands (systemctl, journalctl, podman): PATH decides which binaries run. Default process.env. */
  commandEnv?: NodeJS.ProcessEnv;
  /** What container units ask which image digest a container runs; default podman on commandEnv's PATH. */
  containerRuntime?: ContainerRuntime;
  /** Bounds of a release downloaded from `release.source.url` (upgrade/fetchRelease.ts defaults). */
  download?: FetchOptions;
}

interface NodeState {
  node: AnyPlanNode;
  target: NodeTarget;
  probe: Probe;
  /** What the unit's record file named at preflight (for an adopted node: what it will name). */
  recorded: Deployment;
  /** A node without a record that the plan adopts (upgrade/adopt.ts): what runs, verified, recorded after preflight. */
  adoption: Deployment | null;
  /** The preflight reading; null only for a resumed node the killed run left stopped or still starting. */
  reading: NodeReading | null;
  receipt: NodeReceipt;
  /** The unit already names the target release (a rollout restarted after the agent was killed). */
  resumed: boolean;
}

/** Registered and active on the oracle: node and card status 1 (upgrade/probe.ts `registration`). */
const REGISTERED = /^getNode:1:.*\|getCard:1:/;

const nowIso = () => new Date().toISOString();

function emptyNodeReceipt(node: Pick<AnyPlanNode, "host" | "role">, unitName: string, artifactSha256: string): NodeReceipt {
  return { host: node.host, unit: unitName, role: node.role, outcome: "not-started", preflight: null, old: null, new: null, artifact_sha256: artifactSha256, started_at: null, finished_at: null, gates: [], rollback: null, note: null, adopted: null };
}

/** The receipt's artifact digest, from the plan (known before anything is fetched): a bundle's sha256, an image's manifest digest. */
function artifactSha256Of(plan: UpgradePlan): string {
  return isImagePlan(plan) ? plan.release.artifact.digest.slice("sha256:".length) : plan.release.artifact.sha256;
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number, pollMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/** An approved release (the plan's, or one a node adopts), verified, with the path its nodes take: nothing on a node has changed when this refuses. */
function verifyRelease(release: AnyRelease, options: RunUpgradeOptions): Promise<VerifiedArtifact> {
  const env = options.commandEnv;
  return release.artifact.kind === "image" ? verifyImageRelease(release as ImagePlan["release"], { env, runtime: options.containerRuntime }) : verifyBundleRelease(release as BundlePlan["release"], { env, download: options.download });
}

/**
 * The releases the plan's nodes adopt (upgrade/adopt.ts), by host, each verified once however many nodes name it.
 * Every one verified is pushed to `verified` as it is, so the caller disposes of them whatever refuses.
 */
async function verifyAdoptedReleases(nodes: readonly AnyPlanNode[], options: RunUpgradeOptions, verified: VerifiedArtifact[]): Promise<Map<string, VerifiedArtifact>> {
  const byRelease = new Map<string, VerifiedArtifact>();
  const byHost = new Map<string, VerifiedArtifact>();
  for (const node of nodes) {
    if (node.adopt === undefined) continue;
    const key = JSON.stringify(node.adopt.release);
    let release = byRelease.get(key);
    if (release === undefined) {
      release = await verifyRelease(node.adopt.release, options);
      verified.push(release);
      byRelease.set(key, release);
    }
    byHost.set(node.host, release);
  }
  return byHost;
}

export async function runUpgrade(options: RunUpgradeOptions): Promise<Receipt> {
  const { plan } = options;
  const log = options.log ?? (() => undefined);
  const confirm = options.confirm ?? (async () => false);
  const pollMs = options.pollMs ?? 500;
  const artifactSha256 = artifactSha256Of(plan);
  const receipt: Receipt = {
    version: RECEIPT_VERSION,
    plan_sha256: createHash("sha256").update(options.planText).digest("hex"),
    release_tag: plan.release.tag,
    release_id: plan.release.release_id,
    source_revision: plan.release.source_revision,
    artifact_sha256: artifactSha256,
    started_at: nowIso(),
    finished_at: nowIso(),
    outcome: "completed",
    refusal: null,
    nodes: [],
  };
  const ordered: AnyPlanNode[] = plan.rolloutOrder.map((host) => (plan.nodes as AnyPlanNode[]).find((node) => node.host === host)!);
  const states: NodeState[] = [];
  const verified: VerifiedArtifact[] = [];
  try {
    const artifact = await verifyRelease(plan.release, options);
    verified.push(artifact);
    log(artifact.description);
    const adopted = await verifyAdoptedReleases(ordered, options, verified);
    for (const [host, release] of adopted) log(`${host} adopts ${release.description}`);
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
    for (const node of ordered) states.push(await preflight(node, artifact, adopted.get(node.host), artifactSha256, manifest.chain.genesisHash, oracle, confirm));
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
    // Adopted nodes are recorded only now, every node having passed preflight: a refusal above changed nothing.
    for (const state of states) {
      if (state.adoption === null) continue;
      state.target.point(state.adoption);
      state.receipt.adopted = summaryOf(state.adoption);
      log(`${state.node.host}: adopted as ${state.adoption.releaseId}; ${state.target.recordName} written`);
    }

    // Rollout, batch by batch (upgrade/batches.ts): the nodes a killed run left on the target first, in batches of
    // their own, so they are all back before any other node moves; the first failure stops it.
    // The plan's bound, and never more members down at once than the mesh can lose and still co-sign.
    const meshMembers = Math.max(0, ...states.map((state) => state.reading?.members ?? 0));
    const maxParallel = meshSafeParallel(plan.maxParallel ?? 1, meshMembers);
    if (maxParallel < (plan.maxParallel ?? 1)) {
      log(`batches of at most ${maxParallel}: a ${meshMembers}-member mesh keeps its co-signing quorum with no more than that down`);
    }
    const batches = [...rolloutBatches(states.filter((state) => state.resumed), maxParallel), ...rolloutBatches(states.filter((state) => !state.resumed), maxParallel)];
    for (const batch of batches) {
      if (!(await runBatch(batch, manifest.chain.genesisHash, trustedView, plan, pollMs, log))) {
        receipt.outcome = "stopped";
        break;
      }
    }
  } catch (error) {
    if (!(error instanceof UpgradeRefusal)) throw error;
    log(`refused: ${error.message}`);
    receipt.outcome = "refused";
    receipt.refusal = { code: error.code, message: valueFreeText(error.message) };
    for (const node of ordered) if (!receipt.nodes.some((entry) => entry.host === node.host)) receipt.nodes.push(emptyNodeReceipt(node, "-", artifactSha256));
  } finally {
    for (const release of verified) release.dispose();
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

async function preflight(
  node: AnyPlanNode,
  artifact: VerifiedArtifact,
  adoptRelease: VerifiedArtifact | undefined,
  artifactSha256: string,
  genesisHash: string,
  oracle: Address,
  confirm: (question: string) => Promise<boolean>,
): Promise<NodeState> {
  const target = artifact.targetFor(node);
  const { unit } = target;
  const probe = createProbe({ rest: node.rest, rpc: node.rpc }, oracle);
  let recorded = target.recorded();
  let adoption: Deployment | null = null;
  if (recorded === null) {
    // A node whose install or image this agent did not record: outside the plan unless the plan adopts it.
    if (adoptRelease === undefined) {
      if (!(await confirm(`${node.host}: ${unit.name} has no ${target.recordName}; adopt it?`))) throw new UpgradeRefusal("not-confirmed", `${node.host}: ${unit.name} has no record (${target.recordName}), and adopting it was not confirmed`, { host: node.host });
      // A yes cannot say which approved release runs there, and nothing is adopted on a guess.
      throw new UpgradeRefusal("preflight-failed", `${node.host}: to adopt a node without a record (${target.recordName}), name the approved release it runs in the plan (nodes[].adopt)`, { host: node.host });
    }
    const reported = await probe.read().catch((error: unknown) => {
      throw new UpgradeRefusal("network-degraded", `${node.host}: cannot read the node (${(error as Error).message})`, { host: node.host });
    });
    adoption = checkAdoption(node, adoptRelease, await unit.status(), reported);
    recorded = adoption;
  }
  // A node with a record is not adopted, whatever the plan says: the same plan runs again after a run that adopted
  // it was killed, and the record it wrote (checked below like any other) is then what the node runs.
  // An adopted install's tree was recomputed by checkAdoption a moment ago.
  const tampered = adoption === null ? target.tampered(recorded) : null;
  if (tampered !== null) throw new UpgradeRefusal("preflight-failed", `${node.host}: ${tampered}`, { host: node.host });
  const resumed = recorded.releaseId === artifact.releaseId;
  if (resumed && !artifact.approves(recorded)) {
    throw new UpgradeRefusal("preflight-failed", `${node.host}: ${target.recordName} names ${recorded.releaseId} with ${recorded.digest}, not the approved artifact`, { host: node.host, recorded: recorded.digest });
  }
  const status = await unit.status();
  const receipt = emptyNodeReceipt(node, unit.name, artifactSha256);
  const previous = resumed ? target.previous() : null;
  receipt.old = summaryOf(previous ?? recorded);
  // What runs must be what the record names. A resumed node may still run the previous release: a killed run
  // pointed a container's image file at the target and died before the restart (the rollout restarts it).
  if (status.active && status.runs !== null && status.runs !== recorded.runs && !(resumed && status.runs === previous?.runs)) {
    throw new UpgradeRefusal("preflight-failed", `${node.host}: ${unit.name} runs ${status.runs}, but ${target.recordName} names ${recorded.runs}: changed outside the agent`, { host: node.host });
  }
  if (!status.active) {
    // A killed run stops a node only after putting the target in place and before pointing the record file at
    // it, or after: a stopped node already on the target is the one it left down, resumed first; any other
    // stopped node is not ours to start.
    if (!resumed) throw new UpgradeRefusal("network-degraded", `${node.host}: ${unit.name} is not running`, { host: node.host });
    receipt.note = "stopped by an interrupted rollout; resumed first";
    return { node, target, probe, recorded, adoption, reading: null, receipt, resumed };
  }
  let reading: NodeReading;
  try {
    reading = await probe.read();
  } catch (error) {
    if (resumed) {
      // Started by the killed run a moment before it died: still opening. Its acceptance waits for its first answer.
      receipt.note = "not answering yet after an interrupted rollout started it; resumed first";
      return { node, target, probe, recorded, adoption, reading: null, receipt, resumed };
    }
    throw new UpgradeRefusal("network-degraded", `${node.host}: cannot read the node (${(error as Error).message})`, { host: node.host });
  }
  if (reading.genesisHash !== genesisHash) throw new UpgradeRefusal("preflight-failed", `${node.host} serves another chain than the manifest's`, { host: node.host });
  if (reading.role !== node.role) throw new UpgradeRefusal("preflight-failed", `${node.host} reports role ${reading.role}, the plan says ${node.role}`, { host: node.host });
  if (!resumed && compareVersions(artifact.nodeVersion, reading.version) <= 0) {
    throw new UpgradeRefusal("downgrade", `${node.host} runs ${reading.version}; ${artifact.releaseId} is ${artifact.nodeVersion} (${artifact.versionSource}), not newer: never downgrade`, {
      host: node.host,
      running: reading.version,
      target: artifact.nodeVersion,
    });
  }
  receipt.preflight = preflightSummary(reading);
  return { node, target, probe, recorded, adoption, reading, receipt, resumed };
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

/** Whether a resumed node must be started: it is stopped, or still runs what its record named before the killed run switched it. */
async function notRunning(unit: NodeUnit, deployment: Deployment): Promise<boolean> {
  const status = await unit.status();
  return !status.active || (status.runs !== null && status.runs !== deployment.runs);
}

/** Builds the gates' context for `deployment` on this node. */
type ContextFor = (deployment: Deployment, baseline: NodeReading, logCursor: string, finalizedAtStop: bigint) => AcceptanceContext;

/** One node's switch, once it has been accepted or rolled back. */
interface NodeRun {
  accepted: boolean;
  /** Rolls an accepted node back because another node of its batch failed (a failed node rolled itself back). */
  undo(why: string): Promise<void>;
}

/**
 * Switches one batch (upgrade/batches.ts) at once and waits for every node of it to be accepted or rolled back.
 * Each release is put in place for every node first (staging changes no node, and a refusal there leaves the
 * batch untouched). When any node fails, every node of the batch that was accepted is rolled back too: a batch
 * goes forward together or not at all, so the rollout stops with no node on a release another one failed on.
 * True when every node was accepted.
 */
async function runBatch(batch: readonly NodeState[], genesisHash: string, trusted: AcceptanceContext["trusted"], plan: UpgradePlan, pollMs: number, log: (line: string) => void): Promise<boolean> {
  const prepared = batch.map((state) => (state.resumed ? state.recorded : state.target.prepare()));
  if (batch.length > 1) log(`switching ${batch.map((state) => state.node.host).join(", ")} together`);
  // allSettled, not all: a node whose unit command throws must not leave its batch-mates running unobserved.
  const settled = await Promise.allSettled(batch.map((state, index) => upgradeNode(state, prepared[index]!, genesisHash, trusted, plan, pollMs, log)));
  const failed = batch.filter((_, index) => settled[index]!.status === "rejected" || !(settled[index] as PromiseFulfilledResult<NodeRun>).value.accepted);
  if (failed.length === 0) return true;
  const why = `rolled back with its batch: ${failed.map((state) => state.node.host).join(", ")} failed`;
  // allSettled again: one rollback that throws must not end the run while its batch-mates are still rolling back.
  // (A rollback that throws records itself as rollback-failed: upgradeNode's rollBack.)
  const undone = await Promise.allSettled(settled.map((result) => (result.status === "fulfilled" && result.value.accepted ? result.value.undo(why) : undefined)));
  const thrown = [...settled, ...undone].find((result): result is PromiseRejectedResult => result.status === "rejected");
  if (thrown !== undefined) throw thrown.reason;
  return false;
}

async function upgradeNode(
  state: NodeState,
  prepared: Deployment,
  genesisHash: string,
  trusted: AcceptanceContext["trusted"],
  plan: UpgradePlan,
  pollMs: number,
  log: (line: string) => void,
): Promise<NodeRun> {
  const { node, target, receipt } = state;
  const { unit } = target;
  const limits: Limits = { warmupMs: plan.acceptance.warmupMs, timeoutMs: plan.acceptance.timeoutMs, pollMs };
  receipt.started_at = nowIso();
  const previous = state.resumed ? target.previous() : state.recorded;
  const contextFor: ContextFor = (deployment, baseline, logCursor, finalizedAtStop) => ({
    unit,
    record: { name: target.recordName, releaseId: () => target.recorded()?.releaseId ?? null },
    probe: state.probe,
    trusted,
    target: { kind: deployment.kind, runs: deployment.runs, releaseId: deployment.releaseId, ...target.expected(deployment, baseline) },
    baseline,
    requireRegistered: state.resumed,
    manifestGenesisHash: genesisHash,
    finalizedAtStop,
    logCursor,
    maxLogErrors: plan.acceptance.maxLogErrors,
  });
  const deployment = prepared;
  let cursor = await unit.logCursor();
  let finalizedAtStop = (await trusted.finalizedNumber()) ?? 0n;
  if (state.resumed) {
    log(`${node.host}: already on ${deployment.releaseId}${state.reading === null ? ", left stopped or starting by an interrupted run" : ""}; accepting it again`);
  } else {
    log(`${node.host}: ${deployment.releaseId} in place; switching ${unit.name}`);
    cursor = await unit.logCursor();
    finalizedAtStop = (await trusted.finalizedNumber()) ?? 0n;
    await target.stop();
    target.point(deployment);
  }
  receipt.new = summaryOf(deployment);
  let baseline: NodeReading | null = state.resumed ? null : state.reading;
  let gates: GateResult[];
  try {
    if (!state.resumed || (await notRunning(unit, deployment))) await target.start();
    if (state.resumed) {
      const reading = state.reading ?? (await firstReading(state.probe, limits));
      baseline = reading === null ? null : unseenBaseline(reading);
    }
    if (baseline === null) gates = [{ gate: "unit-running", passed: false, detail: `the resumed node did not answer within ${limits.timeoutMs} ms` }];
    else ({ gates } = await runAcceptance(contextFor(deployment, baseline, cursor, finalizedAtStop), limits));
  } catch (error) {
    gates = [{ gate: "unit-running", passed: false, detail: `start failed (${(error as Error).name})` }];
  }
  receipt.gates = gates;
  const rollBack = async (note: string): Promise<void> => {
    receipt.note = valueFreeText(note);
    try {
      const rolledBack = await rollback(state, previous, baseline, contextFor, trusted, limits, log);
      receipt.outcome = rolledBack ? "rolled-back" : "rollback-failed";
    } catch (error) {
      // A unit command that throws mid-rollback: the receipt says so before the refusal ends the run.
      receipt.outcome = "rollback-failed";
      receipt.note = valueFreeText(`${note}; its rollback failed: ${errorText(error)}`);
      throw error;
    } finally {
      receipt.finished_at = nowIso();
    }
  };
  const failed = firstFailure(gates);
  if (failed === undefined) {
    receipt.outcome = state.resumed ? "already-current" : "upgraded";
    receipt.finished_at = nowIso();
    log(`${node.host}: accepted (${gates.length} gates)`);
    return {
      accepted: true,
      undo: (why) => {
        log(`${node.host}: ${why}; rolling back`);
        return rollBack(why);
      },
    };
  }
  log(`${node.host}: gate ${failed.gate} failed (${failed.detail}); rolling back`);
  await rollBack(`stopped at gate ${failed.gate}: ${failed.detail}`);
  return { accepted: false, undo: async () => undefined };
}

/**
 * Restores the saved release (never data): checks it (an install's digest), points the record file back,
 * restarts, re-runs every gate. `baseline` is the node's reading before the failed start, or null when this run
 * never saw one (a resumed node that did not answer): the restored node's first answer is taken then.
 */
async function rollback(
  state: NodeState,
  saved: Deployment | null,
  baseline: NodeReading | null,
  contextFor: ContextFor,
  trusted: AcceptanceContext["trusted"],
  limits: Limits,
  log: (line: string) => void,
): Promise<boolean> {
  const { target, receipt } = state;
  if (saved === null) {
    receipt.rollback = null;
    receipt.note = valueFreeText(`${receipt.note ?? ""}; no saved ${target.recordName} to restore`);
    return false;
  }
  await target.stop();
  const digestVerified = target.tampered(saved) === null;
  receipt.rollback = { ...restoredOf(saved), digest_verified: digestVerified, gates: [], passed: false };
  if (!digestVerified) return false; // the saved install changed: starting it would run unapproved code
  target.point(saved);
  const logCursor = await target.unit.logCursor();
  const finalizedAtStop = (await trusted.finalizedNumber()) ?? 0n;
  await target.start();
  const before = baseline ?? (await firstReading(state.probe, limits).then((reading) => (reading === null ? null : unseenBaseline(reading))));
  let passed = false;
  let gates: GateResult[] = [{ gate: "unit-running", passed: false, detail: `the restored node did not answer within ${limits.timeoutMs} ms` }];
  if (before !== null) ({ passed, gates } = await runAcceptance(contextFor(saved, before, logCursor, finalizedAtStop), limits));
  receipt.rollback = { ...restoredOf(saved), digest_verified: true, gates, passed };
  log(`${state.node.host}: rollback to ${saved.releaseId} ${passed ? "passed every gate" : "FAILED its gates"}`);
  return passed;
}
