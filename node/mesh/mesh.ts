/**
 * The time mesh of one node (docs/protocol.md §7): it measures its peers continuously, runs consensus rounds as
 * the proposer of its own card's moments, answers its peers' rounds, and keeps the latest co-signed proof for the
 * transports to serve.
 *
 * A round (one proposer, its n − 1 peers, on a short tick and on demand; rounds never overlap):
 *   1. exchange: the proposer reads its card (M) and sends M as t1 of a four-timestamp exchange to every peer
 *      with a session that is not absent (peers.ts: its last exchanges went unanswered; probes bring it back), and
 *      signs M with the card while the answers travel; each answer gives that peer's delay-compensated reading of
 *      M (protocol/consensus.ts readingFromExchange);
 *   2. consensus: runConsensusRound over the readings (its own included): ⌈2n/3⌉ responses, median, window W,
 *      the exact ConsensusErrors, and the accuracy bound to sign;
 *   3. co-signing: the proposer signs its own entry over (card attestation, that accuracy) and asks every valid
 *      responder to co-sign; each decides by its own clock (coSignDecision) and checks the card signature against
 *      the proposer's card from its hello. Entries that do not recover to the peer are a fault (a liar) and are
 *      dropped; fewer than the threshold of entries is `Insufficient node responses`.
 * The proof carries the entries in ascending address order, so a contract's nodeQuorum can demand k of them.
 *
 * n is the configured membership (this node and its meshPeers): excluding a peer (its own tamper alert) never
 * lowers the threshold, so getting nodes excluded cannot weaken the quorum.
 */
import type { Logger } from "pino";
import { cardIdFromPublicKey, decodeHardwareSignature, decodeNodeEntries, encodeNodeEntry, hwMessage, timeAttestationForProof } from "../../protocol/codec";
import {
  coSignDecision,
  consensusThreshold,
  exchangeSample,
  maxRoundAccuracyNs,
  readingFromSample,
  runConsensusRound,
  type CoSignRule,
  type ConsensusReading,
  type ConsensusResult,
} from "../../protocol/consensus";
import { AtsError, ConsensusError, UnavailableError } from "../../protocol/errors";
import type { NodeKey } from "../../protocol/keys";
import { recoverNodeAddress, signNodeEntry, type RecoveryMemo } from "../../protocol/sign";
import type { Address, CardRecord, ConsensusJson, Hex, TimeProof } from "../../protocol/types";
import { createP256KeyCache, verifyP256Signature, verifyTimeProof } from "../../protocol/verify";
import { Value } from "@sinclair/typebox/value";
import { UINT32_MAX } from "../../protocol/constants";
import { ConsensusObject } from "../../wire/rest";
import { alertSignedBy, MAX_PENDING_ROUNDS_PER_PROPOSER, signAlert, type MeshPayload, type MeshRole } from "../../wire/mesh";
import { MAX_TAMPER_ALERTS } from "../../wire/rest";
import type { TimeCard } from "../card/types";
import { buildSignedTime } from "../core/signedTime";
import type { MeshStateReport, SignedTime, TamperAlertReport } from "../core/types";
import { ContradictionWatch } from "./contradictions";
import { ConvergenceTracker } from "./convergence";
import { isAbsent, MESH_ABSENT_AFTER_MISSED_EXCHANGES, newPeerRecord, peerReport, recordAnsweredExchange, recordMissedExchange, type PeerRecord } from "./peers";
import { MeshRequestTimeoutError, type MeshPeerLink, type MeshTransport } from "./transport";

/** A filter sample older than this does not stand in for a round's own exchange, ns (its drift allowance grows). */
const MAX_FILTER_SAMPLE_AGE_NS = 2_000_000_000n;

export interface MeshOptions {
  readonly transport: MeshTransport;
  readonly nodeKey: NodeKey;
  readonly card: TimeCard;
  readonly role: MeshRole;
  /** The accuracy this node's card advertises, ns (its own reading's uncertainty). */
  readonly cardAccuracyNs: number;
  /** Throws UnavailableError when this node must not sign (card tampered, accuracy refusal): the attestor's guard. */
  readonly assertCanSign: () => void;
  /** Hands a peer card's chain to the node's trust store (its verify() then accepts that card). Default: none. */
  readonly learnCardChain?: (certificateChainPem: readonly string[]) => Promise<void>;
  /**
   * The trust store's view of a card: a proposer's card is co-signed, and a primary's relayed proofs served, only
   * once its chain was certified by a trusted root and while it is not revoked. Absent (unit tests of the mesh
   * alone): the card from the hello is used as it is.
   */
  readonly resolveCard?: (cardId: Hex) => CardRecord | undefined;
  readonly windowNs: bigint;
  readonly roundIntervalMs: number;
  readonly probeIntervalMs: number;
  readonly roundTimeoutMs: number;
  /**
   * Rounds this proposer may have in flight at once (setting meshMaxRoundsInFlight; default 1): concurrent callers
   * of roundNow() pipeline up to this many, so throughput is not bounded by one round's two exchanges.
   */
  readonly maxRoundsInFlight?: number;
  /** Readings with a larger uncertainty (slow link, loose card) are left out of rounds, ns. */
  readonly maxPeerUncertaintyNs: bigint;
  /** Co-signing transit slack beyond the measured path (setting meshCoSignSlackNs, §7.5). */
  readonly coSignSlackNs: bigint;
  /** current() refuses a consensus proof older than this, ns. */
  readonly maxProofAgeNs: bigint;
  readonly recoveryMemo?: RecoveryMemo;
  readonly logger: Logger;
  /** Told the bound UDP address once the transport listens. */
  readonly onListening?: (address: { host: string; port: number }) => void;
  /** Told about every verified tamper alert (the guardian hook). */
  readonly onTamperAlert?: (alert: { nodeId: Address; cardId: Hex; reason: string; atNs: bigint; signature: Hex }) => void;
}

/** Round outcomes by result, for metrics. */
export interface MeshStats {
  roundsTotal: number;
  roundsFailedTotal: Record<string, number>;
  /** Duration of the last successful round (card reading → proof), ns. */
  lastRoundDurationNs: bigint | null;
  coSignaturesGivenTotal: number;
  coSignaturesRefusedTotal: number;
  /** Co-sign requests refused by a clock rule of §7.5 (coSignDecision), by rule; also in coSignaturesRefusedTotal. */
  coSignRequestsRefusedByRule: Partial<Record<CoSignRule, number>>;
  /** Relayed proofs refused (each also a fault of the sender), by RelayRefusal. */
  relayedProofsRefusedTotal: Partial<Record<RelayRefusal, number>>;
  /** Round exchanges not sent to an absent peer (its recent exchanges went unanswered), so not waited for. */
  roundExchangesSkippedTotal: number;
}

