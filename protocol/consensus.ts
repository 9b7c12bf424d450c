/**
 * The consensus round of docs/protocol.md §7 and the co-signing rule of a responder, as pure functions over exact
 * nanosecond integers: no clock, no network, no key. The mesh (node/mesh/) feeds them what it measured; the
 * deterministic simulator (test/mesh/) feeds them what it invented, and checks that the bound a proof claims is
 * never violated.
 *
 * A *reading* is one mesh member's clock at the round's moment M (the proposing node's card reading), compensated
 * for the network: for a responder measured by a four-timestamp exchange (t1 = M sent, t2 received, t3 answered,
 * t4 answer received), `readingNs = t1 + offset` with `offset = ((t2 − t1) + (t3 − t4)) / 2`, and its
 * `uncertaintyNs` is `delay / 2` (`delay = (t4 − t1) − (t3 − t2)`: how far the offset can be off, whatever the
 * asymmetry of the path) plus the responder's own card accuracy. The proposer's own reading is M with its card's
 * accuracy as uncertainty.
 *
 * Detail: docs/protocol.md §7.
 */
import { ConsensusError } from "./errors";
import { UINT32_MAX } from "./constants";
import type { Address } from "./types";

/*
 * The signed accuracy (§7.2): each valid reading i bounds the moment's error by `d_i = |reading_i − M| +
 * uncertainty_i` if member i is honest (its clock is within its card accuracy of true time, and its reading within
 * delay / 2 of its clock). At most f = ⌊(n − 1)/3⌋ members may lie, so among the f + 1 smallest d_i at least one is
 * an honest member's: true time lies within the (f + 1)-th smallest d_i of M. That is the bound signed (never below
 * the proposer's own card accuracy), the way NTP's intersection algorithm tolerates falsetickers. §7's "largest
 * deviation from the median" alone is no error bound (it ignores delay and card accuracy); it is reported too.
 */
/** One member's delay-compensated reading of the round's moment. */
export interface ConsensusReading {
  /** The member (its node id; any hex case). */
  readonly nodeId: Address;
  /** The member's clock at the round's moment, ns since the Unix epoch (delay-compensated). */
  readonly readingNs: bigint;
  /** How far true time may be from readingNs by this member's own account, ns (≥ 0): delay / 2 + card accuracy. */
  readonly uncertaintyNs: bigint;
}

export interface ConsensusRoundInput {
  /** n: the mesh members, the proposing node included (excluded members do not count). */
  readonly memberCount: number;
  /** The proposing node (its reading must be among `readings`). */
  readonly selfId: Address;
  /** The proposing node's card moment M: what the proof will carry as nanoMoment. */
  readonly momentNs: bigint;
  /** The readings collected this round, the proposer's own included; one per member at most. */
  readonly readings: readonly ConsensusReading[];
  /** W: a reading is valid when within this of the median, ns. */
  readonly windowNs: bigint;
}

/** A reading with its distance from the median. */
export interface JudgedReading extends ConsensusReading {
  /** readingNs − median, ns (signed). */
  readonly deviationNs: bigint;
}

export interface ConsensusResult {
  /** ⌈2n/3⌉. */
  readonly threshold: number;
  /** The median of the readings, ns: §7's consensus time. */
  readonly timeNs: bigint;
  /** Readings within the window of the median, ascending by node id (the order of the proof's entries). */
  readonly valid: readonly JudgedReading[];
  /** Readings outside the window (falsetickers, or a link too slow to tell). */
  readonly excluded: readonly JudgedReading[];
  /** §7's "accuracy": the largest |deviation| among the valid readings, ns. */
  readonly deviationNs: bigint;
  /** The bound signed into the proof (module comment), ns; fits uint32. */
  readonly accuracyNs: number;
  /** f = ⌊(n − 1)/3⌋: the liars the bound tolerates. */
  readonly toleratedFaults: number;
}

/** ⌈2n/3⌉ of n members (docs/protocol.md §7): 1 of 1, 2 of 2, 2 of 3, 3 of 4, 4 of 5, 4 of 6, 5 of 7. */
export function consensusThreshold(memberCount: number): number {
  if (!Number.isSafeInteger(memberCount) || memberCount < 1) throw new RangeError(`memberCount must be a positive integer, got ${memberCount}`);
  return Math.ceil((2 * memberCount) / 3);
}

