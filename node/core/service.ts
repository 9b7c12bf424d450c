/**
 * The TimeService: the one object every transport reads. It composes the attestor (produces proofs), the proof
 * archive (HISTORICAL_PROOF), the schedule store + delivery worker, and off-chain verification
 * (protocol/verify.ts + protocol/certs.ts). It owns no sockets: transports are thin adapters over it. It also owns
 * the verification caches (a RecoveryMemo the attestor seeds, a P256KeyCache) that verify() passes to protocol/.
 */
import { createHash } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "pino";
import { verifyCardCertificateChain } from "../../protocol/certs";
import { decodeHardwareSignature } from "../../protocol/codec";
import { NotFoundError, UnavailableError, ValidationError } from "../../protocol/errors";
import type { NodeKey } from "../../protocol/keys";
import type { Address, CardRecord, Hex, TimeProof } from "../../protocol/types";
import { createRecoveryMemo } from "../../protocol/sign";
import { createP256KeyCache, verifyTimeProof, type VerifyTimeProofContext } from "../../protocol/verify";
import type { TimeCard } from "../card/types";
import { createAnchoredClock } from "../card/hostClock";
import { redactedConfig, signingErrorBoundNs, type NodeConfig } from "../config";
import { ProofArchive } from "./archive";
import { Attestor } from "./attestor";
import type { CallbackTransport, ResolveHost } from "./callbackGuard";
import { ScheduleService } from "./schedules";
import type {
  HealthReport,
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
}

/** TimeService plus the operations that only the core's owner (CLI, tests, mesh) uses. */
export interface CoreTimeService extends TimeService {
  /**
   * verify() for a proof from a card this node does not know yet: checks `certificateChainPem` against the
   * configured trusted roots (asynchronous: WebCrypto), remembers the card on success, then runs verify().
   */
  verifyWithCertificateChain(proof: TimeProof, certificateChainPem: readonly string[]): Promise<VerifyOutcome>;
}

/** Remembered card chains: bounded, and re-checked after a while (certificates expire). */
const KNOWN_CHAIN_LIMIT = 1_024;
const KNOWN_CHAIN_TTL_MS = 10 * 60_000;

interface KnownCard {
  cardId: Hex;
  publicKey: Hex;
  checkedAtMs: number;
}

type ChainCheck = { ok: true; card: KnownCard } | { ok: false; detail: string };

