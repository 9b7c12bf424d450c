/**
 * The gRPC wire of the node (docs/protocol.md §9.4): where the .proto files are, how they are loaded, and the
 * message shapes as @grpc/proto-loader yields them (keepCase, longs and enums as strings). Shared by the server
 * (node/api/grpc.ts) and the client library (client/grpc.ts).
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

function findProtoDir(start: string): string {
  for (let folder = start; ; folder = dirname(folder)) {
    if (existsSync(join(folder, "proto", "time.proto"))) return join(folder, "proto");
    if (dirname(folder) === folder) throw new Error(`proto/time.proto not found above ${start}`);
  }
}

/**
 * The folder of the .proto files (the source of truth of the gRPC wire): the nearest `proto/` holding time.proto
 * above this module, so it is found from the TypeScript sources and from a build output alike.
 */
export const PROTO_DIR = findProtoDir(__dirname);
export const TIME_PROTO_PATH = join(PROTO_DIR, "time.proto");
export const HEALTH_PROTO_PATH = join(PROTO_DIR, "health.proto");
export const TIME_SERVICE_NAME = "ats.v1.TimeRPC";

/** Loader options shared by the server and the client library. */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

// ------------------------------------------------------------------ message shapes (as proto-loader yields them)

/**
 * RequestType names in wire order (index = enum number, as the service description fixes them): CURRENT_TIME = 0
 * is also what a request without `type` asks for.
 */
export const REQUEST_TYPES = ["CURRENT_TIME", "HISTORICAL_PROOF", "FUTURE_SCHEDULE"] as const;
export type RequestTypeName = (typeof REQUEST_TYPES)[number];

export interface TimeRequestMessage {
  request_id: string;
  /**
   * uint64 as a decimal string (longs: String), "0" when absent; a client may send a decimal string or a number.
   * Signed in this decimal form; required non-zero when a signature is checked (auth.ts).
   */
  nonce: string;
  /** Enum name (CURRENT_TIME when absent); an unknown wire value arrives as its number. */
  type: RequestTypeName | number;
  at_ns: string;
  client_signature: Buffer;
  client_id: string;
  issued_at_ms: string;
}

export interface ProofMessage {
  hardware_signature: Buffer;
  node_signature: Buffer;
  accuracy_ns: number;
  hardware_id: Buffer;
  /** null / absent: no GPS reference. */
  gps: GpsReferenceMessage | null;
}

/** Proof.gps (docs/protocol.md §9.1). */
export interface GpsReferenceMessage {
  fix_state: string;
  satellites: number;
  pps_offset_ns: number;
  observed_at_ns: string;
}

/** TimeResponse.node: the answering node, from service.info(). */
export interface NodeInfoMessage {
  /** EIP-55 address of the node key. */
  node_id: string;
  /** The node's card id, 32 bytes. */
  card_id: Buffer;
  /** Package version. */
  version: string;
  /** "ATS/1". */
  protocol: string;
}

/** TimeResponse.consensus. */
export interface ConsensusProofMessage {
  /** Entries in proof.node_signature. */
  responders: number;
  /** The node's nodeQuorum setting. */
  quorum: number;
  /** EIP-55 signer addresses of those entries, in proof order (ascending). */
  node_ids: string[];
  /** The round (docs/protocol.md §7), from a mesh node; 0 / "" / [] from a lone node. */
  members: number;
  threshold: number;
  time_ns: string;
  deviation_ns: string;
  window_ns: string;
  readings: ConsensusReadingMessage[];
  excluded: ExcludedReadingMessage[];
}

/** ConsensusProof.readings. */
export interface ConsensusReadingMessage {
  node_id: string;
  reading_ns: string;
  uncertainty_ns: string;
  deviation_ns: string;
  /** "" when the member did not co-sign. */
  node_timestamp_ns: string;
}

/** ConsensusProof.excluded. */
export interface ExcludedReadingMessage {
  node_id: string;
  deviation_ns: string;
}

export interface TimeResponseMessage {
  request_id: string;
  nano_moment: string;
  proof: ProofMessage;
  consensus: ConsensusProofMessage;
  node: NodeInfoMessage;
}

export interface StreamRequestMessage {
  request_id: string;
  /** uint64 as a decimal string (longs: String). */
  interval_ns: string;
}

