/**
 * The contradiction watch over peers' verified entries (docs/protocol.md §7.8): every entry a peer co-signed in
 * this node's rounds, or signed in a relayed proof, is checked against the ones it signed before
 * (contradictions.ts). A contradiction is a fault of the peer each time, logged once per peer with its evidence,
 * and kept for GET /mesh/state.
 */
import { decodeNodeEntries, encodeNodeEntry } from "../../protocol/codec";
import type { Address, Hex, TimeProof } from "../../protocol/types";
import type { ContradictionReport } from "../core/types";
import type { MeshContext } from "./context";
import { ContradictionWatch } from "./contradictions";
import type { PeerRecord } from "./peers";

export class EntryEvidence {
  readonly #ctx: MeshContext;
  readonly #watch = new ContradictionWatch();

  constructor(ctx: MeshContext) {
    this.#ctx = ctx;
  }

  reports(): ContradictionReport[] {
    return this.#watch.reports();
  }

  /** The peers' entries of a verified relayed proof (`signers`: its entries' recovered addresses, in order), watched. */
  watchProofEntries(proof: TimeProof, signers: readonly Address[], atNs: bigint): void {
    decodeNodeEntries(proof.nodeSignature).forEach((entry, index) => {
      const peer = this.#ctx.peer(signers[index]!);
      if (peer !== undefined) this.watchEntry(peer, proof, encodeNodeEntry(entry), entry.nodeTimestampNs, atNs);
    });
  }

  /** Checks one verified entry of `peer` against the ones it signed before. */
  watchEntry(peer: PeerRecord, proof: Pick<TimeProof, "nanoMoment" | "hardwareSignature" | "accuracy">, entry: Hex, nodeTimestampNs: bigint, atNs: bigint): void {
    const found = this.#watch.observe(peer.nodeId, proof, entry, nodeTimestampNs, atNs);
    if (found === null) return;
    peer.faultsTotal += 1;
    if (found.first) {
      this.#ctx.logger.warn(
        { peer: peer.nodeId, excessNs: found.report.excessNs, evidence: found.report.evidence },
        "peer signed contradicting entries (docs/protocol.md §7.8): evidence kept in GET /mesh/state contradictions; check it with `ats-node evidence check`",
      );
    }
  }
}
