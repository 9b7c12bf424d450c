/**
 * Contradiction evidence (docs/protocol.md §7.8): two node entries, signed by one node, whose claims cannot both be
 * true. Portable: anyone holding the two proofs can check it with the node's address alone, no registry, no clock.
 *
 * The rule. An entry signs (moment M, accuracy acc, nodeTimestamp ts), where ts is the node's own monotonic clock
 * when it signed, and an honest node never signs a reading older than MAX_SIGNING_DELAY_NS (D) by that clock
 * (protocol/constants.ts says why D is safe). Of two entries with ts1 ≤ ts2, honest ones satisfy
 * M1 − acc1 ≤ ts1 + a ≤ ts2 + a ≤ M2 + acc2 + D, so
 *
 *     M2 + acc2 + D < M1 − acc1
 *
 * proves a lie: the node signed, later by its own clock, a reading whose whole interval lies before the earlier
 * one's by more than the signing delay allows. Equal moments never satisfy it, nor does one entry twice.
 * Detail: docs/protocol.md §7.8.
 */
import { MAX_NODE_ENTRIES, MAX_SIGNING_DELAY_NS } from "./constants";
import { decodeNodeEntries, timeAttestationForProof } from "./codec";
import { AtsError, ProtocolError, ValidationError } from "./errors";
import { asRecord, parseJsonLossless, proofFromJson, proofToJson, rejectUnknownKeys } from "./json";
import { recoverNodeAddress, type RecoveryMemo } from "./sign";
import type { Address, Hex, ProofJson, TimeProof } from "./types";
import { CONTRADICTION_EVIDENCE_KIND, CONTRADICTION_EVIDENCE_VERSION, MAX_CONTRADICTION_EVIDENCE_BYTES } from "./constants";

/*
 * Pure: inputs in, verdicts out; nothing here keeps state or reads a clock. Card signatures are not checked: the
 * node's lie is in what it signed, and it signed the moment whether or not the card's signature over it is valid
 * (hardwareSignatureHash binds those bytes either way). Nothing else is needed to convict the node.
 */
// Declared in constants.ts, which the browser client may load (wire/rest.ts schemas use them); this module may not.
export { CONTRADICTION_EVIDENCE_KIND, CONTRADICTION_EVIDENCE_VERSION, MAX_CONTRADICTION_EVIDENCE_BYTES };


/** What one entry asserts: the node's clock when it signed, and the interval the proof claims for true time. */
export interface SignedClaim {
  readonly nodeTimestampNs: bigint;
  readonly nanoMoment: bigint;
  readonly accuracyNs: number;
}

/** Two claims that contradict each other, in the node's own signing order (`earlier.ts ≤ later.ts`). */
export interface ClaimContradiction<T extends SignedClaim> {
  /** Signed first by the node's clock (smaller nodeTimestamp); its interval lies after the later one's. */
  readonly earlier: T;
  readonly later: T;
  /** (earlier.M − earlier.acc) − (later.M + later.acc + MAX_SIGNING_DELAY_NS): by how much the rule is exceeded, ns (> 0). */
  readonly excessNs: bigint;
}

/** By how much `later` (signed at or after `earlier` by the node's clock) violates the rule; ≤ 0: it does not. */
function excessNs(earlier: SignedClaim, later: SignedClaim): bigint {
  const earlierLowNs = earlier.nanoMoment - BigInt(earlier.accuracyNs);
  const laterHighNs = later.nanoMoment + BigInt(later.accuracyNs) + MAX_SIGNING_DELAY_NS;
  return earlierLowNs - laterHighNs;
}

/**
 * The contradiction between two claims of one node, or null when both can be true. Ordered by nodeTimestamp; with
 * equal timestamps either order is the node's, so both are tried and the larger excess is reported.
 */
export function claimContradiction<T extends SignedClaim>(a: T, b: T): ClaimContradiction<T> | null {
  const orders: Array<[T, T]> =
    a.nodeTimestampNs < b.nodeTimestampNs ? [[a, b]] : a.nodeTimestampNs > b.nodeTimestampNs ? [[b, a]] : [[a, b], [b, a]];
  let found: ClaimContradiction<T> | null = null;
  for (const [earlier, later] of orders) {
    const excess = excessNs(earlier, later);
    if (excess > 0n && (found === null || excess > found.excessNs)) found = { earlier, later, excessNs: excess };
  }
  return found;
}

