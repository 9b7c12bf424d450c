/**
 * Prometheus metrics of one node (own Registry, so several nodes in one process never collide). Names are
 * declared once here. `/metrics` serves `registry.metrics()` in the Prometheus text format.
 *
 * - timerpc_requests_total{transport,route,status}: every answered request / RPC / WebSocket message.
 *   transport ∈ rest | ws | grpc; route is the route pattern or RPC name; status the HTTP status, gRPC status
 *   name or "ok"/"error"/"rate_limited"/"too_many_messages" (the connection closed: more than may wait) for
 *   WebSocket messages; "aborted" for a REST request its client abandoned
 *   (it gets no response). Every refusal is counted here; the log only samples them (sampledLog.ts).
 * - timerpc_accuracy_ns: the accuracy (ns) signed into each attestation the node produced.
 * - timerpc_consensus_latency: seconds from the card's reading (nanoMoment) to the completed proof (producedAtNs).
 *   On a mesh node (docs/protocol.md §7) this is the whole round: exchange, agreement and co-signing; on a lone
 *   node, the attestation latency.
 * - timerpc_node_drift_ns: on a mesh node, |consensus time − this node's moment| of the last successful round (how
 *   far this node's clock is from the mesh's median); on a lone node, the card's measured error (ns): for the
 *   chrony card, |chrony's measured system time offset|.
 * - timerpc_card_bound_ns: the error bound the card proves now, ns, what the node signs (the chrony card; NaN for
 *   a card with a configured accuracy, and while the card proves none).
 * - timerpc_card_state{driver,state}: 1 for the card driver's state (starting, serving, degraded), from drivers that
 *   report one (the chrony card).
 * - timerpc_mesh_peer_offset_ns / _delay_ns / _reach {peer}: each peer's best clock-filter sample and its 8-bit
 *   reachability register (docs/protocol.md §7.4).
 * - timerpc_mesh_rounds_total{outcome}: consensus rounds proposed, "ok" or the error message that ended them.
 * - timerpc_mesh_packets_dropped_total{reason}: mesh packets this node dropped, by reason (docs/protocol.md §7.3).
 * - timerpc_tamper_events_total: tamper events reported by the card.
 * - timerpc_attestation_signer{signer}: 1 for where ticks are signed now (self-ticking-thread, thread, main-thread;
 *   node/api/README.md lists when each applies), read at scrape time.
 * - timerpc_served_proofs_total{transport}: proofs handed out (REST current, WS pushes, gRPC responses).
 * - timerpc_stream_pushes_skipped_total: stream updates (WebSocket, gRPC StreamTime) skipped because the node-wide
 *   push budget (streamMaxPushesPerSecond) was spent.
 * - timerpc_connections_dropped_total{reason}: REST/WebSocket connections closed by the connection guard
 *   (server_full, address_full, penalised: on accept; pipelining, refusals, stalled: while open).
 * - timerpc_ntp_requests_total{outcome}: NTP client requests of the time host (node/ntp) by outcome: "answered",
 *   "rate_limited" (a Kiss-o'-Death RATE sent), "rate_limited_dropped" (over rate, and the node-wide Kiss-o'-Death
 *   budget spent: no reply), "send_error", "state_error" (the clock's state could not be read: no reply); read at
 *   scrape time.
 * - timerpc_ntp_packets_dropped_total{reason}: datagrams the NTP time host dropped unanswered: "short" (< 48
 *   bytes), "control" (mode 6/7 control and monitor queries), "mode" (not a client request), "version" (not 1–4).
 * - timerpc_proof_age_ns{transport}: age of each proof handed out (node clock − nanoMoment when the response is
 *   built), nanoseconds: the freshness clients get, tick interval and event-loop delay included.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CardStatus } from "../card/types";
import type { ServiceStats, SignedTime, TimeService } from "../core/types";
import type { DropReason } from "./connectionGuard";
import type { NtpServerStats } from "../ntp/server";
import { CounterTally, flushAll, HotHistogram, type HotHistogramChild } from "../../lib/metrics";

export const METRIC_NAMES = {
  requestsTotal: "timerpc_requests_total",
  accuracyNs: "timerpc_accuracy_ns",
  consensusLatencySeconds: "timerpc_consensus_latency",
  nodeDriftNs: "timerpc_node_drift_ns",
  cardBoundNs: "timerpc_card_bound_ns",
  cardState: "timerpc_card_state",
  tamperEventsTotal: "timerpc_tamper_events_total",
  servedProofsTotal: "timerpc_served_proofs_total",
  proofAgeNs: "timerpc_proof_age_ns",
  connectionsDroppedTotal: "timerpc_connections_dropped_total",
  attestationSigner: "timerpc_attestation_signer",
  meshPeerOffsetNs: "timerpc_mesh_peer_offset_ns",
  meshPeerDelayNs: "timerpc_mesh_peer_delay_ns",
  meshPeerReach: "timerpc_mesh_peer_reach",
  meshRoundsTotal: "timerpc_mesh_rounds_total",
  meshPacketsDroppedTotal: "timerpc_mesh_packets_dropped_total",
  streamPushesSkippedTotal: "timerpc_stream_pushes_skipped_total",
  ntpRequestsTotal: "timerpc_ntp_requests_total",
  ntpPacketsDroppedTotal: "timerpc_ntp_packets_dropped_total",
} as const;

/** Bucket bounds of timerpc_proof_age_ns: fine around the 1 ms target, coarse up to the 60 s maximum age. */
export const PROOF_AGE_BUCKETS_NS: readonly number[] = [
  50_000, 100_000, 250_000, 500_000, 750_000, 1_000_000, 1_500_000, 2_000_000, 5_000_000, 10_000_000, 50_000_000,
  250_000_000, 1_000_000_000, 10_000_000_000, 60_000_000_000,
];

