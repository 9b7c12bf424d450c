/**
 * Acceptance gates: what must hold of a node after its start before the rollout moves on. An RPC that answers is
 * not success; each gate compares what the node now shows with what it showed before (the preflight reading) or
 * with an independent trusted node:
 *
 * Detail: docs/upgrade.md §4.
 */
import { countLogErrors, LOG_ERROR_KINDS, repeatedKinds } from "./logErrors";
import type { NodeReading, Probe } from "./probe";
import type { NodeUnit } from "./unit";

/*
 *   unit-running   the unit is active, runs the expected install or image digest (the container runtime's
 *                  inspect), and its process has not restarted
 *   version        GET /node/info reports the release's node version and source revision; the unit's record file
 *                  (install.env, or the image file) names the release
 *   genesis        the genesis hash is the manifest's (the node serves the same chain)
 *   not-syncing    system_health says it is not syncing
 *   finality       its finalized head moved past where it was when the node stopped, and its block at a common
 *                  finalized height is the trusted node's
 *   peers          as many mesh peers as before
 *   mesh           the mesh state is back to the one before (Converged), and time quality is reported (> 0)
 *   identity       node id, card id and their on-chain registrations are unchanged
 *   logs           at most acceptance.maxLogErrors error lines since the start, and no repeated consensus, database,
 *                  time-source or restart errors (upgrade/logErrors.ts: kinds and thresholds)
 *
 * The path (installs or images) is the target's (upgrade/target.ts): the gates compare what it says with what the
 * unit and the node report. Details are value-free (docs/upgrade.md): states, counts and block numbers, never an
 * id, hash or log text.
 */
export const GATE_NAMES = ["unit-running", "version", "genesis", "not-syncing", "finality", "peers", "mesh", "identity", "logs"] as const;
export type GateName = (typeof GATE_NAMES)[number];

export interface GateResult {
  gate: GateName;
  passed: boolean;
  detail: string;
}

export interface AcceptanceTarget {
  kind: "install" | "image";
  /** What the unit must report it runs (UnitStatus.runs): the install folder, or the image's manifest digest. */
  runs: string;
  releaseId: string;
  nodeVersion: string;
  /**
   * The revision the node must report: the approved one, or for a rollback its install's (null: built before
   * revisions) or the 12-digit prefix a restored image's release id carries (upgrade/target.ts ExpectedVersion).
   */
  sourceRevision: string | null;
}

export interface AcceptanceContext {
  unit: NodeUnit;
  /** The unit's record file: its name for details, and the release id it names now (null: none). */
  record: { name: string; releaseId(): string | null };
  probe: Probe;
  /** The independent node's view: its finalized number and block hashes. */
  trusted: { finalizedNumber(): Promise<bigint | null>; blockHash(number: bigint): Promise<string | null> };
  target: AcceptanceTarget;
  /** The preflight reading of this node (before it was stopped). */
  baseline: NodeReading;
  /**
   * The baseline was not read before the stop (a node a killed run left on the target): its identity is what the
   * node shows now, so the identity gate also requires the node and card registered and active on the oracle.
   */
  requireRegistered: boolean;
  manifestGenesisHash: string;
  /** The trusted node's finalized number when this node stopped: the node's head must move past it. */
  finalizedAtStop: bigint;
  logCursor: string;
  maxLogErrors: number;
}

export interface AcceptanceLimits {
  warmupMs: number;
  timeoutMs: number;
  /** Between two evaluations, ms. */
  pollMs?: number;
}

/** Node and card status 1 (active) on the oracle (upgrade/probe.ts `registration`). */
const ACTIVE_REGISTRATION = /^getNode:1:.*\|getCard:1:/;

function result(gate: GateName, passed: boolean, detail: string): GateResult {
  return { gate, passed, detail };
}

