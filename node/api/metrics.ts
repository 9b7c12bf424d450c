/**
 * Prometheus metrics of one node (own Registry, so several nodes in one process never collide). Names are
 * declared once here. `/metrics` serves `registry.metrics()` in the Prometheus text format.
 *
 * Detail: docs/operators.md "Monitoring: metrics, dashboard and alerts" and node/api/README.md.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { CardStatus } from "../card/types";
import type { ConvergenceState, MeshStateReport, ServiceStats, SignedTime, TimeService } from "../core/types";
import { DROP_REASONS, type DropReason } from "./connectionGuard";
import { collectProcessMetrics, copiedCounter, CounterTally, flushAll, HotHistogram, ScrapedMetric, type HotHistogramChild } from "../../lib/metrics";

/*
 * - timerpc_requests_total{transport,route,status}: every answered request / RPC / WebSocket message.
 *   transport ∈ rest | ws | grpc; route is the route pattern or RPC name; status the HTTP status, gRPC status
 *   name or "ok"/"error"/"rate_limited"/"too_many_messages" (the connection closed: more than may wait) for
 *   WebSocket messages; "aborted" for a REST request its client abandoned
 *   (it gets no response). Every refusal is counted here; the log only samples them (sampledLog.ts).
 * - timerpc_accuracy_ns: the accuracy (ns) signed into each attestation the node produced; buckets from 10 ns (a
 *   hardware card) to 100 ms (a software mesh's proof: 100 µs to 10 ms on loopback), ACCURACY_BUCKETS_NS.
 * - timerpc_signed_accuracy_seconds: the accuracy of the latest attestation, seconds (NaN before the first), and
 *   timerpc_accuracy_limit_seconds: the largest accuracy verify() accepts (maxAcceptableDriftNs), seconds. A proof
 *   above the limit is one this node's verifier, and consumers with the same bound, refuse.
 * - timerpc_consensus_latency: seconds from the card's reading (nanoMoment) to the completed proof (producedAtNs).
 *   On a mesh node (docs/protocol.md §7) this is the whole round: exchange, agreement and co-signing; on a lone
 *   node, the attestation latency.
 * - timerpc_node_drift_ns: on a mesh node, |consensus time − this node's moment| of the last successful round (how
 *   far this node's clock is from the mesh's median); on a lone node, the card's measured error (ns): for the
 *   chrony card, |chrony's measured system time offset|.
 * - timerpc_card_bound_seconds: the error bound the card proves now, seconds, what the node signs (the chrony card;
 *   NaN for a card with a configured accuracy, and while the card proves none).
 * - timerpc_card_state{driver,state}: 1 for the card driver's state (starting, serving, degraded), from drivers that
 *   report one (the chrony card).
 * - timerpc_mesh_peer_offset_seconds / _delay_seconds / timerpc_mesh_peer_reach {peer}: each peer's best
 *   clock-filter sample and its 8-bit reachability register (docs/protocol.md §7.4).
 * - timerpc_mesh_convergence_state{state}: 1 for the mesh's convergence state (Initializing, Converging, Converged,
 *   Degraded); timerpc_mesh_time_quality (0–10,000), timerpc_mesh_members, timerpc_mesh_peers_reachable,
 *   timerpc_mesh_tamper_alerts (verified alerts held, this node's and its peers'), timerpc_mesh_contradicting_peers
 *   (peers caught signing contradicting entries, §7.8).
 * - timerpc_mesh_rounds_total{outcome}: consensus rounds proposed, "ok" or the error message that ended them.
 * - timerpc_mesh_packets_dropped_total{reason}: mesh packets this node dropped, by reason (docs/protocol.md §7.3).
 *   All timerpc_mesh_* series are absent on a node without a mesh.
 * - timerpc_schedules_pending, timerpc_schedule_backlog_seconds (how long the most overdue pending schedule has
 *   waited past its due attempt; 0 when none is overdue), timerpc_schedules_finished_total{outcome} (delivered,
 *   failed), timerpc_schedule_delivery_attempts_total: scheduled deliveries (node/schedules), read when scraped.
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
 * - timerpc_proof_age_seconds{transport}: age of each proof handed out (node clock − nanoMoment when the response
 *   is built), seconds: the freshness clients get, tick interval and event-loop delay included.
 *
 * Names follow Prometheus's conventions (`promtool check metrics` passes them; a system test runs it on a live
 * node) except timerpc_accuracy_ns and timerpc_node_drift_ns, whose names the service description fixes.
 */
export { OMITTED_DEFAULT_METRICS } from "../../lib/metrics";