export type Transport = "rest" | "ws" | "grpc";

/** The values of timerpc_attestation_signer's label. */
export type SignerMode = "main-thread" | "thread" | "self-ticking-thread";

function signerMode(stats: Pick<ServiceStats, "attestationSigner" | "signerSelfTicking">): SignerMode {
  if (stats.attestationSigner === "main-thread") return "main-thread";
  return stats.signerSelfTicking ? "self-ticking-thread" : "thread";
}

export interface NodeMetrics {
  readonly registry: Registry;
  /** Counts one answered request. Cached label children keep this cheap on the hot path. */
  countRequest(transport: Transport, route: string, status: string): void;
  /** The tally countRequest() adds to, for a caller that counts the same labels on every request (look it up once). */
  requestTally(transport: Transport, route: string, status: string): CounterTally;
  /**
   * Counts a proof handed out. Pass `current` when it answers "what time is it" (REST current, streams, gRPC
   * CURRENT_TIME): its age against the bound service's clock is observed. Archived and scheduled proofs are old
   * or future by design and are only counted.
   */
  countServedProof(transport: Transport, current?: SignedTime): void;
  /** Counts stream updates skipped for want of push budget. */
  countSkippedPushes(count: number): void;
  /** Counts a connection the connection guard closed. */
  countDroppedConnection(reason: DropReason): void;
  /** Observes every attestation and tamper event of the service; returns the unbind function. */
  bindService(service: TimeService): () => void;
  /** Reads the NTP time host's counts at scrape time (node/ntp/server.ts); returns the unbind function. */
  bindNtp(stats: () => NtpServerStats): () => void;
  /** Prometheus text exposition. */
  render(): Promise<string>;
  readonly contentType: string;
}

/**
 * prom-client default metrics the node leaves out: each scrape lists every live handle, request or resource of the
 * process (process._getActiveHandles() and the like) to count them by type, so its cost grows with what clients
 * hold open: with 5,000 connections open (10,000 handles in the measuring process, one core) a scrape took 12–31 ms
 * of event loop, and 7.6–8 ms without these (of which process_open_fds, reading /proc/self/fd, is ~4.6 ms: kept,
 * descriptor exhaustion is what an operator must see coming). The connection guard caps connections anyway.
 */
export const OMITTED_DEFAULT_METRICS = [
  "nodejs_active_handles",
  "nodejs_active_handles_total",
  "nodejs_active_requests",
  "nodejs_active_requests_total",
  "nodejs_active_resources",
  "nodejs_active_resources_total",
] as const;

