/**
 * The relayer's decisions, pure: from what was observed on-chain (and the attested time) to what to do with one
 * item. No I/O here; relayer/worker.ts gathers the observations and carries the decision out. Reverts are
 * classified by the contract's custom error name, never by message text.
 */
import type { CallStatusName, CardStatusName, NodeStatusName } from "../protocol/types";
import type { ItemKind } from "./store";

const NS_PER_MS = 1_000_000n;

/**
 * What a revert means for the item:
 *   done   the goal is reached another way (someone else delivered or settled it): finish the item
 *   dead   it can never succeed: dead-letter with the reason
 *   wait   not yet (too early, not expired yet): decide again later; does not count as a failure
 *   retry  a failure that may pass (a node's bad proof, gas): retry with backoff; the same name N times in a
 *          row is deterministic and goes to dead-letter
 */
export type RevertVerdict = "done" | "dead" | "wait" | "retry";

export interface RevertPolicy {
  verdict: RevertVerdict;
  /** Outcome (done) or reason (dead) recorded on the item. */
  note: string;
}

export const REVERT_POLICY: Readonly<Record<ItemKind, Readonly<Record<string, RevertPolicy>>>> = {
  message: {
    TimeBridgeAlreadyDelivered: { verdict: "done", note: "delivered by someone else" },
    TimeBridgeNotNewer: { verdict: "dead", note: "the target bridge already holds a newer time (TimeBridgeNotNewer)" },
    TimeBridgeInvalidProof: {
      verdict: "dead",
      note: "the proof does not verify on the target chain: too old for its maxAttestationAge, or a key is unknown or revoked there (TimeBridgeInvalidProof)",
    },
    TimeBridgeWrongChain: { verdict: "dead", note: "the message names another target chain (TimeBridgeWrongChain)" },
    TimeBridgeTargetBlockSet: { verdict: "dead", note: "the message's targetBlock is set (TimeBridgeTargetBlockSet)" },
    TimeBridgeMalformedProof: { verdict: "dead", note: "the proof bytes are not a canonical TimeProof (TimeBridgeMalformedProof)" },
    TimeBridgeTimeMismatch: { verdict: "dead", note: "networkTime differs from the proof's nanoMoment (TimeBridgeTimeMismatch)" },
  },
  call: {
    SchedulerCallNotScheduled: { verdict: "done", note: "settled by someone else" },
    SchedulerTooEarly: { verdict: "wait", note: "the proof is earlier than executeAt" },
    SchedulerTooLate: { verdict: "wait", note: "the proof is past the window: the call is expired once the chain clock passes it" },
    // Never executable again, but not dead: the call still needs settling, and the next decision (decideCall) sees
    // the chain clock past the deadline and expires it, refunding the bounty to its scheduler.
    SchedulerChainPastDeadline: { verdict: "wait", note: "the chain clock is past the deadline: the call can only be expired now" },
    SchedulerNotExpired: { verdict: "wait", note: "the chain clock has not passed the deadline yet" },
    SchedulerInvalidProof: { verdict: "retry", note: "the scheduler's oracle refused the node's proof (SchedulerInvalidProof)" },
    SchedulerInsufficientGas: { verdict: "retry", note: "not enough gas for the call's gasLimit (SchedulerInsufficientGas)" },
  },
  push: {
    TimeOracleTimeProofNotNewer: { verdict: "done", note: "a newer proof is already stored" },
    TimeOracleInvalidTimeProof: { verdict: "retry", note: "the oracle refused the node's proof (TimeOracleInvalidTimeProof)" },
  },
  revoke: {
    TimeOracleCardRevoked: { verdict: "done", note: "revoked by someone else" },
    TimeOracleUnknownCard: { verdict: "dead", note: "the card is not registered on this chain (TimeOracleUnknownCard)" },
    AccessControlUnauthorizedAccount: { verdict: "dead", note: "the relayer's signer does not hold GUARDIAN_ROLE here (AccessControlUnauthorizedAccount)" },
  },
};

/** The policy of a revert; an error the table does not name is a counted retry. */
export function classifyRevert(kind: ItemKind, errorName: string): RevertPolicy {
  return REVERT_POLICY[kind][errorName] ?? { verdict: "retry", note: `reverted with ${errorName}` };
}

/** Exponential backoff: base × 2^(attempt−1), capped, with up to 10 % added by `jitter` ∈ [0, 1). */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, jitter: number): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 30);
  const delay = Math.min(maxMs, baseMs * 2 ** exponent);
  return Math.round(delay * (1 + jitter / 10));
}

/** Deterministic revert: the same error name `limit` times in a row. */
export function isDeterministic(sameErrorCount: number, limit: number): boolean {
  return sameErrorCount >= limit;
}

// ---- one decision per kind --------------------------------------------------------------------------------------

export type Decision =
  | { action: "done"; outcome: string }
  | { action: "dead"; reason: string }
  | { action: "wait"; untilMs: number; note: string }
  /** Its source event is no longer on the canonical chain: never sent (revived if a rescan finds the event again). */
  | { action: "orphan"; reason: string }
  | { action: "send" };

