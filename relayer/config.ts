/**
 * The relayer's settings: one table (lib/settings.ts), as the node has. The chains and nodes it serves come from
 * the network file (wire/network.ts) that `networkFile` names; the signer key from the environment or an
 * encrypted keystore, never from the file and never logged.
 */
import { CORS_ORIGIN_PATTERN, corsOriginProblems } from "../lib/cors";
import { BASE_SETTINGS, defineSettings, setting, type LoadSettingsOptions, type SettingDescription, type SettingValues } from "../lib/settings";

const MAX_PORT = 65_535;

export const RELAYER_SETTINGS = {
  networkFile: setting({
    kind: "path",
    env: "ATS_RELAYER_NETWORK_FILE",
    description: "The network file (wire/network.ts): chains (RPC URL, chain id, contracts, confirmations) and attesting node URLs. Required.",
    default: "",
    secret: false,
  }),
  dataDir: setting({
    kind: "path",
    env: "ATS_RELAYER_DATA_DIR",
    description: "Folder of the relayer's SQLite database (relayer.db): items, transactions, nonces, scan cursors.",
    default: "./relayer-data",
    secret: false,
  }),
  signerPrivateKey: setting({
    kind: "string",
    env: "ATS_RELAYER_PRIVATE_KEY",
    description: "The signer's secp256k1 private key (0x + 64 hex). Give it in the environment; or use signerKeystoreFile.",
    default: "",
    pattern: /^(0x[0-9a-fA-F]{64})?$/,
    patternHint: "0x followed by 64 hex digits",
    secret: true,
  }),
  signerKeystoreFile: setting({
    kind: "path",
    env: "ATS_RELAYER_KEYSTORE_FILE",
    description: "An Ethereum V3 keystore (scrypt + aes-128-ctr) holding the signer key, decrypted with signerKeystorePassword.",
    default: "",
    secret: false,
  }),
  signerKeystorePassword: setting({
    kind: "string",
    env: "ATS_RELAYER_KEYSTORE_PASSWORD",
    description: "Password of signerKeystoreFile.",
    default: "",
    secret: true,
  }),
  nodeApiKey: setting({
    kind: "string",
    env: "ATS_RELAYER_NODE_API_KEY",
    description: "API key sent to the attesting nodes (empty: none).",
    default: "",
    secret: true,
  }),
  apiHost: setting({
    kind: "string",
    env: "ATS_RELAYER_API_HOST",
    description: "Interface of the operator API (items, retry, skip, /metrics, /health). Loopback by default.",
    default: "127.0.0.1",
    pattern: /^[0-9A-Za-z.:\-[\]]{1,255}$/,
    patternHint: "a host name or IP address",
    secret: false,
  }),
  apiPort: setting({
    kind: "integer",
    env: "ATS_RELAYER_API_PORT",
    description: "Port of the operator API; 0 picks a free port (printed at start).",
    default: 8090,
    min: 0,
    max: MAX_PORT,
    secret: false,
  }),
  apiKeys: setting({
    kind: "apiKeyList",
    env: "ATS_RELAYER_API_KEYS",
    description: "Keys that may retry or skip items through the operator API (header x-api-key). Empty: those routes are refused (403).",
    default: [],
    max: 64,
    secret: true,
  }),
  apiCorsAllowedOrigins: setting({
    kind: "list",
    env: "ATS_RELAYER_API_CORS_ALLOWED_ORIGINS",
    description:
      "Web origins whose pages may read the operator API's read-only routes (GET /health, /items, /items/<id>) from another site (CORS; lib/cors.ts): each an origin exactly as browsers send it, or '*' alone. Answers carry Vary: Origin, credentials are never allowed; the actions (retry, skip, push) and /metrics never get CORS headers. Empty (default): none (the time explorer of docs/explorer.md lists its origin here).",
    default: [],
    max: 100,
    pattern: CORS_ORIGIN_PATTERN,
    patternHint: "an origin such as https://explorer.example.org or http://127.0.0.1:8080, or '*'",
    secret: false,
  }),
  pollIntervalMs: setting({
    kind: "integer",
    env: "ATS_RELAYER_POLL_INTERVAL_MS",
    description: "How often each chain's head is read and new events indexed, ms.",
    default: 500,
    min: 50,
    max: 60_000,
    secret: false,
  }),
  rpcTimeoutMs: setting({
    kind: "integer",
    env: "ATS_RELAYER_RPC_TIMEOUT_MS",
    description: "A chain RPC request without an answer after this long fails (and is retried by the next tick), ms.",
    default: 10_000,
    min: 100,
    max: 120_000,
    secret: false,
  }),
  maxLogRange: setting({
    kind: "integer",
    env: "ATS_RELAYER_MAX_LOG_RANGE",
    description: "Most blocks one eth_getLogs request covers (RPC providers cap it).",
    default: 1_000,
    min: 1,
    max: 100_000,
    secret: false,
  }),
  pushHeartbeatMs: setting({
    kind: "integer",
    env: "ATS_RELAYER_PUSH_HEARTBEAT_MS",
    description: "The proof pusher submits a fresh proof to an oracle whose stored proof is older than this, ms. 0 turns the pusher off.",
    default: 30_000,
    min: 0,
    max: 86_400_000,
    secret: false,
  }),
  keeperEnabled: setting({
    kind: "boolean",
    env: "ATS_RELAYER_KEEPER",
    description: "Execute (and expire) scheduled calls on every chain with a scheduler.",
    default: true,
    secret: false,
  }),
  bridgeEnabled: setting({
    kind: "boolean",
    env: "ATS_RELAYER_BRIDGE",
    description: "Carry time messages between the bridges of the listed chains.",
    default: true,
    secret: false,
  }),
  guardianEnabled: setting({
    kind: "boolean",
    env: "ATS_RELAYER_GUARDIAN",
    description: "The guardian: revoke on every chain, once, a card whose node signed a tamper alert (read from the nodes' GET /mesh/state). The signer must hold GUARDIAN_ROLE on every oracle.",
    default: false,
    secret: false,
  }),
  retryBaseMs: setting({
    kind: "integer",
    env: "ATS_RELAYER_RETRY_BASE_MS",
    description: "First retry delay after a failure, ms; doubled per attempt up to retryMaxMs.",
    default: 1_000,
    min: 10,
    max: 3_600_000,
    secret: false,
  }),
  retryMaxMs: setting({
    kind: "integer",
    env: "ATS_RELAYER_RETRY_MAX_MS",
    description: "Longest retry delay, ms.",
    default: 300_000,
    min: 10,
    max: 86_400_000,
    secret: false,
  }),
  deterministicRevertLimit: setting({
    kind: "integer",
    env: "ATS_RELAYER_DETERMINISTIC_REVERT_LIMIT",
    description: "An item whose simulation reverts with the same error this many times in a row goes to dead-letter.",
    default: 3,
    min: 1,
    max: 100,
    secret: false,
  }),
  feeBumpAfterMs: setting({
    kind: "integer",
    env: "ATS_RELAYER_FEE_BUMP_AFTER_MS",
    description: "A broadcast transaction not mined after this long is replaced at the same nonce with 25 % higher fees, ms.",
    default: 15_000,
    min: 100,
    max: 3_600_000,
    secret: false,
  }),
  maxFeePerGasWei: setting({
    kind: "string",
    env: "ATS_RELAYER_MAX_FEE_PER_GAS_WEI",
    description: "Cap on maxFeePerGas, wei (decimal); a transaction needing more waits.",
    default: "500000000000",
    pattern: /^[1-9][0-9]{0,30}$/,
    patternHint: "a positive decimal integer",
    secret: false,
  }),
  ...BASE_SETTINGS,
} as const;

