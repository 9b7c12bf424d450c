/**
 * The co-signing seam between the attestor and what the node serves. The attestor produces a *local attestation*
 * (the card-signed moment plus this node's own entry); a co-signing stage turns it, with whatever peer entries it
 * has, into the served SignedTime. A lone node uses `soloCoSigning()`, a pass-through whose proof carries exactly
 * one node entry (byte for byte what the attestor built before this seam existed).
 *
 * The stage is synchronous on purpose: attest() (attestNow, schedule delivery, on-demand refresh under load)
 * returns its proof in the same call, and the serving path must never await. A mesh stage (docs/protocol.md §7,
 * not built yet) has to collect peer entries within a deadline, which is asynchronous; it will sit on the tick
 * path the way the signer worker already does (the attestor publishes a worker tick when its reply is in), as an
 * asynchronous variant `(local, deadline) => Promise<SignedTime>` that falls back to this synchronous stage when
 * the quorum is 1 or the deadline passes. Merging peer entries means sorting them by recovered address
 * (assembleProof in protocol/) — work the solo stage skips, since one entry is trivially ascending.
 */
import type { Hex, TimeProof } from "../../protocol/types";
import { buildSignedTime } from "./signedTime";
import type { SignedTime } from "./types";

/** What the attestor signs, before it becomes a served proof. Immutable; one is built per attestation. */
export interface LocalAttestation {
  /** The card clock's reading, ns since the Unix epoch. */
  readonly nanoMoment: bigint;
  /** The card's signature over the moment: cardId (32) ‖ r (32) ‖ s (32). */
  readonly hardwareSignature: Hex;
  /** The accuracy signed into the proof, ns. */
  readonly accuracy: number;
  /** This node's own entry (NODE_ENTRY_LENGTH bytes: nodeTimestamp ‖ r ‖ yParityAndS) over the attestation. */
  readonly nodeEntry: Hex;
  /** Node clock when the attestor finished signing, ns (becomes SignedTime.producedAtNs). */
  readonly producedAtNs: bigint;
}

/**
 * Turns a local attestation into the served proof. Called once per attestation (tick or on demand), never per
 * request. Must not throw for a well-formed local attestation.
 */
export type CoSigningStage = (local: LocalAttestation) => SignedTime;

/** The proof a local attestation alone makes: one node entry (this node's). */
export function localProof(local: LocalAttestation): TimeProof {
  return {
    nanoMoment: local.nanoMoment,
    hardwareSignature: local.hardwareSignature,
    accuracy: local.accuracy,
    nodeSignature: local.nodeEntry,
  };
}

/** The lone node's stage: the local attestation is the proof (today's SignedTime, unchanged). */
export function soloCoSigning(): CoSigningStage {
  return (local) => buildSignedTime(localProof(local), local.producedAtNs);
}