export const METRIC_NAMES = {
  requestsTotal: "timerpc_requests_total",
  accuracyNs: "timerpc_accuracy_ns",
  signedAccuracySeconds: "timerpc_signed_accuracy_seconds",
  accuracyLimitSeconds: "timerpc_accuracy_limit_seconds",
  consensusLatencySeconds: "timerpc_consensus_latency",
  nodeDriftNs: "timerpc_node_drift_ns",
  cardBoundSeconds: "timerpc_card_bound_seconds",
  cardState: "timerpc_card_state",
  tamperEventsTotal: "timerpc_tamper_events_total",
  servedProofsTotal: "timerpc_served_proofs_total",
  proofAgeSeconds: "timerpc_proof_age_seconds",
  connectionsDroppedTotal: "timerpc_connections_dropped_total",
  attestationSigner: "timerpc_attestation_signer",
  meshPeerOffsetSeconds: "timerpc_mesh_peer_offset_seconds",
  meshPeerDelaySeconds: "timerpc_mesh_peer_delay_seconds",
  meshPeerReach: "timerpc_mesh_peer_reach",
  meshConvergenceState: "timerpc_mesh_convergence_state",
  meshTimeQuality: "timerpc_mesh_time_quality",
  meshMembers: "timerpc_mesh_members",
  meshPeersReachable: "timerpc_mesh_peers_reachable",
  meshTamperAlerts: "timerpc_mesh_tamper_alerts",
  meshContradictingPeers: "timerpc_mesh_contradicting_peers",
  schedulesPending: "timerpc_schedules_pending",
  scheduleBacklogSeconds: "timerpc_schedule_backlog_seconds",
  schedulesFinishedTotal: "timerpc_schedules_finished_total",
  scheduleDeliveryAttemptsTotal: "timerpc_schedule_delivery_attempts_total",
  meshRoundsTotal: "timerpc_mesh_rounds_total",
  meshPacketsDroppedTotal: "timerpc_mesh_packets_dropped_total",
  streamPushesSkippedTotal: "timerpc_stream_pushes_skipped_total",
  ntpRequestsTotal: "timerpc_ntp_requests_total",
  ntpPacketsDroppedTotal: "timerpc_ntp_packets_dropped_total",
} as const;

/**
 * Bucket bounds of timerpc_accuracy_ns: 1, 2.5 and 5 per decade from 10 ns (hardware-timestamped cards) to 100 ms
 * (a software mesh signs 100 µs to 10 ms), so every kind of proof lands in a bucket of its own size, not in +Inf.
 */
export const ACCURACY_BUCKETS_NS: readonly number[] = [10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000].flatMap((decade) => [decade, 2.5 * decade, 5 * decade]).concat(100_000_000);

/** Bucket bounds of timerpc_proof_age_seconds: fine around the 1 ms target, coarse up to the 60 s maximum age. */
export const PROOF_AGE_BUCKETS_SECONDS: readonly number[] = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.005, 0.01, 0.05, 0.25, 1, 10, 60,
];

/** The convergence states of timerpc_mesh_convergence_state (docs/protocol.md §7.4). */
const CONVERGENCE_STATES: readonly ConvergenceState[] = ["Initializing", "Converging", "Converged", "Degraded"];

const NS_PER_SECOND = 1e9;

export type Transport = "rest" | "ws" | "grpc";

/** The values of timerpc_attestation_signer's label. */
export type SignerMode = "main-thread" | "thread" | "self-ticking-thread";

function signerMode(stats: Pick<ServiceStats, "attestationSigner" | "signerSelfTicking">): SignerMode {
  if (stats.attestationSigner === "main-thread") return "main-thread";
  return stats.signerSelfTicking ? "self-ticking-thread" : "thread";
}

/**
 * The NTP time host's counts as the metrics read them: node/ntp/server.ts's NtpServerStats has this shape (the
 * server binds one to the other), so node/api/ needs no import of node/ntp/ (the wings import only downwards).
 */
export interface NtpCounts {
  answeredTotal: number;
  kissOfDeathTotal: number;
  rateLimitedDroppedTotal: number;
  /** By drop reason (node/ntp/packet.ts NTP_DROP_REASONS). */
  dropped: Readonly<Record<string, number>>;
  sendErrorsTotal: number;
  stateErrorsTotal: number;
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
  bindNtp(stats: () => NtpCounts): () => void;
  /** Prometheus text exposition. */
  render(): Promise<string>;
  readonly contentType: string;
}

