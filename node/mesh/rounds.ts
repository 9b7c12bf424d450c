/**
 * The proposer's rounds (docs/protocol.md §7.1), on a short tick and on demand, up to maxRoundsInFlight at once:
 *   1. exchange: read the card (M), send M as t1 of a four-timestamp exchange to every peer with a session that is
 *      not absent, and sign M with the card while the answers travel;
 *   2. consensus: runConsensusRound over the readings (its own included): ⌈2n/3⌉ responses, median, window W, the
 *      accuracy to sign (protocol/consensus.ts);
 *   3. co-signing: sign its own entry and ask every valid responder to co-sign; an entry that does not recover to
 *      its peer is a fault and dropped; fewer entries than the threshold is `Insufficient node responses`.
 * The proof carries the entries in ascending address order, so a contract's nodeQuorum can demand k of them. Each
 * newer proof is published and relayed to the members that propose none (§7.6).
 */
import { timeAttestationForProof } from "../../protocol/codec";
import { runConsensusRound, type ConsensusReading, type ConsensusResult } from "../../protocol/consensus";
import { AtsError, ConsensusError, UnavailableError } from "../../protocol/errors";
import { recoverNodeAddress, signNodeEntry } from "../../protocol/sign";
import type { Address, ConsensusJson, Hex, TimeProof } from "../../protocol/types";
import { buildSignedTime } from "../core/signedTime";
import type { SignedTime } from "../core/types";
import { sortByAddress, type MeshContext } from "./context";
import type { EntryEvidence } from "./evidence";
import { isAbsent } from "./peers";
import type { PeerSessions } from "./sessions";

/** At most one log line per this many ms for failed rounds (a partition fails every round). */
const FAILURE_LOG_INTERVAL_MS = 5_000;

/** A round this node proposes, while it runs. */
interface RoundInFlight {
  /** The card clock just before the round read its moment: the round's moment is at or after it. */
  readonly notBeforeNs: bigint;
  readonly promise: Promise<SignedTime>;
}