/** One evaluation of every gate, in order. A reading that fails makes the gates that need it fail, named. */
export async function evaluateGates(context: AcceptanceContext, firstPid: { value: number | null }): Promise<GateResult[]> {
  const results: GateResult[] = [];
  const status = await context.unit.status();
  if (status.active && firstPid.value === null) firstPid.value = status.pid;
  const restarted = status.active && firstPid.value !== null && status.pid !== firstPid.value;
  const wrongRelease = status.runs !== null && status.runs !== context.target.runs;
  results.push(
    result("unit-running", status.active && !restarted && !wrongRelease, !status.active ? "unit not active" : restarted ? "process restarted during acceptance" : wrongRelease ? `runs another ${context.target.kind}` : "active"),
  );

  let reading: NodeReading;
  try {
    reading = await context.probe.read();
  } catch (error) {
    const detail = `node did not answer (${(error as Error).name})`;
    for (const gate of GATE_NAMES.slice(1, -1)) results.push(result(gate, false, detail));
    results.push(await logGate(context));
    return results;
  }
  results.push(versionGate(context, reading));
  results.push(result("genesis", reading.genesisHash === context.manifestGenesisHash && reading.genesisHash === context.baseline.genesisHash, reading.genesisHash === context.manifestGenesisHash ? "unchanged" : "differs from the manifest"));
  results.push(result("not-syncing", !reading.isSyncing, reading.isSyncing ? "syncing" : "not syncing"));
  results.push(await finalityGate(context, reading));
  results.push(result("peers", reading.peers >= context.baseline.peers, `${reading.peers} peers (before: ${context.baseline.peers})`));
  const meshBack = reading.convergenceState === context.baseline.convergenceState;
  const quality = reading.timeQuality !== null && reading.timeQuality > 0;
  results.push(result("mesh", meshBack && quality, `${reading.convergenceState} (before: ${context.baseline.convergenceState}), time quality ${quality ? "reported" : "missing"}`));
  const sameIdentity = reading.nodeId === context.baseline.nodeId && reading.cardId === context.baseline.cardId;
  const sameRegistration = reading.registration === context.baseline.registration;
  const registered = !context.requireRegistered || ACTIVE_REGISTRATION.test(reading.registration);
  results.push(
    result(
      "identity",
      sameIdentity && sameRegistration && registered,
      !sameIdentity ? "node id or card id changed" : !sameRegistration ? "on-chain registration changed" : !registered ? "node or card not active on the oracle" : "node id, card id and registration unchanged",
    ),
  );
  results.push(await logGate(context));
  return results;
}

/** A full revision is compared whole; a release id's 12-digit prefix (a restored image) as the start of the node's. */
function revisionMatches(reported: string | null, expected: string | null): boolean {
  if (expected === null || reported === null) return reported === expected;
  return expected.length === 40 ? reported === expected : reported.startsWith(expected);
}

function versionGate(context: AcceptanceContext, reading: NodeReading): GateResult {
  if (reading.version !== context.target.nodeVersion) return result("version", false, "node reports another version");
  if (!revisionMatches(reading.revision, context.target.sourceRevision)) return result("version", false, reading.revision === null ? "node reports no source revision" : "node reports another source revision");
  if (context.record.releaseId() !== context.target.releaseId) return result("version", false, `${context.record.name} names another release`);
  return result("version", true, "expected version, source revision and release");
}

async function finalityGate(context: AcceptanceContext, reading: NodeReading): Promise<GateResult> {
  const trustedNumber = await context.trusted.finalizedNumber();
  if (reading.finalizedNumber === null || trustedNumber === null) return result("finality", false, "no finalized head");
  if (reading.finalizedNumber <= context.finalizedAtStop) return result("finality", false, `finalized ${reading.finalizedNumber}, not past ${context.finalizedAtStop} yet`);
  const common = reading.finalizedNumber < trustedNumber ? reading.finalizedNumber : trustedNumber;
  const [mine, theirs] = await Promise.all([context.probe.blockHash(common), context.trusted.blockHash(common)]);
  if (mine === null || mine !== theirs) return result("finality", false, `block ${common} differs from the trusted node's`);
  return result("finality", true, `finalized ${reading.finalizedNumber}, block ${common} matches the trusted node`);
}

/** The log gate alone (exported for its tests). */
export async function logGate(context: Pick<AcceptanceContext, "unit" | "logCursor" | "maxLogErrors">): Promise<GateResult> {
  const counts = countLogErrors(await context.unit.logSince(context.logCursor));
  const repeated = repeatedKinds(counts);
  const kinds = LOG_ERROR_KINDS.map((kind) => `${kind} ${counts.byKind[kind]}`).join(", ");
  const verdict = repeated.length > 0 ? `; repeated: ${repeated.join(", ")}` : "";
  return result("logs", counts.errors <= context.maxLogErrors && repeated.length === 0, `${counts.errors} error lines (at most ${context.maxLogErrors}); ${kinds}${verdict}`);
}

/** Evaluates the gates after the warm-up until all pass or the time is up; returns the last evaluation. */
export async function runAcceptance(context: AcceptanceContext, limits: AcceptanceLimits): Promise<{ passed: boolean; gates: GateResult[] }> {
  const startedAtMs = Date.now();
  const firstPid = { value: null as number | null };
  await new Promise((resolve) => setTimeout(resolve, limits.warmupMs));
  for (;;) {
    const gates = await evaluateGates(context, firstPid);
    if (gates.every((gate) => gate.passed)) return { passed: true, gates };
    // A restarted process or a wrong install or image does not heal by waiting.
    if (!gates[0]!.passed && gates[0]!.detail !== "unit not active") return { passed: false, gates };
    if (Date.now() - startedAtMs >= limits.timeoutMs) return { passed: false, gates };
    await new Promise((resolve) => setTimeout(resolve, limits.pollMs ?? 500));
  }
}

/** The first failed gate of an evaluation, or undefined. */
export function firstFailure(gates: readonly GateResult[]): GateResult | undefined {
  return gates.find((gate) => !gate.passed);
}
