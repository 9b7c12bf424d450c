/**
 * The client library's options and results (createTimeClient in client/index.ts). Nanosecond values are bigint,
 * proofs the on-chain struct of protocol/types.ts.
 */
import type { ConsensusJson, Hex, ProofJson, TimeProof } from "../protocol/types";
import type { VerifyTimeProofContext } from "../protocol/verify";
import type { RequestTypeName } from "../wire/grpc";
import type { NodeInfoBody, ScheduleCreated, ScheduleRecordBody } from "../wire/rest";
import type { NodeScoreInputs } from "./selection";

export interface TimeClientOptions {
  /** REST base URL of the node, e.g. "http://127.0.0.1:8080". */
  endpoint: string;
  /** Sent as header / metadata `x-api-key`. */
  apiKey?: string;
  /** gRPC target "host:port"; gRPC calls throw without it. */
  grpcEndpoint?: string;
  /** WebSocket URL; defaults to the endpoint with ws(s):// and path /v1/stream. */
  wsEndpoint?: string;
  /**
   * For a node serving TLS (its `endpoints.tls`). gRPC uses TLS when this is set or `endpoint` is https://;
   * REST and WebSocket follow their URL's scheme.
   */
  tls?: TimeClientTlsOptions;
  /** Per-attempt timeout (default 5,000 ms). */
  timeoutMs?: number;
  /** Retries after the first attempt on retryable failures (default 2). */
  retries?: number;
  /** First backoff (default 100 ms); doubles per retry, full jitter, capped by backoffMaxMs (default 2,000 ms). */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

export interface TimeClientTlsOptions {
  /** PEM certificate(s) to trust for the node (a private CA or a self-signed node certificate); default: system roots. */
  ca?: string | Buffer;
}

export interface FetchedProof {
  /** The on-chain struct: pass it to `verifyTimeProof` unchanged. */
  proof: TimeProof;
  /** docs/protocol.md §9.1 JSON as received. */
  json: ProofJson;
  /** How a mesh node's proof was agreed (docs/protocol.md §7, §9.1), checked against its schema; absent from a lone node. */
  consensus?: ConsensusJson;
  cardId: Hex;
  /** Local clock when the answer arrived, ns since the Unix epoch (Date.now() resolution). */
  receivedAtNs: bigint;
}

export interface VerifyResult {
  valid: boolean;
  reason: string | null;
  detail?: string;
}

/** POST /time/schedule's answer (wire/rest.ts). */
export type { ScheduleCreated } from "../wire/rest";

export interface StreamUpdate {
  /** ns since the Unix epoch. */
  nanoMoment: bigint;
  accuracyNs: number;
  subscriptionId: string;
  /** Present when the subscription asked for proofs. */
  proof?: FetchedProof;
}

export interface StreamOptions {
  intervalNs: bigint | number;
  includeProof?: boolean;
  onUpdate(update: StreamUpdate): void;
  /** Server error messages and connection errors. */
  onError?(error: Error): void;
  /** The connection closed (code, reason), e.g. 1013 with the tamper reason. */
  onClose?(code: number, reason: string): void;
}

export interface TimeStream {
  /** Subscription id given by the node. */
  readonly id: string;
  close(): void;
}

export interface GrpcTimeRequestOptions {
  /** Default CURRENT_TIME (enum value 0, also what the node assumes when the field is absent). */
  type?: RequestTypeName;
  atNs?: bigint;
  requestId?: string;
  /**
   * TimeRequest.nonce, an unsigned 64-bit integer (ValidationError outside 0 .. 2^64 - 1). Signed in decimal form
   * (`clientRequestMessage({ nonce: nonce.toString(), ... })`); a signed request needs a non-zero nonce.
   */
  nonce?: bigint;
  clientId?: string;
  /** 65-byte EIP-191 signature over wire/auth.ts `clientRequestMessage(...)`. */
  clientSignature?: Uint8Array;
  /** The `issuedAtMs` that the signature covers (decimal ms since the Unix epoch). */
  issuedAtMs?: string;
}

/** TimeResponse.node: the node that answered. */
export interface GrpcNodeInfo {
  /** EIP-55 address of the node key. */
  nodeId: string;
  /** The node's card id (32 bytes). */
  cardId: Hex;
  /** The node software's version. */
  version: string;
  /** "ATS/1". */
  protocol: string;
}

/** TimeResponse.consensus: how the proof was agreed. */
export interface GrpcConsensusProof {
  /** Nodes whose entries are in the proof's nodeSignature. */
  responders: number;
  /** The answering node's quorum setting (entries it requires of a proof). */
  quorum: number;
  /** EIP-55 addresses of those nodes, in proof order (ascending). */
  nodeIds: string[];
  /** From a mesh node: the round that produced the proof (the REST `consensus` member's values). */
  round?: ConsensusJson;
}

export interface GrpcFetchedProof extends Omit<FetchedProof, "consensus"> {
  requestId: string;
  /** null only from a node that does not send the record (an older time.proto). */
  node: GrpcNodeInfo | null;
  consensus: GrpcConsensusProof | null;
}

export interface GrpcTimeClient {
  getCurrentTime(options?: GrpcTimeRequestOptions): Promise<GrpcFetchedProof>;
  verify(proof: TimeProof): Promise<VerifyResult>;
  close(): void;
}

export interface TimeClient {
  getCurrentTime(): Promise<FetchedProof>;
  /** Local verification when `context` is given, else the node's POST /time/verify. */
  verify(proof: TimeProof, options?: { context?: VerifyTimeProofContext }): Promise<VerifyResult>;
  /** The node's POST /time/verify; with a certificate chain the node can check a card it does not know. */
  verifyRemote(proof: TimeProof, options?: { certificateChainPem?: readonly string[] }): Promise<VerifyResult>;
  schedule(executeAtNs: bigint, callbackUrl: string): Promise<ScheduleCreated>;
  getSchedule(id: string): Promise<ScheduleRecordBody>;
  info(): Promise<NodeInfoBody>;
  stream(options: StreamOptions): Promise<TimeStream>;
  readonly grpc: GrpcTimeClient;
  close(): void;
}

/** createClusterClient's options (client/cluster.ts, docs/protocol.md §8); apiKey, tls and timeoutMs go to every node. */
export interface ClusterClientOptions extends Pick<TimeClientOptions, "apiKey" | "tls" | "timeoutMs"> {
  /** REST base URLs of the nodes: at least one, each once. No retries per node: failing over replaces them. */
  endpoints: readonly string[];
  /** A proof counts as accurate for recentAccuracyScore when its accuracyNs is at most this, ns (default 1,000,000). */
  requiredAccuracyNs?: number;
  /** How old node info (accuracy, load) may get before a request refreshes it, ms (default 10,000). */
  infoRefreshMs?: number;
  /** Random source of the pick, numbers in [0, 1) (tests inject a seeded one); default Math.random. */
  random?: () => number;
  /** Clock that ages the node info, ms (tests inject one to step past infoRefreshMs); default Date.now. */
  nowMs?: () => number;
}

/** What a cluster client knows of one node: the §8 inputs, the score they give, and the last failure. */
export interface ClusterNodeState {
  endpoint: string;
  inputs: NodeScoreInputs;
  score: number;
  /** Answers counted in recentAccuracyScore (at most 20). */
  answers: number;
  /** The node's last failure (a request or a node info refresh), null after a success. */
  lastError: string | null;
}

export interface ClusterFetchedProof extends FetchedProof {
  /** The node that answered. */
  endpoint: string;
}

export interface ClusterClient {
  /**
   * A proof from the picked node, or from the next ones, best first, when it fails retryably or answers a malformed
   * proof; each node at most once. UnavailableError when every node failed (cause: the last node's error; details:
   * every node's failure); another error answer (4xx other than 429) is thrown as it came.
   */
  getCurrentTime(): Promise<ClusterFetchedProof>;
  /** Each node's inputs and score now, in the order of `endpoints`. */
  nodes(): ClusterNodeState[];
  /** Reads every node's info now (requests also do it when it is older than infoRefreshMs). */
  refreshInfo(): Promise<void>;
  close(): void;
}
