/**
 * What the NTP time host says about the node's clock (docs/protocol.md §9.8): the node's TimeService read as an
 * NTP server's system variables (RFC 5905 §7.3, §11.2). One job: turn the node's own notions (the card clock, the
 * accuracy it signs, its health) into an `NtpServerState`; the socket (server.ts) and the bytes (packet.ts) are
 * elsewhere.
 *
 * Detail: docs/protocol.md §9.8.
 */
import type { NtpUpstream } from "../card/types";
import type { TimeService } from "../core/types";
import { checkNtpServerState, NTP_LEAP, type NtpServerState } from "./packet";

/*
 * - time: the card's clock (TimeService.cardNowNs), the clock every nanoMoment is read from;
 * - the bound: the accuracy the node signs into its own entries (info().accuracyNs), which it only signs while the
 *   card's measured error is within it. It goes into root dispersion with root delay 0 for a card, whose reference
 *   is local (GPS, PPS): an NTP client's root distance, rootDelay/2 + rootDispersion (§11.2), is then the bound,
 *   rounded up to the short format's 15.26 µs;
 * - leap indicator 3 (unsynchronised) whenever the node would not sign now: health not "ok" (tampered, starting,
 *   stale, degraded by accuracy, or a mesh that is not Converged). Clients (chrony, sntp) then discard the replies;
 * - stratum and reference id are inputs (`NtpReference`): a card or GPS is stratum 1; a source that is itself an
 *   NTP client (a chrony-disciplined host clock) gives its own stratum + 1 and reference id.
 *
 * The state is recomputed at most every STATE_REFRESH_NS of the card clock, not per request: health() of a mesh
 * node builds the mesh's report, too much for every datagram of a flood. The node itself finds a refusal only at
 * its next tick (tickIntervalNs) or round, so the 10 ms adds little to how late LI follows it.
 */
/** How long a computed state is reused, ns of the card clock. */
export const STATE_REFRESH_NS = 10_000_000n;
/**
 * Precision announced, log2 s: -20 ≈ 0.95 µs. The card clock reads at ns resolution, but a reply's timestamps are
 * read in a JavaScript event loop, whose readings of one clock are a microsecond apart at best.
 */
export const NODE_PRECISION_LOG2 = -20;

/** The largest stratum a synchronised server may serve (RFC 5905 §7.3: 16 means unsynchronised). */
const MAX_SERVED_STRATUM = 15;

/** Stratum and reference id of the node's time source (RFC 5905 §7.3, Figure 12 for stratum-1 codes). */
export interface NtpReference {
  /** 1–15: 1 for a card or GPS; an NTP-disciplined source's stratum + 1. */
  readonly stratum: number;
  /**
   * A stratum-1 source code (1–4 ASCII characters, RFC 5905 Figure 12), or for stratum ≥ 2 the upstream's 32-bit
   * reference id (its IPv4 address, or the hash of its IPv6 one: §7.3), as chronyc reports it.
   */
  readonly referenceId: string | number;
}

/**
 * The stratum and reference id this node serves (docs/protocol.md §9.8):
 * - a card whose clock follows an NTP source (the chrony driver: TimeCard.ntpUpstream) serves that source's stratum
 *   + 1 and its 32-bit reference id (RFC 5905 §7.3), as any NTP server downstream of another does;
 * - any other card is this node's primary reference: stratum 1 with "LOCL", ntpd's conventional code for a local
 *   clock. Not "GPS" even when the card reports a GPS fix: that fix is unsigned metadata beside the proof
 *   (gpsd, docs/protocol.md §14.7) and disciplines nothing the node serves.
 */
export function cardNtpReference(upstream: NtpUpstream | null): NtpReference {
  if (upstream !== null) return { stratum: Math.min(MAX_SERVED_STRATUM, upstream.stratum + 1), referenceId: upstream.referenceId };
  return { stratum: 1, referenceId: "LOCL" };
}

/** The clock and state the NTP server (server.ts) reads per request. */
export interface NtpClock {
  /** The served clock now, ns since the Unix epoch. */
  readTimeNs(): bigint;
  /** What the next reply says about that clock (checked: checkNtpServerState). */
  state(): NtpServerState;
}

export interface ServiceNtpClockOptions {
  /** Stratum and reference id; default: cardNtpReference of the card's NTP upstream, read with each state. */
  reference?: NtpReference;
  /** Root delay to the primary reference, ns (default 0: the card is the reference). */
  rootDelayNs?: bigint;
  precisionLog2?: number;
}

export interface ServiceNtpClock extends NtpClock {
  /** Stops following the service's proofs. */
  close(): void;
}

function referenceTimeNs(nowNs: bigint, lastProofAgeNs: bigint | null): bigint {
  if (lastProofAgeNs === null || lastProofAgeNs > nowNs) return 0n;
  return lastProofAgeNs < 0n ? nowNs : nowNs - lastProofAgeNs;
}

/** The NTP view of a TimeService (see the module comment). */
export function createServiceNtpClock(service: TimeService, options: ServiceNtpClockOptions = {}): ServiceNtpClock {
  const boundNs = BigInt(service.info().accuracyNs);
  const rootDelayNs = options.rootDelayNs ?? 0n;
  // root distance = rootDelay/2 + rootDispersion ≥ the bound (a delay beyond twice the bound leaves dispersion 0).
  const halfDelayNs = (rootDelayNs + 1n) / 2n;
  const rootDispersionNs = boundNs > halfDelayNs ? boundNs - halfDelayNs : 0n;
  const precisionLog2 = options.precisionLog2 ?? NODE_PRECISION_LOG2;
  let cached: NtpServerState | null = null;
  let cachedAtNs = 0n;

  const compute = (nowNs: bigint): NtpServerState => {
    const health = service.health();
    // Read with the state (at most every STATE_REFRESH_NS): a chrony card's source can change between readings.
    const reference = options.reference ?? cardNtpReference(service.cardNtpUpstream());
    const state: NtpServerState = {
      leap: health.status === "ok" ? NTP_LEAP.none : NTP_LEAP.unsynchronised,
      stratum: reference.stratum,
      precisionLog2,
      rootDelayNs,
      rootDispersionNs,
      referenceId: reference.referenceId,
      // The reference time: when the node last found its card within the bound and signed (its freshest proof);
      // NTP's zero timestamp ("never") before the first. A proof dated ahead of the clock (age < 0) counts as now.
      referenceTimeNs: referenceTimeNs(nowNs, health.lastProofAgeNs),
    };
    checkNtpServerState(state);
    return state;
  };

  return {
    readTimeNs: () => service.cardNowNs(),
    state() {
      const nowNs = service.cardNowNs();
      if (cached === null || nowNs - cachedAtNs >= STATE_REFRESH_NS || nowNs < cachedAtNs) {
        cached = compute(nowNs);
        cachedAtNs = nowNs;
      }
      return cached;
    },
    close: () => undefined,
  };
}