/** Why a relayed proof was refused (a fixed set: metric labels). */
export type RelayRefusal = "future-dated" | "malformed-consensus" | "untrusted-card" | "invalid";

interface PendingRound {
  readonly roundId: bigint;
  /** The probe's t1 (the proposer's clock when it sent it): the round's moment was read before it. */
  readonly t1Ns: bigint;
  readonly receivedAtNs: bigint;
}

type ProofListener = (signed: SignedTime) => void;

/** A round this node proposes, while it runs. */
interface RoundInFlight {
  /** The card clock just before the round read its moment: the round's moment is at or after it. */
  readonly notBeforeNs: bigint;
  readonly promise: Promise<SignedTime>;
}

function sortByAddress<T extends { nodeId: Address }>(items: T[]): T[] {
  return items.sort((a, b) => (a.nodeId.toLowerCase() < b.nodeId.toLowerCase() ? -1 : 1));
}

export class Mesh {
  readonly #options: MeshOptions;
  readonly #logger: Logger;
  readonly #self: Address;
  readonly #peers = new Map<string, PeerRecord>();
  readonly #pendingRounds = new Map<string, PendingRound[]>();
  readonly #tracker: ConvergenceTracker;
  readonly #members: number;
  readonly #threshold: number;
  readonly #listeners = new Set<ProofListener>();
  readonly #p256Keys = createP256KeyCache();
  readonly #stats: MeshStats = {
    roundsTotal: 0,
    roundsFailedTotal: {},
    lastRoundDurationNs: null,
    coSignaturesGivenTotal: 0,
    coSignaturesRefusedTotal: 0,
    coSignRequestsRefusedByRule: {},
    relayedProofsRefusedTotal: {},
    roundExchangesSkippedTotal: 0,
  };
  #latest: SignedTime | null = null;
  #roundCounter = 0n;
  /** The rounds this node proposes that have not settled, oldest first (at most maxRoundsInFlight). */
  #roundsInFlight: readonly RoundInFlight[] = [];
  #roundTimer: NodeJS.Timeout | null = null;
  /** A non-primary accepted a relayed proof since the last watch period. */
  #relayedSinceWatch = false;
  #probeTimer: NodeJS.Timeout | null = null;
  /** Verified tamper alerts (own and peers'), for GET /mesh/state and the relayer's guardian. */
  readonly #alerts: TamperAlertReport[] = [];
  /** Peers' verified entries, checked against each other for contradictions (§7.8). */
  readonly #contradictions = new ContradictionWatch();
  #running = false;
  #lastFailureLogMs = 0;
  #lastCoSignRefusalLogMs = 0;

  constructor(options: MeshOptions) {
    this.#options = options;
    this.#logger = options.logger.child({ component: "mesh" });
    this.#self = options.nodeKey.address;
    for (const link of options.transport.peers) this.#peers.set(link.nodeId.toLowerCase(), newPeerRecord(link.nodeId, link.address.role));
    this.#members = this.#peers.size + 1;
    this.#threshold = consensusThreshold(this.#members);
    this.#tracker = new ConvergenceTracker({ memberCount: this.#members, windowNs: options.windowNs });
    const { transport } = options;
    transport.onHello((link) => this.#learn(link));
    transport.handle("probe", (link, payload, receivedAtNs) => this.#answerProbe(link, payload, receivedAtNs));
    transport.handle("cosignRequest", (link, payload) => this.#answerCoSign(link, payload));
    transport.handle("alert", (link, payload) => this.#acceptAlert(link, payload));
    transport.handle("relayedProof", (link, payload) => this.#acceptRelayedProof(link, payload));
  }

  async start(): Promise<{ host: string; port: number }> {
    const bound = await this.#options.transport.start().catch((error: unknown) => {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL") {
        throw new UnavailableError(`cannot bind the mesh socket (meshPort, UDP): ${code} [env ATS_MESH_PORT]`, { code }, { cause: error });
      }
      throw error;
    });
    this.#options.onListening?.(bound);
    this.#running = true;
    this.#options.transport.greet();
    this.#armProbe();
    // Only a primary proposes rounds over its card's moments (§7.6); other roles measure and co-sign, and count
    // a period without a relayed proof as a failed round (they are not Converged on old news).
    if (this.#options.role === "primary") this.#armRound(this.#options.roundIntervalMs);
    else this.#armRelayWatch();
    return bound;
  }

  /** A non-primary: every meshMaxProofAgeNs without an accepted relayed proof is one failed round. */
  #armRelayWatch(): void {
    if (!this.#running) return;
    const periodMs = Math.max(1, Number(this.#options.maxProofAgeNs / 1_000_000n));
    this.#roundTimer = setTimeout(() => {
      if (!this.#relayedSinceWatch) {
        this.#tracker.observeRound({ ok: false, atNs: this.#options.card.readTimeNs(), error: "no relayed proof from a primary" });
      }
      this.#relayedSinceWatch = false;
      this.#armRelayWatch();
    }, periodMs);
    this.#roundTimer.unref();
  }

  async stop(): Promise<void> {
    this.#running = false;
    if (this.#roundTimer !== null) clearTimeout(this.#roundTimer);
    if (this.#probeTimer !== null) clearTimeout(this.#probeTimer);
    this.#roundTimer = null;
    this.#probeTimer = null;
    await Promise.allSettled(this.#roundsInFlight.map((round) => round.promise));
    await this.#options.transport.close();
    this.#latest = null;
  }

  get latest(): SignedTime | null {
    return this.#latest;
  }

  get threshold(): number {
    return this.#threshold;
  }

  /** The latest consensus proof; UnavailableError (with the last round's error) when none is fresh. */
  current(): SignedTime {
    const latest = this.#latest;
    const ageNs = latest === null ? null : this.#options.card.readTimeNs() - latest.proof.nanoMoment;
    if (latest === null || ageNs! > this.#options.maxProofAgeNs) {
      const why = this.#tracker.lastError ?? (latest === null ? "no round has succeeded yet" : "rounds stalled");
      throw new UnavailableError(`no consensus proof: ${why}`, {
        convergenceState: this.#tracker.state,
        ...(ageNs === null ? {} : { ageNs: ageNs.toString() }),
      });
    }
    return latest;
  }

  onProof(listener: ProofListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * A fresh round's proof. Starts a round while fewer than maxRoundsInFlight run; at that bound, joins the newest
   * round in flight. With `notBeforeNs` (a moment the card clock has reached, e.g. a schedule that is due) the
   * proof's moment is at or after it: a round that read its moment earlier is never joined, and at the bound the
   * call waits for the oldest round to settle and asks again (bounded in practice: every round started after this
   * call qualifies, so it joins or starts one). Rejects with ConsensusError / UnavailableError.
   */
  roundNow(notBeforeNs?: bigint): Promise<SignedTime> {
    if (!this.#running) return Promise.reject(new UnavailableError("the mesh is not running", {}));
    if (this.#options.role !== "primary") {
      return Promise.reject(new UnavailableError(`a ${this.#options.role} node proposes no rounds: it never signs as a card`, { role: this.#options.role }));
    }
    if (notBeforeNs !== undefined && notBeforeNs > this.#options.card.readTimeNs()) {
      return Promise.reject(new UnavailableError("the card clock has not reached the requested moment", { notBeforeNs: notBeforeNs.toString() }));
    }
    const inFlight = this.#roundsInFlight;
    if (inFlight.length < (this.#options.maxRoundsInFlight ?? 1)) return this.#startRound();
    const newest = inFlight[inFlight.length - 1]!;
    if (notBeforeNs === undefined || newest.notBeforeNs >= notBeforeNs) return newest.promise;
    return inFlight[0]!.promise.then(
      () => this.roundNow(notBeforeNs),
      () => this.roundNow(notBeforeNs),
    );
  }

  #startRound(): Promise<SignedTime> {
    const notBeforeNs = this.#options.card.readTimeNs();
    const promise = this.#round().finally(() => {
      this.#roundsInFlight = this.#roundsInFlight.filter((round) => round.promise !== promise);
    });
    this.#roundsInFlight = [...this.#roundsInFlight, { notBeforeNs, promise }];
    return promise;
  }

  /** Broadcasts this node's own tamper alert, signed, to every peer with a session. */
  broadcastTamper(reason: string, atNs: bigint): void {
    const { card, nodeKey, transport } = this.#options;
    const signature = signAlert(nodeKey, this.#self, card.cardId, atNs, reason);
    this.#remember({ nodeId: this.#self, cardId: card.cardId.toLowerCase() as Hex, reason, atNs: atNs.toString(), signature: `0x${signature.toString("hex")}` });
    for (const peer of this.#peers.values()) {
      transport.notify(peer.nodeId, { kind: "alert", alert: { kind: "tamper", cardId: card.cardId, reason, atNs, signature } });
    }
  }

  state(): MeshStateReport {
    const snapshot = this.#tracker.snapshot();
    return {
      convergenceState: snapshot.state,
      timeQuality: snapshot.timeQuality,
      peerCount: this.#reachablePeers(),
      members: this.#members,
      threshold: this.#threshold,
      consensusOffsetNs: snapshot.consensusOffsetNs === null ? null : snapshot.consensusOffsetNs.toString(),
      lastError: snapshot.lastError,
      role: this.#options.role,
      roundsSucceeded: this.#stats.roundsTotal - Object.values(this.#stats.roundsFailedTotal).reduce((sum, count) => sum + count, 0),
      roundsFailed: { ...this.#stats.roundsFailedTotal },
      peers: sortByAddress([...this.#peers.values()]).map(peerReport),
      tamperAlerts: [...this.#alerts],
      contradictions: this.#contradictions.reports(),
      refused: {
        packets: { ...this.#options.transport.drops() },
        coSignRequests: this.#stats.coSignaturesRefusedTotal,
        coSignRequestsByRule: { ...this.#stats.coSignRequestsRefusedByRule },
        relayedProofs: { ...this.#stats.relayedProofsRefusedTotal },
      },
    };
  }

  /** Keeps a verified alert (one per card, the first), at most MAX_TAMPER_ALERTS. */
  #remember(alert: TamperAlertReport): void {
    if (this.#alerts.some((held) => held.cardId.toLowerCase() === alert.cardId.toLowerCase())) return;
    if (this.#alerts.length >= MAX_TAMPER_ALERTS) return;
    this.#alerts.push(alert);
  }

  stats(): MeshStats {
    return {
      ...this.#stats,
      roundsFailedTotal: { ...this.#stats.roundsFailedTotal },
      coSignRequestsRefusedByRule: { ...this.#stats.coSignRequestsRefusedByRule },
      relayedProofsRefusedTotal: { ...this.#stats.relayedProofsRefusedTotal },
    };
  }

  /** The largest |offset| among reachable peers' best samples, ns (the drift gauge); null without samples. */
  maxPeerOffsetNs(): bigint | null {
    let max: bigint | null = null;
    for (const peer of this.#peers.values()) {
      const best = peer.filter.best();
      if (best === null || !peer.reach.reachable) continue;
      const offset = best.offsetNs < 0n ? -best.offsetNs : best.offsetNs;
      if (max === null || offset > max) max = offset;
    }
    return max;
  }

  // ------------------------------------------------------------------------------------------ peers

  #learn(link: MeshPeerLink): void {
    const peer = this.#peers.get(link.nodeId.toLowerCase());
    const hello = link.hello;
    if (peer === undefined || hello === null) return;
    // The role stays what this node configured: the transport refused any hello announcing another (§7.6).
    peer.version = hello.version;
    peer.cardAccuracyNs = hello.cardAccuracyNs;
    if (hello.cardPublicKey.length === 0) {
      peer.cardPublicKey = null;
      peer.cardId = null;
    } else {
      peer.cardPublicKey = `0x${hello.cardPublicKey.toString("hex")}`;
      peer.cardId = cardIdFromPublicKey(peer.cardPublicKey);
      peer.certificateChainPem = hello.certificateChainPem;
      this.#learnCard(peer);
    }
  }

  /**
   * Hands the peer's card chain to the trust store, whose verdicts expire (certificates do): called on each hello
   * and every probe interval, it costs a lookup while the verdict is fresh.
   */
  #learnCard(peer: PeerRecord): void {
    if (peer.certificateChainPem.length === 0 || this.#options.learnCardChain === undefined) return;
    this.#options.learnCardChain(peer.certificateChainPem).catch((error: unknown) => {
      this.#logger.warn({ peer: peer.nodeId, err: error }, "could not check a peer card's certificate chain");
    });
  }

  #reachablePeers(): number {
    let count = 0;
    for (const peer of this.#peers.values()) if (peer.reach.reachable && peer.excludedReason === null) count += 1;
    return count;
  }

  #armProbe(): void {
    if (!this.#running) return;
    this.#probeTimer = setTimeout(() => {
      this.#probeAll();
      this.#armProbe();
    }, this.#options.probeIntervalMs);
    this.#probeTimer.unref();
  }

  /** One probe interval: shift every reach register, probe every peer (hello first where there is no session). */
  #probeAll(): void {
    const { transport } = this.#options;
    const peers = [...this.#peers.values()];
    // Spread over the interval: answers that arrive together wait for each other in this event loop, and that
    // wait would count as path delay. A quiet exchange is what the clock filter keeps as its best sample.
    const spacingMs = this.#options.probeIntervalMs / Math.max(1, peers.length);
    peers.forEach((peer, index) => {
      this.#learnCard(peer);
      peer.reach.shift(peer.answeredSinceLastProbe);
      peer.answeredSinceLastProbe = false;
      if (!transport.hasSession(peer.nodeId)) return;
      if (index === 0) this.#probe(peer);
      else setTimeout(() => this.#probe(peer), index * spacingMs).unref();
    });
    transport.greet();
    this.#tracker.observePeers(this.#reachablePeers());
  }

  #probe(peer: PeerRecord): void {
    if (!this.#running) return;
    const t1Ns = this.#options.card.readTimeNs();
    this.#options.transport
      .request(peer.nodeId, { kind: "probe", t1Ns, roundId: 0n }, this.#options.roundTimeoutMs)
      .then(
        (answer) => this.#recordExchange(peer, t1Ns, answer.payload, answer.receivedAtNs),
        (error: unknown) => this.#recordUnanswered(peer, error), // and the reach register records it
      );
  }

  /**
   * A request to the peer failed. Only an exchange the peer left unanswered for its whole timeout counts towards
   * its absence; a local refusal (no session, too many requests pending) says nothing about the peer.
   */
  #recordUnanswered(peer: PeerRecord, error: unknown): void {
    if (!(error instanceof MeshRequestTimeoutError) || !recordMissedExchange(peer)) return;
    this.#logger.warn(
      { peer: peer.nodeId, missedExchanges: MESH_ABSENT_AFTER_MISSED_EXCHANGES, probeIntervalMs: this.#options.probeIntervalMs },
      "mesh peer absent: its recent exchanges went unanswered; rounds no longer wait for it (it still counts in n), probes go on until it answers",
    );
  }

  /**
   * Records an answered exchange (reachability, last seen) and returns the peer's reading of `momentNs`, or null.
   * Only probes feed the clock filter: a round's exchanges go out to every peer at once and their answers queue
   * behind each other in this event loop, so their delays say more about that queue than about the path. For a
   * round (`momentNs` read just before this exchange's t1) the reading is this exchange's, or the filter's best
   * sample's when that bounds the moment more tightly (§7.1).
   */
  #recordExchange(peer: PeerRecord, t1Ns: bigint, payload: MeshPayload, t4Ns: bigint, round?: { momentNs: bigint }): ConsensusReading | null {
    if (payload.kind !== "probeReply") return null;
    if (recordAnsweredExchange(peer)) this.#logger.info({ peer: peer.nodeId }, "mesh peer answered again: back in the rounds");
    const timestamps = { t1: t1Ns, t2: payload.t2Ns, t3: payload.t3Ns, t4: t4Ns };
    try {
      const sample = exchangeSample(timestamps);
      if (round === undefined) peer.filter.add({ offsetNs: sample.offsetNs, delayNs: sample.delayNs, atNs: t4Ns });
      peer.answeredSinceLastProbe = true;
      peer.lastSeenNs = t4Ns;
      peer.reportedState = payload.state;
      peer.cardAccuracyNs = payload.cardAccuracyNs;
      const momentNs = round?.momentNs ?? t1Ns;
      const accuracyNs = BigInt(payload.cardAccuracyNs);
      const fresh = readingFromSample(peer.nodeId, momentNs, { offsetNs: sample.offsetNs, delayNs: sample.delayNs, atNs: t1Ns }, accuracyNs);
      const best = peer.filter.best();
      if (best === null || t4Ns - best.atNs > MAX_FILTER_SAMPLE_AGE_NS) return fresh;
      const filtered = readingFromSample(peer.nodeId, momentNs, best, accuracyNs);
      return filtered.uncertaintyNs < fresh.uncertaintyNs ? filtered : fresh;
    } catch (error) {
      peer.faultsTotal += 1;
      this.#logger.warn({ peer: peer.nodeId, err: error }, "mesh exchange with impossible timestamps: ignored");
      return null;
    }
  }

  // ------------------------------------------------------------------------------------------ responder

  #answerProbe(link: MeshPeerLink, payload: MeshPayload, receivedAtNs: bigint): MeshPayload | null {
    if (payload.kind !== "probe") return null;
    const peer = this.#peers.get(link.nodeId.toLowerCase());
    if (peer === undefined || peer.excludedReason !== null) return null;
    // A peer that sends us an exchange is up (a restarted member does, in its first rounds): back in our rounds at
    // once, rather than after our next probe reaches it, which a restart's rounds cannot wait for.
    if (recordAnsweredExchange(peer)) this.#logger.info({ peer: peer.nodeId }, "mesh peer sent an exchange: back in the rounds");
    if (payload.roundId !== 0n) {
      const key = link.nodeId.toLowerCase();
      const rounds = (this.#pendingRounds.get(key) ?? []).filter((round) => round.roundId !== payload.roundId);
      rounds.push({ roundId: payload.roundId, t1Ns: payload.t1Ns, receivedAtNs });
      // Bounded: a proposer pipelines at most MAX_ROUNDS_IN_FLIGHT (half of this) rounds; the oldest entries beyond
      // them are rounds whose co-sign request never came.
      this.#pendingRounds.set(key, rounds.slice(-MAX_PENDING_ROUNDS_PER_PROPOSER));
    }
    return {
      kind: "probeReply",
      t2Ns: receivedAtNs,
      t3Ns: this.#options.card.readTimeNs(),
      cardAccuracyNs: this.#options.cardAccuracyNs,
      state: this.#tracker.state,
    };
  }

  /**
   * How late after the proposer's moment its round's exchange may arrive here and still be co-signed (§7.5): this
   * node's own measurement of the path (the largest round-trip delay of its recent samples, which carries the
   * queueing both event loops add, capped at twice meshMaxPeerUncertaintyNs so that a proposer answering probes
   * late cannot widen it further), plus four jitters and meshCoSignSlackNs; never more than the round
   * timeout. Null when the newest sample is not recent: then nothing but the proposer's word bounds the transit.
   * (The newest, not the minimum-delay one: with 8 samples one probe interval apart, the best is often several
   * seconds old while the path was measured a moment ago, and refusing then failed honest rounds.)
   */
  #transitBoundNs(peer: PeerRecord, roundTimeoutNs: bigint): bigint | null {
    let newestAtNs: bigint | null = null;
    let largestDelayNs = 0n;
    for (const sample of peer.filter.samples()) {
      if (newestAtNs === null || sample.atNs > newestAtNs) newestAtNs = sample.atNs;
      if (sample.delayNs > largestDelayNs) largestDelayNs = sample.delayNs;
    }
    if (newestAtNs === null || this.#options.card.readTimeNs() - newestAtNs > MAX_FILTER_SAMPLE_AGE_NS) return null;
    const delayCapNs = 2n * this.#options.maxPeerUncertaintyNs;
    const boundNs = (largestDelayNs < delayCapNs ? largestDelayNs : delayCapNs) + 4n * peer.filter.jitterNs() + this.#options.coSignSlackNs;
    return boundNs < roundTimeoutNs ? boundNs : roundTimeoutNs;
  }

  #answerCoSign(link: MeshPeerLink, payload: MeshPayload): MeshPayload | null {
    if (payload.kind !== "cosignRequest") return null;
    const refuse = (refusal: string): MeshPayload => {
      this.#stats.coSignaturesRefusedTotal += 1;
      this.#logger.debug({ proposer: link.nodeId, refusal }, "co-signature refused");
      return { kind: "cosignReply", nodeEntry: null, refusal };
    };
    const peer = this.#peers.get(link.nodeId.toLowerCase());
    if (peer === undefined || peer.excludedReason !== null) return refuse("the proposer is excluded from the mesh");
    // Only a primary proposes rounds, and who is one is this node's configuration (meshPeers), not the peer's claim.
    if (peer.role !== "primary") return refuse(`the proposer is configured here as ${peer.role}, not primary (meshPeers)`);
    const key = link.nodeId.toLowerCase();
    const rounds = this.#pendingRounds.get(key) ?? [];
    const round = rounds.find((candidate) => candidate.roundId === payload.roundId);
    if (round === undefined) return refuse(`round ${payload.roundId} unknown (no exchange, or already co-signed)`);
    this.#pendingRounds.set(key, rounds.filter((candidate) => candidate !== round)); // one co-signature per round
    const roundTimeoutNs = BigInt(this.#options.roundTimeoutMs) * 1_000_000n;
    // A round is redeemed within two timeouts (its exchanges, then its co-sign requests), by this node's clock: a
    // proposer cannot keep rounds to pick one later.
    if (this.#options.card.readTimeNs() - round.receivedAtNs > 2n * roundTimeoutNs) return refuse(`round ${payload.roundId} expired`);
    if (payload.nanoMoment > round.t1Ns) return refuse("the moment is later than the round's exchange that should follow it");
    // The cheap clock rule before the P-256 verification and the signature (§7.5).
    const maxTransitNs = this.#transitBoundNs(peer, roundTimeoutNs);
    if (maxTransitNs === null) return refuse("no recent measurement of the path from the proposer yet");
    const ownAccuracyNs = this.#options.cardAccuracyNs;
    const maxAccuracyNs = maxRoundAccuracyNs(this.#options.windowNs, this.#options.maxPeerUncertaintyNs);
    const decision = coSignDecision({ momentNs: payload.nanoMoment, accuracyNs: payload.accuracyNs, receivedAtNs: round.receivedAtNs, ownAccuracyNs, maxTransitNs, maxAccuracyNs });
    if (!decision.sign) {
      this.#recordClockRefusal(peer, decision.rule, decision.reason, {
        roundId: payload.roundId.toString(),
        nanoMoment: payload.nanoMoment.toString(),
        accuracyNs: payload.accuracyNs,
        hardwareSignature: payload.hardwareSignature,
        receivedAtNs: round.receivedAtNs.toString(),
        ownAccuracyNs,
        maxTransitNs: maxTransitNs.toString(),
        maxAccuracyNs: maxAccuracyNs.toString(),
      });
      return refuse(decision.reason);
    }
    const cardProblem = this.#checkProposerCard(peer, payload.nanoMoment, payload.hardwareSignature);
    if (cardProblem !== null) return refuse(cardProblem);
    try {
      this.#options.assertCanSign();
    } catch (error) {
      return refuse(`this node cannot sign: ${error instanceof Error ? error.message : String(error)}`);
    }
    const attestation = timeAttestationForProof(
      { nanoMoment: payload.nanoMoment, hardwareSignature: payload.hardwareSignature, accuracy: payload.accuracyNs },
      this.#options.card.readTimeNs(),
    );
    this.#stats.coSignaturesGivenTotal += 1;
    return { kind: "cosignReply", nodeEntry: signNodeEntry(this.#options.nodeKey, attestation), refusal: "" };
  }

  /**
   * A co-sign request this node's clock refused (§7.5), recorded as evidence: counted by rule, and logged with what
   * was asked (the moment, the claimed accuracy, the card's signature over the moment, which proves the proposer's
   * card read it) and what this node measured (t2, its transit bound and accuracy), at most one line per 5 s. A
   * claim no honest proposer makes (an accuracy above what a round can sign, or a moment ahead of this clock beyond
   * it) is also a fault of the proposer; a moment behind may be an honest one delayed past the transit bound by a
   * busy host, so it is not.
   */
  #recordClockRefusal(peer: PeerRecord, rule: CoSignRule, reason: string, evidence: Record<string, string | number>): void {
    this.#stats.coSignRequestsRefusedByRule[rule] = (this.#stats.coSignRequestsRefusedByRule[rule] ?? 0) + 1;
    if (rule !== "backdated") peer.faultsTotal += 1;
    const nowMs = Date.now();
    if (nowMs - this.#lastCoSignRefusalLogMs < 5_000) return;
    this.#lastCoSignRefusalLogMs = nowMs;
    this.#logger.warn({ proposer: peer.nodeId, rule, reason, ...evidence }, "co-sign request refused by this node's clock (docs/protocol.md §7.5)");
  }

  /** The peer's card as this node trusts it (certified, not revoked), or why it does not. */
  #trustedCard(peer: PeerRecord): { publicKey: Hex; cardId: Hex } | string {
    if (peer.cardPublicKey === null || peer.cardId === null) return "the peer announced no card";
    if (this.#options.resolveCard === undefined) return { publicKey: peer.cardPublicKey, cardId: peer.cardId };
    const record = this.#options.resolveCard(peer.cardId);
    if (record === undefined) return `the peer's card ${peer.cardId} is not certified by a trusted root (yet)`;
    if (record.revoked) return `the peer's card ${peer.cardId} is revoked`;
    return { publicKey: record.publicKey, cardId: peer.cardId };
  }

  /** Why the proposer's card signature cannot be co-signed, or null: its card from its hello, low-S, valid. */
  #checkProposerCard(peer: PeerRecord, nanoMoment: bigint, hardwareSignature: Hex): string | null {
    const card = this.#trustedCard(peer);
    if (typeof card === "string") return card;
    const decoded = decodeHardwareSignature(hardwareSignature);
    if (decoded.cardId.toLowerCase() !== card.cardId.toLowerCase()) return `the card signature is by ${decoded.cardId}, the proposer's card is ${card.cardId}`;
    const valid = verifyP256Signature({ message: hwMessage(decoded.cardId, nanoMoment) }, decoded.r, decoded.s, card.publicKey, this.#p256Keys);
    return valid ? null : "the card signature does not verify";
  }

  #acceptAlert(link: MeshPeerLink, payload: MeshPayload): null {
    if (payload.kind !== "alert") return null;
    const peer = this.#peers.get(link.nodeId.toLowerCase());
    const { alert } = payload;
    // Cheap check first: a peer already excluded by its own alert costs no further signature recovery.
    if (peer?.excludedReason != null) return null;
    // Only the node itself can sign an alert about its card: a forged one (another signer, another card) frames nobody.
    if (peer === undefined || !alertSignedBy(alert, peer.nodeId) || (peer.cardId !== null && alert.cardId.toLowerCase() !== peer.cardId.toLowerCase())) {
      this.#logger.warn({ sender: link.nodeId, cardId: alert.cardId }, "tamper alert refused: not signed by the node it is about, or not its card");
      return null;
    }
    if (peer.excludedReason === null) {
      peer.excludedReason = `tamper alert: ${alert.reason}`;
      this.#pendingRounds.delete(link.nodeId.toLowerCase());
      this.#logger.error({ peer: peer.nodeId, cardId: alert.cardId, reason: alert.reason }, "peer reported its card tampered: excluded from rounds and co-signing");
      this.#remember({ nodeId: peer.nodeId, cardId: alert.cardId.toLowerCase() as Hex, reason: alert.reason, atNs: alert.atNs.toString(), signature: `0x${alert.signature.toString("hex")}` });
      this.#options.onTamperAlert?.({ nodeId: peer.nodeId, cardId: alert.cardId, reason: alert.reason, atNs: alert.atNs, signature: `0x${alert.signature.toString("hex")}` });
    }
    return null;
  }

  // ------------------------------------------------------------------------------------------ proposer

  #armRound(delayMs: number): void {
    if (!this.#running) return;
    this.#roundTimer = setTimeout(() => {
      this.#roundTimer = null;
      this.roundNow()
        .catch(() => undefined) // recorded by #round
        .finally(() => this.#armRound(this.#options.roundIntervalMs));
    }, delayMs);
    this.#roundTimer.unref();
  }

  async #round(): Promise<SignedTime> {
    const startedAt = process.hrtime.bigint();
    try {
      const signed = await this.#runRound();
      this.#stats.roundsTotal += 1;
      this.#stats.lastRoundDurationNs = process.hrtime.bigint() - startedAt;
      // Pipelined rounds can finish out of order: only a newer proof replaces the served one (and is relayed);
      // the caller of an older round still gets its proof.
      if (this.#latest === null || signed.proof.nanoMoment > this.#latest.proof.nanoMoment) {
        this.#publish(signed);
        this.#relay(signed);
      }
      return signed;
    } catch (error) {
      this.#stats.roundsTotal += 1;
      const label = error instanceof AtsError ? error.message : "internal";
      this.#stats.roundsFailedTotal[label] = (this.#stats.roundsFailedTotal[label] ?? 0) + 1;
      this.#tracker.observeRound({ ok: false, atNs: this.#options.card.readTimeNs(), error: error instanceof Error ? error.message : String(error) });
      this.#logRoundFailure(error);
      throw error;
    }
  }

  #publish(signed: SignedTime): void {
    this.#latest = signed;
    for (const listener of this.#listeners) {
      try {
        listener(signed);
      } catch (error) {
        this.#logger.error({ err: error }, "mesh proof listener failed");
      }
    }
  }

  /** Sends a round's proof to the members that propose none, so they can serve it (§7.6). */
  #relay(signed: SignedTime): void {
    const consensus = signed.json.consensus;
    if (consensus === undefined) return;
    const consensusJson = JSON.stringify(consensus);
    for (const peer of this.#peers.values()) {
      if (peer.role === "primary" || peer.excludedReason !== null) continue;
      this.#options.transport.notify(peer.nodeId, { kind: "relayedProof", proof: signed.proof, consensusJson });
    }
  }

  /**
   * A primary's co-signed proof, on a member that proposes none: checked like any verifier would (the sender's card
   * from its hello, low-S card signature, at least the threshold of entries from distinct mesh members, fresh, not
   * ahead of this node's clock by more than its own bound), then served if newer than the one held. Each accepted
   * proof counts as a successful round for this member's state.
   */
  #acceptRelayedProof(link: MeshPeerLink, payload: MeshPayload): null {
    if (payload.kind !== "relayedProof" || this.#options.role === "primary") return null;
    const peer = this.#peers.get(link.nodeId.toLowerCase());
    if (peer === undefined || peer.role !== "primary" || peer.cardPublicKey === null || peer.cardId === null || peer.excludedReason !== null) return null;
    const refuse = (label: RelayRefusal, why: string): null => {
      peer.faultsTotal += 1;
      this.#stats.relayedProofsRefusedTotal[label] = (this.#stats.relayedProofsRefusedTotal[label] ?? 0) + 1;
      this.#logger.warn({ peer: peer.nodeId, refusal: label, why }, "relayed proof refused");
      return null;
    };
    // Cheap checks first: a proof no newer than the one held is dropped before any signature is checked.
    if (this.#latest !== null && this.#latest.proof.nanoMoment >= payload.proof.nanoMoment) return null;
    // The served proof is the newest held, so one dated ahead would stay "newest" and pin what this node serves
    // until its moment passes. An honest proof's moment lies within its accuracy of true time, and this node's
    // clock within its own card accuracy of true time (and true time only advances since): a moment further ahead
    // of this clock than those two bounds is false by this node's clock (the rule of §7.5) and refused.
    const nowNs = this.#options.card.readTimeNs();
    const leadNs = payload.proof.nanoMoment - nowNs;
    const maxLeadNs = relayedProofMaxLeadNs(payload.proof.accuracy, this.#options.cardAccuracyNs, this.#options.windowNs);
    if (leadNs > maxLeadNs) {
      return refuse("future-dated", `its moment is ${leadNs} ns ahead of this node's clock; at most ${maxLeadNs} ns (its accuracy + this node's card accuracy) allowed`);
    }
    const consensus = parseConsensus(payload.consensusJson);
    if (consensus === null) return refuse("malformed-consensus", "its consensus object does not match the schema");
    const members = new Set<string>([this.#self.toLowerCase(), ...[...this.#peers.values()].filter((p) => p.excludedReason === null).map((p) => p.nodeId.toLowerCase())]);
    const card = this.#trustedCard(peer);
    if (typeof card === "string") return refuse("untrusted-card", card);
    const cardId = card.cardId.toLowerCase();
    const outcome = verifyTimeProof(payload.proof, {
      resolveCard: (id) => (id.toLowerCase() === cardId ? { publicKey: card.publicKey, revoked: false } : undefined),
      isActiveNode: (address) => members.has(address.toLowerCase()),
      nodeQuorum: this.#threshold,
      nowNs,
      maxAttestationAgeNs: this.#options.maxProofAgeNs,
      maxFutureDriftNs: maxLeadNs,
      maxAcceptableDriftNs: BigInt(UINT32_MAX),
      p256KeyCache: this.#p256Keys,
    });
    if (!outcome.valid) return refuse("invalid", `${outcome.reason}: ${outcome.detail}`);
    // The relayer's readings count is its claim: never more than the mesh's members.
    const validResponders = Math.min(consensus.readings.length, members.size);
    // This node's own measurement of the primary's clock, not the primary's word: the stability test of
    // Converged then compares this node's clock with the mesh's.
    const consensusOffsetNs = peer.filter.best()?.offsetNs ?? 0n;
    this.#watchProofEntries(payload.proof, outcome.nodes, nowNs);
    this.#relayedSinceWatch = true;
    this.#tracker.observeRound({ ok: true, atNs: nowNs, consensusOffsetNs, accuracyNs: payload.proof.accuracy, validResponders });
    this.#publish(withConsensus(buildSignedTime(payload.proof, nowNs, null), consensus));
    return null;
  }

  #logRoundFailure(error: unknown): void {
    const nowMs = Date.now();
    if (nowMs - this.#lastFailureLogMs < 5_000) return; // a partition fails every round: one line per 5 s
    this.#lastFailureLogMs = nowMs;
    const details = error instanceof AtsError ? error.details : {};
    this.#logger.warn({ err: error instanceof AtsError ? undefined : error, error: error instanceof Error ? error.message : String(error), ...details }, "consensus round failed");
  }

  async #runRound(): Promise<SignedTime> {
    const { card, transport, nodeKey } = this.#options;
    this.#options.assertCanSign();
    this.#roundCounter += 1n;
    const roundId = this.#roundCounter;
    const reachable = [...this.#peers.values()].filter((peer) => peer.excludedReason === null && transport.hasSession(peer.nodeId));
    // An absent peer gets no exchange, so the round does not wait out its timeout; it still counts in n (the
    // threshold is the configured membership's), and its probes bring it back (#probeAll).
    const participants = reachable.filter((peer) => !isAbsent(peer));
    this.#stats.roundExchangesSkippedTotal += reachable.length - participants.length;
    const momentNs = card.readTimeNs();
    // Each exchange's t1 is read right before its own packet is built and sent, so a peer's measured delay does
    // not include the packets sent to the peers before it; the reading is then carried back to the moment.
    const exchanges = participants.map((peer) => {
      const t1Ns = card.readTimeNs();
      return transport.request(peer.nodeId, { kind: "probe", t1Ns, roundId }, this.#options.roundTimeoutMs).then(
        (answer) => this.#recordExchange(peer, t1Ns, answer.payload, answer.receivedAtNs, { momentNs }),
        (error: unknown) => {
          this.#recordUnanswered(peer, error);
          throw error;
        },
      );
    });
    // The card signs while the exchanges travel: t1 is the moment itself, read before any of this work.
    const hardwareSignature = card.signHardware(momentNs);
    const answers = await Promise.allSettled(exchanges);

    const readings: ConsensusReading[] = [{ nodeId: this.#self, readingNs: momentNs, uncertaintyNs: BigInt(this.#options.cardAccuracyNs) }];
    answers.forEach((answer, index) => {
      const reading = answer.status === "fulfilled" ? answer.value : null;
      if (reading === null) return;
      if (reading.uncertaintyNs > this.#options.maxPeerUncertaintyNs) {
        this.#logger.debug({ peer: participants[index]!.nodeId, uncertaintyNs: reading.uncertaintyNs.toString() }, "reading too uncertain for a round");
        return;
      }
      readings.push(reading);
    });
    const result = runConsensusRound({ memberCount: this.#members, selfId: this.#self, momentNs, readings, windowNs: this.#options.windowNs });
    for (const excluded of result.excluded) this.#peers.get(excluded.nodeId.toLowerCase())!.faultsTotal += 1;

    const accuracy = result.accuracyNs;
    const base = { nanoMoment: momentNs, hardwareSignature, accuracy };
    const ownTimestampNs = card.readTimeNs();
    const entries: Array<{ nodeId: Address; entry: Hex; nodeTimestampNs: bigint }> = [
      { nodeId: this.#self, entry: signNodeEntry(nodeKey, timeAttestationForProof(base, ownTimestampNs), this.#options.recoveryMemo), nodeTimestampNs: ownTimestampNs },
    ];
    const coSigners = result.valid.filter((reading) => reading.nodeId.toLowerCase() !== this.#self.toLowerCase());
    const replies = await Promise.allSettled(
      coSigners.map((reading) =>
        transport.request(reading.nodeId, { kind: "cosignRequest", roundId, nanoMoment: momentNs, accuracyNs: accuracy, hardwareSignature }, this.#options.roundTimeoutMs),
      ),
    );
    replies.forEach((reply, index) => {
      const nodeId = coSigners[index]!.nodeId;
      if (reply.status !== "fulfilled" || reply.value.payload.kind !== "cosignReply") return;
      const { nodeEntry, refusal } = reply.value.payload;
      if (nodeEntry === null) {
        this.#logger.debug({ peer: nodeId, refusal }, "peer refused to co-sign");
        return;
      }
      const checked = this.#checkEntry(nodeId, base, nodeEntry);
      if (checked !== null) entries.push({ nodeId, entry: nodeEntry, nodeTimestampNs: checked });
    });
    if (entries.length < result.threshold) {
      throw new ConsensusError(ConsensusError.INSUFFICIENT_RESPONSES, {
        stage: "co-signing",
        coSignatures: entries.length,
        threshold: result.threshold,
        members: this.#members,
      });
    }
    sortByAddress(entries);
    const proof: TimeProof = { ...base, nodeSignature: `0x${entries.map((e) => e.entry.slice(2)).join("")}` };
    this.#tracker.observeRound({
      ok: true,
      atNs: momentNs,
      consensusOffsetNs: result.timeNs - momentNs,
      accuracyNs: accuracy,
      validResponders: result.valid.length,
    });
    return withConsensus(buildSignedTime(proof, card.readTimeNs(), card.gpsReference()), consensusJson(result, entries, this.#members, this.#options.windowNs));
  }

  /** The entry's nodeTimestamp when it is `nodeId`'s valid signature over the round's attestation; null (a fault) otherwise. */
  #checkEntry(nodeId: Address, base: Pick<TimeProof, "nanoMoment" | "hardwareSignature" | "accuracy">, entry: Hex): bigint | null {
    const peer = this.#peers.get(nodeId.toLowerCase())!;
    try {
      const nodeTimestampNs = BigInt(`0x${entry.slice(2, 34)}`);
      const signer = recoverNodeAddress(timeAttestationForProof(base, nodeTimestampNs), entry, this.#options.recoveryMemo);
      if (signer.toLowerCase() === nodeId.toLowerCase()) {
        this.#watchEntry(peer, base, entry, nodeTimestampNs, this.#options.card.readTimeNs());
        return nodeTimestampNs;
      }
      this.#logger.warn({ peer: nodeId, signer }, "co-signature signed by another key: dropped");
    } catch (error) {
      this.#logger.warn({ peer: nodeId, err: error }, "co-signature does not recover: dropped");
    }
    peer.faultsTotal += 1;
    return null;
  }

  /** The peers' entries of a verified relayed proof (`signers`: its entries' recovered addresses, in order), watched. */
  #watchProofEntries(proof: TimeProof, signers: readonly Address[], atNs: bigint): void {
    decodeNodeEntries(proof.nodeSignature).forEach((entry, index) => {
      const peer = this.#peers.get(signers[index]!.toLowerCase());
      if (peer !== undefined) this.#watchEntry(peer, proof, encodeNodeEntry(entry), entry.nodeTimestampNs, atNs);
    });
  }

  /**
   * Checks a verified entry of `peer` against the ones it signed before (§7.8). A contradiction is a fault of the
   * peer each time, logged once per peer with its evidence, and kept for GET /mesh/state.
   */
  #watchEntry(peer: PeerRecord, proof: Pick<TimeProof, "nanoMoment" | "hardwareSignature" | "accuracy">, entry: Hex, nodeTimestampNs: bigint, atNs: bigint): void {
    const found = this.#contradictions.observe(peer.nodeId, proof, entry, nodeTimestampNs, atNs);
    if (found === null) return;
    peer.faultsTotal += 1;
    if (found.first) {
      this.#logger.warn(
        { peer: peer.nodeId, excessNs: found.report.excessNs, evidence: found.report.evidence },
        "peer signed contradicting entries (docs/protocol.md §7.8): evidence kept in GET /mesh/state contradictions; check it with `ats-node evidence check`",
      );
    }
  }
}

/**
 * How far ahead of this node's clock a relayed proof's moment may be, ns: the proof's own accuracy, this node's card
 * accuracy, and the mesh window (docs/protocol.md §7.6): the mesh agrees on time only to within its window, so this
 * node's card may trail the consensus the proof carries by that much. Further ahead, the proof's claim is false by
 * this node's clock.
 */
export function relayedProofMaxLeadNs(proofAccuracyNs: number, ownCardAccuracyNs: number, windowNs: bigint): bigint {
  return BigInt(proofAccuracyNs) + BigInt(ownCardAccuracyNs) + windowNs;
}

/** A relayed `consensus` object, parsed and checked against its wire schema; null when it is not one. */
function parseConsensus(text: string): ConsensusJson | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  return Value.Check(ConsensusObject, value) ? (value as ConsensusJson) : null;
}

/** The served form of a mesh proof: the solo body plus its `consensus` member, serialised once. */
function withConsensus(signed: SignedTime, consensus: ConsensusJson): SignedTime {
  const json = Object.freeze({ ...signed.json, consensus });
  return Object.freeze({ ...signed, json, body: JSON.stringify(json) });
}

/** The `consensus` member of the served body (docs/protocol.md §9.1). */
function consensusJson(result: ConsensusResult, entries: ReadonlyArray<{ nodeId: Address; nodeTimestampNs: bigint }>, members: number, windowNs: bigint): ConsensusJson {
  const timestamps = new Map(entries.map((entry) => [entry.nodeId.toLowerCase(), entry.nodeTimestampNs]));
  return {
    members,
    threshold: result.threshold,
    responders: entries.length,
    nodeIds: entries.map((entry) => entry.nodeId),
    timeNs: result.timeNs.toString(),
    deviationNs: result.deviationNs.toString(),
    windowNs: windowNs.toString(),
    readings: result.valid.map((reading) => ({
      nodeId: reading.nodeId,
      readingNs: reading.readingNs.toString(),
      uncertaintyNs: reading.uncertaintyNs.toString(),
      deviationNs: reading.deviationNs.toString(),
      nodeTimestampNs: timestamps.get(reading.nodeId.toLowerCase())?.toString() ?? null,
    })),
    excluded: result.excluded.map((reading) => ({ nodeId: reading.nodeId, deviationNs: reading.deviationNs.toString() })),
  };
}