const SETTINGS = defineSettings(RELAYER_SETTINGS, {
  checkCrossFieldRules(values, fail) {
    if (values.networkFile === "") fail("networkFile", "is required (the chains and nodes the relayer serves)");
    const hasKey = values.signerPrivateKey !== "";
    const hasKeystore = values.signerKeystoreFile !== "";
    if (hasKey === hasKeystore) fail("signerPrivateKey", "give exactly one of signerPrivateKey and signerKeystoreFile");
    if (hasKeystore && values.signerKeystorePassword === "") fail("signerKeystorePassword", "is required with signerKeystoreFile (the keystore must be encrypted)");
    if (values.retryBaseMs > values.retryMaxMs) fail("retryBaseMs", `must not exceed retryMaxMs (${values.retryMaxMs})`);
    for (const problem of corsOriginProblems(values.apiCorsAllowedOrigins)) fail("apiCorsAllowedOrigins", problem.message, problem.value);
  },
});

export type RelayerConfig = SettingValues<typeof RELAYER_SETTINGS>;

export function loadRelayerConfig(options: LoadSettingsOptions = {}): RelayerConfig {
  return SETTINGS.load(options);
}

export function describeRelayerSettings(): SettingDescription[] {
  return SETTINGS.describe();
}

export function redactedRelayerConfig(config: RelayerConfig): Record<string, unknown> {
  return SETTINGS.redact(config);
}