/** One entry of one of the two proofs, with what it claims. */
export interface EvidenceEntry extends SignedClaim {
  /** 0 or 1: which of the two proofs. */
  readonly proofIndex: 0 | 1;
  /** The entry's position in that proof's nodeSignature. */
  readonly entryIndex: number;
}

/** A contradicting pair of entries of one node across two proofs. */
export interface Contradiction extends ClaimContradiction<EvidenceEntry> {
  readonly nodeId: Address;
}

/** Every entry of `proof` with its signer; entries that recover to no key (nobody's signature) are left out. */
function signedEntries(proof: TimeProof, proofIndex: 0 | 1, memo?: RecoveryMemo): Array<{ nodeId: Address; entry: EvidenceEntry }> {
  const entries = decodeNodeEntries(proof.nodeSignature);
  if (entries.length > MAX_NODE_ENTRIES) {
    throw new ProtocolError(`proof ${proofIndex} has ${entries.length} node entries, at most ${MAX_NODE_ENTRIES}`, { proofIndex, entries: entries.length });
  }
  const signed: Array<{ nodeId: Address; entry: EvidenceEntry }> = [];
  entries.forEach((entry, entryIndex) => {
    let nodeId: Address;
    try {
      nodeId = recoverNodeAddress(timeAttestationForProof(proof, entry.nodeTimestampNs), entry, memo);
    } catch {
      return;
    }
    signed.push({ nodeId, entry: { proofIndex, entryIndex, nodeTimestampNs: entry.nodeTimestampNs, nanoMoment: proof.nanoMoment, accuracyNs: proof.accuracy } });
  });
  return signed;
}

/**
 * Every pair of entries, one from each proof, signed by the same node and contradicting each other (§7.8), with the
 * node and the numbers. Entries of one proof share its moment and accuracy, so they never contradict each other.
 * Throws ProtocolError for a nodeSignature that is not a multiple of 80 bytes or holds more than MAX_NODE_ENTRIES
 * (so at most 32 × 32 comparisons).
 */
export function findContradictions(proofA: TimeProof, proofB: TimeProof, memo?: RecoveryMemo): Contradiction[] {
  const fromA = signedEntries(proofA, 0, memo);
  const fromB = signedEntries(proofB, 1, memo);
  const found: Contradiction[] = [];
  for (const a of fromA) {
    for (const b of fromB) {
      if (a.nodeId !== b.nodeId) continue;
      const contradiction = claimContradiction(a.entry, b.entry);
      if (contradiction !== null) found.push({ nodeId: a.nodeId, ...contradiction });
    }
  }
  return found;
}

// ---------------------------------------------------------------- the evidence document

/** One side of the evidence: a proof in its §9.1 JSON form and which of its entries is the node's. */
export interface EvidenceProofJson {
  readonly entryIndex: number;
  /** As GET /time/current serves it, without `consensus` (a reader also accepts hardwareId and gps left out). */
  readonly timeProof: ProofJson;
}

/**
 * The evidence document (docs/protocol.md §7.8; schema: wire/rest.ts ContradictionEvidenceObject). `nodeId` is the
 * accused node (EIP-55); `proofs` holds exactly two sides, in any order.
 */
export interface ContradictionEvidenceJson {
  readonly kind: typeof CONTRADICTION_EVIDENCE_KIND;
  readonly version: typeof CONTRADICTION_EVIDENCE_VERSION;
  readonly nodeId: Address;
  readonly proofs: readonly [EvidenceProofJson, EvidenceProofJson];
}

/** The evidence document for a contradiction found between `proofs` (findContradictions' proof order). */
export function contradictionEvidence(contradiction: Contradiction, proofs: readonly [TimeProof, TimeProof]): ContradictionEvidenceJson {
  const side = (entry: EvidenceEntry): EvidenceProofJson => ({ entryIndex: entry.entryIndex, timeProof: proofToJson(proofs[entry.proofIndex]) });
  return {
    kind: CONTRADICTION_EVIDENCE_KIND,
    version: CONTRADICTION_EVIDENCE_VERSION,
    nodeId: contradiction.nodeId,
    proofs: [side(contradiction.earlier), side(contradiction.later)],
  };
}

