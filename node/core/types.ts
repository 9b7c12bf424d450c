/**
 * The seam between the node's core (attestor, archive, schedules, verification) and its transports
 * (REST, WebSocket, gRPC, JSON-RPC). Transports are thin readers of one `TimeService`: they never sign, never
 * touch the card and never open the database. The shape is the seam of docs/architecture.md; fields may be added, never
 * renamed.
 */
import type { Address, ConsensusJson, Hex, ProofJson, TimeProof } from "../../protocol/types";
import type { CardStatus, NtpUpstream } from "../card/types";
import type { MeshStateReport } from "../../wire/meshState";

/** One attestation: produced once by the attestor, served many times by every transport. */
export interface SignedTime {
  /** The on-chain struct, unchanged across transports. */
  readonly proof: TimeProof;
  /** docs/protocol.md §9.1 body, built once at production time (with `consensus` for a mesh proof). */
  readonly json: ProofJson & { readonly consensus?: ConsensusJson };
  /** `JSON.stringify(json)`, pre-serialised for the hot REST path. */
  readonly body: string;
  /** Node clock (ns since the Unix epoch) when the node signed. */
  readonly producedAtNs: bigint;
}

/** The mesh report lives in wire/ (the temporal gateway reads it too); re-exported for the core's readers. */
export type { ContradictionReport, ConvergenceState, MeshPeerReport, MeshStateReport, TamperAlertReport } from "../../wire/meshState";

/** What clients need to know about this node (`GET /node/info`). */
export interface NodeInfo {
  /** EIP-55 address of the node's secp256k1 key. */
  nodeId: Address;
  /** SHA-256 of the card's uncompressed P-256 public key (32 bytes, lowercase hex). */
  cardId: Hex;
  /** The card's certificate chain, leaf first, PEM. */
  certificateChainPem: string[];
  /** Package version. */
  version: string;
  /** Source revision (40 hex) of a release install (node/core/buildRevision.ts); null when run from sources. */
  revision: string | null;
  /** Protocol version tag, "ATS/1". */
  protocol: "ATS/1";
  /** Accuracy the node advertises and signs into every proof, ns. */
  accuracyNs: number;
  /** Interval between attestations, ns. */
  tickIntervalNs: bigint;
  /** Verification bounds the node applies in `verify()` (same meaning as on-chain), ns. */
  maxAttestationAgeNs: bigint;
  maxFutureDriftNs: bigint;
  maxAcceptableDriftNs: bigint;
  nodeQuorum: number;
  /** One proof is archived per this interval for HISTORICAL_PROOF lookups, ns. */
  archiveIntervalNs: bigint;
  /** How many proofs the archive keeps at most. */
  archiveCapacity: number;
  /** primary, secondary, archive or bridge (docs/protocol.md §7.6). */
  role: string;
  /** The card driver's clock source and state, read when asked, from drivers that report one (the chrony card). */
  card?: CardStatus;
}

export type VerifyOutcome =
  | { valid: true; reason: null }
  | {
      valid: false;
      /**
       * A protocol `VerifyFailureReason` (docs/protocol.md §6.2 order), or one of the node's own reasons:
       * "malformed-proof" (fields that are not a TimeProof at all), "certificate-chain-invalid" (a chain was
       * given and does not lead to a trusted root or does not match the cardId).
       */
      reason: string;
      detail: string;
    };

export type ScheduleStatus = "scheduled" | "delivering" | "delivered" | "failed";

export interface ScheduleRecord {
  /** Random UUID (v4). */
  id: string;
  /** When to deliver, ns since the Unix epoch. */
  executeAtNs: bigint;
  /** http(s) URL the node POSTs `{ id, executeAt, nanoMoment, proof }` to. */
  callbackUrl: string;
  status: ScheduleStatus;
  /** Delivery attempts made so far. */
  attempts: number;
  /** Last delivery error (status code or network error), or null. */
  lastError: string | null;
  /** Node clock when the schedule was accepted, ns. */
  createdAtNs: bigint;
  /** Node clock when the callback acknowledged (2xx), ns; null until delivered. */
  deliveredAtNs: bigint | null;
  /** The proof delivered (or being delivered), docs/protocol.md §9.1; null before the first attempt. */
  proof: ProofJson | null;
  /** Node clock of the next attempt, ns; null when delivered or failed. */
  nextAttemptAtNs: bigint | null;
}

/**
 * "ok": fresh proofs are being produced. "degraded": the card's measured error exceeds the advertised accuracy, so
 * the node refuses to sign, but a proof within maxAttestationAgeNs is still served. "stale": the latest proof is
 * older than that bound, so nothing can be served (signing stalled or refused too long). "starting": no proof
 * yet (start() not finished, or stopped). "tampered": the card reported tampering; the node no longer attests.
 */
export type HealthStatus = "ok" | "tampered" | "starting" | "degraded" | "stale";

