/**
 * The co-signing seam between the attestor and what the node serves. The attestor produces a *local attestation*
 * (the card-signed moment plus this node's own entry); a co-signing stage turns it, with whatever peer entries it
 * has, into the served SignedTime. A lone node uses `soloCoSigning()`, a pass-through whose proof carries exactly
 * one node entry (byte for byte what the attestor built before this seam existed).
 *
 * The stage is synchronous on purpose: attest() (attestNow, schedule delivery, on-demand refresh under load)
 * returns its proof in the same call, and the serving path must never await.
 *
 * A node with mesh peers serves a ConsensusStage instead (node/mesh/: docs/protocol.md §7). Its rounds are
 * asynchronous (peers answer over the network) and sign a different accuracy (the round's bound, not the card's),
 * so they do not go through the attestor's local attestation: the service serves the stage's latest co-signed
 * proof, and the attestor keeps guarding every signature (assertCanSign) and reporting tamper.
 */
import type { CardRecord, GpsReference, Hex, TimeProof } from "../../protocol/types";
import { buildSignedTime } from "./signedTime";
import type { MeshStateReport, SignedTime } from "./types";

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
  /** The card's GPS reference at that time (unsigned metadata of the served body); null: none. */
  readonly gps: GpsReference | null;
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
  return (local) => buildSignedTime(localProof(local), local.producedAtNs, local.gps);
}

/**
 * The proofs of a node with mesh peers (node/mesh/Mesh implements it): the latest co-signed proof, rounds on
 * demand, the mesh state, and the tamper broadcast. The service serves it in place of the attestor's cache.
 */
export interface ConsensusStage {
  /** The latest co-signed proof without freshness checks; null before the first successful round. */
  readonly latest: SignedTime | null;
  /** The latest co-signed proof; UnavailableError (naming the last round's error) when none is fresh. */
  current(): SignedTime;
  /**
   * A fresh round's proof (a new round, or one in flight at the pipelining bound); with `notBeforeNs`, one whose
   * moment is at or after it. Rejects with ConsensusError or UnavailableError.
   */
  roundNow(notBeforeNs?: bigint): Promise<SignedTime>;
  onProof(listener: (signed: SignedTime) => void): () => void;
  state(): MeshStateReport;
  /** Tells every peer, signed, that this node's card is tampered. */
  broadcastTamper(reason: string, atNs: bigint): void;
  start(): Promise<unknown>;
  stop(): Promise<void>;
}

/** What the service gives the stage: the attestor's guard, and its trust store's chain check for peers' cards. */
export interface ConsensusStageDeps {
  assertCanSign: () => void;
  /** Checks a peer card's chain against the trusted roots; verify() accepts that card's proofs once it passed. */
  learnCardChain: (certificateChainPem: readonly string[]) => Promise<void>;
  /** The trust store's view of a card (certified by a trusted root, and whether revoked); undefined when unknown. */
  resolveCard: (cardId: Hex) => CardRecord | undefined;
}

/** Builds the stage once the service's attestor and trust store exist. */
export type ConsensusStageFactory = (deps: ConsensusStageDeps) => ConsensusStage;
