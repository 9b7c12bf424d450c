/**
 * The TimeService (types.ts): the one object every transport reads, a composition of the attestor (local
 * attestations, co-signed by the stage of cosign.ts: solo for a lone node, the mesh's otherwise), the trust store,
 * verification (verifier.ts), health, the proof wait (proofWait.ts), and the archive and schedules it is handed.
 * It owns no sockets and reads no configuration file: node/compose.ts builds it from the settings.
 */
import { join } from "node:path";
import type { Logger } from "pino";
import { NotFoundError, UnavailableError, ValidationError } from "../../protocol/errors";
import type { NodeKey } from "../../protocol/keys";
import type { TimeProof } from "../../protocol/types";
import { createRecoveryMemo } from "../../protocol/sign";
import type { TimeCard } from "../card/types";
import { anchorToWallClock, clockFromAnchor, type WallClockAnchor } from "../card/hostClock";
import type { ProofArchive } from "./archive";
import { BUILD_REVISION_FILE, readBuildRevision } from "./buildRevision";
import { Attestor } from "./attestor";
import { soloCoSigning, type ConsensusStage, type ConsensusStageFactory } from "./cosign";
import { createHealthCheck, servedHealthSource } from "./health";
import { createProofAtOrAfter, type ProofAtOrAfter } from "./proofWait";
import type { CoreSettings, SigningBounds } from "./settings";
import { TrustStore } from "./trustStore";
import { createVerifier } from "./verifier";
import type { MeshStateReport, NodeAlert, NodeInfo, ScheduleRecord, ServiceStats, SignedTime, TimeService, VerifyOutcome } from "./types";

/** The package version reported by info(). */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const PACKAGE_VERSION = (require("../../package.json") as { version: string }).version;
/** The source revision reported by info(): a release install's BUILD-REVISION.json beside that package.json, else null. */
const SOURCE_REVISION = readBuildRevision(join(__dirname, "..", "..", BUILD_REVISION_FILE));

/** The schedules as the service uses them (node/schedules ScheduleService fits). */
export interface ScheduleBook {
  schedule(executeAtNs: bigint, callbackUrl: string, clientKey?: string): Promise<ScheduleRecord>;
  get(id: string): ScheduleRecord;
  start(): void;
  stop(): Promise<void>;
  stats(): { deliveredTotal: number; failedTotal: number; attemptsTotal: number; pending: number; earliestDueNs: bigint | null };
}

/** What the schedules get from the service: its clock and its proof wait. */
export interface ScheduleBookDeps {
  nowNs: () => bigint;
  proofAtOrAfter: ProofAtOrAfter;
}

export interface CoreTimeServiceParameters {
  settings: CoreSettings;
  bounds: SigningBounds;
  card: TimeCard;
  nodeKey: NodeKey;
  logger: Logger;
  /** The node's own clock (ns since the Unix epoch); defaults to the host clock anchored to the wall clock. */
  nodeClockNs?: () => bigint;
  /** stop() also closes the card (the service built it). Default false. */
  ownsCard?: boolean;
  /** The mesh, when the node has peers: the service then serves its co-signed proofs. Omitted: a lone node. */
  consensus?: ConsensusStageFactory;
  /** Opens the proof archive, at every start (HISTORICAL_PROOF). */
  openArchive: (logger: Logger) => ProofArchive;
  /** Opens the schedules, at every start. */
  openSchedules: (deps: ScheduleBookDeps) => ScheduleBook;
  /** What the start log shows of the configuration (redacted by the caller). */
  startLogConfig?: Readonly<Record<string, unknown>>;
}

/** TimeService plus the operations that only the core's owner (CLI, tests, mesh) uses. */
export interface CoreTimeService extends TimeService {
  /**
   * verify() for a proof from a card this node does not know yet: checks `certificateChainPem` against the
   * configured trusted roots (asynchronous: WebCrypto), remembers the card on success, then runs verify().
   */
  verifyWithCertificateChain(proof: TimeProof, certificateChainPem: readonly string[]): Promise<VerifyOutcome>;
}

/** What a lone node reports as its mesh (docs/protocol.md §7.4): honest, never "Converged". */
function loneNodeState(role: string): MeshStateReport {
  return { convergenceState: "Initializing", timeQuality: 0, peerCount: 0, members: 1, threshold: 1, consensusOffsetNs: null, lastError: null, role, roundsSucceeded: 0, roundsFailed: {}, peers: [], tamperAlerts: [], contradictions: [], refused: { packets: {}, coSignRequests: 0, coSignRequestsByRule: {}, relayedProofs: {} } };
}