/** The served form of a mesh proof: the solo body plus its `consensus` member, serialised once. */
export function withConsensus(signed: SignedTime, consensus: ConsensusJson): SignedTime {
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

export class RoundProposer {
  readonly #ctx: MeshContext;
  readonly #sessions: PeerSessions;
  readonly #evidence: EntryEvidence;
  #roundCounter = 0n;
  /** The rounds this node proposes that have not settled, oldest first (at most maxRoundsInFlight). */
  #roundsInFlight: readonly RoundInFlight[] = [];
  #roundTimer: NodeJS.Timeout | null = null;
  #lastFailureLogMs = 0;

  constructor(ctx: MeshContext, sessions: PeerSessions, evidence: EntryEvidence) {
    this.#ctx = ctx;
    this.#sessions = sessions;
    this.#evidence = evidence;
  }

  /** Starts the round tick (a primary's). */
  start(): void {
    this.#armRound(this.#ctx.options.roundIntervalMs);
  }

  /** Stops the tick; resolves once every round in flight settled. */
  async stop(): Promise<void> {
    if (this.#roundTimer !== null) clearTimeout(this.#roundTimer);
    this.#roundTimer = null;
    await Promise.allSettled(this.#roundsInFlight.map((round) => round.promise));
  }

  /**
   * A fresh round's proof. Starts a round while fewer than maxRoundsInFlight run; at that bound, joins the newest
   * round in flight. With `notBeforeNs` (a moment the card clock has reached, e.g. a schedule that is due) the
   * proof's moment is at or after it: a round that read its moment earlier is never joined, and at the bound the
   * call waits for the oldest round to settle and asks again (bounded in practice: every round started after this
   * call qualifies, so it joins or starts one). Rejects with ConsensusError / UnavailableError.
   */
  roundNow(notBeforeNs?: bigint): Promise<SignedTime> {
    const { options } = this.#ctx;
    if (!this.#ctx.running) return Promise.reject(new UnavailableError("the mesh is not running", {}));
    if (options.role !== "primary") {
      return Promise.reject(new UnavailableError(`a ${options.role} node proposes no rounds: it never signs as a card`, { role: options.role }));
    }
    if (notBeforeNs !== undefined && notBeforeNs > options.card.readTimeNs()) {
      return Promise.reject(new UnavailableError("the card clock has not reached the requested moment", { notBeforeNs: notBeforeNs.toString() }));
    }
    const inFlight = this.#roundsInFlight;
    if (inFlight.length < (options.maxRoundsInFlight ?? 1)) return this.#startRound();
    const newest = inFlight[inFlight.length - 1]!;
    if (notBeforeNs === undefined || newest.notBeforeNs >= notBeforeNs) return newest.promise;
    return inFlight[0]!.promise.then(
      () => this.roundNow(notBeforeNs),
      () => this.roundNow(notBeforeNs),
    );
  }

  #startRound(): Promise<SignedTime> {
    const notBeforeNs = this.#ctx.options.card.readTimeNs();
    const promise = this.#round().finally(() => {
      this.#roundsInFlight = this.#roundsInFlight.filter((round) => round.promise !== promise);
    });
    this.#roundsInFlight = [...this.#roundsInFlight, { notBeforeNs, promise }];
    return promise;
  }

  #armRound(delayMs: number): void {
    if (!this.#ctx.running) return;
    this.#roundTimer = setTimeout(() => {
      this.#roundTimer = null;
      this.roundNow()
        .catch(() => undefined) // recorded by #round
        .finally(() => this.#armRound(this.#ctx.options.roundIntervalMs));
    }, delayMs);
    this.#roundTimer.unref();
  }

  async #round(): Promise<SignedTime> {
    const { stats, feed } = this.#ctx;
    const startedAt = process.hrtime.bigint();
    try {
      const signed = await this.#runRound();
      stats.roundsTotal += 1;
      stats.lastRoundDurationNs = process.hrtime.bigint() - startedAt;
      // Pipelined rounds can finish out of order: only a newer proof replaces the served one (and is relayed);
      // the caller of an older round still gets its proof.
      if (feed.latest === null || signed.proof.nanoMoment > feed.latest.proof.nanoMoment) {
        feed.publish(signed);
        this.#relay(signed);
      }
      return signed;
    } catch (error) {
      stats.roundsTotal += 1;
      const label = error instanceof AtsError ? error.message : "internal";
      stats.roundsFailedTotal[label] = (stats.roundsFailedTotal[label] ?? 0) + 1;
      this.#ctx.tracker.observeRound({ ok: false, atNs: this.#ctx.options.card.readTimeNs(), error: error instanceof Error ? error.message : String(error) });
      this.#logRoundFailure(error);
      throw error;
    }
  }

  /** Sends a round's proof to the members that propose none, so they can serve it (§7.6). */
  #relay(signed: SignedTime): void {
    const consensus = signed.json.consensus;
    if (consensus === undefined) return;
    const consensusText = JSON.stringify(consensus);
    for (const peer of this.#ctx.peers.values()) {
      if (peer.role === "primary" || peer.excludedReason !== null) continue;
      this.#ctx.options.transport.notify(peer.nodeId, { kind: "relayedProof", proof: signed.proof, consensusJson: consensusText });
    }
  }

  #logRoundFailure(error: unknown): void {
    const nowMs = Date.now();
    if (nowMs - this.#lastFailureLogMs < FAILURE_LOG_INTERVAL_MS) return;
    this.#lastFailureLogMs = nowMs;
    const details = error instanceof AtsError ? error.details : {};
    this.#ctx.logger.warn({ err: error instanceof AtsError ? undefined : error, error: error instanceof Error ? error.message : String(error), ...details }, "consensus round failed");
  }

  /** Step 1: the exchanges (the card signs meanwhile); the readings that may take part, its own first. */
  async #exchange(roundId: bigint): Promise<{ momentNs: bigint; hardwareSignature: Hex; readings: ConsensusReading[] }> {
    const { options, stats } = this.#ctx;
    const { card, transport } = options;
    const reachable = [...this.#ctx.peers.values()].filter((peer) => peer.excludedReason === null && transport.hasSession(peer.nodeId));
    // An absent peer gets no exchange, so the round does not wait out its timeout; it still counts in n (the
    // threshold is the configured membership's), and its probes bring it back (sessions.ts).
    const participants = reachable.filter((peer) => !isAbsent(peer));
    stats.roundExchangesSkippedTotal += reachable.length - participants.length;
    const momentNs = card.readTimeNs();
    // Each exchange's t1 is read right before its own packet is built and sent, so a peer's measured delay does
    // not include the packets sent to the peers before it; the reading is then carried back to the moment.
    const exchanges = participants.map((peer) => {
      const t1Ns = card.readTimeNs();
      return transport.request(peer.nodeId, { kind: "probe", t1Ns, roundId }, options.roundTimeoutMs).then(
        (answer) => this.#sessions.recordExchange(peer, t1Ns, answer.payload, answer.receivedAtNs, { momentNs }),
        (error: unknown) => {
          this.#sessions.recordUnanswered(peer, error);
          throw error;
        },
      );
    });
    // The card signs while the exchanges travel: t1 is the moment itself, read before any of this work.
    const hardwareSignature = card.signHardware(momentNs);
    const answers = await Promise.allSettled(exchanges);
    const readings: ConsensusReading[] = [{ nodeId: this.#ctx.self, readingNs: momentNs, uncertaintyNs: BigInt(options.cardAccuracyNs) }];
    answers.forEach((answer, index) => {
      const reading = answer.status === "fulfilled" ? answer.value : null;
      if (reading === null) return;
      if (reading.uncertaintyNs > options.maxPeerUncertaintyNs) {
        this.#ctx.logger.debug({ peer: participants[index]!.nodeId, uncertaintyNs: reading.uncertaintyNs.toString() }, "reading too uncertain for a round");
        return;
      }
      readings.push(reading);
    });
    return { momentNs, hardwareSignature, readings };
  }

  async #runRound(): Promise<SignedTime> {
    const { options } = this.#ctx;
    const { card, transport, nodeKey } = options;
    options.assertCanSign();
    this.#roundCounter += 1n;
    const roundId = this.#roundCounter;
    const { momentNs, hardwareSignature, readings } = await this.#exchange(roundId);
    // Step 2.
    const result = runConsensusRound({ memberCount: this.#ctx.members, selfId: this.#ctx.self, momentNs, readings, windowNs: options.windowNs });
    for (const excluded of result.excluded) this.#ctx.peer(excluded.nodeId)!.faultsTotal += 1;
    // Step 3.
    const accuracy = result.accuracyNs;
    const base = { nanoMoment: momentNs, hardwareSignature, accuracy };
    const ownTimestampNs = card.readTimeNs();
    const entries: Array<{ nodeId: Address; entry: Hex; nodeTimestampNs: bigint }> = [
      { nodeId: this.#ctx.self, entry: signNodeEntry(nodeKey, timeAttestationForProof(base, ownTimestampNs), options.recoveryMemo), nodeTimestampNs: ownTimestampNs },
    ];
    const coSigners = result.valid.filter((reading) => reading.nodeId.toLowerCase() !== this.#ctx.self.toLowerCase());
    const replies = await Promise.allSettled(
      coSigners.map((reading) =>
        transport.request(reading.nodeId, { kind: "cosignRequest", roundId, nanoMoment: momentNs, accuracyNs: accuracy, hardwareSignature }, options.roundTimeoutMs),
      ),
    );
    replies.forEach((reply, index) => {
      const nodeId = coSigners[index]!.nodeId;
      if (reply.status !== "fulfilled" || reply.value.payload.kind !== "cosignReply") return;
      const { nodeEntry, refusal } = reply.value.payload;
      if (nodeEntry === null) {
        this.#ctx.logger.debug({ peer: nodeId, refusal }, "peer refused to co-sign");
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
        members: this.#ctx.members,
      });
    }
    sortByAddress(entries);
    const proof: TimeProof = { ...base, nodeSignature: `0x${entries.map((e) => e.entry.slice(2)).join("")}` };
    this.#ctx.tracker.observeRound({
      ok: true,
      atNs: momentNs,
      consensusOffsetNs: result.timeNs - momentNs,
      accuracyNs: accuracy,
      validResponders: result.valid.length,
    });
    return withConsensus(buildSignedTime(proof, card.readTimeNs(), card.gpsReference()), consensusJson(result, entries, this.#ctx.members, options.windowNs));
  }

  /** The entry's nodeTimestamp when it is `nodeId`'s valid signature over the round's attestation; null (a fault) otherwise. */
  #checkEntry(nodeId: Address, base: Pick<TimeProof, "nanoMoment" | "hardwareSignature" | "accuracy">, entry: Hex): bigint | null {
    const peer = this.#ctx.peer(nodeId)!;
    try {
      const nodeTimestampNs = BigInt(`0x${entry.slice(2, 34)}`);
      const signer = recoverNodeAddress(timeAttestationForProof(base, nodeTimestampNs), entry, this.#ctx.options.recoveryMemo);
      if (signer.toLowerCase() === nodeId.toLowerCase()) {
        this.#evidence.watchEntry(peer, base, entry, nodeTimestampNs, this.#ctx.options.card.readTimeNs());
        return nodeTimestampNs;
      }
      this.#ctx.logger.warn({ peer: nodeId, signer }, "co-signature signed by another key: dropped");
    } catch (error) {
      this.#ctx.logger.warn({ peer: nodeId, err: error }, "co-signature does not recover: dropped");
    }
    peer.faultsTotal += 1;
    return null;
  }
}
