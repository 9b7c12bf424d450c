/**
 * A deterministic mesh simulator in virtual time (the way chrony tests its source selection on a clock and
 * network simulator): true time T, member clocks with offsets, frequency error and steps, links with asymmetric
 * delay, jitter and loss, and Byzantine members. It drives the pure rules of protocol/consensus.ts exactly as
 * node/mesh/mesh.ts does (four-timestamp exchanges, readingFromSample, runConsensusRound, coSignDecision), so
 * every claim can be checked against the truth the simulator knows.
 */
import {
  coSignDecision,
  exchangeSample,
  maxFaults,
  maxRoundAccuracyNs,
  readingFromSample,
  runConsensusRound,
  type ConsensusReading,
  type ConsensusResult,
} from "../../protocol/consensus";
import { ConsensusError } from "../../protocol/errors";
import type { Address } from "../../protocol/types";

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Behaviour =
  | "honest"
  /** Reports t2/t3 shifted by a fixed amount far outside the window. */
  | "far-liar"
  /** Reports t2/t3 shifted by a fixed amount inside the window (the hardest liar: it stays valid). */
  | "near-liar"
  /** A different shift every round, within ±2W. */
  | "equivocating"
  /** A shift that grows every round. */
  | "walking"
  /** A near lie while claiming a card accuracy of 0 (to pull the bound down). */
  | "overconfident"
  /** Never answers. */
  | "silent";

export interface SimMember {
  readonly nodeId: Address;
  readonly behaviour: Behaviour;
  /** The accuracy the member claims for its card, ns. For honest members it truly bounds |clock − T|. */
  readonly claimedAccuracyNs: bigint;
  /** Clock offset at T = 0 of the run, ns. */
  readonly offsetNs: bigint;
  /** Frequency error, parts per billion. */
  readonly frequencyErrorPpb: bigint;
  /** A step of the clock at a run time, ns (0n: none). */
  readonly stepAtNs: bigint;
  readonly stepNs: bigint;
  /** The liar's shift, ns (its parameter per behaviour). */
  readonly lieNs: bigint;
}

export interface SimLink {
  readonly forwardNs: bigint;
  readonly backwardNs: bigint;
  /** Mean of the exponential jitter added to each direction, ns. */
  readonly jitterMeanNs: number;
  readonly lossProbability: number;
}

export interface SimulationParameters {
  readonly seed: number;
  readonly members: number;
  readonly liars: number;
  readonly liarBehaviours: readonly Behaviour[];
  readonly windowNs: bigint;
  readonly rounds: number;
  readonly roundIntervalNs: bigint;
  readonly maxTransitNs: bigint;
  /**
   * meshMaxPeerUncertaintyNs: a reading more uncertain is left out of the round, as the mesh does; with the window it
   * bounds the accuracy an honest member co-signs (maxRoundAccuracyNs).
   */
  readonly maxPeerUncertaintyNs: bigint;
  /** All liars tell the first liar's lie (collusion). */
  readonly collude?: boolean;
  /**
   * The proposer is one of the liars: its card runs off by a lie inside the window while it claims a tiny accuracy.
   * This is the case a verifier needs the bound for: it must not have to trust the node that served the proof.
   */
  readonly lyingProposer?: boolean;
}

export interface RoundRecord {
  readonly round: number;
  /** True time when the proposer's card read the moment. */
  readonly trueNs: bigint;
  readonly momentNs: bigint;
  readonly outcome: { ok: true; result: ConsensusResult } | { ok: false; error: string };
  /** Per honest valid peer: whether it co-signs. */
  readonly honestCoSigns: readonly boolean[];
}

export interface SimulationOutcome {
  readonly members: readonly SimMember[];
  readonly rounds: readonly RoundRecord[];
}

const EPOCH_NS = 1_800_000_000_000_000_000n;
const BILLION = 1_000_000_000n;

function address(index: number): Address {
  return `0x${(index + 1).toString(16).padStart(40, "0")}`;
}

