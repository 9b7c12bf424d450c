/**
 * The responder's side of other primaries' rounds (docs/protocol.md §7.1, §7.5): it answers their exchanges, keeps
 * the rounds it answered (bounded per proposer), and co-signs a round's attestation only when its own clock agrees
 * (coSignDecision, within the transit it measured itself), the proposer's card signature checks against the card it
 * trusts, and this node may sign. One co-signature per round, redeemed within two round timeouts.
 */
import { coSignDecision, maxRoundAccuracyNs, type CoSignRule } from "../../protocol/consensus";
import { decodeHardwareSignature, hwMessage, timeAttestationForProof } from "../../protocol/codec";
import { signNodeEntry } from "../../protocol/sign";
import type { Address, Hex } from "../../protocol/types";
import { verifyP256Signature } from "../../protocol/verify";
import { MAX_PENDING_ROUNDS_PER_PROPOSER, type MeshPayload } from "../../wire/mesh";
import { MAX_FILTER_SAMPLE_AGE_NS, type MeshContext } from "./context";
import { recordAnsweredExchange, type PeerRecord } from "./peers";
import type { MeshPeerLink } from "./transport";

/** At most one log line per this many ms for refused co-sign requests (a misbehaving proposer repeats them). */
const REFUSAL_LOG_INTERVAL_MS = 5_000;

/** A round whose exchange this node answered, waiting for its co-sign request. */
interface PendingRound {
  readonly roundId: bigint;
  /** The probe's t1 (the proposer's clock when it sent it): the round's moment was read before it. */
  readonly t1Ns: bigint;
  readonly receivedAtNs: bigint;
}

export class CoSignService {
  readonly #ctx: MeshContext;
  /** By lower-case proposer id, oldest first. */
  readonly #pendingRounds = new Map<string, PendingRound[]>();
  #lastRefusalLogMs = 0;

  constructor(ctx: MeshContext) {
    this.#ctx = ctx;
    ctx.options.transport.handle("probe", (link, payload, receivedAtNs) => this.#answerProbe(link, payload, receivedAtNs));
    ctx.options.transport.handle("cosignRequest", (link, payload) => this.#answerCoSign(link, payload));
  }

  /** Drops the rounds a proposer has pending here (it was excluded). */
  forgetRounds(nodeId: Address): void {
    this.#pendingRounds.delete(nodeId.toLowerCase());
  }

  #answerProbe(link: MeshPeerLink, payload: MeshPayload, receivedAtNs: bigint): MeshPayload | null {
    if (payload.kind !== "probe") return null;
    const peer = this.#ctx.peer(link.nodeId);
    if (peer === undefined || peer.excludedReason !== null) return null;
    // A peer that sends us an exchange is up (a restarted member does, in its first rounds): back in our rounds at
    // once, rather than after our next probe reaches it, which a restart's rounds cannot wait for.
    if (recordAnsweredExchange(peer)) this.#ctx.logger.info({ peer: peer.nodeId }, "mesh peer sent an exchange: back in the rounds");
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
      t3Ns: this.#ctx.options.card.readTimeNs(),
      cardAccuracyNs: this.#ctx.options.cardAccuracyNs,
      state: this.#ctx.tracker.state,
    };
  }

  /**
   * How late after the proposer's moment its round's exchange may arrive here and still be co-signed (§7.5): this
   * node's own measurement of the path (the largest round-trip delay of its recent samples, which carries the
   * queueing both event loops add, capped at twice meshMaxPeerUncertaintyNs so that a proposer answering probes
   * late cannot widen it further), plus four jitters and meshCoSignSlackNs; never more than the round
   * timeout. Null when the newest sample is not recent: then nothing but the proposer's word bounds the transit.
   * The newest sample, not the minimum-delay one: the best of 8 samples one probe interval apart is often several
   * seconds old while the path was measured a moment ago, and refusing on it failed honest rounds.
   */
  #transitBoundNs(peer: PeerRecord, roundTimeoutNs: bigint): bigint | null {
    let newestAtNs: bigint | null = null;
    let largestDelayNs = 0n;
    for (const sample of peer.filter.samples()) {
      if (newestAtNs === null || sample.atNs > newestAtNs) newestAtNs = sample.atNs;
      if (sample.delayNs > largestDelayNs) largestDelayNs = sample.delayNs;
    }
    if (newestAtNs === null || this.#ctx.options.card.readTimeNs() - newestAtNs > MAX_FILTER_SAMPLE_AGE_NS) return null;
    const delayCapNs = 2n * this.#ctx.options.maxPeerUncertaintyNs;
    const boundNs = (largestDelayNs < delayCapNs ? largestDelayNs : delayCapNs) + 4n * peer.filter.jitterNs() + this.#ctx.options.coSignSlackNs;
    return boundNs < roundTimeoutNs ? boundNs : roundTimeoutNs;
  }