/** f = ⌊(n − 1)/3⌋: the most members that may lie while ⌈2n/3⌉ honest ones remain a quorum. */
export function maxFaults(memberCount: number): number {
  return Math.floor((memberCount - 1) / 3);
}

function abs(value: bigint): bigint {
  return value < 0n ? -value : value;
}

/** The median of sorted values; for an even count the mean of the two middle ones, rounded toward −∞. */
export function medianNs(sorted: readonly bigint[]): bigint {
  if (sorted.length === 0) throw new RangeError("the median of no readings");
  const middle = sorted.length >> 1;
  if (sorted.length % 2 === 1) return sorted[middle]!;
  const sum = sorted[middle - 1]! + sorted[middle]!;
  // BigInt division truncates toward zero; readings are positive, but stay exact for any sign.
  return sum >= 0n || sum % 2n === 0n ? sum / 2n : sum / 2n - 1n;
}

/**
 * Runs one §7 round over the collected readings. Throws ConsensusError `Insufficient node responses` when fewer
 * than the threshold responded, and `Time divergence too high` when fewer than the threshold lie within the
 * window of the median, when the proposer's own reading is outside it (its clock disagrees with the mesh: it must
 * not serve its card's moment), or when the bound would not fit the proof's uint32. Throws RangeError on input a
 * caller must never build (duplicate members, more readings than members, negative uncertainty).
 */
