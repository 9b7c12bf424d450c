/**
 * The TimeService: the one object every transport reads, a thin composition of the attestor (local attestations,
 * through the co-signing stage of cosign.ts: solo for a lone node), the trust store (trustStore.ts: the cards and
 * nodes verify() accepts), health (health.ts), the proof archive (HISTORICAL_PROOF) and the schedule store +
 * delivery worker. It owns no sockets: transports are thin adapters over it. It also owns the verification caches
 * (a RecoveryMemo the attestor seeds, a P256KeyCache) that verify() passes to protocol/.
 */
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import { decodeHardwareSignature } from "../../protocol/codec";
import { NotFoundError, UnavailableError, ValidationError } from "../../protocol/errors";
import type { NodeKey } from "../../protocol/keys";
import type { Hex, TimeProof } from "../../protocol/types";
import { createRecoveryMemo } from "../../protocol/sign";
import { createP256KeyCache, verifyTimeProof, type VerifyTimeProofContext } from "../../protocol/verify";
import type { TimeCard } from "../card/types";
import { anchorToWallClock, clockFromAnchor, type WallClockAnchor } from "../card/hostClock";
import { advertisedAccuracyNs, redactedConfig, signingErrorBoundNs, type NodeConfig } from "../config";
import { ProofArchive } from "./archive";
import { BUILD_REVISION_FILE, readBuildRevision } from "./buildRevision";
import { Attestor } from "./attestor";
import type { CallbackTransport, ResolveHost } from "../schedules/callbackGuard";
import { soloCoSigning, type ConsensusStage, type ConsensusStageFactory } from "./cosign";
import { createHealthCheck } from "./health";
import { ScheduleService } from "../schedules/service";
import { TrustStore } from "./trustStore";
import type {
  MeshStateReport,
  NodeAlert,
  NodeInfo,
  ScheduleRecord,
  ServiceStats,
  SignedTime,
  TimeService,
  VerifyOptions,
  VerifyOutcome,
} from "./types";

/** The package version reported by info(). */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const PACKAGE_VERSION = (require("../../package.json") as { version: string }).version;
/** The source revision reported by info(): a release install's BUILD-REVISION.json beside that package.json, else null. */
const SOURCE_REVISION = readBuildRevision(join(__dirname, "..", "..", BUILD_REVISION_FILE));

export interface CreateTimeServiceParameters {
  config: NodeConfig;
  card: TimeCard;
  nodeKey: NodeKey;
  logger: Logger;
  /** The node's own clock (ns since the Unix epoch); defaults to the host clock anchored to the wall clock. */
  nodeClockNs?: () => bigint;
  /** How schedule callbacks resolve host names (default: the system resolver): see callbackGuard.ts. */
  resolveCallbackHost?: ResolveHost;
  /** How schedule callbacks are POSTed over the pinned connection (default: node:http/https): see callbackGuard.ts. */
  callbackTransport?: CallbackTransport;
  /** Jitter source for delivery retries; defaults to Math.random. */
  random?: () => number;
  /** stop() also closes the card (the service built it). Default false. */
  ownsCard?: boolean;
  /**
   * The mesh (node/mesh/createMeshStage) when the node has peers: the service then serves its co-signed proofs
   * instead of the attestor's one-entry ones. Omitted: a lone node.
   */
  consensus?: ConsensusStageFactory;
}

/** What a lone node reports as its mesh (docs/protocol.md §7.4): honest, never "Converged". */
function loneNodeState(role: string): MeshStateReport {
  return { convergenceState: "Initializing", timeQuality: 0, peerCount: 0, members: 1, threshold: 1, consensusOffsetNs: null, lastError: null, role, roundsSucceeded: 0, roundsFailed: {}, peers: [], tamperAlerts: [], contradictions: [], refused: { packets: {}, coSignRequests: 0, coSignRequestsByRule: {}, relayedProofs: {} } };
}

/** TimeService plus the operations that only the core's owner (CLI, tests, mesh) uses. */
export interface CoreTimeService extends TimeService {
  /**
   * verify() for a proof from a card this node does not know yet: checks `certificateChainPem` against the
   * configured trusted roots (asynchronous: WebCrypto), remembers the card on success, then runs verify().
   */
  verifyWithCertificateChain(proof: TimeProof, certificateChainPem: readonly string[]): Promise<VerifyOutcome>;
}

