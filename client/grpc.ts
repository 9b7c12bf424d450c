/**
 * gRPC calls of the client library (`ats.v1.TimeRPC` from proto/time.proto, loaded by wire/grpc.ts): one channel,
 * opened on first use, TLS when asked; statuses turned back into the error classes by wire/errorMapping.ts.
 */
import * as grpc from "@grpc/grpc-js";
import { UnavailableError, ValidationError } from "../protocol/errors";
import type { Address, GpsFixState, Hex, ProofJson, TimeProof } from "../protocol/types";
import { API_KEY_HEADER } from "../wire/auth";
import { fromGrpcStatus } from "../wire/errorMapping";
import {
  loadProtos,
  REQUEST_TYPES,
  type ConsensusProofMessage,
  type NodeInfoMessage,
  type ProofMessage,
  type TimeRequestMessage,
  type TimeResponseMessage,
  type VerifyResponseMessage,
} from "../wire/grpc";
import { toFetched } from "./fetched";
import { withRetries, type RetryPolicy } from "./retry";
import type { GrpcConsensusProof, GrpcNodeInfo, GrpcTimeClient } from "./types";

function hexOf(bytes: Uint8Array): Hex {
  return `0x${Buffer.from(bytes).toString("hex")}`;
}

export function proofJsonFromMessage(nanoMoment: string, proof: ProofMessage): ProofJson {
  return {
    nanoMoment,
    proof: {
      hardwareSignature: hexOf(proof.hardware_signature),
      nodeSignature: hexOf(proof.node_signature),
      accuracyNs: proof.accuracy_ns,
      hardwareId: hexOf(proof.hardware_id),
      gps:
        proof.gps === null || proof.gps === undefined
          ? null
          : { fixState: proof.gps.fix_state as GpsFixState, satellites: proof.gps.satellites, ppsOffsetNs: proof.gps.pps_offset_ns, observedAtNs: proof.gps.observed_at_ns },
    },
  };
}

/** TimeResponse.node as the client library returns it (null when absent). */
export function nodeInfoFromMessage(node: NodeInfoMessage | null | undefined): GrpcNodeInfo | null {
  if (node === null || node === undefined) return null;
  return { nodeId: node.node_id, cardId: hexOf(node.card_id), version: node.version, protocol: node.protocol };
}

/** TimeResponse.consensus as the client library returns it (null when absent). */
export function consensusFromMessage(consensus: ConsensusProofMessage | null | undefined): GrpcConsensusProof | null {
  if (consensus === null || consensus === undefined) return null;
  const base = { responders: consensus.responders, quorum: consensus.quorum, nodeIds: [...consensus.node_ids] };
  if (consensus.members === 0) return base; // a lone node: no round
  return {
    ...base,
    round: {
      members: consensus.members,
      threshold: consensus.threshold,
      responders: consensus.responders,
      nodeIds: [...consensus.node_ids] as Address[],
      timeNs: consensus.time_ns,
      deviationNs: consensus.deviation_ns,
      windowNs: consensus.window_ns,
      readings: (consensus.readings ?? []).map((reading) => ({
        nodeId: reading.node_id as Address,
        readingNs: reading.reading_ns,
        uncertaintyNs: reading.uncertainty_ns,
        deviationNs: reading.deviation_ns,
        nodeTimestampNs: reading.node_timestamp_ns === "" ? null : reading.node_timestamp_ns,
      })),
      excluded: (consensus.excluded ?? []).map((item) => ({ nodeId: item.node_id as Address, deviationNs: item.deviation_ns })),
    },
  };
}

const MAX_UINT64 = 2n ** 64n - 1n;

/** The decimal form of a uint64 option, as proto-loader takes it (a wider value would be cut to 64 bits silently). */
function uint64Decimal(field: string, value: bigint): string {
  if (value < 0n || value > MAX_UINT64) throw new ValidationError(field, "must be an unsigned 64-bit integer");
  return value.toString();
}