/** The member's clock at run time `tNs` (true time EPOCH_NS + tNs). */
export function clockAt(member: SimMember, tNs: bigint): bigint {
  const drift = (tNs * member.frequencyErrorPpb) / BILLION;
  const step = member.stepNs !== 0n && tNs >= member.stepAtNs ? member.stepNs : 0n;
  return EPOCH_NS + tNs + member.offsetNs + drift + step;
}

function between(random: () => number, low: number, high: number): number {
  return low + (high - low) * random();
}

function bigBetween(random: () => number, low: bigint, high: bigint): bigint {
  return low + BigInt(Math.floor(Number(high - low) * random()));
}

/**
 * Honest members get clocks whose every error source, summed, stays within their claimed accuracy. A step falls
 * between rounds' exchanges (three quarters into an interval): a step inside an exchange is a clock that jumps while
 * it is being measured, which no two-way exchange can bound (real cards slew instead of stepping).
 */
function honestMember(random: () => number, index: number, durationNs: bigint, intervalNs: bigint): SimMember {
  const accuracy = BigInt(Math.round(between(random, 50, 20_000)));
  // Split the budget: offset ≤ 40 %, drift over the run ≤ 30 %, a step ≤ 30 % (with the opposite sign half the time).
  const offset = bigBetween(random, -(accuracy * 4n) / 10n, (accuracy * 4n) / 10n);
  const maxDriftNs = (accuracy * 3n) / 10n;
  const frequencyErrorPpb = durationNs === 0n ? 0n : bigBetween(random, -(maxDriftNs * BILLION) / durationNs, (maxDriftNs * BILLION) / durationNs);
  const stepNs = random() < 0.3 ? bigBetween(random, -(accuracy * 3n) / 10n, (accuracy * 3n) / 10n) : 0n;
  return {
    nodeId: address(index),
    behaviour: "honest",
    claimedAccuracyNs: accuracy,
    offsetNs: offset,
    frequencyErrorPpb,
    stepAtNs: (bigBetween(random, 0n, durationNs) / intervalNs) * intervalNs + (intervalNs * 3n) / 4n,
    stepNs,
    lieNs: 0n,
  };
}

function lieFor(behaviour: Behaviour, random: () => number, windowNs: bigint): bigint {
  const sign = random() < 0.5 ? -1n : 1n;
  switch (behaviour) {
    case "far-liar":
      return sign * bigBetween(random, windowNs * 3n, windowNs * 1_000n);
    case "near-liar":
    case "overconfident":
      return sign * bigBetween(random, windowNs / 4n, windowNs / 2n);
    case "walking":
      return sign * bigBetween(random, windowNs / 50n + 1n, windowNs / 10n + 2n); // per round
    default:
      return 0n;
  }
}

