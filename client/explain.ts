/**
 * explainTimeProof: why an oracle refuses (or accepts) a proof, with evidence. On-chain a user sees only `false` or
 * `Invalid time proof`; this reads the oracle's settings, the proof's card and every registered node, runs the
 * TypeScript verifier (protocol/verify.ts, the same rules as the contract, docs/protocol.md §6) against them at the
 * chain's clock, and returns the failed rule with what it compared. It also asks the oracle itself, so a
 * disagreement between the two (a bug) shows.
 *
 * Node entries sign the accuracy and the moment: a proof altered after signing recovers to addresses nobody
 * registered. Such a proof is not reported as a mere unknown node: when no entry recovers to a registered node
 * while registered nodes exist, the hint says the signed attestation was altered (or its nodes are not registered
 * on this oracle).
 */
import { getAddress, type Address, type PublicClient } from "viem";
import { iTimeConsumerAbi, iTimeOracleAbi } from "../abi";
import { decodeHardwareSignature, decodeNodeEntries, timeAttestationForProof } from "../protocol/codec";
import { ACCURACY_TIERS, accuracyTierFor, type AccuracyTier } from "../protocol/constants";
import { p256PublicKeyToUncompressed } from "../protocol/keys";
import { recoverNodeAddress } from "../protocol/sign";
import { CARD_STATUS, type CardRecord, type CardStatusName, type Hex, type TimeProof } from "../protocol/types";
import { verifyTimeProof, type VerifyFailureReason } from "../protocol/verify";

/** Registered nodes read at most (the oracle caps its registry well below this). */
const MAX_NODES_READ = 256;
const ACTIVE = 1;

export interface ExplainedEntry {
  index: number;
  /** The address the entry recovers to (null when it does not recover). */
  recovered: Address | null;
  registered: boolean;
  active: boolean;
}

export interface ExplainedProof {
  valid: boolean;
  reason: VerifyFailureReason | null;
  detail: string;
  /** The oracle's own answer to verifyTimeProof for the same proof. */
  onChainValid: boolean;
  /** A plain sentence on what to do or what happened, when the rule alone does not say it. */
  hint: string | null;
  evidence: {
    chainNowNs: bigint;
    nanoMoment: bigint;
    /** nowNs − nanoMoment (negative: ahead of the chain clock). */
    ageNs: bigint;
    maxAttestationAgeNs: bigint;
    maxFutureDriftNs: bigint;
    accuracyNs: number;
    maxAcceptableDriftNs: bigint;
    nodeQuorum: number;
    cardId: Hex | null;
    cardStatus: CardStatusName | null;
    entries: ExplainedEntry[];
    registeredNodes: number;
  };
}