function proofToMessage(proof: TimeProof): { nano_moment: string; proof: Omit<ProofMessage, "hardware_id" | "gps"> } {
  return {
    nano_moment: proof.nanoMoment.toString(),
    proof: {
      hardware_signature: Buffer.from(proof.hardwareSignature.slice(2), "hex"),
      node_signature: Buffer.from(proof.nodeSignature.slice(2), "hex"),
      accuracy_ns: proof.accuracy,
    },
  };
}

export interface GrpcCallerOptions {
  /** "host:port"; calls throw ValidationError without it. */
  grpcEndpoint: string | undefined;
  apiKey: string | undefined;
  timeoutMs: number;
  retry: RetryPolicy;
  tls: boolean;
  ca: string | Buffer | undefined;
}

export function createGrpcClient(options: GrpcCallerOptions): GrpcTimeClient {
  const { timeoutMs, ca } = options;
  let grpcClient: grpc.Client | undefined;
  function timeRpc(): grpc.Client & Record<string, unknown> {
    if (options.grpcEndpoint === undefined) throw new ValidationError("grpcEndpoint", "is required for gRPC calls");
    if (grpcClient === undefined) {
      const { timeClient } = loadProtos();
      const credentials = options.tls
        ? grpc.credentials.createSsl(ca === undefined ? null : Buffer.from(ca))
        : grpc.credentials.createInsecure();
      grpcClient = new timeClient(options.grpcEndpoint, credentials);
    }
    return grpcClient as grpc.Client & Record<string, unknown>;
  }

  function unaryCall<Req, Res>(method: string, requestMessage: Req): Promise<Res> {
    return withRetries(
      options.retry,
      () =>
        new Promise<Res>((resolve, reject) => {
          const client = timeRpc();
          const metadata = new grpc.Metadata();
          if (options.apiKey !== undefined) metadata.set(API_KEY_HEADER, options.apiKey);
          const fn = client[method] as (
            request: Req,
            metadata: grpc.Metadata,
            callOptions: grpc.CallOptions,
            callback: (error: grpc.ServiceError | null, response?: Res) => void,
          ) => void;
          fn.call(client, requestMessage, metadata, { deadline: Date.now() + timeoutMs }, (error, response) => {
            if (error !== null) reject(fromGrpcStatus(error.code, error.details));
            else if (response === undefined) reject(new UnavailableError("empty gRPC response"));
            else resolve(response);
          });
        }),
    );
  }

  return {
    async getCurrentTime(requestOptions = {}) {
      const type = requestOptions.type ?? "CURRENT_TIME";
      // protobufjs encodes a name it does not know as 0, which is CURRENT_TIME: a typo must not ask for the wrong thing.
      if (!REQUEST_TYPES.includes(type)) throw new ValidationError("type", `must be one of ${REQUEST_TYPES.join(", ")}`);
      const message: Partial<TimeRequestMessage> = {
        request_id: requestOptions.requestId ?? "",
        nonce: uint64Decimal("nonce", requestOptions.nonce ?? 0n),
        type,
        at_ns: requestOptions.atNs === undefined ? "" : requestOptions.atNs.toString(),
        client_id: requestOptions.clientId ?? "",
        client_signature: Buffer.from(requestOptions.clientSignature ?? new Uint8Array()),
        issued_at_ms: requestOptions.issuedAtMs ?? "",
      };
      const response = await unaryCall<Partial<TimeRequestMessage>, TimeResponseMessage>("GetCurrentTime", message);
      return {
        ...toFetched(proofJsonFromMessage(response.nano_moment, response.proof)),
        requestId: response.request_id,
        node: nodeInfoFromMessage(response.node),
        consensus: consensusFromMessage(response.consensus),
      };
    },
    async verify(proof) {
      const response = await unaryCall<ReturnType<typeof proofToMessage>, VerifyResponseMessage>("VerifyTime", proofToMessage(proof));
      return response.valid ? { valid: true, reason: null } : { valid: false, reason: response.reason, detail: response.detail };
    },
    close() {
      grpcClient?.close();
      grpcClient = undefined;
    },
  };
}
