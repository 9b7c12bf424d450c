/**
 * The temporal gateway's settings (lib/settings.ts): TEMPORAL_GATEWAY_SETTINGS, the `rpc*` settings a node with
 * `rpcUpstreamUrl` runs its in-process gateway on (spread into node/config.ts, so the table stays the one source),
 * and the table of `ats-gateway`, the gateway as a program of its own: those, plus the attesting nodes it reads
 * consensus time from, its interface, data folder and logging.
 */
import { CORS_ORIGIN_PATTERN, corsOriginProblems } from "../lib/cors";
import { BASE_SETTINGS, defineSettings, setting, type LoadSettingsOptions, type SettingDescription, type SettingFailure, type SettingValues } from "../lib/settings";
import type { PublishedLimits } from "./methods";

const MAX_PORT = 65_535;
const HTTP_URL_PATTERN = /^https?:\/\/[^\s]{1,2040}$/;

export const TEMPORAL_GATEWAY_SETTINGS = {
  rpcUpstreamUrl: setting({
    kind: "string",
    env: "ATS_RPC_UPSTREAM_URL",
    description: "The EVM chain JSON-RPC the temporal gateway fronts (docs/protocol.md §9.5). Empty (default): no gateway.",
    default: "",
    pattern: /^(https?:\/\/[^\s]{1,2040})?$/,
    patternHint: "an http(s) URL",
    secret: false,
  }),
  rpcPort: setting({
    kind: "integer",
    env: "ATS_RPC_PORT",
    description: "Port of the temporal JSON-RPC gateway, on `host`; 0 picks a free port.",
    default: 8547,
    min: 0,
    max: MAX_PORT,
    secret: false,
  }),
  rpcChainName: setting({
    kind: "string",
    env: "ATS_RPC_CHAIN_NAME",
    description: "What system_chain answers (the chain's name).",
    default: "evm",
    pattern: /^[A-Za-z0-9 ._-]{1,64}$/,
    patternHint: "letters, digits, space, . _ -",
    secret: false,
  }),
  rpcConfirmations: setting({
    kind: "integer",
    env: "ATS_RPC_CONFIRMATIONS",
    description: "Blocks on top of a block before the gateway calls it final (chain_getFinalizedHead, temporal_getBlockTransactionTimestamps).",
    default: 1,
    min: 0,
    max: 1_000,
    secret: false,
  }),
  rpcLegacyNumbers: setting({
    kind: "boolean",
    env: "ATS_RPC_LEGACY_NUMBERS",
    description: "Legacy mode: temporal_getWatermarkInfo and temporal_getBlockMetadata give ns as bare JSON integers (above 2^53 too), as older nodes do. Off: decimal strings.",
    default: false,
    secret: false,
  }),
  rpcMaxBodyBytes: setting({
    kind: "integer",
    env: "ATS_RPC_MAX_BODY_BYTES",
    description: "Largest JSON-RPC request body, bytes (HTTP 413 beyond); room for a full batch of about 1 KiB items.",
    default: 1_048_576,
    min: 1_024,
    max: 16_777_216,
    secret: false,
  }),
  rpcMaxBatchItems: setting({
    kind: "integer",
    env: "ATS_RPC_MAX_BATCH_ITEMS",
    description:
      "Most items in one JSON-RPC batch; a longer batch is refused whole with one -32600 error. 1,000 as geth, and what viem's http({ batch: true }) sends at most.",
    default: 1_000,
    min: 1,
    max: 10_000,
    secret: false,
  }),
  rpcMaxBatchMs: setting({
    kind: "integer",
    env: "ATS_RPC_MAX_BATCH_MS",
    description: "Time budget of one JSON-RPC batch, ms: an item not answered by then gets -32002 (Request timed out) with its id, the others their answers.",
    default: 10_000,
    min: 100,
    max: 120_000,
    secret: false,
  }),
  rpcMaxResponseBytes: setting({
    kind: "integer",
    env: "ATS_RPC_MAX_RESPONSE_BYTES",
    description: "Largest answer of one item, and of a batch as a whole, bytes; an item beyond it gets -32006 (Response too large).",
    default: 4_194_304,
    min: 1_024,
    max: 67_108_864,
    secret: false,
  }),
  rpcRequestsPerSecond: setting({
    kind: "integer",
    env: "ATS_RPC_REQUESTS_PER_SECOND",
    description:
      "JSON-RPC calls per second per client address (a batch item counts as one, an invalid one too; a client may spend a second's worth at once, so one full batch of rpcMaxBatchItems fits); beyond, -32005 (Rate limit exceeded). 0: no limit.",
    default: 1_000,
    min: 0,
    max: 1_000_000,
    secret: false,
  }),
  rpcMaxConnections: setting({
    kind: "integer",
    env: "ATS_RPC_MAX_CONNECTIONS",
    description: "Most open connections to the gateway.",
    default: 1_024,
    min: 1,
    max: 65_536,
    secret: false,
  }),
  rpcCorsAllowedOrigins: setting({
    kind: "list",
    env: "ATS_RPC_CORS_ALLOWED_ORIGINS",
    description:
      "Web origins whose pages may call the gateway over HTTP from another site (CORS, lib/cors.ts): each an origin exactly as browsers send it, or '*' alone. Every answer carries Vary: Origin and, for a listed origin, Access-Control-Allow-Origin; a preflight (OPTIONS) admits POST with a content-type header; credentials are never allowed. Empty (default): none, so browsers keep other sites' pages from reading the gateway (the time explorer of docs/explorer.md lists its origin here).",
    default: [],
    max: 100,
    pattern: CORS_ORIGIN_PATTERN,
    patternHint: "an origin such as https://explorer.example.org or http://127.0.0.1:8080, or '*'",
    secret: false,
  }),
} as const;