export async function explainTimeProof(publicClient: PublicClient, oracle: Address, proof: TimeProof): Promise<ExplainedProof> {
  const at = { address: oracle, abi: iTimeOracleAbi } as const;
  const [block, maxAttestationAgeNs, maxFutureDriftNs, maxAcceptableDriftNs, quorum, registered] = await Promise.all([
    publicClient.getBlock({ blockTag: "latest" }),
    publicClient.readContract({ ...at, functionName: "maxAttestationAge" }),
    publicClient.readContract({ ...at, functionName: "maxFutureDrift" }),
    publicClient.readContract({ ...at, functionName: "maxAcceptableDrift" }),
    publicClient.readContract({ ...at, functionName: "nodeQuorum" }),
    publicClient.readContract({ ...at, functionName: "nodes" }),
  ]);
  const chainNowNs = block.timestamp * 1_000_000_000n;
  const nodeInfo = new Map<string, { validFromNs: bigint; validUntilNs: bigint; status: number }>();
  for (const address of registered.slice(0, MAX_NODES_READ)) nodeInfo.set(address.toLowerCase(), await publicClient.readContract({ ...at, functionName: "getNode", args: [address] }));

  let cardId: Hex | null = null;
  let cardStatus: ExplainedProof["evidence"]["cardStatus"] = null;
  let card: CardRecord | undefined;
  try {
    cardId = decodeHardwareSignature(proof.hardwareSignature).cardId;
    const onChain = await publicClient.readContract({ ...at, functionName: "getCard", args: [cardId] });
    cardStatus = CARD_STATUS[onChain.status] ?? "None";
    if (onChain.status !== 0) {
      card = {
        publicKey: p256PublicKeyToUncompressed(`0x04${onChain.publicKeyX.slice(2)}${onChain.publicKeyY.slice(2)}`),
        revoked: onChain.status === 2,
        validFromNs: onChain.validFromNs,
        validUntilNs: onChain.validUntilNs,
      };
    }
  } catch {
    // a malformed hardware signature: the verifier names it
  }

  const isActiveNode = (address: Address, nowNs: bigint) => {
    const info = nodeInfo.get(address.toLowerCase());
    return info !== undefined && info.status === ACTIVE && info.validFromNs <= nowNs && nowNs <= info.validUntilNs;
  };
  const outcome = verifyTimeProof(proof, {
    resolveCard: (id) => (cardId !== null && id.toLowerCase() === cardId.toLowerCase() ? card : undefined),
    isActiveNode,
    nodeQuorum: Number(quorum),
    nowNs: chainNowNs,
    maxAttestationAgeNs,
    maxFutureDriftNs,
    maxAcceptableDriftNs,
  });

  const entries: ExplainedEntry[] = [];
  try {
    decodeNodeEntries(proof.nodeSignature).forEach((entry, index) => {
      let recovered: Address | null = null;
      try {
        recovered = getAddress(recoverNodeAddress(timeAttestationForProof(proof, entry.nodeTimestampNs), entry));
      } catch {
        recovered = null;
      }
      const info = recovered === null ? undefined : nodeInfo.get(recovered.toLowerCase());
      entries.push({ index, recovered, registered: info !== undefined, active: recovered !== null && isActiveNode(recovered, chainNowNs) });
    });
  } catch {
    // a malformed node signature: the verifier names it
  }
  const onChainValid = await publicClient.readContract({ ...at, functionName: "verifyTimeProof", args: [proof] }).catch(() => false);

  let hint: string | null = null;
  if (!outcome.valid && outcome.reason === "unknown-node" && registered.length > 0 && entries.length > 0 && entries.every((entry) => !entry.registered)) {
    hint = "no entry recovers to a node this oracle registered: the signed attestation (its accuracy, moment or card signature) was altered after signing, or its nodes are not registered here";
  } else if (!outcome.valid && outcome.reason === "too-old") {
    hint = `the proof is ${chainNowNs - proof.nanoMoment} ns old at the chain's clock; fetch a fresh one (at most ${maxAttestationAgeNs} ns)`;
  } else if (outcome.valid !== onChainValid) {
    hint = "the TypeScript verifier and the oracle disagree: please report this with the proof";
  }

  return {
    valid: outcome.valid,
    reason: outcome.valid ? null : outcome.reason,
    detail: outcome.valid ? "valid" : outcome.detail,
    onChainValid,
    hint,
    evidence: {
      chainNowNs,
      nanoMoment: proof.nanoMoment,
      ageNs: chainNowNs - proof.nanoMoment,
      maxAttestationAgeNs,
      maxFutureDriftNs,
      accuracyNs: proof.accuracy,
      maxAcceptableDriftNs,
      nodeQuorum: Number(quorum),
      cardId,
      cardStatus,
      entries,
      registeredNodes: registered.length,
    },
  };
}

/** The rules of docs/protocol.md §6.2 in the verifier's order, each with the reason it fails with. */
export const TIME_PROOF_RULES: readonly { rule: string; reason: VerifyFailureReason; condition: string }[] = [
  { rule: "0", reason: "malformed-proof", condition: "the value has the shape of a proof" },
  { rule: "1a", reason: "hardware-signature-length", condition: "the hardware signature is exactly 96 bytes" },
  { rule: "1b", reason: "unknown-card", condition: "its card is registered" },
  { rule: "1c", reason: "revoked-card", condition: "the card is not revoked" },
  { rule: "1d", reason: "card-not-valid-now", condition: "the card is inside its validity window now" },
  { rule: "1e", reason: "high-s", condition: "the card signature's s ≤ n/2 (P-256)" },
  { rule: "1f", reason: "bad-hardware-signature", condition: "the card signature verifies over the moment" },
  { rule: "2a", reason: "node-signature-length", condition: "the node signature is 1 to 32 entries of 80 bytes" },
  { rule: "2b", reason: "bad-node-signature", condition: "every entry recovers a signer" },
  { rule: "2c", reason: "unknown-node", condition: "every signer is a registered node, active now" },
  { rule: "2d", reason: "nodes-not-ascending", condition: "signers are in strictly ascending address order" },
  { rule: "2e", reason: "quorum-not-met", condition: "at least nodeQuorum entries" },
  { rule: "3a", reason: "too-old", condition: "no older than maxAttestationAge at the chain's clock" },
  { rule: "3b", reason: "too-far-in-future", condition: "no further ahead than maxFutureDrift" },
  { rule: "4", reason: "accuracy-too-low", condition: "the signed accuracy ≤ maxAcceptableDrift" },
];