export interface VerifyRequestMessage {
  nano_moment: string;
  proof: ProofMessage | null;
  certificate_chain_pem: string[];
}

export interface VerifyResponseMessage {
  valid: boolean;
  reason: string;
  detail: string;
}

export interface ScheduleRequestMessage {
  execute_at_ns: string;
  callback_url: string;
}

export interface ScheduleResponseMessage {
  id: string;
  status: string;
  execute_at_ns: string;
  callback_url: string;
}

export interface HealthCheckRequestMessage {
  service: string;
}

export type ServingStatus = "UNKNOWN" | "SERVING" | "NOT_SERVING" | "SERVICE_UNKNOWN";

export interface HealthCheckResponseMessage {
  status: ServingStatus;
}

/**
 * A message's field names, checked by the compiler against its interface both ways (none missing, none extra).
 * The interfaces above are written by hand (proto-loader yields untyped objects); these lists pin them to
 * proto/time.proto: test/wire/grpc.test.ts compares each list with the fields protobufjs reads from the file.
 */
function fieldsOf<T>() {
  return <const K extends readonly (keyof T & string)[]>(keys: K & ([keyof T] extends [K[number]] ? unknown : "a field is missing")) => keys;
}

/** Proto message name → the fields its interface declares. */
export const MESSAGE_FIELDS = {
  TimeRequest: fieldsOf<TimeRequestMessage>()(["request_id", "nonce", "type", "at_ns", "client_signature", "client_id", "issued_at_ms"]),
  Proof: fieldsOf<ProofMessage>()(["hardware_signature", "node_signature", "accuracy_ns", "hardware_id", "gps"]),
  GpsReference: fieldsOf<GpsReferenceMessage>()(["fix_state", "satellites", "pps_offset_ns", "observed_at_ns"]),
  NodeInfo: fieldsOf<NodeInfoMessage>()(["node_id", "card_id", "version", "protocol"]),
  ConsensusProof: fieldsOf<ConsensusProofMessage>()(["responders", "quorum", "node_ids", "members", "threshold", "time_ns", "deviation_ns", "window_ns", "readings", "excluded"]),
  ConsensusReading: fieldsOf<ConsensusReadingMessage>()(["node_id", "reading_ns", "uncertainty_ns", "deviation_ns", "node_timestamp_ns"]),
  ExcludedReading: fieldsOf<ExcludedReadingMessage>()(["node_id", "deviation_ns"]),
  TimeResponse: fieldsOf<TimeResponseMessage>()(["request_id", "nano_moment", "proof", "consensus", "node"]),
  StreamRequest: fieldsOf<StreamRequestMessage>()(["request_id", "interval_ns"]),
  VerifyRequest: fieldsOf<VerifyRequestMessage>()(["nano_moment", "proof", "certificate_chain_pem"]),
  VerifyResponse: fieldsOf<VerifyResponseMessage>()(["valid", "reason", "detail"]),
  ScheduleRequest: fieldsOf<ScheduleRequestMessage>()(["execute_at_ns", "callback_url"]),
  ScheduleResponse: fieldsOf<ScheduleResponseMessage>()(["id", "status", "execute_at_ns", "callback_url"]),
} as const;

export interface LoadedProtos {
  timeService: grpc.ServiceDefinition;
  healthService: grpc.ServiceDefinition;
  timeClient: grpc.ServiceClientConstructor;
  healthClient: grpc.ServiceClientConstructor;
}

let loaded: LoadedProtos | undefined;

/** Loads both proto files once per process. */
export function loadProtos(): LoadedProtos {
  if (loaded === undefined) {
    const definition = protoLoader.loadSync([TIME_PROTO_PATH, HEALTH_PROTO_PATH], PROTO_LOADER_OPTIONS);
    const root = grpc.loadPackageDefinition(definition) as unknown as {
      ats: { v1: { TimeRPC: grpc.ServiceClientConstructor } };
      grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
    };
    loaded = {
      timeService: root.ats.v1.TimeRPC.service,
      healthService: root.grpc.health.v1.Health.service,
      timeClient: root.ats.v1.TimeRPC,
      healthClient: root.grpc.health.v1.Health,
    };
  }
  return loaded;
}