/** The rules of the gateway's settings that one setting's bounds cannot say; both tables apply them. */
export function checkTemporalGatewaySettings(values: Pick<TemporalGatewaySettings, "rpcCorsAllowedOrigins">, fail: SettingFailure): void {
  for (const problem of corsOriginProblems(values.rpcCorsAllowedOrigins)) fail("rpcCorsAllowedOrigins", problem.message, problem.value);
}

/** `ats-gateway`'s table: where its time comes from, where it listens and stores, then the gateway's own settings. */
export const GATEWAY_PROGRAM_SETTINGS = {
  nodeUrls: setting({
    kind: "list",
    env: "ATS_GATEWAY_NODE_URLS",
    description:
      "REST base URLs of the attesting nodes whose consensus time the gateway serves (GET /mesh/state), in order of preference: it reads the first that answers and moves on when one stops. The gateway applies a node's consensus offset to this host's clock, so it runs beside its nodes (or on a host whose clock follows theirs). Required.",
    default: [],
    max: 32,
    pattern: HTTP_URL_PATTERN,
    patternHint: "an http(s) URL",
    secret: false,
  }),
  nodeApiKey: setting({
    kind: "string",
    env: "ATS_GATEWAY_NODE_API_KEY",
    description: "API key sent to the nodes (empty: none).",
    default: "",
    secret: true,
  }),
  nodePollIntervalMs: setting({
    kind: "integer",
    env: "ATS_GATEWAY_NODE_POLL_INTERVAL_MS",
    description: "How often the nodes' mesh state (and with it the consensus offset) is read, ms.",
    default: 500,
    min: 50,
    max: 60_000,
    secret: false,
  }),
  nodeStaleAfterMs: setting({
    kind: "integer",
    env: "ATS_GATEWAY_NODE_STALE_AFTER_MS",
    description:
      "When no node has answered for this long, consensus time is unknown: temporal methods answer -32003 (Unavailable) and new blocks wait, rather than being stamped with an offset nobody vouches for, ms.",
    default: 5_000,
    min: 100,
    max: 600_000,
    secret: false,
  }),
  host: setting({
    kind: "string",
    env: "ATS_GATEWAY_HOST",
    description: "Interface the gateway listens on (rpcPort). Loopback by default.",
    default: "127.0.0.1",
    pattern: /^[0-9A-Za-z.:\-[\]]{1,255}$/,
    patternHint: "a host name or IP address",
    secret: false,
  }),
  dataDir: setting({
    kind: "path",
    env: "ATS_GATEWAY_DATA_DIR",
    description: "Folder of the gateway's SQLite store (transaction and block timestamps).",
    default: "./gateway-data",
    secret: false,
  }),
  chainPollIntervalMs: setting({
    kind: "integer",
    env: "ATS_GATEWAY_CHAIN_POLL_INTERVAL_MS",
    description: "How often the chain is read for new blocks, ms.",
    default: 500,
    min: 50,
    max: 60_000,
    secret: false,
  }),
  ...TEMPORAL_GATEWAY_SETTINGS,
  ...BASE_SETTINGS,
} as const;

const GATEWAY_SETTINGS = defineSettings(GATEWAY_PROGRAM_SETTINGS, {
  checkCrossFieldRules(values, fail) {
    if (values.rpcUpstreamUrl === "") fail("rpcUpstreamUrl", "is required (the EVM chain the gateway fronts)");
    if (values.nodeUrls.length === 0) fail("nodeUrls", "is required (the attesting nodes whose consensus time the gateway serves)");
    if (values.nodeStaleAfterMs <= values.nodePollIntervalMs) fail("nodeStaleAfterMs", `must exceed nodePollIntervalMs (${values.nodePollIntervalMs})`);
    checkTemporalGatewaySettings(values, fail);
  },
});

export type GatewayConfig = SettingValues<typeof GATEWAY_PROGRAM_SETTINGS>;
/** The settings both the node's in-process gateway and `ats-gateway` have. */
export type TemporalGatewaySettings = SettingValues<typeof TEMPORAL_GATEWAY_SETTINGS>;

export function loadGatewayConfig(options: LoadSettingsOptions = {}): GatewayConfig {
  return GATEWAY_SETTINGS.load(options);
}

export function describeGatewaySettings(): SettingDescription[] {
  return GATEWAY_SETTINGS.describe();
}

export function redactedGatewayConfig(config: GatewayConfig): Record<string, unknown> {
  return GATEWAY_SETTINGS.redact(config);
}

/** The limits `temporal_getLimits` publishes, from the settings. */
export function publishedLimits(settings: Pick<TemporalGatewaySettings, "rpcMaxBodyBytes" | "rpcMaxBatchItems" | "rpcMaxBatchMs" | "rpcMaxResponseBytes" | "rpcRequestsPerSecond" | "rpcMaxConnections">): PublishedLimits {
  return {
    maxBodyBytes: settings.rpcMaxBodyBytes,
    maxBatchItems: settings.rpcMaxBatchItems,
    maxBatchMs: settings.rpcMaxBatchMs,
    maxResponseBytes: settings.rpcMaxResponseBytes,
    requestsPerSecondPerClient: settings.rpcRequestsPerSecond,
    maxConnections: settings.rpcMaxConnections,
  };
}
