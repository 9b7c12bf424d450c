/**
 * Client library for dApps and relayers: `createTimeClient({ endpoint, apiKey })`.
 *
 * Detail: docs/client.md.
 */
import { verifyTimeProof } from "../protocol/verify";
import { createGrpcClient } from "./grpc";
import { createRestCaller, DEFAULT_TIMEOUT_MS, restBaseOf } from "./rest";
import { createRestReads } from "./restApi";
import { retryPolicyOf } from "./retry";
import { streamUrlOf } from "./streamSession";
import type { ScheduleRecordBody } from "../wire/rest";
import type { ScheduleCreated, TimeClient, TimeClientOptions } from "./types";
import { openStream } from "./ws";

/*
 * - REST (`getCurrentTime`, `verifyRemote`, `schedule`, `getSchedule`, `info`): fetch with a per-attempt timeout
 *   (AbortSignal.timeout) and retries with exponential backoff and full jitter on retryable failures only
 *   (network errors, timeouts, 429 and 5xx; never other 4xx). Bodies are parsed losslessly and proofs strictly
 *   (protocol/json.ts), so a proof arrives exactly as the node signed it.
 * - `verify(proof, { context })`: local verification with protocol/verify.ts (the same rules as the contract);
 *   without a context it asks the node (`POST /time/verify`).
 * - `stream({ intervalNs, onUpdate })`: WebSocket subscription (`/v1/stream`).
 * - `grpc.getCurrentTime()` etc. over @grpc/grpc-js when `grpcEndpoint` is given.
 * - Several nodes: `createClusterClient({ endpoints })` (client/cluster.ts) picks a node per request by the score of
 *   docs/protocol.md §8 (client/selection.ts) and fails over to the others.
 * - TLS: an https:// endpoint means HTTPS and WSS; `tls` (or an https:// endpoint) means gRPC over TLS. `tls.ca`
 *   trusts a private CA or a self-signed node certificate instead of the system roots, on all three transports
 *   (REST then goes through node:https, since the global fetch takes no per-request CA).
 * Split per transport: client/rest.ts, client/ws.ts, client/grpc.ts, client/retry.ts (over the browser-safe
 * client/restCaller.ts, client/restApi.ts and client/streamSession.ts it shares with client/browser.ts); it imports wire/ and
 * protocol/ only, never the node (docs/architecture.md), so a dApp or relayer does not load the server.
 * Errors are the classes of protocol/errors.ts (ValidationError, AuthError, NotFoundError, RateLimitError,
 * UnavailableError, AtsError "INTERNAL").
 */
export type * from "./types";
export { createClusterClient } from "./cluster";
export { explainConsumerProof, explainTimeProof, ruleVerdicts, TIME_PROOF_RULES, type ConsumerRefusal, type ExplainedConsumerProof, type ExplainedEntry, type ExplainedProof } from "./explain";
export { assertHash, createTemporalClient, parseLossless, type BlockTransactionTimestamp, type ConsensusTimeResult, type ConsensusTimeState, type FinalizedBlock, type TemporalClient, type TemporalClientOptions } from "./temporal";
export { hardwareAccuracyOf, nodeScore, scoreInputsOf, selectionOrder, RECENT_ANSWERS, SELECTION_POOL, type NodeObservations, type NodeScoreInputs } from "./selection";
export { consensusFromMessage, nodeInfoFromMessage, proofJsonFromMessage } from "./grpc";
/** The REST JSON of a proof as the contracts' TimeProof struct (also exported by the browser entry, client/browser.ts). */
export { contractProofFromJson } from "./contractProof";
/** The text a registered gRPC client signs (EIP-191) for `GrpcTimeRequestOptions.clientSignature`. */
export { clientRequestMessage } from "../wire/auth";

export function createTimeClient(options: TimeClientOptions): TimeClient {
  const base = restBaseOf(options.endpoint);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const retry = retryPolicyOf(options);
  const ca = options.tls?.ca;
  const rest = createRestCaller({ base, apiKey: options.apiKey, timeoutMs, retry, ca });
  const grpc = createGrpcClient({
    grpcEndpoint: options.grpcEndpoint,
    apiKey: options.apiKey,
    timeoutMs,
    retry,
    tls: options.tls !== undefined || base.startsWith("https:"),
    ca,
  });
  const wsEndpoint = options.wsEndpoint ?? streamUrlOf(base);
  const reads = createRestReads(rest);

  return {
    getCurrentTime: reads.getCurrentTime,
    async verify(proof, verifyOptions = {}) {
      if (verifyOptions.context !== undefined) {
        const outcome = verifyTimeProof(proof, verifyOptions.context);
        return outcome.valid ? { valid: true, reason: null } : { valid: false, reason: outcome.reason, detail: outcome.detail };
      }
      return reads.verifyRemote(proof);
    },
    verifyRemote: reads.verifyRemote,
    async schedule(executeAtNs, callbackUrl) {
      const body = { executeAt: executeAtNs.toString(), callback: callbackUrl };
      const { value } = await rest.request("POST", "/time/schedule", body, false);
      return value as ScheduleCreated;
    },
    async getSchedule(id) {
      const { value } = await rest.request("GET", `/time/schedule/${encodeURIComponent(id)}`);
      return value as ScheduleRecordBody;
    },
    info: reads.info,
    stream: (streamOptions) => openStream({ wsEndpoint, apiKey: options.apiKey, timeoutMs, ca }, streamOptions),
    grpc,
    close() {
      grpc.close();
      rest.close();
    },
  };
}