export function createNodeMetrics(options: { defaultMetrics?: boolean } = {}): NodeMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    for (const name of OMITTED_DEFAULT_METRICS) registry.removeSingleMetric(name);
  }

  const requestTallies = new Map<string, CounterTally>();
  const servedTallies = new Map<Transport, { served: CounterTally; age: HotHistogramChild }>();

  const requestsTotal = new Counter({
    name: METRIC_NAMES.requestsTotal,
    help: "Requests answered, by transport, route and status",
    labelNames: ["transport", "route", "status"] as const,
    registers: [registry],
    collect() {
      flushAll(requestTallies.values());
    },
  });
  const accuracyNs = new Histogram({
    name: METRIC_NAMES.accuracyNs,
    help: "Accuracy signed into each attestation, nanoseconds",
    buckets: [1, 5, 10, 25, 50, 100, 250, 500, 1000, 10_000],
    registers: [registry],
  });
  const consensusLatencySeconds = new Histogram({
    name: METRIC_NAMES.consensusLatencySeconds,
    help: "Seconds from the card reading to the completed proof (single node: attestation latency)",
    buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1],
    registers: [registry],
  });
  // The gauge reads the bound service when scraped, so it costs nothing between scrapes.
  let driftSourceNs: (() => number) | null = null;
  new Gauge({
    name: METRIC_NAMES.nodeDriftNs,
    help: "The card's latest measured error against the host reference clock, nanoseconds",
    registers: [registry],
    collect() {
      if (driftSourceNs !== null) this.set(driftSourceNs());
    },
  });
  // The card driver's own report (chrony card), read when scraped.
  let cardStatusSource: (() => CardStatus | undefined) | null = null;
  new Gauge({
    name: METRIC_NAMES.cardBoundNs,
    help: "The error bound the card proves now, nanoseconds: what the node signs (chrony card)",
    registers: [registry],
    collect() {
      // NaN, not 0, while the card proves no bound (a label-less gauge reset would read 0: a perfect clock).
      this.set(cardStatusSource?.()?.accuracyBoundNs ?? Number.NaN);
    },
  });
  new Gauge({
    name: METRIC_NAMES.cardState,
    help: "1 for the card driver's state: starting, serving or degraded (chrony card)",
    labelNames: ["driver", "state"] as const,
    registers: [registry],
    collect() {
      this.reset();
      const status = cardStatusSource?.();
      if (status !== undefined) this.set({ driver: status.driver, state: status.state }, 1);
    },
  });
  // Where attestations are signed, read when scraped: a node whose signer thread failed (and whose ticks fell back to
  // the serving thread) shows it here as well as in its error log.
  let signerSource: (() => SignerMode) | null = null;
  new Gauge({
    name: METRIC_NAMES.attestationSigner,
    help: "Where attestations are signed: 1 for the current mode (main-thread, thread, self-ticking-thread)",
    labelNames: ["signer"] as const,
    registers: [registry],
    collect() {
      this.reset();
      if (signerSource !== null) this.set({ signer: signerSource() }, 1);
    },
  });
  const tamperEventsTotal = new Counter({
    name: METRIC_NAMES.tamperEventsTotal,
    help: "Tamper events reported by the time card",
    registers: [registry],
  });
  const servedProofsTotal = new Counter({
    name: METRIC_NAMES.servedProofsTotal,
    help: "Proofs handed out, by transport",
    labelNames: ["transport"] as const,
    registers: [registry],
    collect() {
      flushAll([...servedTallies.values()].map((tally) => tally.served));
    },
  });

  // Observed once per proof served (every request of the hottest route): lib/metrics.ts HotHistogram.
  const proofAgeNs = new HotHistogram({
    name: METRIC_NAMES.proofAgeNs,
    help: "Age of each proof handed out (node clock minus nanoMoment), nanoseconds, by transport",
    labelName: "transport",
    buckets: PROOF_AGE_BUCKETS_NS,
    registry,
  });

  const connectionsDroppedTotal = new Counter({
    name: METRIC_NAMES.connectionsDroppedTotal,
    help: "REST/WebSocket connections closed by the connection guard, by reason",
    labelNames: ["reason"] as const,
    registers: [registry],
  });

  const streamPushesSkippedTotal = new Counter({
    name: METRIC_NAMES.streamPushesSkippedTotal,
    help: "Stream updates skipped because the node-wide push budget was spent",
    registers: [registry],
  });

  // Mesh gauges read the bound service's mesh state when scraped.
  let meshSource: (() => ReturnType<TimeService["meshState"]>) | null = null;
  const peerGauge = (name: string, help: string, field: "offsetNs" | "delayNs" | "reach") =>
    new Gauge({
      name,
      help,
      labelNames: ["peer"] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const peer of meshSource?.().peers ?? []) {
          const value = peer[field];
          if (value !== null && value !== undefined) this.set({ peer: String(peer["nodeId"]) }, Number(value));
        }
      },
    });
  peerGauge(METRIC_NAMES.meshPeerOffsetNs, "Each mesh peer's clock offset from the best filter sample (peer − this node), nanoseconds", "offsetNs");
  peerGauge(METRIC_NAMES.meshPeerDelayNs, "Each mesh peer's round-trip delay from the best filter sample, nanoseconds", "delayNs");
  peerGauge(METRIC_NAMES.meshPeerReach, "Each mesh peer's 8-bit reachability register", "reach");
  // Counts the mesh keeps by one label, read when scraped; nothing on a node without a mesh.
  const meshCountGauge = (name: string, help: string, label: string, counts: (state: ReturnType<TimeService["meshState"]>) => Record<string, number>) =>
    new Gauge({
      name,
      help,
      labelNames: [label],
      registers: [registry],
      collect() {
        this.reset();
        const state = meshSource?.();
        if (state === undefined || state.members === 1) return;
        for (const [value, count] of Object.entries(counts(state))) this.set({ [label]: value }, count);
      },
    });
  meshCountGauge(METRIC_NAMES.meshRoundsTotal, "Consensus rounds proposed by this node, by outcome (ok, or the error that ended them)", "outcome", (state) => ({
    ok: state.roundsSucceeded,
    ...state.roundsFailed,
  }));
  meshCountGauge(
    METRIC_NAMES.meshPacketsDroppedTotal,
    "Mesh packets this node dropped since it started, by reason (wrong source, replay, over a peer's budget, ...)",
    "reason",
    (state) => state.refused.packets,
  );

  // The NTP time host keeps plain counts (its hot path touches no prom-client object); they are copied when scraped.
  let ntpSource: (() => NtpServerStats) | null = null;
  new Counter({
    name: METRIC_NAMES.ntpRequestsTotal,
    help: "NTP client requests of the time host, by outcome (answered, rate_limited: Kiss-o'-Death sent, rate_limited_dropped, send_error)",
    labelNames: ["outcome"] as const,
    registers: [registry],
    collect() {
      this.reset();
      const stats = ntpSource?.();
      if (stats === undefined) return;
      this.inc({ outcome: "answered" }, stats.answeredTotal);
      this.inc({ outcome: "rate_limited" }, stats.kissOfDeathTotal);
      this.inc({ outcome: "rate_limited_dropped" }, stats.rateLimitedDroppedTotal);
      this.inc({ outcome: "send_error" }, stats.sendErrorsTotal);
      this.inc({ outcome: "state_error" }, stats.stateErrorsTotal);
    },
  });
  new Counter({
    name: METRIC_NAMES.ntpPacketsDroppedTotal,
    help: "Datagrams the NTP time host dropped unanswered, by reason (short, control: mode 6/7, mode, version)",
    labelNames: ["reason"] as const,
    registers: [registry],
    collect() {
      this.reset();
      const stats = ntpSource?.();
      if (stats === undefined) return;
      for (const [reason, count] of Object.entries(stats.dropped)) this.inc({ reason }, count);
    },
  });

  // Until a service is bound there is no node clock: served proofs are counted, their age is not observed.
  let clockNs: (() => bigint) | null = null;

  function observeAttestation(signed: SignedTime): void {
    accuracyNs.observe(signed.proof.accuracy);
    const latencyNs = signed.producedAtNs - signed.proof.nanoMoment;
    consensusLatencySeconds.observe(Number(latencyNs > 0n ? latencyNs : 0n) / 1e9);
  }

  return {
    registry,
    contentType: registry.contentType,
    countRequest(transport, route, status) {
      this.requestTally(transport, route, status).add();
    },
    requestTally(transport, route, status) {
      const key = `${transport}\u0000${route}\u0000${status}`;
      let tally = requestTallies.get(key);
      if (tally === undefined) {
        tally = new CounterTally(requestsTotal.labels(transport, route, status));
        requestTallies.set(key, tally);
      }
      return tally;
    },
    countServedProof(transport, current) {
      let tallies = servedTallies.get(transport);
      if (tallies === undefined) {
        tallies = { served: new CounterTally(servedProofsTotal.labels(transport)), age: proofAgeNs.labels(transport) };
        servedTallies.set(transport, tallies);
      }
      tallies.served.add();
      if (current !== undefined && clockNs !== null) tallies.age.observe(Number(clockNs() - current.proof.nanoMoment));
    },
    countSkippedPushes(count) {
      streamPushesSkippedTotal.inc(count);
    },
    countDroppedConnection(reason) {
      connectionsDroppedTotal.inc({ reason });
    },
    bindService(service) {
      const offProof = service.onProof(observeAttestation);
      const offTamper = service.onTamper(() => tamperEventsTotal.inc());
      driftSourceNs = () => {
        const offset = service.meshState().consensusOffsetNs;
        if (offset === null) return service.stats().measuredErrorNs;
        return Math.abs(Number(offset));
      };
      meshSource = () => service.meshState();
      clockNs = () => service.nowNs();
      signerSource = () => signerMode(service.stats());
      cardStatusSource = () => service.info().card;
      return () => {
        offProof();
        offTamper();
        driftSourceNs = null;
        meshSource = null;
        clockNs = null;
        signerSource = null;
        cardStatusSource = null;
      };
    },
    bindNtp(stats) {
      ntpSource = stats;
      return () => {
        if (ntpSource === stats) ntpSource = null;
      };
    },
    render: () => registry.metrics(),
  };
}