/** Why evidence does not prove a contradiction (a fixed set: exit codes and labels depend on it). */
export type EvidenceFailureReason = "malformed" | "bad-signature" | "different-nodes" | "not-contradictory";

export const EVIDENCE_FAILURE_REASONS: readonly EvidenceFailureReason[] = ["malformed", "bad-signature", "different-nodes", "not-contradictory"];

export type CheckEvidenceReturnType =
  | { valid: true; nodeId: Address; contradiction: Contradiction }
  | { valid: false; reason: EvidenceFailureReason; detail: string; nodeId: Address | null };

type EvidenceFailure = Extract<CheckEvidenceReturnType, { valid: false }>;

class EvidenceRefused extends Error {
  constructor(readonly failure: EvidenceFailure) {
    super(failure.detail);
  }
}

function refuse(reason: EvidenceFailureReason, detail: string, nodeId: Address | null = null): never {
  throw new EvidenceRefused({ valid: false, reason, detail, nodeId });
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

interface ParsedSide {
  readonly proof: TimeProof;
  readonly entryIndex: number;
}

/** The document's shape, strictly (closed objects, the §9.1 reader for each proof); `malformed` otherwise. */
function parseEvidence(value: unknown): { nodeId: Address; sides: readonly [ParsedSide, ParsedSide] } {
  try {
    const record = asRecord(value, "$");
    rejectUnknownKeys(record, ["kind", "version", "nodeId", "proofs"], "$");
    if (record.kind !== CONTRADICTION_EVIDENCE_KIND) throw new ValidationError("kind", `must be "${CONTRADICTION_EVIDENCE_KIND}"`, {});
    if (record.version !== CONTRADICTION_EVIDENCE_VERSION) throw new ValidationError("version", `must be ${CONTRADICTION_EVIDENCE_VERSION}`, {});
    if (typeof record.nodeId !== "string" || !ADDRESS.test(record.nodeId)) throw new ValidationError("nodeId", "must be a 20-byte 0x-hex address", {});
    const proofs = record.proofs;
    if (!Array.isArray(proofs) || proofs.length !== 2) throw new ValidationError("proofs", "must be an array of exactly two proofs", {});
    const sides = proofs.map((side: unknown, index): ParsedSide => {
      const field = `proofs[${index}]`;
      const sideRecord = asRecord(side, field);
      rejectUnknownKeys(sideRecord, ["entryIndex", "timeProof"], field);
      const { entryIndex } = sideRecord;
      if (typeof entryIndex !== "number" || !Number.isInteger(entryIndex) || entryIndex < 0 || entryIndex >= MAX_NODE_ENTRIES) {
        throw new ValidationError(`${field}.entryIndex`, `must be an integer in [0, ${MAX_NODE_ENTRIES})`, {});
      }
      const timeProof = asRecord(sideRecord.timeProof, `${field}.timeProof`);
      // A mesh body's `consensus` is the server's account of a round, signed by nobody: no part of evidence.
      rejectUnknownKeys(timeProof, ["nanoMoment", "proof"], `${field}.timeProof`);
      try {
        return { proof: proofFromJson(timeProof).proof, entryIndex };
      } catch (error) {
        if (error instanceof ValidationError) throw new ValidationError(`${field}.timeProof.${error.field}`, error.message.slice(error.field.length + 2), {});
        throw error;
      }
    });
    return { nodeId: record.nodeId as Address, sides: [sides[0]!, sides[1]!] };
  } catch (error) {
    if (error instanceof AtsError) refuse("malformed", error.message);
    throw error;
  }
}

/** The side's named entry and its signer; `malformed` / `bad-signature` when there is none. */
function recoverSide(side: ParsedSide, proofIndex: 0 | 1, memo?: RecoveryMemo): { nodeId: Address; entry: EvidenceEntry; bytes: Hex } {
  const entries = decodeNodeEntries(side.proof.nodeSignature); // proofFromJson checked: a non-empty multiple of 80 bytes
  if (entries.length > MAX_NODE_ENTRIES) refuse("malformed", `proofs[${proofIndex}] has ${entries.length} node entries, at most ${MAX_NODE_ENTRIES}`);
  const entry = entries[side.entryIndex];
  if (entry === undefined) refuse("malformed", `proofs[${proofIndex}].entryIndex ${side.entryIndex} is beyond its ${entries.length} node entries`);
  let nodeId: Address;
  try {
    nodeId = recoverNodeAddress(timeAttestationForProof(side.proof, entry.nodeTimestampNs), entry, memo);
  } catch (error) {
    refuse("bad-signature", `proofs[${proofIndex}] entry ${side.entryIndex} is nobody's signature: ${error instanceof Error ? error.message : String(error)}`);
  }
  const offset = 2 + side.entryIndex * 160;
  return {
    nodeId,
    entry: { proofIndex, entryIndex: side.entryIndex, nodeTimestampNs: entry.nodeTimestampNs, nanoMoment: side.proof.nanoMoment, accuracyNs: side.proof.accuracy },
    bytes: `0x${side.proof.nodeSignature.slice(offset, offset + 160)}`,
  };
}

/** Whether two proofs carry the same signed fields but their entries (gps and hardwareId are not signed). */
function sameSignedFields(a: TimeProof, b: TimeProof): boolean {
  return a.nanoMoment === b.nanoMoment && a.accuracy === b.accuracy && a.hardwareSignature === b.hardwareSignature;
}

/** A claim as text for details: "M ± acc ns signed at ts". */
function claimText(claim: SignedClaim): string {
  return `${claim.nanoMoment} ± ${claim.accuracyNs} ns signed at nodeTimestamp ${claim.nodeTimestampNs}`;
}

function checkParsed(value: unknown, memo?: RecoveryMemo): CheckEvidenceReturnType {
  const { nodeId, sides } = parseEvidence(value);
  const first = recoverSide(sides[0], 0, memo);
  const second = recoverSide(sides[1], 1, memo);
  if (first.nodeId !== second.nodeId) {
    // A tampered entry recovers to a stranger's address, so it lands here too: the addresses say which side.
    refuse("different-nodes", `proofs[0] entry ${first.entry.entryIndex} is signed by ${first.nodeId}, proofs[1] entry ${second.entry.entryIndex} by ${second.nodeId}`);
  }
  if (first.nodeId.toLowerCase() !== nodeId.toLowerCase()) {
    refuse("different-nodes", `both entries are signed by ${first.nodeId}, not by the accused ${nodeId}`, first.nodeId);
  }
  // The rule alone would say so too (one moment); the detail is clearer.
  const sameEntry = first.bytes === second.bytes && sameSignedFields(sides[0].proof, sides[1].proof);
  if (sameEntry) refuse("not-contradictory", "the same signed entry twice", first.nodeId);
  const contradiction = claimContradiction(first.entry, second.entry);
  if (contradiction === null) {
    refuse(
      "not-contradictory",
      `${claimText(first.entry)} and ${claimText(second.entry)} can both be true: an honest node signs readings up to ${MAX_SIGNING_DELAY_NS} ns old by its clock`,
      first.nodeId,
    );
  }
  return { valid: true, nodeId: first.nodeId, contradiction: { nodeId: first.nodeId, ...contradiction } };
}

/**
 * Checks an evidence document (already parsed JSON; use checkEvidenceText for text): valid when both named entries
 * are the accused node's signatures and contradict each other (§7.8); otherwise the first failure, in the order of
 * EVIDENCE_FAILURE_REASONS. Never throws on untrusted input.
 */
export function checkEvidence(value: unknown, memo?: RecoveryMemo): CheckEvidenceReturnType {
  try {
    return checkParsed(value, memo);
  } catch (error) {
    if (error instanceof EvidenceRefused) return error.failure;
    if (error instanceof AtsError) return { valid: false, reason: "malformed", detail: error.message, nodeId: null };
    throw error;
  }
}

/** checkEvidence over untrusted text: at most MAX_CONTRADICTION_EVIDENCE_BYTES (UTF-8), parsed losslessly. */
export function checkEvidenceText(text: string, memo?: RecoveryMemo): CheckEvidenceReturnType {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MAX_CONTRADICTION_EVIDENCE_BYTES) {
    return { valid: false, reason: "malformed", detail: `evidence is ${bytes} bytes, at most ${MAX_CONTRADICTION_EVIDENCE_BYTES}`, nodeId: null };
  }
  let value: unknown;
  try {
    value = parseJsonLossless(text);
  } catch (error) {
    return { valid: false, reason: "malformed", detail: error instanceof Error ? error.message : String(error), nodeId: null };
  }
  return checkEvidence(value, memo);
}
