/**
 * Measuring the peers (docs/protocol.md §7.4): hellos teach this node each peer's card, every probe interval shifts
 * the reach registers and probes every peer with a session (spread over the interval), and each answered exchange
 * feeds the peer's clock filter. A peer whose exchanges go unanswered becomes absent (peers.ts); the first exchange
 * it answers brings it back.
 */
import { exchangeSample, readingFromSample, type ConsensusReading } from "../../protocol/consensus";
import { cardIdFromPublicKey } from "../../protocol/codec";
import type { MeshPayload } from "../../wire/mesh";
import { MAX_FILTER_SAMPLE_AGE_NS, type MeshContext } from "./context";
import { MESH_ABSENT_AFTER_MISSED_EXCHANGES, recordAnsweredExchange, recordMissedExchange, type PeerRecord } from "./peers";
import { MeshRequestTimeoutError, type MeshPeerLink } from "./transport";

export class PeerSessions {
  readonly #ctx: MeshContext;
  #probeTimer: NodeJS.Timeout | null = null;

  constructor(ctx: MeshContext) {
    this.#ctx = ctx;
    ctx.options.transport.onHello((link) => this.#learn(link));
  }

  start(): void {
    this.#armProbe();
  }

  stop(): void {
    if (this.#probeTimer !== null) clearTimeout(this.#probeTimer);
    this.#probeTimer = null;
  }

  /** The largest |offset| among reachable peers' best samples, ns (the drift gauge); null without samples. */
  maxPeerOffsetNs(): bigint | null {
    let max: bigint | null = null;
    for (const peer of this.#ctx.peers.values()) {
      const best = peer.filter.best();
      if (best === null || !peer.reach.reachable) continue;
      const offset = best.offsetNs < 0n ? -best.offsetNs : best.offsetNs;
      if (max === null || offset > max) max = offset;
    }
    return max;
  }

  /**
   * A request to the peer failed. Only an exchange the peer left unanswered for its whole timeout counts towards
   * its absence; a local refusal (no session, too many requests pending) says nothing about the peer.
   */
  recordUnanswered(peer: PeerRecord, error: unknown): void {
    if (!(error instanceof MeshRequestTimeoutError) || !recordMissedExchange(peer)) return;
    this.#ctx.logger.warn(
      { peer: peer.nodeId, missedExchanges: MESH_ABSENT_AFTER_MISSED_EXCHANGES, probeIntervalMs: this.#ctx.options.probeIntervalMs },
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
  recordExchange(peer: PeerRecord, t1Ns: bigint, payload: MeshPayload, t4Ns: bigint, round?: { momentNs: bigint }): ConsensusReading | null {
    if (payload.kind !== "probeReply") return null;
    if (recordAnsweredExchange(peer)) this.#ctx.logger.info({ peer: peer.nodeId }, "mesh peer answered again: back in the rounds");
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
      this.#ctx.logger.warn({ peer: peer.nodeId, err: error }, "mesh exchange with impossible timestamps: ignored");
      return null;
    }
  }

  #learn(link: MeshPeerLink): void {
    const peer = this.#ctx.peer(link.nodeId);
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
    const { learnCardChain } = this.#ctx.options;
    if (peer.certificateChainPem.length === 0 || learnCardChain === undefined) return;
    learnCardChain(peer.certificateChainPem).catch((error: unknown) => {
      this.#ctx.logger.warn({ peer: peer.nodeId, err: error }, "could not check a peer card's certificate chain");
    });
  }

  #armProbe(): void {
    if (!this.#ctx.running) return;
    this.#probeTimer = setTimeout(() => {
      this.#probeAll();
      this.#armProbe();
    }, this.#ctx.options.probeIntervalMs);
    this.#probeTimer.unref();
  }

  /** One probe interval: shift every reach register, probe every peer (hello first where there is no session). */
  #probeAll(): void {
    const { transport } = this.#ctx.options;
    const peers = [...this.#ctx.peers.values()];
    // Spread over the interval: answers that arrive together wait for each other in this event loop, and that
    // wait would count as path delay. A quiet exchange is what the clock filter keeps as its best sample.
    const spacingMs = this.#ctx.options.probeIntervalMs / Math.max(1, peers.length);
    peers.forEach((peer, index) => {
      this.#learnCard(peer);
      peer.reach.shift(peer.answeredSinceLastProbe);
      peer.answeredSinceLastProbe = false;
      if (!transport.hasSession(peer.nodeId)) return;
      if (index === 0) this.#probe(peer);
      else setTimeout(() => this.#probe(peer), index * spacingMs).unref();
    });
    transport.greet();
    this.#ctx.tracker.observePeers(this.#ctx.reachablePeers());
  }

  #probe(peer: PeerRecord): void {
    if (!this.#ctx.running) return;
    const t1Ns = this.#ctx.options.card.readTimeNs();
    this.#ctx.options.transport
      .request(peer.nodeId, { kind: "probe", t1Ns, roundId: 0n }, this.#ctx.options.roundTimeoutMs)
      .then(
        (answer) => this.recordExchange(peer, t1Ns, answer.payload, answer.receivedAtNs),
        (error: unknown) => this.recordUnanswered(peer, error), // and the reach register records it
      );
  }
}
