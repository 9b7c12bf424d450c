/**
 * The gRPC messages of the node's answers, built from the service's objects (proto/time.proto, wire/grpc.ts): the
 * response template of a served attestation (built once per SignedTime), its consensus, the node's identity, and
 * back, the TimeProof of a VerifyRequest. grpc.ts is the server that sends them.
 */
import { NODE_ENTRY_LENGTH } from "../../protocol/constants";
import { ValidationError } from "../../protocol/errors";
import { parseNsString } from "../../protocol/json";
import type { ConsensusJson, GpsReference, Hex, TimeProof } from "../../protocol/types";
import { recoverNodeAddresses } from "../../protocol/verify";
import type { ConsensusProofMessage, GpsReferenceMessage, NodeInfoMessage, ProofMessage, TimeResponseMessage } from "../../wire/grpc";
import type { NodeInfo, SignedTime } from "../core/types";
import type { TransportContext } from "./context";

function hexOfBytes(bytes: Buffer): Hex {
  return `0x${bytes.toString("hex")}`;
}

/** The TimeProof of a VerifyRequest: bytes are taken as they are; their content is service.verify()'s to judge. */
export function proofFromMessage(nanoMoment: string, proof: ProofMessage | null): TimeProof {
  const nanoMomentNs = parseNsString(nanoMoment, "nano_moment");
  if (proof === null) throw new ValidationError("proof", "is required");
  return {
    nanoMoment: nanoMomentNs,
    hardwareSignature: hexOfBytes(proof.hardware_signature),
    nodeSignature: hexOfBytes(proof.node_signature),
    accuracy: proof.accuracy_ns,
  };
}

/** TimeResponse.node of this node: its identity from service.info(). */
export function nodeInfoMessage(info: Pick<NodeInfo, "nodeId" | "cardId" | "version" | "protocol">): NodeInfoMessage {
  return { node_id: info.nodeId, card_id: Buffer.from(info.cardId.slice(2), "hex"), version: info.version, protocol: info.protocol };
}

/** Proof.gps of the served body's `gps` (null: none). */
function gpsMessage(gps: GpsReference | null): GpsReferenceMessage | null {
  if (gps === null) return null;
  return { fix_state: gps.fixState, satellites: gps.satellites, pps_offset_ns: gps.ppsOffsetNs, observed_at_ns: gps.observedAtNs };
}

/** The round fields of a lone node's ConsensusProof: proto3 defaults (no round). */
function loneNodeRound(): Pick<ConsensusProofMessage, "members" | "threshold" | "time_ns" | "deviation_ns" | "window_ns" | "readings" | "excluded"> {
  return { members: 0, threshold: 0, time_ns: "", deviation_ns: "", window_ns: "", readings: [], excluded: [] };
}

/**
 * TimeResponse.consensus of a proof served by the node `self`. One entry is the node's own attestation (its id,
 * no recovery); several (a proof co-signed by other nodes) are recovered from proof.node_signature, once per
 * attestation since the response template is cached. Entries that do not recover (not expected of a proof the
 * node serves) leave node_ids empty rather than fail the call; responders still counts the entries.
 */
export function consensusProofMessage(
  proof: TimeProof,
  self: Pick<NodeInfo, "nodeId" | "nodeQuorum">,
  round?: ConsensusJson,
): ConsensusProofMessage {
  if (round !== undefined) {
    // A mesh proof: the round's own account (the same values as REST's `consensus`), node ids from the round.
    return {
      responders: round.responders,
      quorum: self.nodeQuorum,
      node_ids: [...round.nodeIds],
      members: round.members,
      threshold: round.threshold,
      time_ns: round.timeNs,
      deviation_ns: round.deviationNs,
      window_ns: round.windowNs,
      readings: round.readings.map((reading) => ({
        node_id: reading.nodeId,
        reading_ns: reading.readingNs,
        uncertainty_ns: reading.uncertaintyNs,
        deviation_ns: reading.deviationNs,
        node_timestamp_ns: reading.nodeTimestampNs ?? "",
      })),
      excluded: round.excluded.map((item) => ({ node_id: item.nodeId, deviation_ns: item.deviationNs })),
    };
  }
  const entries = (proof.nodeSignature.length - 2) / (2 * NODE_ENTRY_LENGTH);
  let nodeIds: string[];
  if (entries === 1) {
    nodeIds = [self.nodeId];
  } else {
    try {
      nodeIds = recoverNodeAddresses(proof);
    } catch {
      nodeIds = [];
    }
  }
  return { responders: entries, quorum: self.nodeQuorum, node_ids: nodeIds, ...loneNodeRound() };
}

/**
 * The response template of one attestation, built once per SignedTime and shared by every call that serves it
 * (bytes decoded from hex once, not per request). The NodeInfo record is built once per server: the node's
 * identity does not change while it runs.
 */
export class ResponseCache {
  private readonly cache = new WeakMap<SignedTime, Omit<TimeResponseMessage, "request_id">>();
  private node: NodeInfoMessage | undefined;

  constructor(private readonly context: TransportContext) {}

  response(signed: SignedTime, requestId: string): TimeResponseMessage {
    let template = this.cache.get(signed);
    if (template === undefined) {
      const info = this.context.service.info();
      this.node ??= nodeInfoMessage(info);
      template = {
        nano_moment: signed.json.nanoMoment,
        proof: {
          hardware_signature: Buffer.from(signed.proof.hardwareSignature.slice(2), "hex"),
          node_signature: Buffer.from(signed.proof.nodeSignature.slice(2), "hex"),
          accuracy_ns: signed.proof.accuracy,
          hardware_id: Buffer.from(signed.json.proof.hardwareId.slice(2), "hex"),
          gps: gpsMessage(signed.json.proof.gps),
        },
        consensus: consensusProofMessage(signed.proof, info, signed.json.consensus),
        node: this.node,
      };
      this.cache.set(signed, template);
    }
    return { request_id: requestId, ...template };
  }
}