export function createNodeMetrics(options: { defaultMetrics?: boolean } = {}): NodeMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectProcessMetrics(registry);

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
    buckets: [...ACCURACY_BUCKETS_NS],
    registers: [registry],
  });
  // NaN until the first attestation (0 would read as a perfect clock).
  const signedAccuracySeconds = new Gauge({
    name: METRIC_NAMES.signedAccuracySeconds,
    help: "Accuracy signed into the latest attestation, seconds",
    registers: [registry],
  });
  signedAccuracySeconds.set(Number.NaN);
  const accuracyLimitSeconds = new Gauge({
    name: METRIC_NAMES.accuracyLimitSeconds,
    help: "The largest proof accuracy this node's verification accepts (maxAcceptableDriftNs), seconds",
    registers: [registry],
  });
  accuracyLimitSeconds.set(Number.NaN);
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
    name: METRIC_NAMES.cardBoundSeconds,
    help: "The error bound the card proves now, seconds: what the node signs (chrony card)",
    registers: [registry],
    collect() {
      // NaN, not 0, while the card proves no bound (a label-less gauge reset would read 0: a perfect clock).
      const boundNs = cardStatusSource?.()?.accuracyBoundNs;
      this.set(boundNs === undefined || boundNs === null ? Number.NaN : boundNs / NS_PER_SECOND);
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
  const proofAgeSeconds = new HotHistogram({
    name: METRIC_NAMES.proofAgeSeconds,
    help: "Age of each proof handed out (node clock minus nanoMoment), seconds, by transport",
    labelName: "transport",
    buckets: PROOF_AGE_BUCKETS_SECONDS,
    registry,
  });

  const connectionsDroppedTotal = new Counter({
    name: METRIC_NAMES.connectionsDroppedTotal,
    help: "REST/WebSocket connections closed by the connection guard, by reason",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
  // At zero from the start, so that increase() sees the first drop of each reason.
  for (const reason of DROP_REASONS) connectionsDroppedTotal.inc({ reason }, 0);

  const streamPushesSkippedTotal = new Counter({
    name: METRIC_NAMES.streamPushesSkippedTotal,
    help: "Stream updates skipped because the node-wide push budget was spent",
    registers: [registry],
  });

  // Mesh series read the bound service's mesh state when scraped; none on a node without a mesh (a lone node's state
  // is Initializing for ever, which would read as a mesh that never converges).
  let meshSource: (() => MeshStateReport) | null = null;
  const meshState = (): MeshStateReport | undefined => {
    const state = meshSource?.();
    return state === undefined || state.members === 1 ? undefined : state;
  };
  const peerGauge = (name: string, help: string, value: (peer: MeshStateReport["peers"][number]) => number | null) =>
    new Gauge({
      name,
      help,
      labelNames: ["peer"] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const peer of meshState()?.peers ?? []) {
          const sample = value(peer);
          if (sample !== null) this.set({ peer: peer.nodeId }, sample);
        }
      },
    });
  const nsAsSeconds = (ns: string | null): number | null => (ns === null ? null : Number(ns) / NS_PER_SECOND);
  peerGauge(METRIC_NAMES.meshPeerOffsetSeconds, "Each mesh peer's clock offset from the best filter sample (peer minus this node), seconds", (peer) => nsAsSeconds(peer.offsetNs));
  peerGauge(METRIC_NAMES.meshPeerDelaySeconds, "Each mesh peer's round-trip delay from the best filter sample, seconds", (peer) => nsAsSeconds(peer.delayNs));
  peerGauge(METRIC_NAMES.meshPeerReach, "Each mesh peer's 8-bit reachability register", (peer) => peer.reach);
  new Gauge({
    name: METRIC_NAMES.meshConvergenceState,
    help: "1 for the mesh's convergence state: Initializing, Converging, Converged or Degraded",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      this.reset();
      const state = meshState();
      // Every state's series, 0 or 1, so that a query for the state left is never empty while the mesh runs.
      if (state !== undefined) for (const name of CONVERGENCE_STATES) this.set({ state: name }, name === state.convergenceState ? 1 : 0);
    },
  });
  const meshGauge = (name: string, help: string, value: (state: MeshStateReport) => number) =>
    new ScrapedMetric({
      name,
      help,
      type: "gauge",
      registry,
      read: () => {
        const state = meshState();
        return state === undefined ? undefined : value(state);
      },
    });
  meshGauge(METRIC_NAMES.meshTimeQuality, "The mesh's time quality, 0 to 10000 (docs/protocol.md section 7.4)", (state) => state.timeQuality);
  meshGauge(METRIC_NAMES.meshMembers, "Members of the mesh, this node included", (state) => state.members);
  meshGauge(METRIC_NAMES.meshPeersReachable, "Mesh peers reachable now, this node not counted", (state) => state.peerCount);
  meshGauge(METRIC_NAMES.meshTamperAlerts, "Verified tamper alerts this node holds, its own and its peers'", (state) => state.tamperAlerts.length);
  meshGauge(METRIC_NAMES.meshContradictingPeers, "Mesh peers caught signing contradicting entries", (state) => state.contradictions.length);
  // Counts the mesh keeps since it started, copied when scraped.
  copiedCounter({
    name: METRIC_NAMES.meshRoundsTotal,
    help: "Consensus rounds proposed by this node, by outcome (ok, or the error that ended them)",
    labelName: "outcome",
    registry,
    read: () => {
      const state = meshState();
      return state === undefined ? undefined : { ok: state.roundsSucceeded, ...state.roundsFailed };
    },
  });
  copiedCounter({
    name: METRIC_NAMES.meshPacketsDroppedTotal,
    help: "Mesh packets this node dropped, by reason (wrong source, replay, over a peer's budget, ...)",
    labelName: "reason",
    registry,
    read: () => meshState()?.refused.packets,
  });

  // Scheduled deliveries (node/schedules), read from the bound service when scraped.
  let statsSource: (() => ServiceStats) | null = null;
  const scheduleMetric = (name: string, help: string, type: "gauge" | "counter", value: (stats: ServiceStats) => number) =>
    new ScrapedMetric({ name, help, type, registry, read: () => (statsSource === null ? undefined : value(statsSource())) });
  scheduleMetric(METRIC_NAMES.schedulesPending, "Scheduled deliveries pending (scheduled or delivering)", "gauge", (stats) => stats.schedulesPending);
  scheduleMetric(METRIC_NAMES.scheduleBacklogSeconds, "How long the most overdue pending schedule has waited past its due attempt, seconds (0: none overdue)", "gauge", (stats) => {
    const dueNs = stats.scheduleEarliestDueNs;
    const overdueNs = dueNs === null || clockNs === null ? 0n : clockNs() - dueNs;
    return overdueNs > 0n ? Number(overdueNs) / NS_PER_SECOND : 0;
  });
  scheduleMetric(METRIC_NAMES.scheduleDeliveryAttemptsTotal, "Delivery attempts (POSTs to callback URLs) made for schedules", "counter", (stats) => stats.scheduleDeliveryAttemptsTotal);
  copiedCounter({
    name: METRIC_NAMES.schedulesFinishedTotal,
    help: "Schedules finished, by outcome (delivered, failed: out of attempts)",
    labelName: "outcome",
    registry,
    read: () => {
      const stats = statsSource?.();
      return stats === undefined ? undefined : { delivered: stats.schedulesDeliveredTotal, failed: stats.schedulesFailedTotal };
    },
  });

  // The NTP time host keeps plain counts (its hot path touches no prom-client object); they are copied when scraped.
  let ntpSource: (() => NtpCounts) | null = null;
  copiedCounter({
    name: METRIC_NAMES.ntpRequestsTotal,
    help: "NTP client requests of the time host, by outcome (answered, rate_limited: Kiss-o'-Death sent, rate_limited_dropped, send_error, state_error)",
    labelName: "outcome",
    registry,
    read: () => {
      const stats = ntpSource?.();
      if (stats === undefined) return undefined;
      return {
        answered: stats.answeredTotal,
        rate_limited: stats.kissOfDeathTotal,
        rate_limited_dropped: stats.rateLimitedDroppedTotal,
        send_error: stats.sendErrorsTotal,
        state_error: stats.stateErrorsTotal,
      };
    },
  });
  copiedCounter({
    name: METRIC_NAMES.ntpPacketsDroppedTotal,
    help: "Datagrams the NTP time host dropped unanswered, by reason (short, control: mode 6/7, mode, version)",
    labelName: "reason",
    registry,
    read: () => ntpSource?.().dropped,
  });

  // Until a service is bound there is no node clock: served proofs are counted, their age is not observed.
  let clockNs: (() => bigint) | null = null;

  function observeAttestation(signed: SignedTime): void {
    accuracyNs.observe(signed.proof.accuracy);
    signedAccuracySeconds.set(signed.proof.accuracy / NS_PER_SECOND);
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
        tallies = { served: new CounterTally(servedProofsTotal.labels(transport)), age: proofAgeSeconds.labels(transport) };
        servedTallies.set(transport, tallies);
      }
      tallies.served.add();
      if (current !== undefined && clockNs !== null) tallies.age.observe(Number(clockNs() - current.proof.nanoMoment) / NS_PER_SECOND);
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
      statsSource = () => service.stats();
      cardStatusSource = () => service.info().card;
      accuracyLimitSeconds.set(Number(service.info().maxAcceptableDriftNs) / NS_PER_SECOND);
      return () => {
        offProof();
        offTamper();
        driftSourceNs = null;
        meshSource = null;
        clockNs = null;
        signerSource = null;
        statsSource = null;
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