function cardIdOfProof(proof: TimeProof): Hex | undefined {
  try {
    return decodeHardwareSignature(proof.hardwareSignature).cardId;
  } catch {
    return undefined;
  }
}

const NS_PER_MS = 1_000_000n;
const PROOF_WAIT_ROUNDS = 20;
/** How often a node that only serves relayed proofs looks for one at or after a moment, ms. */
const RELAYED_PROOF_POLL_MS = 50;

export function createTimeService(parameters: CreateTimeServiceParameters): CoreTimeService {
  const { config, card, nodeKey } = parameters;
  const logger = parameters.logger.child({ component: "time-service" });
  // The node's own clock: the host clock anchored once, unless the caller gives one. The anchor lets a self-ticking
  // signer thread read the same clock (attestor.ts).
  let nodeClockNs: () => bigint;
  let nodeClockAnchor: WallClockAnchor | undefined;
  if (parameters.nodeClockNs === undefined) {
    nodeClockAnchor = anchorToWallClock();
    nodeClockNs = clockFromAnchor(nodeClockAnchor);
  } else {
    nodeClockNs = parameters.nodeClockNs;
  }
  const trust = new TrustStore({
    ownCard: card,
    ownNodeAddress: nodeKey.address,
    trustedNodeAddresses: config.trustedNodeAddresses,
    revokedCardIds: config.revokedCardIds,
    trustedRootsPem: config.trustedRootsPem,
  });
  // The service's own verification caches (protocol/ keeps none): the attestor seeds the recovery memo with every
  // entry it signs, so verify() of the node's own proofs, the common request, costs no ecrecover.
  const recoveryMemo = createRecoveryMemo();
  const p256KeyCache = createP256KeyCache();

  const attestor = new Attestor({
    card,
    nodeKey,
    // A card that proves its own bound (the chrony card) has that signed; this is then the most it may sign.
    accuracyNs: advertisedAccuracyNs(config),
    signingErrorBoundNs: signingErrorBoundNs(config),
    tickIntervalNs: config.tickIntervalNs,
    maxServeAgeNs: config.maxAttestationAgeNs,
    refreshAfterNs: config.refreshAfterNs,
    ...(config.signerThread === "auto" ? {} : { signInWorker: config.signerThread === "on" }),
    nodeClockNs,
    ...(nodeClockAnchor === undefined ? {} : { nodeClockAnchor }),
    // Components bind their own `component` to the caller's logger (a child of ours would print the key twice).
    logger: parameters.logger,
    recoveryMemo,
    coSigning: soloCoSigning(),
    // Only a primary signs as a card on its own; a mesh node serves its rounds' proofs instead of ticks.
    ticks: parameters.consensus === undefined && config.role === "primary",
  });

  const consensus: ConsensusStage | null =
    parameters.consensus?.({ assertCanSign: () => attestor.assertCanSign(), learnCardChain: (chain) => trust.checkChain(chain), resolveCard: trust.resolveCard }) ?? null;
  /** What transports serve: the mesh's co-signed proofs when there is a mesh, else the attestor's. */
  /** Why this node has nothing of its own to serve, or null: a non-primary role never signs as a card (§7.6). */
  const roleRefusal =
    config.role === "primary" ? null : `this node's role is ${config.role}: it never signs as a card, so it proposes no proofs of its own`;
  const refuseByRole = (): never => {
    throw new UnavailableError(roleRefusal ?? "", { role: config.role });
  };
  /** What transports serve: the mesh's co-signed proofs when there is a mesh, else the attestor's. */
  const served = consensus ?? attestor;
  /** A newly signed proof; with `notBeforeNs` (reached by the card clock), one whose moment is at or after it. */
  const freshProof = (notBeforeNs?: bigint): Promise<SignedTime> => {
    if (roleRefusal !== null) refuseByRole();
    return consensus === null ? Promise.resolve(attestor.attest()) : consensus.roundNow(notBeforeNs);
  };

  let archive: ProofArchive | null = null;
  let schedules: ScheduleService | null = null;
  let running = false;
  let unsubscribeArchive: (() => void) | null = null;
  let unsubscribeTamperBroadcast: (() => void) | null = null;

  /** Aborted by stop(): a delivery waiting for the card clock gives up at once instead of signing after stop. */
  let stopping = new AbortController();

  function throwIfStopping(): void {
    if (!running || stopping.signal.aborted) throw new UnavailableError("node is stopping: no new proofs", {});
  }

  /**
   * TimeService.proofAtOrAfter: the freshest servable proof with nanoMoment ≥ executeAtNs; waits (timers, at most
   * PROOF_WAIT_ROUNDS × 1 s) while the card clock is earlier. Throws UnavailableError once the service stops or
   * the card is tampered, without signing; rejects with the reason of `signal` when the caller gives up.
   */
  async function proofAtOrAfter(executeAtNs: bigint, signal?: AbortSignal): Promise<SignedTime> {
    // One controller per call, fed by both signals through listeners removed at the end: AbortSignal.any() with
    // the long-lived stopping signal would keep every call's composite signal alive on Node 20 (a leak per call).
    const wait = new AbortController();
    const abortWait = (): void => wait.abort();
    stopping.signal.addEventListener("abort", abortWait, { once: true });
    signal?.addEventListener("abort", abortWait, { once: true });
    try {
      return await waitForProofAtOrAfter(executeAtNs, wait.signal, signal);
    } finally {
      stopping.signal.removeEventListener("abort", abortWait);
      signal?.removeEventListener("abort", abortWait);
    }
  }

  async function waitForProofAtOrAfter(executeAtNs: bigint, waitSignal: AbortSignal, signal: AbortSignal | undefined): Promise<SignedTime> {
    for (let round = 0; round < PROOF_WAIT_ROUNDS; round += 1) {
      throwIfStopping();
      signal?.throwIfAborted();
      const tamper = card.tamperState();
      if (tamper.tampered) throw new UnavailableError(tamper.reason ?? "time card tampered", {});
      const cached = served.latest;
      if (cached !== null && cached.proof.nanoMoment >= executeAtNs) return served.current();
      const cardNowNs = card.readTimeNs();
      // A node that signs no proofs of its own (a non-primary mesh member) waits for the next relayed one instead.
      if (cardNowNs >= executeAtNs && (roleRefusal === null || consensus === null)) {
        // A mesh round already in flight read its moment before executeAt: roundNow never hands that one back,
        // and the moment is checked here as well, so a delivery never carries a proof dated before its time.
        const fresh = await freshProof(executeAtNs);
        if (fresh.proof.nanoMoment >= executeAtNs) return fresh;
        continue;
      }
      const untilDueMs = Number((executeAtNs - cardNowNs + NS_PER_MS - 1n) / NS_PER_MS);
      const waitMs = Math.min(Math.max(untilDueMs, roleRefusal === null ? 1 : RELAYED_PROOF_POLL_MS), 1_000);
      // stop() or the caller aborts the wait (AbortError); the next round's checks then end the loop unsigned.
      await delay(waitMs, undefined, { signal: waitSignal }).catch(() => undefined);
    }
    throw new UnavailableError("the card clock did not reach executeAt", { executeAtNs: executeAtNs.toString() });
  }

  function requireStarted<T>(value: T | null, what: string): T {
    if (value === null) throw new UnavailableError(`node is not started: ${what} unavailable`, {});
    return value;
  }

  function verify(proof: TimeProof, opts: VerifyOptions = {}): VerifyOutcome {
    const refused = trust.chainFailure(cardIdOfProof(proof), opts.certificateChainPem);
    if (refused !== undefined) return refused;
    const ctx: VerifyTimeProofContext = {
      resolveCard: trust.resolveCard,
      isActiveNode: trust.isActiveNode,
      nodeQuorum: config.nodeQuorum,
      nowNs: nodeClockNs(),
      maxAttestationAgeNs: config.maxAttestationAgeNs,
      maxFutureDriftNs: config.maxFutureDriftNs,
      maxAcceptableDriftNs: config.maxAcceptableDriftNs,
      recoveryMemo,
      p256KeyCache,
    };
    const result = verifyTimeProof(proof, ctx);
    return result.valid ? { valid: true, reason: null } : { valid: false, reason: result.reason, detail: result.detail };
  }

  async function verifyWithCertificateChain(proof: TimeProof, certificateChainPem: readonly string[]): Promise<VerifyOutcome> {
    await trust.checkChain(certificateChainPem);
    return verify(proof, { certificateChainPem: [...certificateChainPem] });
  }

  const health = createHealthCheck({
    attestor:
      consensus === null
        ? attestor
        : {
            // A mesh node is healthy when its co-signed proofs are: stale once the latest is older than the mesh's
            // serving bound, degraded while the mesh is not Converged.
            get latest() {
              return consensus.latest;
            },
            get tamperReason() {
              return attestor.tamperReason;
            },
            get refusalReason() {
              const state = consensus.state();
              if (attestor.refusalReason !== null) return attestor.refusalReason;
              return state.convergenceState === "Converged" ? null : `mesh ${state.convergenceState}${state.lastError === null ? "" : `: ${state.lastError}`}`;
            },
          },
    measuredErrorNs: () => card.measuredErrorNs(),
    cardStatus: () => card.status?.(),
    nowNs: nodeClockNs,
    isRunning: () => running,
    maxAttestationAgeNs: consensus === null ? config.maxAttestationAgeNs : config.meshMaxProofAgeNs,
  });

  const info: NodeInfo = {
    nodeId: nodeKey.address,
    cardId: card.cardId,
    certificateChainPem: [...card.certificateChainPem],
    version: PACKAGE_VERSION,
    revision: SOURCE_REVISION,
    protocol: "ATS/1",
    accuracyNs: advertisedAccuracyNs(config),
    tickIntervalNs: config.tickIntervalNs,
    maxAttestationAgeNs: config.maxAttestationAgeNs,
    maxFutureDriftNs: config.maxFutureDriftNs,
    maxAcceptableDriftNs: config.maxAcceptableDriftNs,
    nodeQuorum: config.nodeQuorum,
    archiveIntervalNs: config.archiveIntervalNs,
    archiveCapacity: config.archiveCapacity,
    role: config.role,
  };

  const service: CoreTimeService = {
    current: () => (roleRefusal !== null && served.latest === null ? refuseByRole() : served.current()),
    nowNs: nodeClockNs,
    cardNowNs: () => card.readTimeNs(),
    cardNtpUpstream: () => card.ntpUpstream?.() ?? null,

    attestNow: async () => {
      if (!running) throw new UnavailableError("node is not started", {});
      return freshProof();
    },

    proofAtOrAfter,

    verify,
    verifyWithCertificateChain,

    schedule: async (executeAtNs: bigint, callbackUrl: string, clientKey?: string): Promise<ScheduleRecord> =>
      requireStarted(schedules, "schedules").schedule(executeAtNs, callbackUrl, clientKey),

    getSchedule: (id: string): ScheduleRecord => requireStarted(schedules, "schedules").get(id),

    historical: (atNs: bigint): SignedTime => {
      if (typeof atNs !== "bigint" || atNs < 0n) throw new ValidationError("atNs", "must be a non-negative bigint of ns", {});
      const found = requireStarted(archive, "archive").nearestAtOrBefore(atNs);
      if (found === undefined) {
        throw new NotFoundError(`no archived proof at or before ${atNs} ns`, { atNs: atNs.toString() });
      }
      return found;
    },

    info: () => {
      const cardStatus = card.status?.();
      return { ...info, certificateChainPem: [...info.certificateChainPem], ...(cardStatus === undefined ? {} : { card: cardStatus }) };
    },

    meshState: () => consensus?.state() ?? loneNodeState(config.role),

    health,

    stats: (): ServiceStats => {
      const attestorStats = attestor.stats();
      const scheduleStats = schedules?.stats() ?? { deliveredTotal: 0, failedTotal: 0, attemptsTotal: 0, dispatchesTotal: 0, storeWriteErrorsTotal: 0 };
      return {
        attestationsTotal: attestorStats.attestationsTotal,
        accuracyRefusalsTotal: attestorStats.accuracyRefusalsTotal,
        tamperEventsTotal: attestorStats.tamperEventsTotal,
        measuredErrorNs: card.measuredErrorNs(),
        lastSignDurationNs: attestorStats.lastSignDurationNs,
        attestationSigner: attestorStats.signer,
        signerSelfTicking: attestorStats.selfTicking,
        archivedProofs: archive?.size() ?? 0,
        schedulesDeliveredTotal: scheduleStats.deliveredTotal,
        schedulesFailedTotal: scheduleStats.failedTotal,
        scheduleDeliveryAttemptsTotal: scheduleStats.attemptsTotal,
      };
    },

    onProof: (listener: (signed: SignedTime) => void) => served.onProof(listener),
    onTamper: (listener: (reason: string) => void) => attestor.onTamper(listener),
    onAlert: (listener: (alert: NodeAlert) => void) => attestor.onAlert(listener),

    start: async () => {
      if (running) return;
      const problem = await trust.checkOwnChain();
      if (problem !== null) {
        logger.warn({ cardId: card.cardId, problem }, "this node's card chain does not lead to a trusted root: verify() rejects its own proofs");
      }
      archive = new ProofArchive({
        dataDir: config.dataDir,
        intervalNs: config.archiveIntervalNs,
        capacity: config.archiveCapacity,
        logger,
      });
      const openArchive = archive;
      unsubscribeArchive = served.onProof((signed) => {
        try {
          openArchive.offer(signed);
        } catch (error) {
          logger.error({ err: error }, "archiving a proof failed");
        }
      });
      try {
        schedules = new ScheduleService({
          dataDir: config.dataDir,
          maxAttempts: config.scheduleMaxAttempts,
          baseBackoffMs: config.scheduleBaseBackoffMs,
          maxBackoffMs: config.scheduleMaxBackoffMs,
          deliveryTimeoutMs: config.scheduleDeliveryTimeoutMs,
          maxHorizonNs: config.scheduleMaxHorizonNs,
          maxPastNs: config.scheduleMaxPastNs,
          maxPending: config.scheduleMaxPending,
          maxPendingPerClient: config.scheduleMaxPendingPerClient,
          maxConcurrentDeliveries: config.scheduleMaxConcurrentDeliveries,
          maxCreatesPerSecond: config.scheduleMaxCreatesPerSecond,
          maxConcurrentDeliveriesPerClient: config.scheduleMaxConcurrentDeliveriesPerClient,
          allowedCallbackHosts: config.scheduleAllowedCallbackHosts,
          nowNs: nodeClockNs,
          proofAtOrAfter,
          logger: parameters.logger,
          ...(parameters.resolveCallbackHost === undefined ? {} : { resolveCallbackHost: parameters.resolveCallbackHost }),
          ...(parameters.callbackTransport === undefined ? {} : { callbackTransport: parameters.callbackTransport }),
          ...(parameters.random === undefined ? {} : { random: parameters.random }),
        });
      } catch (error) {
        unsubscribeArchive();
        archive.close();
        archive = null;
        throw error;
      }
      running = true;
      stopping = new AbortController();
      attestor.start();
      if (consensus !== null) {
        try {
          await consensus.start();
        } catch (error) {
          running = false;
          attestor.stop();
          unsubscribeArchive();
          await schedules.stop();
          archive.close();
          archive = null;
          schedules = null;
          throw error;
        }
        unsubscribeTamperBroadcast = attestor.onTamper((reason) => consensus.broadcastTamper(reason, nodeClockNs()));
      }
      schedules.start();
      logger.info(
        { nodeId: nodeKey.address, cardId: card.cardId, config: redactedConfig(config) },
        "time service started",
      );
    },

    stop: async () => {
      if (!running) return;
      running = false;
      stopping.abort();
      unsubscribeTamperBroadcast?.();
      unsubscribeTamperBroadcast = null;
      await consensus?.stop();
      attestor.stop();
      unsubscribeArchive?.();
      unsubscribeArchive = null;
      await schedules?.stop();
      schedules = null;
      archive?.close();
      archive = null;
      if (parameters.ownsCard === true) card.close();
      logger.info({ nodeId: nodeKey.address }, "time service stopped");
    },
  };
  return service;
}