export interface MessageObservation {
  /** The target bridge's deliveredBlock(messageId): 0 when not delivered. */
  deliveredBlock: bigint;
  /** The target bridge's latest delivered networkTime. */
  latestNetworkTimeNs: bigint;
  networkTimeNs: bigint;
}

/** A bridge message: already delivered is done; older than what the target holds can never be delivered. */
export function decideMessage(observed: MessageObservation): Decision {
  if (observed.deliveredBlock !== 0n) return { action: "done", outcome: `delivered (block ${observed.deliveredBlock})` };
  // The same moment arrived in another message (the same card signature with other node entries): the time is
  // delivered, which is the job; not a failure.
  if (observed.networkTimeNs === observed.latestNetworkTimeNs) return { action: "done", outcome: "its moment was delivered by another message" };
  if (observed.networkTimeNs < observed.latestNetworkTimeNs) {
    return { action: "dead", reason: REVERT_POLICY.message.TimeBridgeNotNewer!.note };
  }
  return { action: "send" };
}

export interface SourceObservation {
  /** Whether the source chain still holds the item's event at the block it was indexed from (read just now). */
  eventCanonical: boolean;
  sourceChain: string;
  sourceBlock: bigint;
  /** The event, for the reason (e.g. "TimeSent"). */
  eventName: string;
}

/**
 * The last word before a send that a source event asked for: a target chain cannot tell a message whose source
 * event a reorg deeper than the confirmations took back from one still on its chain (it verifies the proof only),
 * so the relayer looks at the source again immediately before each send, and never sends for an event that is gone.
 */
export function decideSource(observed: SourceObservation): Extract<Decision, { action: "orphan" | "send" }> {
  if (observed.eventCanonical) return { action: "send" };
  return {
    action: "orphan",
    reason: `orphaned: its source event (${observed.eventName} in block ${observed.sourceBlock} of ${observed.sourceChain}) is no longer on the canonical chain (a reorg deeper than the confirmations took it back): never sent`,
  };
}

export interface CallObservation {
  status: CallStatusName;
  executeAtNs: bigint;
  /** executeAt + window. */
  deadlineNs: bigint;
  /** The latest block's timestamp, ns (what expireCall compares). */
  chainNowNs: bigint;
  /** The relayer's estimate of attested time (host clock), ns; the proof decides in the end. */
  nowNs: bigint;
}

export type CallDecision = Exclude<Decision, { action: "send" }> | { action: "execute" } | { action: "expire" };

/** A scheduled call: settled is done; past its deadline on the chain clock it is expired; before executeAt it waits. */
export function decideCall(observed: CallObservation): CallDecision {
  if (observed.status !== "Scheduled") {
    if (observed.status === "None") return { action: "dead", reason: "the scheduler does not know this call (status None)" };
    return { action: "done", outcome: `settled: ${observed.status}` };
  }
  if (observed.chainNowNs > observed.deadlineNs) return { action: "expire" };
  if (observed.nowNs < observed.executeAtNs) {
    return { action: "wait", untilMs: Number((observed.executeAtNs + NS_PER_MS - 1n) / NS_PER_MS), note: "before executeAt" };
  }
  return { action: "execute" };
}

export interface PushObservation {
  /** The oracle's stored proof's nanoMoment, or null when it holds none. */
  storedNanoMomentNs: bigint | null;
  nowNs: bigint;
  heartbeatNs: bigint;
  /** Asked for by an operator: push even when fresh. */
  forced: boolean;
}

/** A proof push: skipped while the stored proof is younger than the heartbeat (unless forced). */
export function decidePush(observed: PushObservation): Decision {
  if (!observed.forced && observed.storedNanoMomentNs !== null && observed.nowNs - observed.storedNanoMomentNs < observed.heartbeatNs) {
    return { action: "done", outcome: "skipped: the stored proof is fresh" };
  }
  return { action: "send" };
}

/** Whether an oracle's stored proof is due for a push (the pusher creates an item only then). */
export function pushDue(storedNanoMomentNs: bigint | null, nowNs: bigint, heartbeatNs: bigint): boolean {
  return storedNanoMomentNs === null || nowNs - storedNanoMomentNs >= heartbeatNs;
}

export interface RevokeObservation {
  cardStatus: CardStatusName;
  /** The status, on this chain, of the node that signed the alert. */
  alertSignerStatus: NodeStatusName;
}

/**
 * The guardian's revocation of a card after a signed tamper alert: once (already revoked is done), and only on the
 * word of a node this chain's oracle holds active: an alert signed by any other key would let anyone revoke any card.
 */
export function decideRevoke(observed: RevokeObservation): Decision {
  if (observed.cardStatus === "Revoked") return { action: "done", outcome: "revoked (already)" };
  if (observed.cardStatus === "None") return { action: "dead", reason: "the card is not registered on this chain" };
  if (observed.alertSignerStatus !== "Active") return { action: "dead", reason: `the alert's signer is not an active node on this chain (${observed.alertSignerStatus})` };
  return { action: "send" };
}