  #answerCoSign(link: MeshPeerLink, payload: MeshPayload): MeshPayload | null {
    if (payload.kind !== "cosignRequest") return null;
    const { options, stats } = this.#ctx;
    const refuse = (refusal: string): MeshPayload => {
      stats.coSignaturesRefusedTotal += 1;
      this.#ctx.logger.debug({ proposer: link.nodeId, refusal }, "co-signature refused");
      return { kind: "cosignReply", nodeEntry: null, refusal };
    };
    const peer = this.#ctx.peer(link.nodeId);
    if (peer === undefined || peer.excludedReason !== null) return refuse("the proposer is excluded from the mesh");
    // Only a primary proposes rounds, and who is one is this node's configuration (meshPeers), not the peer's claim.
    if (peer.role !== "primary") return refuse(`the proposer is configured here as ${peer.role}, not primary (meshPeers)`);
    const key = link.nodeId.toLowerCase();
    const rounds = this.#pendingRounds.get(key) ?? [];
    const round = rounds.find((candidate) => candidate.roundId === payload.roundId);
    if (round === undefined) return refuse(`round ${payload.roundId} unknown (no exchange, or already co-signed)`);
    this.#pendingRounds.set(key, rounds.filter((candidate) => candidate !== round)); // one co-signature per round
    const roundTimeoutNs = BigInt(options.roundTimeoutMs) * 1_000_000n;
    // A round is redeemed within two timeouts (its exchanges, then its co-sign requests), by this node's clock: a
    // proposer cannot keep rounds to pick one later.
    if (options.card.readTimeNs() - round.receivedAtNs > 2n * roundTimeoutNs) return refuse(`round ${payload.roundId} expired`);
    if (payload.nanoMoment > round.t1Ns) return refuse("the moment is later than the round's exchange that should follow it");
    // The cheap clock rule before the P-256 verification and the signature (§7.5).
    const maxTransitNs = this.#transitBoundNs(peer, roundTimeoutNs);
    if (maxTransitNs === null) return refuse("no recent measurement of the path from the proposer yet");
    const ownAccuracyNs = options.cardAccuracyNs;
    const maxAccuracyNs = maxRoundAccuracyNs(options.windowNs, options.maxPeerUncertaintyNs);
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
      options.assertCanSign();
    } catch (error) {
      return refuse(`this node cannot sign: ${error instanceof Error ? error.message : String(error)}`);
    }
    const attestation = timeAttestationForProof(
      { nanoMoment: payload.nanoMoment, hardwareSignature: payload.hardwareSignature, accuracy: payload.accuracyNs },
      options.card.readTimeNs(),
    );
    stats.coSignaturesGivenTotal += 1;
    return { kind: "cosignReply", nodeEntry: signNodeEntry(options.nodeKey, attestation), refusal: "" };
  }

  /**
   * A co-sign request this node's clock refused (§7.5), recorded as evidence: counted by rule, and logged with what
   * was asked (the moment, the claimed accuracy, the card's signature over the moment, which proves the proposer's
   * card read it) and what this node measured (t2, its transit bound and accuracy). A claim no honest proposer makes
   * (an accuracy above what a round can sign, or a moment ahead of this clock beyond it) is also a fault of the
   * proposer; a moment behind may be an honest one delayed past the transit bound by a busy host, so it is not.
   */
  #recordClockRefusal(peer: PeerRecord, rule: CoSignRule, reason: string, evidence: Record<string, string | number>): void {
    const byRule = this.#ctx.stats.coSignRequestsRefusedByRule;
    byRule[rule] = (byRule[rule] ?? 0) + 1;
    if (rule !== "backdated") peer.faultsTotal += 1;
    const nowMs = Date.now();
    if (nowMs - this.#lastRefusalLogMs < REFUSAL_LOG_INTERVAL_MS) return;
    this.#lastRefusalLogMs = nowMs;
    this.#ctx.logger.warn({ proposer: peer.nodeId, rule, reason, ...evidence }, "co-sign request refused by this node's clock (docs/protocol.md §7.5)");
  }

  /** Why the proposer's card signature cannot be co-signed, or null: its card from its hello, low-S, valid. */
  #checkProposerCard(peer: PeerRecord, nanoMoment: bigint, hardwareSignature: Hex): string | null {
    const card = this.#ctx.trustedCard(peer);
    if (typeof card === "string") return card;
    const decoded = decodeHardwareSignature(hardwareSignature);
    if (decoded.cardId.toLowerCase() !== card.cardId.toLowerCase()) return `the card signature is by ${decoded.cardId}, the proposer's card is ${card.cardId}`;
    const valid = verifyP256Signature({ message: hwMessage(decoded.cardId, nanoMoment) }, decoded.r, decoded.s, card.publicKey, this.#ctx.p256Keys);
    return valid ? null : "the card signature does not verify";
  }
}
