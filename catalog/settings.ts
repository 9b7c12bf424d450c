/**
 * The catalog's settings: one table (lib/settings.ts), as every program has. Each of its services is on when its
 * source is set: downloads with `releasesDir`, evidence with `contentDir` (always; `evidenceNodeUrls` adds the
 * mesh's evidence), the faucet with `faucetRpcUrl` and `faucetPrivateKey`, the time explorer with
 * `explorerNetworkFile`.
 */
import { BASE_SETTINGS, defineSettings, setting, type LoadSettingsOptions, type SettingDescription, type SettingValues } from "../lib/settings";

const HOST = { pattern: /^[0-9A-Za-z.:\-[\]]{1,255}$/, patternHint: "a host name or IP address" } as const;

export const CATALOG_SETTINGS = {
  host: setting({ kind: "string", env: "ATS_CATALOG_HOST", description: "Interface the catalog listens on. Loopback by default.", default: "127.0.0.1", ...HOST, secret: false }),
  port: setting({ kind: "integer", env: "ATS_CATALOG_PORT", description: "Port of the catalog; 0 picks a free port (printed at start).", default: 8095, min: 0, max: 65_535, secret: false }),
  releasesDir: setting({
    kind: "path",
    env: "ATS_CATALOG_RELEASES_DIR",
    description: "Folder of release folders as `npm run release` writes them (.ats/releases). Empty: no downloads service.",
    default: "",
    secret: false,
  }),
  contentDir: setting({
    kind: "path",
    env: "ATS_CATALOG_CONTENT_DIR",
    description: "The evidence gateway's content store: one read-only file per content identifier.",
    default: "./catalog-data/content",
    secret: false,
  }),
  maxContentBytes: setting({
    kind: "integer",
    env: "ATS_CATALOG_MAX_CONTENT_BYTES",
    description: "Largest content the store keeps, bytes (a larger release file is served by the downloads service only).",
    default: 256 * 1024 * 1024,
    min: 1024,
    max: 4 * 1024 * 1024 * 1024,
    secret: false,
  }),
  evidenceNodeUrls: setting({
    kind: "list",
    env: "ATS_CATALOG_EVIDENCE_NODE_URLS",
    description: "Nodes (REST base URLs) whose contradiction evidence (GET /mesh/state) is published into the store.",
    default: [],
    max: 32,
    pattern: /^https?:\/\/\S{1,2000}$/,
    patternHint: "an http:// or https:// URL",
    secret: false,
  }),
  evidencePollMs: setting({ kind: "integer", env: "ATS_CATALOG_EVIDENCE_POLL_MS", description: "How often the nodes' evidence is read, ms.", default: 10_000, min: 100, max: 86_400_000, secret: false }),
  faucetRpcUrl: setting({
    kind: "string",
    env: "ATS_CATALOG_FAUCET_RPC_URL",
    description: "JSON-RPC URL of the chain the faucet funds. Empty: no faucet.",
    default: "",
    pattern: /^(https?:\/\/\S{1,2000})?$/,
    patternHint: "an http:// or https:// URL",
    secret: false,
  }),
  faucetChainId: setting({ kind: "integer", env: "ATS_CATALOG_FAUCET_CHAIN_ID", description: "Chain id the faucet funds; the signed message must name it, and the RPC must serve it.", default: 31_337, min: 1, max: 2 ** 48, secret: false }),
  faucetPrivateKey: setting({
    kind: "string",
    env: "ATS_CATALOG_FAUCET_PRIVATE_KEY",
    description: "The faucet account's secp256k1 private key (0x + 64 hex). Give it in the environment.",
    default: "",
    pattern: /^(0x[0-9a-fA-F]{64})?$/,
    patternHint: "0x followed by 64 hex digits",
    secret: true,
  }),
  faucetAmountWei: setting({ kind: "string", env: "ATS_CATALOG_FAUCET_AMOUNT_WEI", description: "Wei sent per grant.", default: "1000000000000000000", pattern: /^[1-9][0-9]{0,30}$/, patternHint: "a positive integer of wei", secret: false }),
  faucetAddressIntervalMs: setting({ kind: "integer", env: "ATS_CATALOG_FAUCET_ADDRESS_INTERVAL_MS", description: "One grant per address per this long, ms.", default: 86_400_000, min: 0, max: 365 * 86_400_000, secret: false }),
  faucetClaimsPerClientPerHour: setting({ kind: "integer", env: "ATS_CATALOG_FAUCET_CLAIMS_PER_CLIENT_PER_HOUR", description: "Faucet requests (nonces and claims) per client address per hour.", default: 20, min: 1, max: 1_000_000, secret: false }),
  faucetNonceTtlMs: setting({ kind: "integer", env: "ATS_CATALOG_FAUCET_NONCE_TTL_MS", description: "How long an issued nonce may be signed and claimed, ms.", default: 300_000, min: 1_000, max: 86_400_000, secret: false }),
  faucetMaxOutstandingNonces: setting({ kind: "integer", env: "ATS_CATALOG_FAUCET_MAX_OUTSTANDING_NONCES", description: "Most unexpired nonces (and remembered grants) held in memory.", default: 10_000, min: 1, max: 1_000_000, secret: false }),
  faucetDomain: setting({
    kind: "string",
    env: "ATS_CATALOG_FAUCET_DOMAIN",
    description: "The authority (host:port) a signed message must name. Empty: the catalog's own host:port.",
    default: "",
    pattern: /^[0-9A-Za-z.:\-[\]]{0,255}$/,
    patternHint: "host or host:port",
    secret: false,
  }),
  explorerNetworkFile: setting({
    kind: "string",
    env: "ATS_CATALOG_EXPLORER_NETWORK_FILE",
    description: "The network file (wire/network.ts) whose first chain, gateway and nodes the time explorer shows at /explorer/ (docs/explorer.md); its pages read them directly, so each must list the catalog's origin in its CORS setting. Empty (default): no explorer.",
    default: "",
    pattern: /^[^\0]{0,4096}$/,
    patternHint: "a path",
    secret: false,
  }),
  explorerRelayerUrl: setting({
    kind: "string",
    env: "ATS_CATALOG_EXPLORER_RELAYER_URL",
    description: "The relayer's operator API whose queues the explorer shows (read-only routes). Empty: no relayer panel.",
    default: "",
    pattern: /^(https?:\/\/[^\s]{1,2040})?$/,
    patternHint: "an http(s) URL",
    secret: false,
  }),
  explorerDir: setting({
    kind: "string",
    env: "ATS_CATALOG_EXPLORER_DIR",
    description: "The explorer's built page (npm run build:explorer). Empty (default): the package's explorer/build/.",
    default: "",
    pattern: /^[^\0]{0,4096}$/,
    patternHint: "a path",
    secret: false,
  }),
  ...BASE_SETTINGS,
} as const;

const SETTINGS = defineSettings(CATALOG_SETTINGS, {
  checkCrossFieldRules(values, fail) {
    if ((values.faucetRpcUrl === "") !== (values.faucetPrivateKey === "")) {
      fail(values.faucetRpcUrl === "" ? "faucetRpcUrl" : "faucetPrivateKey", "the faucet needs both faucetRpcUrl and faucetPrivateKey (or neither)");
    }
  },
});

export type CatalogConfig = SettingValues<typeof CATALOG_SETTINGS>;

export function loadCatalogConfig(options: LoadSettingsOptions = {}): CatalogConfig {
  return SETTINGS.load(options);
}

export function describeCatalogSettings(): SettingDescription[] {
  return SETTINGS.describe();
}

export function redactedCatalogConfig(config: CatalogConfig): Record<string, unknown> {
  return SETTINGS.redact(config);
}