/** One seeded run: member 0 (honest) proposes every round. */
export function simulate(parameters: SimulationParameters): SimulationOutcome {
  const random = seededRandom(parameters.seed);
  const durationNs = BigInt(parameters.rounds) * parameters.roundIntervalNs;
  const members: SimMember[] = [];
  const lyingProposer = parameters.lyingProposer === true && parameters.liars > 0;
  for (let index = 0; index < parameters.members; index += 1) {
    const honest = honestMember(random, index, durationNs, parameters.roundIntervalNs);
    if (index === 0 && lyingProposer) {
      // Its clock is off by the lie (so its t1/t4 are too), and it claims 1 ns of accuracy.
      const lie = lieFor("near-liar", random, parameters.windowNs);
      members.push({ ...honest, behaviour: "near-liar", claimedAccuracyNs: 1n, offsetNs: honest.offsetNs + lie });
      continue;
    }
    const liar = index >= parameters.members - (parameters.liars - (lyingProposer ? 1 : 0));
    if (!liar) {
      members.push(honest);
      continue;
    }
    const firstLiar = members.find((member) => member.behaviour !== "honest");
    const behaviour = parameters.collude === true && firstLiar !== undefined ? firstLiar.behaviour : parameters.liarBehaviours[Math.floor(random() * parameters.liarBehaviours.length)]!;
    const lieNs = lieFor(behaviour, random, parameters.windowNs);
    members.push({
      ...honest,
      behaviour,
      claimedAccuracyNs: behaviour === "overconfident" ? 0n : honest.claimedAccuracyNs,
      lieNs: parameters.collude === true && firstLiar !== undefined ? firstLiar.lieNs : lieNs,
    });
  }
  const links: SimLink[] = members.map(() => {
    const base = between(random, 20_000, 400_000);
    const asymmetry = between(random, 0.2, 1.8);
    return {
      forwardNs: BigInt(Math.round(base * asymmetry)),
      backwardNs: BigInt(Math.round(base * (2 - asymmetry))),
      jitterMeanNs: between(random, 0, 100_000),
      lossProbability: between(random, 0, 0.15),
    };
  });
  const jitter = (mean: number): bigint => BigInt(Math.round(-Math.log(1 - random()) * mean));

  const proposer = members[0]!;
  const records: RoundRecord[] = [];
  for (let round = 0; round < parameters.rounds; round += 1) {
    const t0 = BigInt(round) * parameters.roundIntervalNs + bigBetween(random, 0n, parameters.roundIntervalNs / 2n);
    const momentNs = clockAt(proposer, t0);
    const readings: ConsensusReading[] = [{ nodeId: proposer.nodeId, readingNs: momentNs, uncertaintyNs: proposer.claimedAccuracyNs }];
    const arrivals = new Map<string, bigint>();
    let sendAt = t0;
    for (let index = 1; index < members.length; index += 1) {
      const member = members[index]!;
      const link = links[index]!;
      sendAt += 2_000n; // each packet is built and sent after the previous one
      if (member.behaviour === "silent" || random() < link.lossProbability || random() < link.lossProbability) continue;
      const t1 = clockAt(proposer, sendAt);
      const arrival = sendAt + link.forwardNs + jitter(link.jitterMeanNs);
      const processing = BigInt(Math.round(between(random, 5_000, 60_000)));
      const back = arrival + processing + link.backwardNs + jitter(link.jitterMeanNs);
      const lie =
        member.behaviour === "honest"
          ? 0n
          : member.behaviour === "equivocating"
            ? bigBetween(random, -2n * parameters.windowNs, 2n * parameters.windowNs)
            : member.behaviour === "walking"
              ? member.lieNs * BigInt(round + 1)
              : member.lieNs;
      const t2 = clockAt(member, arrival) + lie;
      const t3 = clockAt(member, arrival + processing) + lie;
      const t4 = clockAt(proposer, back);
      arrivals.set(member.nodeId, arrival);
      const sample = exchangeSample({ t1, t2, t3, t4 });
      const reading = readingFromSample(member.nodeId, momentNs, { offsetNs: sample.offsetNs, delayNs: sample.delayNs, atNs: t1 }, member.claimedAccuracyNs);
      if (reading.uncertaintyNs <= parameters.maxPeerUncertaintyNs) readings.push(reading);
    }
    let outcome: RoundRecord["outcome"];
    const honestCoSigns: boolean[] = [];
    try {
      const result = runConsensusRound({ memberCount: members.length, selfId: proposer.nodeId, momentNs, readings, windowNs: parameters.windowNs });
      outcome = { ok: true, result };
      for (const reading of result.valid) {
        const member = members.find((candidate) => candidate.nodeId === reading.nodeId)!;
        if (member === proposer || member.behaviour !== "honest" || proposer.behaviour !== "honest") continue;
        const decision = coSignDecision({
          momentNs,
          accuracyNs: result.accuracyNs,
          receivedAtNs: clockAt(member, arrivals.get(member.nodeId)!),
          ownAccuracyNs: Number(member.claimedAccuracyNs),
          maxTransitNs: parameters.maxTransitNs,
          maxAccuracyNs: maxRoundAccuracyNs(parameters.windowNs, parameters.maxPeerUncertaintyNs),
        });
        honestCoSigns.push(decision.sign);
      }
    } catch (error) {
      if (!(error instanceof ConsensusError)) throw error;
      outcome = { ok: false, error: error.message };
    }
    records.push({ round, trueNs: EPOCH_NS + t0, momentNs, outcome, honestCoSigns });
  }
  return { members, rounds: records };
}

/** f = ⌊(n − 1)/3⌋ (re-exported for the tests' parameter choice). */
export { maxFaults };