export interface HealthReport {
  status: HealthStatus;
  /** The tamper reason when status is "tampered", the accuracy refusal when "degraded", else null. */
  reason: string | null;
  /** Node clock minus the freshest proof's nanoMoment, ns; null when there is no proof. */
  lastProofAgeNs: bigint | null;
  /** The card's current measured error, ns. */
  measuredErrorNs: number;
  /** The card driver's clock source and state, from drivers that report one (the chrony card). */
  card?: CardStatus;
}

/** Raised by the core; the mesh (docs/protocol.md §7, not built yet) will broadcast these to peers. */
export interface NodeAlert {
  kind: "tamper" | "accuracy";
  nodeId: Address;
  cardId: Hex;
  reason: string;
  /** Node clock when raised, ns. */
  atNs: bigint;
}

/** Counters and gauges of the core, for node/api/metrics.ts. Monotonic counters only grow. */
export interface ServiceStats {
  attestationsTotal: number;
  /** Ticks or on-demand requests refused because measured error > advertised accuracy. */
  accuracyRefusalsTotal: number;
  tamperEventsTotal: number;
  /** The card's latest measured error, ns (the `timerpc_node_drift_ns` gauge). */
  measuredErrorNs: number;
  /** Duration of the last card+node signing, ns; null before the first attestation. */
  lastSignDurationNs: bigint | null;
  /** Where attestation ticks compute the node signature right now (the `signerThread` setting; attestor.ts). */
  attestationSigner: "worker" | "main-thread";
  /** Whether that worker makes whole ticks on its own (self-ticking: node/core/signerThread.ts); false otherwise. */
  signerSelfTicking: boolean;
  archivedProofs: number;
  schedulesDeliveredTotal: number;
  schedulesFailedTotal: number;
  scheduleDeliveryAttemptsTotal: number;
  /** Pending schedules (scheduled or delivering). */
  schedulesPending: number;
  /** When the earliest pending schedule's next attempt is due, node clock ns; null with none. */
  scheduleEarliestDueNs: bigint | null;
}

export interface VerifyOptions {
  /** Card certificate chain (leaf first, PEM): checked against the configured trusted roots. */
  certificateChainPem?: string[];
}

export interface TimeService {
  /** Freshest cached proof; throws UnavailableError if tampered / not started / too stale to serve. */
  current(): SignedTime;
  /** The node's clock, ns since the Unix epoch (what proof ages are measured against). */
  nowNs(): bigint;
  /**
   * The card's clock, ns since the Unix epoch (TimeCard.readTimeNs: what nanoMoments are read from). The NTP time
   * host (node/ntp) serves it; transports still never touch the card itself.
   */
  cardNowNs(): bigint;
  /** The NTP source the card's clock follows (TimeCard.ntpUpstream), or null: the card is the primary reference. */
  cardNtpUpstream(): NtpUpstream | null;
  /** On-demand fresh attestation; throws UnavailableError when tampered or the accuracy bound is exceeded. */
  attestNow(): Promise<SignedTime>;
  /**
   * The one "proof at or after t" of the node (schedules, gRPC FUTURE_SCHEDULE): the freshest servable proof with
   * nanoMoment ≥ atNs, waiting for the card clock to reach atNs (at most 20 s) and signing then if no cached
   * proof qualifies. Throws UnavailableError when the card is tampered, signing is refused, the wait runs out or
   * the service stops; rejects with `signal`'s reason when it aborts.
   */
  proofAtOrAfter(atNs: bigint, signal?: AbortSignal): Promise<SignedTime>;
  /** The mesh's state as this node sees it (a lone node: Initializing, 0 peers). */
  meshState(): MeshStateReport;
  /** Full off-chain checks (docs/protocol.md §6 plus the card chain of §2); never throws on a malformed proof. */
  verify(proof: TimeProof, opts?: VerifyOptions): VerifyOutcome;
  /**
   * Validates (ValidationError) and persists before returning. `clientKey` (the transports' rate-limit identity,
   * API key or address) is held to its own pending quota.
   */
  schedule(executeAtNs: bigint, callbackUrl: string, clientKey?: string): Promise<ScheduleRecord>;
  /** Throws NotFoundError. */
  getSchedule(id: string): ScheduleRecord;
  /** Nearest stored proof at or before atNs; throws NotFoundError. */
  historical(atNs: bigint): SignedTime;
  info(): NodeInfo;
  health(): HealthReport;
  stats(): ServiceStats;
  /** Each new proof; returns unsubscribe. Listeners must be cheap (they run on the tick). */
  onProof(listener: (signed: SignedTime) => void): () => void;
  /** Transports close streams with the reason. */
  onTamper(listener: (reason: string) => void): () => void;
  /** Alerts for peers (tamper, accuracy refusals). */
  onAlert(listener: (alert: NodeAlert) => void): () => void;
  start(): Promise<void>;
  stop(): Promise<void>;
}
