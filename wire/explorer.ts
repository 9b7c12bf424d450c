/**
 * The time explorer's configuration (explorer/, docs/explorer.md): the public endpoints its page reads, served
 * beside its bundle as `config.json` (catalog/explorer.ts derives it from the local network's network.json). No
 * secrets: only URLs a browser may read, and the path of the server's proof inspector.
 */

export interface ExplorerConfig {
  /** The chain the gateway fronts (its name and EVM chain id). */
  chain: { name: string; chainId: number };
  /** The temporal JSON-RPC gateway (docs/protocol.md §9.5): blocks, transactions, the finalized head. */
  gateway: string;
  /** REST bases of the attesting nodes: /node/info, /mesh/state, /time/current. */
  nodes: string[];
  /** The relayer's operator API (its read-only routes: /health, /items); null when none runs. */
  relayer: string | null;
  /** Where the page POSTs a proof for `explainTimeProof` (relative to the page). */
  explain: string;
}

/** One rule of docs/protocol.md §6.2 as the inspector shows it. */
export interface RuleVerdict {
  /** Its number in the §6.2 table (0, 1a … 4). */
  rule: string;
  condition: string;
  /** The verifier's reason when it fails (protocol/verify.ts VerifyFailureReason). */
  reason: string;
  /** The verifier stops at the first failing rule: the ones after it are not reached. */
  status: "pass" | "fail" | "not reached";
}

/** The explorer server's answer for a pasted proof: explainTimeProof's, ns as decimal strings, and every rule. */
export interface ExplainAnswer {
  valid: boolean;
  reason: string | null;
  detail: string;
  onChainValid: boolean;
  hint: string | null;
  rules: RuleVerdict[];
  evidence: {
    chainNowNs: string;
    nanoMoment: string;
    ageNs: string;
    maxAttestationAgeNs: string;
    maxFutureDriftNs: string;
    accuracyNs: number;
    maxAcceptableDriftNs: string;
    nodeQuorum: number;
    cardId: string | null;
    cardStatus: string | null;
    entries: { index: number; recovered: string | null; registered: boolean; active: boolean }[];
    registeredNodes: number;
  };
}