function chainKey(chainPem: readonly string[]): string {
  const hash = createHash("sha256");
  for (const pem of chainPem) hash.update(pem.trim()).update("\n");
  return hash.digest("hex");
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

export function createTimeService(parameters: CreateTimeServiceParameters): CoreTimeService {
  const { config, card, nodeKey } = parameters;
  const logger = parameters.logger.child({ component: "time-service" });
  const nodeClockNs = parameters.nodeClockNs ?? createAnchoredClock();
  const ownCardId = card.cardId.toLowerCase() as Hex;
  const revokedCardIds = new Set(config.revokedCardIds.map((id) => id.toLowerCase()));
  const activeNodes = new Set<string>([nodeKey.address.toLowerCase(), ...config.trustedNodeAddresses.map((a) => a.toLowerCase())]);
  const knownChains = new Map<string, ChainCheck & { checkedAtMs: number }>();
  const knownCards = new Map<string, KnownCard>();
  // The service's own verification caches (protocol/ keeps none): the attestor seeds the recovery memo with every
  // entry it signs, so verify() of the node's own proofs, the common request, costs no ecrecover.
  const recoveryMemo = createRecoveryMemo();
  const p256KeyCache = createP256KeyCache();

  const attestor = new Attestor({
    card,
    nodeKey,
    accuracyNs: config.accuracyNs,
    signingErrorBoundNs: signingErrorBoundNs(config),
    tickIntervalNs: config.tickIntervalNs,
    maxServeAgeNs: config.maxAttestationAgeNs,
    refreshAfterNs: config.refreshAfterNs,
    nodeClockNs,
    // Components bind their own `component` to the caller's logger (a child of ours would print the key twice).
    logger: parameters.logger,
    recoveryMemo,
  });

  let archive: ProofArchive | null = null;
  let schedules: ScheduleService | null = null;
  let ownChainProblem: string | null = null;
  let running = false;
  let unsubscribeArchive: (() => void) | null = null;

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
      const cached = attestor.latest;
      if (cached !== null && cached.proof.nanoMoment >= executeAtNs) return attestor.current();
      const cardNowNs = card.readTimeNs();
      if (cardNowNs >= executeAtNs) return attestor.attest();
      const waitMs = Math.min(Math.max(Number((executeAtNs - cardNowNs + NS_PER_MS - 1n) / NS_PER_MS), 1), 1_000);
      // stop() or the caller aborts the wait (AbortError); the next round's checks then end the loop unsigned.
      await delay(waitMs, undefined, { signal: waitSignal }).catch(() => undefined);
    }
    throw new UnavailableError("the card clock did not reach executeAt", { executeAtNs: executeAtNs.toString() });
  }

  function requireStarted<T>(value: T | null, what: string): T {
    if (value === null) throw new UnavailableError(`node is not started: ${what} unavailable`, {});
    return value;
  }

  async function checkChain(chainPem: readonly string[], expectedCardId?: Hex): Promise<ChainCheck> {
    if (config.trustedRootsPem.length === 0) {
      return { ok: false, detail: "no trusted roots are configured (trustedRootsPem)" };
    }
    const result = await verifyCardCertificateChain({
      chainPem,
      trustedRootsPem: config.trustedRootsPem,
      nowMs: Date.now(),
      ...(expectedCardId === undefined ? {} : { cardId: expectedCardId }),
    });
    if (!result.valid) return { ok: false, detail: `${result.reason}: ${result.detail}` };
    return { ok: true, card: { cardId: result.cardId, publicKey: result.publicKey, checkedAtMs: Date.now() } };
  }

  function rememberChain(key: string, check: ChainCheck): void {
    if (knownChains.size >= KNOWN_CHAIN_LIMIT) {
      const oldest = knownChains.keys().next().value;
      if (oldest !== undefined) knownChains.delete(oldest);
    }
    knownChains.set(key, { ...check, checkedAtMs: Date.now() });
    if (check.ok) {
      if (knownCards.size >= KNOWN_CHAIN_LIMIT && !knownCards.has(check.card.cardId)) {
        const oldest = knownCards.keys().next().value;
        if (oldest !== undefined) knownCards.delete(oldest);
      }
      knownCards.set(check.card.cardId.toLowerCase(), check.card);
    }
  }

  function resolveCard(cardId: Hex): CardRecord | undefined {
    const id = cardId.toLowerCase();
    const revoked = revokedCardIds.has(id);
    if (id === ownCardId) return ownChainProblem === null ? { publicKey: card.publicKey, revoked } : undefined;
    const known = knownCards.get(id);
    if (known === undefined || Date.now() - known.checkedAtMs > KNOWN_CHAIN_TTL_MS) return undefined;
    return { publicKey: known.publicKey, revoked };
  }

  function verify(proof: TimeProof, opts: VerifyOptions = {}): VerifyOutcome {
    const proofCardId = cardIdOfProof(proof);
    if (opts.certificateChainPem !== undefined) {
      const known = knownChains.get(chainKey(opts.certificateChainPem));
      if (known === undefined || Date.now() - known.checkedAtMs > KNOWN_CHAIN_TTL_MS) {
        return {
          valid: false,
          reason: "certificate-chain-unchecked",
          detail: "this certificate chain has not been checked yet: use verifyWithCertificateChain()",
        };
      }
      if (!known.ok) return { valid: false, reason: "certificate-chain-invalid", detail: known.detail };
      if (proofCardId !== undefined && known.card.cardId.toLowerCase() !== proofCardId.toLowerCase()) {
        return {
          valid: false,
          reason: "certificate-chain-invalid",
          detail: `the chain certifies card ${known.card.cardId}, the proof is from ${proofCardId}`,
        };
      }
    }
    if (proofCardId?.toLowerCase() === ownCardId && ownChainProblem !== null) {
      return { valid: false, reason: "certificate-chain-invalid", detail: `this node's card chain: ${ownChainProblem}` };
    }
    const ctx: VerifyTimeProofContext = {
      resolveCard,
      isActiveNode: (address: Address) => activeNodes.has(address.toLowerCase()),
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
    const key = chainKey(certificateChainPem);
    const known = knownChains.get(key);
    if (known === undefined || Date.now() - known.checkedAtMs > KNOWN_CHAIN_TTL_MS) {
      rememberChain(key, await checkChain(certificateChainPem));
    }
    return verify(proof, { certificateChainPem: [...certificateChainPem] });
  }

  const info: NodeInfo = {
    nodeId: nodeKey.address,
    cardId: card.cardId,
    certificateChainPem: [...card.certificateChainPem],
    version: PACKAGE_VERSION,
    protocol: "ATS/1",
    accuracyNs: config.accuracyNs,
    tickIntervalNs: config.tickIntervalNs,
    maxAttestationAgeNs: config.maxAttestationAgeNs,
    maxFutureDriftNs: config.maxFutureDriftNs,
    maxAcceptableDriftNs: config.maxAcceptableDriftNs,
    nodeQuorum: config.nodeQuorum,
    archiveIntervalNs: config.archiveIntervalNs,
    archiveCapacity: config.archiveCapacity,
  };

  const service: CoreTimeService = {
    current: () => attestor.current(),
    nowNs: nodeClockNs,

    attestNow: async () => {
      if (!running) throw new UnavailableError("node is not started", {});
      return attestor.attest();
    },

    proofAtOrAfter,

    verify,
    verifyWithCertificateChain,

    schedule: (executeAtNs: bigint, callbackUrl: string, clientKey?: string): ScheduleRecord =>
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

    info: () => ({ ...info, certificateChainPem: [...info.certificateChainPem] }),

    health: (): HealthReport => {
      const latest = attestor.latest;
      const lastProofAgeNs = latest === null ? null : nodeClockNs() - latest.proof.nanoMoment;
      const measuredErrorNs = card.measuredErrorNs();
      if (attestor.tamperReason !== null) return { status: "tampered", reason: attestor.tamperReason, lastProofAgeNs, measuredErrorNs };
      if (!running || latest === null) return { status: "starting", reason: attestor.refusalReason, lastProofAgeNs, measuredErrorNs };
      // The same bound current() applies: past it the node answers 503 to every proof request.
      if (lastProofAgeNs !== null && lastProofAgeNs > config.maxAttestationAgeNs) {
        return { status: "stale", reason: attestor.refusalReason ?? "no fresh attestation: signing stalled", lastProofAgeNs, measuredErrorNs };
      }
      if (attestor.refusalReason !== null) return { status: "degraded", reason: attestor.refusalReason, lastProofAgeNs, measuredErrorNs };
      return { status: "ok", reason: null, lastProofAgeNs, measuredErrorNs };
    },

    stats: (): ServiceStats => {
      const attestorStats = attestor.stats();
      const scheduleStats = schedules?.stats() ?? { deliveredTotal: 0, failedTotal: 0, attemptsTotal: 0, dispatchesTotal: 0 };
      return {
        attestationsTotal: attestorStats.attestationsTotal,
        accuracyRefusalsTotal: attestorStats.accuracyRefusalsTotal,
        tamperEventsTotal: attestorStats.tamperEventsTotal,
        measuredErrorNs: card.measuredErrorNs(),
        lastSignDurationNs: attestorStats.lastSignDurationNs,
        archivedProofs: archive?.size() ?? 0,
        schedulesDeliveredTotal: scheduleStats.deliveredTotal,
        schedulesFailedTotal: scheduleStats.failedTotal,
        scheduleDeliveryAttemptsTotal: scheduleStats.attemptsTotal,
      };
    },

    onProof: (listener: (signed: SignedTime) => void) => attestor.onProof(listener),
    onTamper: (listener: (reason: string) => void) => attestor.onTamper(listener),
    onAlert: (listener: (alert: NodeAlert) => void) => attestor.onAlert(listener),

    start: async () => {
      if (running) return;
      if (config.trustedRootsPem.length > 0) {
        const check = await checkChain(card.certificateChainPem, card.cardId);
        ownChainProblem = check.ok ? null : check.detail;
        if (!check.ok) {
          logger.warn({ cardId: card.cardId, problem: check.detail }, "this node's card chain does not lead to a trusted root: verify() rejects its own proofs");
        }
      }
      archive = new ProofArchive({
        dataDir: config.dataDir,
        intervalNs: config.archiveIntervalNs,
        capacity: config.archiveCapacity,
        logger,
      });
      const openArchive = archive;
      unsubscribeArchive = attestor.onProof((signed) => {
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