/**
 * Every §6.2 rule's outcome for a verdict: the verifier checks in order and stops at the first failure, so the
 * rules before `reason` passed, `reason`'s failed and the later ones were not reached; a valid proof passes all.
 */
export function ruleVerdicts(reason: VerifyFailureReason | null): { rule: string; reason: VerifyFailureReason; condition: string; status: "pass" | "fail" | "not reached" }[] {
  const failedAt = reason === null ? TIME_PROOF_RULES.length : TIME_PROOF_RULES.findIndex((rule) => rule.reason === reason);
  if (failedAt < 0) throw new Error(`no §6.2 rule fails with ${reason}`);
  return TIME_PROOF_RULES.map((rule, index) => ({ ...rule, status: index < failedAt ? "pass" : index === failedAt ? "fail" : "not reached" }));
}

/** The two revert strings a TimeConsumer guard fixes for a proof it refuses (docs/protocol.md §6.7). */
export type ConsumerRefusal = "Invalid time proof" | "Insufficient accuracy";

export interface ExplainedConsumerProof {
  /** Whether the consumer's `_verifiedTime` (every guard's first step) accepts the proof. */
  accepted: boolean;
  /** The revert string the guard gives, null when accepted. */
  refusal: ConsumerRefusal | null;
  /** One sentence: the signed bound against the consumer's, and the tier a network needs for this consumer. */
  explanation: string;
  consumer: Address;
  /** The consumer's bound, ns (its constructor's choice). */
  maxAccuracyNs: number;
  /** The proof's signed bound, ns. */
  accuracyNs: number;
  /** The loosest tier of AccuracyTiers.sol the consumer accepts; null when its bound is tighter than every tier. */
  tierNeeded: AccuracyTier | null;
  /** The oracle's verdict on the proof, with its evidence. */
  oracle: ExplainedProof;
}

function formatNs(ns: number): string {
  return `${ns.toLocaleString("en-US")} ns`;
}

/**
 * What a TimeConsumer-based contract does with `proof`: accepts it, or refuses it with `Invalid time proof` (the
 * oracle's rules, explained by {@link explainTimeProof}) or `Insufficient accuracy` (the signed bound above the
 * consumer's), naming the tier of network its bound needs. It covers the checks every guard makes first; the
 * per-key "strictly newer" rule and a guard's own time window are the caller's to judge.
 */
export async function explainConsumerProof(publicClient: PublicClient, consumer: Address, proof: TimeProof): Promise<ExplainedConsumerProof> {
  const [oracleAddress, maxAccuracyNs] = await Promise.all([
    publicClient.readContract({ address: consumer, abi: iTimeConsumerAbi, functionName: "timeOracle" }),
    publicClient.readContract({ address: consumer, abi: iTimeConsumerAbi, functionName: "maxAccuracyNs" }),
  ]);
  const oracle = await explainTimeProof(publicClient, oracleAddress, proof);
  const tierNeeded = accuracyTierFor(maxAccuracyNs) ?? null;
  const tierText =
    tierNeeded === null
      ? `no kind of network we know signs that little (the tightest tier, ${ACCURACY_TIERS[0].name}, is ${formatNs(ACCURACY_TIERS[0].maxAccuracyNs)})`
      : `this contract needs ${tierNeeded.network}, tier AccuracyTiers.${tierNeeded.name} (${formatNs(tierNeeded.maxAccuracyNs)})`;
  let refusal: ConsumerRefusal | null = null;
  let explanation: string;
  if (!oracle.onChainValid) {
    refusal = "Invalid time proof";
    explanation = `refused with "Invalid time proof": the oracle refuses the proof (${oracle.reason ?? "valid by the TypeScript rules"}: ${oracle.detail})${oracle.hint === null ? "" : `; ${oracle.hint}`}`;
  } else if (proof.accuracy > maxAccuracyNs) {
    refusal = "Insufficient accuracy";
    explanation = `refused with "Insufficient accuracy": the proof's signed bound is ${formatNs(proof.accuracy)} and the contract accepts at most ${formatNs(maxAccuracyNs)}; ${tierText}`;
  } else {
    explanation = `accepted: the proof's signed bound ${formatNs(proof.accuracy)} is within the contract's ${formatNs(maxAccuracyNs)}`;
  }
  return { accepted: refusal === null, refusal, explanation, consumer, maxAccuracyNs, accuracyNs: proof.accuracy, tierNeeded, oracle };
}
