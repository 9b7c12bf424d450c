/**
 * Relayed proofs on a member that proposes none (docs/protocol.md §7.6): a primary's co-signed proof is checked as
 * any verifier would (the sender's trusted card, low-S card signature, the threshold of entries from distinct mesh
 * members, fresh, not ahead of this node's clock beyond relayedProofMaxLeadNs), then served if newer than the one
 * held; each counts as a successful round. Every meshMaxProofAgeNs without one is a failed round.
 */
import { Value } from "@sinclair/typebox/value";
import { UINT32_MAX } from "../../protocol/constants";
import type { ConsensusJson } from "../../protocol/types";
import { verifyTimeProof } from "../../protocol/verify";
import type { MeshPayload } from "../../wire/mesh";
import { ConsensusObject } from "../../wire/rest";
import { buildSignedTime } from "../core/signedTime";
import type { MeshContext, RelayRefusal } from "./context";
import type { EntryEvidence } from "./evidence";
import { withConsensus } from "./rounds";
import type { MeshPeerLink } from "./transport";

/**
 * How far ahead of this node's clock a relayed proof's moment may be, ns: the proof's own accuracy, this node's card
 * accuracy, and the mesh window (docs/protocol.md §7.6): the mesh agrees on time only to within its window, so this
 * node's card may trail the consensus the proof carries by that much. Further ahead, the proof's claim is false by
 * this node's clock.
 */
export function relayedProofMaxLeadNs(proofAccuracyNs: number, ownCardAccuracyNs: number, windowNs: bigint): bigint {
  return BigInt(proofAccuracyNs) + BigInt(ownCardAccuracyNs) + windowNs;
}

/** A relayed `consensus` object, parsed and checked against its wire schema; null when it is not one. */
function parseConsensus(text: string): ConsensusJson | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  return Value.Check(ConsensusObject, value) ? (value as ConsensusJson) : null;
}

export class RelayedProofs {
  readonly #ctx: MeshContext;
  readonly #evidence: EntryEvidence;
  /** A relayed proof was accepted since the last watch period. */
  #relayedSinceWatch = false;
  #watchTimer: NodeJS.Timeout | null = null;

  constructor(ctx: MeshContext, evidence: EntryEvidence) {
    this.#ctx = ctx;
    this.#evidence = evidence;
    ctx.options.transport.handle("relayedProof", (link, payload) => this.#accept(link, payload));
  }

  /** Starts the watch: every meshMaxProofAgeNs without an accepted relayed proof is one failed round. */
  start(): void {
    if (!this.#ctx.running) return;
    const periodMs = Math.max(1, Number(this.#ctx.options.maxProofAgeNs / 1_000_000n));
    this.#watchTimer = setTimeout(() => {
      if (!this.#relayedSinceWatch) {
        this.#ctx.tracker.observeRound({ ok: false, atNs: this.#ctx.options.card.readTimeNs(), error: "no relayed proof from a primary" });
      }
      this.#relayedSinceWatch = false;
      this.start();
    }, periodMs);
    this.#watchTimer.unref();
  }

  stop(): void {
    if (this.#watchTimer !== null) clearTimeout(this.#watchTimer);
    this.#watchTimer = null;
  }

  #accept(link: MeshPeerLink, payload: MeshPayload): null {
    const { options, stats, feed } = this.#ctx;
    if (payload.kind !== "relayedProof" || options.role === "primary") return null;
    const peer = this.#ctx.peer(link.nodeId);
    if (peer === undefined || peer.role !== "primary" || peer.cardPublicKey === null || peer.cardId === null || peer.excludedReason !== null) return null;
    const refuse = (label: RelayRefusal, why: string): null => {
      peer.faultsTotal += 1;
      stats.relayedProofsRefusedTotal[label] = (stats.relayedProofsRefusedTotal[label] ?? 0) + 1;
      this.#ctx.logger.warn({ peer: peer.nodeId, refusal: label, why }, "relayed proof refused");
      return null;
    };
    // Cheap checks first: a proof no newer than the one held is dropped before any signature is checked.
    if (feed.latest !== null && feed.latest.proof.nanoMoment >= payload.proof.nanoMoment) return null;
    // The served proof is the newest held, so one dated ahead would stay "newest" and pin what this node serves
    // until its moment passes. An honest proof's moment lies within its accuracy of true time, and this node's
    // clock within its own card accuracy of true time (and true time only advances since): a moment further ahead
    // of this clock than those two bounds is false by this node's clock (the rule of §7.5) and refused.
    const nowNs = options.card.readTimeNs();
    const leadNs = payload.proof.nanoMoment - nowNs;
    const maxLeadNs = relayedProofMaxLeadNs(payload.proof.accuracy, options.cardAccuracyNs, options.windowNs);
    if (leadNs > maxLeadNs) {
      return refuse("future-dated", `its moment is ${leadNs} ns ahead of this node's clock; at most ${maxLeadNs} ns (its accuracy + this node's card accuracy) allowed`);
    }
    const consensus = parseConsensus(payload.consensusJson);
    if (consensus === null) return refuse("malformed-consensus", "its consensus object does not match the schema");
    const members = new Set<string>([this.#ctx.self.toLowerCase(), ...[...this.#ctx.peers.values()].filter((p) => p.excludedReason === null).map((p) => p.nodeId.toLowerCase())]);
    const card = this.#ctx.trustedCard(peer);
    if (typeof card === "string") return refuse("untrusted-card", card);
    const cardId = card.cardId.toLowerCase();
    const outcome = verifyTimeProof(payload.proof, {
      resolveCard: (id) => (id.toLowerCase() === cardId ? { publicKey: card.publicKey, revoked: false } : undefined),
      isActiveNode: (address) => members.has(address.toLowerCase()),
      nodeQuorum: this.#ctx.threshold,
      nowNs,
      maxAttestationAgeNs: options.maxProofAgeNs,
      maxFutureDriftNs: maxLeadNs,
      maxAcceptableDriftNs: BigInt(UINT32_MAX),
      p256KeyCache: this.#ctx.p256Keys,
    });
    if (!outcome.valid) return refuse("invalid", `${outcome.reason}: ${outcome.detail}`);
    // The relayer's readings count is its claim: never more than the mesh's members.
    const validResponders = Math.min(consensus.readings.length, members.size);
    // This node's own measurement of the primary's clock, not the primary's word: the stability test of
    // Converged then compares this node's clock with the mesh's.
    const consensusOffsetNs = peer.filter.best()?.offsetNs ?? 0n;
    this.#evidence.watchProofEntries(payload.proof, outcome.nodes, nowNs);
    this.#relayedSinceWatch = true;
    this.#ctx.tracker.observeRound({ ok: true, atNs: nowNs, consensusOffsetNs, accuracyNs: payload.proof.accuracy, validResponders });
    feed.publish(withConsensus(buildSignedTime(payload.proof, nowNs, null), consensus));
    return null;
  }
}
