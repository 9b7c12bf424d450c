/**
 * What a client and a node agree on to authenticate a request (docs/protocol.md §9.6): the API key's header name
 * (REST, WebSocket upgrade, gRPC metadata) and the exact text a registered gRPC client signs. Shared by the node
 * (node/api/auth.ts checks) and the client library (client/ sends), so neither imports the other.
 */

/** Header (REST, WebSocket upgrade) and metadata key (gRPC) carrying the API key. */
export const API_KEY_HEADER = "x-api-key";

export interface ClientRequestFields {
  requestId: string;
  /** Decimal form of TimeRequest.nonce (uint64), e.g. "42"; "0" (or "") means none. */
  nonce: string;
  /** RequestType enum name, e.g. "CURRENT_TIME". */
  type: string;
  /** Decimal ns or "". */
  atNs: string;
  clientId: string;
  /** When the client signed, ms since the Unix epoch, decimal. */
  issuedAtMs: string;
}

/** The exact text a client signs (EIP-191 personal_sign) for a gRPC TimeRequest. */
export function clientRequestMessage(fields: ClientRequestFields): string {
  return `ATS/1 REQ|${fields.requestId}|${fields.nonce}|${fields.type}|${fields.atNs}|${fields.clientId}|${fields.issuedAtMs}`;
}
