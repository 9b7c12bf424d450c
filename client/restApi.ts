/**
 * The REST calls the Node client (client/index.ts) and the browser client (client/browser.ts) both make, over a
 * RestCaller: the current proof (parsed strictly, client/fetched.ts), the node's verification of a proof, and the
 * node's info (checked against its schema).
 */
import type { TimeProof } from "../protocol/types";
import type { NodeInfoBody, VerifyBody } from "../wire/rest";
import { toFetched } from "./fetched";
import { nodeInfoFromJson, type RestCaller } from "./restCaller";
import type { FetchedProof, VerifyResult } from "./types";

export interface RestReads {
  /** GET /time/current. */
  getCurrentTime(): Promise<FetchedProof>;
  /** POST /time/verify; with a certificate chain the node can check a card it does not know. */
  verifyRemote(proof: TimeProof, options?: { certificateChainPem?: readonly string[] }): Promise<VerifyResult>;
  /** GET /node/info. */
  info(): Promise<NodeInfoBody>;
}

/** The body of POST /time/verify for `proof` (docs/protocol.md §9.2). */
function verifyBodyOf(proof: TimeProof, certificateChainPem: readonly string[] | undefined): VerifyBody {
  const body: VerifyBody = {
    nanoMoment: proof.nanoMoment.toString(),
    proof: { hardwareSignature: proof.hardwareSignature, nodeSignature: proof.nodeSignature, accuracyNs: proof.accuracy },
  };
  if (certificateChainPem !== undefined) body.certificateChainPem = [...certificateChainPem];
  return body;
}

export function createRestReads(rest: RestCaller): RestReads {
  return {
    async getCurrentTime() {
      const { value } = await rest.request("GET", "/time/current");
      return toFetched(value);
    },
    async verifyRemote(proof, options = {}) {
      const { value } = await rest.request("POST", "/time/verify", verifyBodyOf(proof, options.certificateChainPem));
      return value as VerifyResult;
    },
    async info() {
      const { value } = await rest.request("GET", "/node/info");
      return nodeInfoFromJson(value);
    },
  };
}