/** The node's own clock: the host clock anchored once (a self-ticking signer thread reads the same anchor). */
function nodeClock(given: (() => bigint) | undefined): { nowNs: () => bigint; anchor?: WallClockAnchor } {
  if (given !== undefined) return { nowNs: given };
  const anchor = anchorToWallClock();
  return { nowNs: clockFromAnchor(anchor), anchor };
}

export function createCoreTimeService(parameters: CoreTimeServiceParameters): CoreTimeService {
  const { settings, bounds, card, nodeKey } = parameters;
  const logger = parameters.logger.child({ component: "time-service" });
  const { nowNs: nodeClockNs, anchor: nodeClockAnchor } = nodeClock(parameters.nodeClockNs);
  const trust = new TrustStore({
    ownCard: card,
    ownNodeAddress: nodeKey.address,
    trustedNodeAddresses: settings.trustedNodeAddresses,
    revokedCardIds: settings.revokedCardIds,
    trustedRootsPem: settings.trustedRootsPem,
  });
  // The attestor seeds the service's recovery memo with every entry it signs (protocol/ keeps no caches).
  const recoveryMemo = createRecoveryMemo();
  const attestor = new Attestor({
    card,
    nodeKey,
    accuracyNs: bounds.accuracyNs,
    signingErrorBoundNs: bounds.signingErrorBoundNs,
    tickIntervalNs: settings.tickIntervalNs,
    maxServeAgeNs: settings.maxAttestationAgeNs,
    refreshAfterNs: settings.refreshAfterNs,
    ...(settings.signerThread === "auto" ? {} : { signInWorker: settings.signerThread === "on" }),
    nodeClockNs,
    ...(nodeClockAnchor === undefined ? {} : { nodeClockAnchor }),
    // Components bind their own `component` to the caller's logger (a child of ours would print the key twice).
    logger: parameters.logger,
    recoveryMemo,
    coSigning: soloCoSigning(),
    // Only a primary signs as a card on its own; a mesh node serves its rounds' proofs instead of ticks.
    ticks: parameters.consensus === undefined && settings.role === "primary",
  });
  const verifier = createVerifier(trust, settings, nodeClockNs, recoveryMemo);

  const consensus: ConsensusStage | null =
    parameters.consensus?.({ assertCanSign: () => attestor.assertCanSign(), learnCardChain: (chain) => trust.checkChain(chain), resolveCard: trust.resolveCard }) ?? null;
  /** Why this node has nothing of its own to serve, or null: a non-primary role never signs as a card (§7.6). */
  const roleRefusal =
    settings.role === "primary" ? null : `this node's role is ${settings.role}: it never signs as a card, so it proposes no proofs of its own`;
  const refuseByRole = (): never => {
    throw new UnavailableError(roleRefusal ?? "", { role: settings.role });
  };
  /** What transports serve: the mesh's co-signed proofs when there is a mesh, else the attestor's. */
  const served = consensus ?? attestor;
  /** A newly signed proof; with `notBeforeNs` (reached by the card clock), one whose moment is at or after it. */
  const freshProof = (notBeforeNs?: bigint): Promise<SignedTime> => {
    if (roleRefusal !== null) refuseByRole();
    return consensus === null ? Promise.resolve(attestor.attest()) : consensus.roundNow(notBeforeNs);
  };

  let archive: ProofArchive | null = null;
  let schedules: ScheduleBook | null = null;
  let running = false;
  let unsubscribeArchive: (() => void) | null = null;
  let unsubscribeTamperBroadcast: (() => void) | null = null;
  /** Aborted by stop(): a delivery waiting for the card clock gives up at once instead of signing after stop. */
  let stopping = new AbortController();

  const proofAtOrAfter = createProofAtOrAfter({
    card,
    served,
    freshProof,
    // A node that signs no proofs of its own (a non-primary mesh member) waits for the next relayed one instead.
    signsOwnProofs: roleRefusal === null || consensus === null,
    signsAsCard: roleRefusal === null,
    throwIfStopping: () => {
      if (!running || stopping.signal.aborted) throw new UnavailableError("node is stopping: no new proofs", {});
    },
    stoppingSignal: () => stopping.signal,
  });

  function requireStarted<T>(value: T | null, what: string): T {
    if (value === null) throw new UnavailableError(`node is not started: ${what} unavailable`, {});
    return value;
  }

  const health = createHealthCheck({
    attestor: consensus === null ? attestor : servedHealthSource(attestor, consensus),
    measuredErrorNs: () => card.measuredErrorNs(),
    cardStatus: () => card.status?.(),
    nowNs: nodeClockNs,
    isRunning: () => running,
    maxAttestationAgeNs: consensus === null ? settings.maxAttestationAgeNs : settings.meshMaxProofAgeNs,
  });

  const info: NodeInfo = {
    nodeId: nodeKey.address,
    cardId: card.cardId,
    certificateChainPem: [...card.certificateChainPem],
    version: PACKAGE_VERSION,
    revision: SOURCE_REVISION,
    protocol: "ATS/1",
    accuracyNs: bounds.accuracyNs,
    tickIntervalNs: settings.tickIntervalNs,
    maxAttestationAgeNs: settings.maxAttestationAgeNs,
    maxFutureDriftNs: settings.maxFutureDriftNs,
    maxAcceptableDriftNs: settings.maxAcceptableDriftNs,
    nodeQuorum: settings.nodeQuorum,
    archiveIntervalNs: settings.archiveIntervalNs,
    archiveCapacity: settings.archiveCapacity,
    role: settings.role,
  };

  /** Opens the archive (fed by every served proof) and the schedules; closes what it opened if one fails. */
  function openStores(): { archive: ProofArchive; schedules: ScheduleBook } {
    const openArchive = parameters.openArchive(logger);
    unsubscribeArchive = served.onProof((signed) => {
      try {
        openArchive.offer(signed);
      } catch (error) {
        logger.error({ err: error }, "archiving a proof failed");
      }
    });
    try {
      return { archive: openArchive, schedules: parameters.openSchedules({ nowNs: nodeClockNs, proofAtOrAfter }) };
    } catch (error) {
      unsubscribeArchive();
      openArchive.close();
      throw error;
    }
  }

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
    verify: verifier.verify,
    verifyWithCertificateChain: verifier.verifyWithCertificateChain,
    schedule: async (executeAtNs: bigint, callbackUrl: string, clientKey?: string): Promise<ScheduleRecord> =>
      requireStarted(schedules, "schedules").schedule(executeAtNs, callbackUrl, clientKey),
    getSchedule: (id: string): ScheduleRecord => requireStarted(schedules, "schedules").get(id),
    historical: (atNs: bigint): SignedTime => {
      if (typeof atNs !== "bigint" || atNs < 0n) throw new ValidationError("atNs", "must be a non-negative bigint of ns", {});
      const found = requireStarted(archive, "archive").nearestAtOrBefore(atNs);
      if (found === undefined) throw new NotFoundError(`no archived proof at or before ${atNs} ns`, { atNs: atNs.toString() });
      return found;
    },
    info: () => {
      const cardStatus = card.status?.();
      return { ...info, certificateChainPem: [...info.certificateChainPem], ...(cardStatus === undefined ? {} : { card: cardStatus }) };
    },
    meshState: () => consensus?.state() ?? loneNodeState(settings.role),
    health,
    stats: (): ServiceStats => {
      const attestorStats = attestor.stats();
      const scheduleStats = schedules?.stats() ?? { deliveredTotal: 0, failedTotal: 0, attemptsTotal: 0, pending: 0, earliestDueNs: null };
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
        schedulesPending: scheduleStats.pending,
        scheduleEarliestDueNs: scheduleStats.earliestDueNs,
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
      const stores = openStores();
      archive = stores.archive;
      schedules = stores.schedules;
      running = true;
      stopping = new AbortController();
      attestor.start();
      if (consensus !== null) {
        try {
          await consensus.start();
        } catch (error) {
          running = false;
          attestor.stop();
          unsubscribeArchive?.();
          await stores.schedules.stop();
          stores.archive.close();
          archive = null;
          schedules = null;
          throw error;
        }
        unsubscribeTamperBroadcast = attestor.onTamper((reason) => consensus.broadcastTamper(reason, nodeClockNs()));
      }
      stores.schedules.start();
      logger.info({ nodeId: nodeKey.address, cardId: card.cardId, config: parameters.startLogConfig ?? {} }, "time service started");
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