export function runConsensusRound(input: ConsensusRoundInput): ConsensusResult {
  const { memberCount, readings, windowNs, momentNs } = input;
  const threshold = consensusThreshold(memberCount);
  if (windowNs < 0n) throw new RangeError(`windowNs must be ≥ 0, got ${windowNs}`);
  if (readings.length > memberCount) throw new RangeError(`${readings.length} readings from ${memberCount} members`);
  const seen = new Set<string>();
  for (const reading of readings) {
    const id = reading.nodeId.toLowerCase();
    if (seen.has(id)) throw new RangeError(`two readings from ${reading.nodeId}`);
    if (reading.uncertaintyNs < 0n) throw new RangeError(`negative uncertainty from ${reading.nodeId}`);
    seen.add(id);
  }
  const selfId = input.selfId.toLowerCase();
  const evidence = { responses: readings.length, threshold, members: memberCount };
  if (readings.length < threshold) throw new ConsensusError(ConsensusError.INSUFFICIENT_RESPONSES, evidence);
  if (!seen.has(selfId)) throw new RangeError(`the proposer ${input.selfId} has no reading of its own`);

  const timeNs = medianNs(readings.map((r) => r.readingNs).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  const valid: JudgedReading[] = [];
  const excluded: JudgedReading[] = [];
  for (const reading of readings) {
    const judged = { ...reading, deviationNs: reading.readingNs - timeNs };
    (abs(judged.deviationNs) <= windowNs ? valid : excluded).push(judged);
  }
  const byId = (a: JudgedReading, b: JudgedReading) => {
    const x = a.nodeId.toLowerCase();
    const y = b.nodeId.toLowerCase();
    return x < y ? -1 : x > y ? 1 : 0;
  };
  valid.sort(byId);
  excluded.sort(byId);
  const divergence = {
    ...evidence,
    valid: valid.length,
    medianNs: timeNs.toString(),
    windowNs: windowNs.toString(),
    excluded: excluded.map((r) => ({ nodeId: r.nodeId, deviationNs: r.deviationNs.toString() })),
  };
  if (valid.length < threshold) throw new ConsensusError(ConsensusError.DIVERGENCE_TOO_HIGH, divergence);
  if (!valid.some((r) => r.nodeId.toLowerCase() === selfId)) {
    throw new ConsensusError(ConsensusError.DIVERGENCE_TOO_HIGH, { ...divergence, selfOutsideWindow: true });
  }

  let deviationNs = 0n;
  for (const reading of valid) if (abs(reading.deviationNs) > deviationNs) deviationNs = abs(reading.deviationNs);
  const toleratedFaults = maxFaults(memberCount);
  const bounds = valid.map((reading) => abs(reading.readingNs - momentNs) + reading.uncertaintyNs).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  // valid.length ≥ threshold > f, so the (f + 1)-th smallest exists.
  let boundNs = bounds[toleratedFaults]!;
  const ownUncertaintyNs = valid.find((r) => r.nodeId.toLowerCase() === selfId)!.uncertaintyNs;
  if (boundNs < ownUncertaintyNs) boundNs = ownUncertaintyNs;
  if (boundNs > BigInt(UINT32_MAX)) {
    throw new ConsensusError(ConsensusError.DIVERGENCE_TOO_HIGH, { ...divergence, accuracyBoundNs: boundNs.toString() });
  }
  return { threshold, timeNs, valid, excluded, deviationNs, accuracyNs: Number(boundNs), toleratedFaults };
}

/** A four-timestamp exchange, each on the clock of the side that took it, ns. */
export interface ExchangeTimestamps {
  /** Request sent (initiator's clock). */
  readonly t1: bigint;
  /** Request received (responder's clock). */
  readonly t2: bigint;
  /** Answer sent (responder's clock). */
  readonly t3: bigint;
  /** Answer received (initiator's clock). */
  readonly t4: bigint;
}

/** What one exchange tells the initiator, ns. */
export interface ExchangeSample {
  /** Responder clock − initiator clock, estimated (NTP's θ), rounded toward −∞. */
  readonly offsetNs: bigint;
  /** Round trip minus the responder's own processing (NTP's δ); ≥ 0 for a consistent exchange. */
  readonly delayNs: bigint;
}

/**
 * NTP's offset and delay of one exchange (RFC 5905 §8). Throws RangeError for timestamps no honest pair of clocks
 * produces: the answer sent before the request arrived (t3 < t2), or received before it was sent (t4 < t1), or a
 * negative delay (responder processing longer than the whole round trip).
 */
export function exchangeSample(timestamps: ExchangeTimestamps): ExchangeSample {
  const { t1, t2, t3, t4 } = timestamps;
  if (t3 < t2) throw new RangeError(`the answer was sent (t3 ${t3}) before the request arrived (t2 ${t2})`);
  if (t4 < t1) throw new RangeError(`the answer arrived (t4 ${t4}) before the request left (t1 ${t1})`);
  const delayNs = t4 - t1 - (t3 - t2);
  if (delayNs < 0n) throw new RangeError(`negative delay ${delayNs} ns: the responder claims more processing time than the round trip`);
  const twice = t2 - t1 + (t3 - t4);
  const offsetNs = twice >= 0n || twice % 2n === 0n ? twice / 2n : twice / 2n - 1n;
  return { offsetNs, delayNs };
}

/** The reading and uncertainty a responder's exchange contributes to a round (module comment). */
export function readingFromExchange(nodeId: Address, timestamps: ExchangeTimestamps, responderAccuracyNs: bigint): ConsensusReading {
  const { offsetNs, delayNs } = exchangeSample(timestamps);
  // delay / 2 rounded up: the bound must not shrink by the rounding.
  return { nodeId, readingNs: timestamps.t1 + offsetNs, uncertaintyNs: (delayNs + 1n) / 2n + responderAccuracyNs };
}

/** Relative frequency error assumed between two honest clocks, parts per million (two oscillators of 15 ppm each). */
export const MESH_RELATIVE_DRIFT_PPM = 30n;

/** An earlier exchange with the same member: its offset and delay, and when it was taken (proposer's clock). */
export interface EarlierSample {
  readonly offsetNs: bigint;
  readonly delayNs: bigint;
  readonly atNs: bigint;
}

/**
 * The reading of the moment M that an earlier exchange gives, the way NTP's clock filter trusts its minimum-delay
 * sample: `M + offset`, uncertain by `⌈delay / 2⌉ + the member's accuracy + ⌈drift since the sample⌉`, the drift
 * bounded by MESH_RELATIVE_DRIFT_PPM of the time elapsed (honest clocks are slewed, never stepped). A quiet
 * exchange of a few rounds ago often bounds M more tightly than this round's, whose delay includes whatever the
 * two event loops were busy with.
 */
export function readingFromSample(nodeId: Address, momentNs: bigint, sample: EarlierSample, responderAccuracyNs: bigint): ConsensusReading {
  const elapsedNs = momentNs > sample.atNs ? momentNs - sample.atNs : sample.atNs - momentNs;
  const driftNs = (elapsedNs * MESH_RELATIVE_DRIFT_PPM + 999_999n) / 1_000_000n;
  return { nodeId, readingNs: momentNs + sample.offsetNs, uncertaintyNs: (sample.delayNs + 1n) / 2n + responderAccuracyNs + driftNs };
}

export interface CoSignCheckInput {
  /** The proposed attestation's moment (the proposer's card reading, sent as t1 of this round's exchange). */
  readonly momentNs: bigint;
  /** The accuracy the proposer asks this node to co-sign, ns. */
  readonly accuracyNs: number;
  /** This node's clock when the round's first message (carrying momentNs) arrived: t2, ns. */
  readonly receivedAtNs: bigint;
  /** This node's card accuracy, ns. */
  readonly ownAccuracyNs: number;
  /** The longest this node accepts between the proposer reading its card and the message arriving, ns. */
  readonly maxTransitNs: bigint;
  /** The largest accuracy this node co-signs: maxRoundAccuracyNs of its own settings, ns. */
  readonly maxAccuracyNs: bigint;
}

/** Which rule refused (a fixed set: metric and report labels). */
export type CoSignRule = "accuracy-over-bound" | "future-dated" | "backdated";

export type CoSignDecision = { readonly sign: true } | { readonly sign: false; readonly rule: CoSignRule; readonly reason: string };

/**
 * The largest accuracy an honest round of a mesh can sign (§7.5), ns: 2 W + meshMaxPeerUncertaintyNs. Every valid
 * reading lies within W of the median, and so does the proposer's own (M: a proposer outside the window has no
 * round), so |reading − M| ≤ 2 W; a reading whose uncertainty exceeds meshMaxPeerUncertaintyNs is left out of the
 * round. Every d_i of §7.2 is therefore at most this bound, and so is the (f + 1)-th smallest; the proposer's own d
 * (its card accuracy) too, unless its card is looser than meshMaxPeerUncertaintyNs, and such a member has no reading
 * in its peers' rounds either. A claim above it comes from no honest round of a mesh with these settings.
 */
export function maxRoundAccuracyNs(windowNs: bigint, maxPeerUncertaintyNs: bigint): bigint {
  return 2n * windowNs + maxPeerUncertaintyNs;
}

/**
 * Whether a responder co-signs a proposal, by its own clock alone (never the proposer's word). Co-signing says "my
 * clock does not contradict that M was within ±accuracy of true time when the card read it". The message carrying
 * M arrived at t2 on this clock, so true time at the reading T0 was at most t2 + ownAccuracy (this clock is within
 * its accuracy of true time, and the reading came before the arrival), and at least t2 − ownAccuracy − maxTransit
 * (this node tolerates no longer transit). It refuses when either bound proves the claim false:
 *   M − t2 > accuracy + ownAccuracy                 (M is ahead of every true time the reading can have had)
 *   t2 − M > maxTransit + accuracy + ownAccuracy    (M is behind every true time the reading can have had)
 * A refusal is certain evidence against the claim; a signature is the absence of such evidence from this clock.
 *
 * Both rules measure M against the claimed accuracy, so the claim must be bounded first: claiming the most a proof
 * can carry (2^32 − 1 ns, 4.3 s) would cover a moment seconds from this clock in either direction, and this node
 * would put its name to it. It first refuses an accuracy above maxAccuracyNs, which no honest round of its mesh
 * signs (maxRoundAccuracyNs): what it co-signs is then at most that far from its own clock, plus its own
 * uncertainty (and the transit, behind).
 */
export function coSignDecision(input: CoSignCheckInput): CoSignDecision {
  if (BigInt(input.accuracyNs) > input.maxAccuracyNs) {
    return {
      sign: false,
      rule: "accuracy-over-bound",
      reason: `the claimed accuracy ${input.accuracyNs} ns exceeds what an honest round of this mesh can sign: at most ${input.maxAccuracyNs} ns (2 × meshWindowNs + meshMaxPeerUncertaintyNs)`,
    };
  }
  const allowedNs = BigInt(input.accuracyNs) + BigInt(input.ownAccuracyNs);
  const aheadNs = input.momentNs - input.receivedAtNs;
  if (aheadNs > allowedNs) {
    return {
      sign: false,
      rule: "future-dated",
      reason: `the moment is ${aheadNs} ns ahead of this node's clock; accuracy ${input.accuracyNs} ns and this clock's ${input.ownAccuracyNs} ns allow ${allowedNs} ns`,
    };
  }
  if (-aheadNs > input.maxTransitNs + allowedNs) {
    return { sign: false, rule: "backdated", reason: `the moment is ${-aheadNs} ns behind this node's clock; at most ${input.maxTransitNs + allowedNs} ns allowed` };
  }
  return { sign: true };
}
