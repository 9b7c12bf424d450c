/**
 * The node's settings: its table, declared with lib/settings.ts (the framework every program shares: loader,
 * validation, description, redaction), with the base settings of every program (logging) at the end, plus the
 * rules that involve two settings. Why one file: every setting's default, bounds and
 * description live here and nowhere else, one entry per setting.
 */
import { CORS_ORIGIN_PATTERN, corsOriginProblems } from "../lib/cors";
import { ValidationError } from "../protocol/errors";
import {
  DEFAULT_MAX_ACCEPTABLE_DRIFT_NS,
  DEFAULT_MAX_ATTESTATION_AGE_NS,
  DEFAULT_MAX_FUTURE_DRIFT_NS,
  DEFAULT_NODE_QUORUM,
  DEV_CARD_DRIVER_ACCURACY_NS,
  NS_PER_MILLISECOND,
  NS_PER_SECOND,
  UINT32_MAX,
} from "../protocol/constants";
import {
  BASE_SETTINGS,
  defineSettings,
  setting,
  type LoadSettingsOptions,
  type LogFormat,
  type LogLevel,
  type SettingDescription,
  type SettingFailure,
  type SettingValues,
} from "../lib/settings";
import { MAX_ROUNDS_IN_FLIGHT } from "../wire/mesh";
import { checkTemporalGatewaySettings, TEMPORAL_GATEWAY_SETTINGS } from "../gateway/config";

export { LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel, type SettingDescription } from "../lib/settings";

const NS_PER_DAY = 86_400n * NS_PER_SECOND;
const MAX_PORT = 65_535;
const ADDRESS_PATTERN = /^0x[0-9a-fA-F]{40}$/;
const BYTES32_PATTERN = /^0x[0-9a-fA-F]{64}$/;

/** The settings table. Order is the order of `describeSettings()` and of the redacted log line. */
export const SETTINGS = {
  host: setting({
    kind: "string",
    env: "ATS_HOST",
    description: "Interface every server binds to. Loopback by default; set 0.0.0.0 to expose the node.",
    default: "127.0.0.1",
    pattern: /^[0-9A-Za-z.:\-[\]]{1,255}$/,
    patternHint: "a host name or IP address",
    secret: false,
  }),
  restPort: setting({
    kind: "integer",
    env: "ATS_REST_PORT",
    description: "REST + WebSocket + /metrics port. 0 picks a free port (printed at start).",
    default: 8080,
    min: 0,
    max: MAX_PORT,
    secret: false,
  }),
  grpcEnabled: setting({
    kind: "boolean",
    env: "ATS_GRPC_ENABLED",
    description: "Serve gRPC TimeRPC and the gRPC health service.",
    default: true,
    secret: false,
  }),
  grpcPort: setting({
    kind: "integer",
    env: "ATS_GRPC_PORT",
    description: "gRPC port. 0 picks a free port (printed at start).",
    default: 50051,
    min: 0,
    max: MAX_PORT,
    secret: false,
  }),
  keyDir: setting({
    kind: "path",
    env: "ATS_KEY_DIR",
    description: "Key directory written by `ats-node keys init` (card key + chain, node keystore).",
    default: "./keys",
    secret: false,
  }),
  keystorePassword: setting({
    kind: "string",
    env: "ATS_KEYSTORE_PASSWORD",
    description: "Password of the node keystore (keyDir/node.json) when it is encrypted; empty = plain dev keystore.",
    default: "",
    secret: true,
  }),
  cardKeySource: setting({
    kind: "choice",
    env: "ATS_CARD_KEY_SOURCE",
    description:
      "Where the card's P-256 key is, whatever the card driver: 'file' (default): keyDir/card.key.pem. 'pkcs11': a sensitive, non-extractable key in the PKCS#11 token of the pkcs11* settings, labelled pkcs11CardKeyLabel (keyDir still holds the card's certificate chain, card.pem, and the trusted root, ca.pem; `ats-node keys init --pkcs11` writes both). A token card key signs on the serving thread.",
    default: "file",
    choices: ["file", "pkcs11"],
    secret: false,
  }),
  nodeKeySource: setting({
    kind: "choice",
    env: "ATS_NODE_KEY_SOURCE",
    description:
      "Where the node's secp256k1 key is: 'file' (default): keyDir/node.json. 'pkcs11': a sensitive, non-extractable key in the PKCS#11 token of the pkcs11* settings, labelled pkcs11NodeKeyLabel; the token signs the EIP-712 digest on the serving thread (signerThread 'on' is refused), and a mesh (meshPeers) is refused: its transport keys are derived from the node key by ECDH, which the node does not ask of a token yet.",
    default: "file",
    choices: ["file", "pkcs11"],
    secret: false,
  }),
  pkcs11Module: setting({
    kind: "path",
    env: "ATS_PKCS11_MODULE",
    description: "The PKCS#11 module (.so) of the token holding the 'pkcs11' keys, e.g. /usr/lib/softhsm/libsofthsm2.so (SoftHSM2) or the HSM vendor's library.",
    default: "",
    secret: false,
  }),
  pkcs11TokenLabel: setting({
    kind: "string",
    env: "ATS_PKCS11_TOKEN_LABEL",
    description: "The token's label (at most 32 characters): the node uses the slot whose token has it. Set this or pkcs11SlotId, not both.",
    default: "",
    pattern: /^[\x20-\x7e]{0,32}$/,
    patternHint: "at most 32 printable ASCII characters",
    secret: false,
  }),
  pkcs11SlotId: setting({
    kind: "integer",
    env: "ATS_PKCS11_SLOT_ID",
    description: "The token's slot id (as `softhsm2-util --show-slots` or `pkcs11-tool -L` print it); -1 (default): find the slot by pkcs11TokenLabel.",
    default: -1,
    min: -1,
    max: Number.MAX_SAFE_INTEGER,
    secret: false,
  }),
  pkcs11CardKeyLabel: setting({
    kind: "string",
    env: "ATS_PKCS11_CARD_KEY_LABEL",
    description: "CKA_LABEL of the card's P-256 key pair in the token (cardKeySource 'pkcs11').",
    default: "ats-card",
    pattern: /^[\x20-\x7e]{1,64}$/,
    patternHint: "1 to 64 printable ASCII characters",
    secret: false,
  }),
  pkcs11NodeKeyLabel: setting({
    kind: "string",
    env: "ATS_PKCS11_NODE_KEY_LABEL",
    description: "CKA_LABEL of the node's secp256k1 key pair in the token (nodeKeySource 'pkcs11').",
    default: "ats-node",
    pattern: /^[\x20-\x7e]{1,64}$/,
    patternHint: "1 to 64 printable ASCII characters",
    secret: false,
  }),
  pkcs11PinEnv: setting({
    kind: "string",
    env: "ATS_PKCS11_PIN_ENV",
    description: "The NAME of the environment variable that holds the token's user PIN (read when pkcs11PinFile is empty). The PIN itself is never a setting: it is not in any config file or log.",
    default: "ATS_PKCS11_PIN",
    pattern: /^[A-Za-z_][A-Za-z0-9_]{0,127}$/,
    patternHint: "an environment variable name",
    secret: false,
  }),
  pkcs11PinFile: setting({
    kind: "path",
    env: "ATS_PKCS11_PIN_FILE",
    description: "A file holding the token's user PIN (one line; mode 600, or it is refused). Empty (default): the PIN comes from the variable pkcs11PinEnv names.",
    default: "",
    secret: false,
  }),
  tlsCertFile: setting({
    kind: "path",
    env: "ATS_TLS_CERT_FILE",
    description:
      "PEM certificate chain (leaf first) of the node's servers. Set together with tlsKeyFile: REST and WebSocket then serve HTTPS/WSS and gRPC TLS on the same ports. Empty (default): plaintext (bind loopback or terminate TLS in front).",
    default: "",
    secret: false,
  }),
  tlsKeyFile: setting({
    kind: "path",
    env: "ATS_TLS_KEY_FILE",
    description:
      "PEM private key (unencrypted PKCS#8, SEC1 or PKCS#1) of tlsCertFile. The path is shown; the key is read at start, checked against the certificate, and never logged.",
    default: "",
    secret: false,
  }),
  dataDir: setting({
    kind: "path",
    env: "ATS_DATA_DIR",
    description: "Folder of the node's SQLite files (schedules, proof archive). Created when missing.",
    default: "./data",
    secret: false,
  }),
  cardDriver: setting({
    kind: "choice",
    env: "ATS_CARD_DRIVER",
    description:
      "Time card driver. 'dev': P-256 key from keyDir, host clock (process.hrtime anchored to the wall clock), signs accuracyNs. 'chrony': P-256 key from keyDir, the host clock disciplined by chronyd, signs the error bound chrony's tracking figures prove (ClockBound's formula, docs/protocol.md §14.19) and nothing while chrony is unsynchronised or that bound exceeds chronyMaxBoundNs (settings chrony*).",
    default: "dev",
    // The names of node/card CARD_DRIVERS (not imported: settings load without any driver; a test pins the two).
    choices: ["dev", "chrony"],
    secret: false,
  }),
  chronySocketPath: setting({
    kind: "path",
    env: "ATS_CHRONY_SOCKET_PATH",
    description: "cardDriver 'chrony': chronyd's command socket (its bindcmdaddress), which chronyc is pointed at with -h. The node's user must be allowed to open it.",
    default: "/run/chrony/chronyd.sock",
    secret: false,
  }),
  chronycPath: setting({
    kind: "path",
    env: "ATS_CHRONYC_PATH",
    description: "cardDriver 'chrony': the chronyc program run (`chronyc -h <chronySocketPath> -c -n tracking`, no shell, 2 s timeout, 1 KiB of output at most).",
    default: "/usr/bin/chronyc",
    secret: false,
  }),
  chronyPollIntervalMs: setting({
    kind: "integer",
    env: "ATS_CHRONY_POLL_INTERVAL_MS",
    description:
      "cardDriver 'chrony': how often chronyc runs, ms. Ticks never run it: each uses the last reading and adds the frequency error's growth since then, so a longer interval signs a looser bound between readings. A reading older than 3 intervals + 2 s makes the node degraded.",
    default: 1_000,
    min: 100,
    max: 60_000,
    secret: false,
  }),
  chronyMaxBoundNs: setting({
    kind: "integer",
    env: "ATS_CHRONY_MAX_BOUND_NS",
    description:
      "cardDriver 'chrony': the largest error bound the node signs, ns; above it the node is degraded and signs nothing. It is also the accuracy GET /node/info advertises. Must not exceed maxAcceptableDriftNs.",
    default: 1_000_000,
    min: 1,
    max: UINT32_MAX,
    secret: false,
  }),
  chronyMaxClockErrorPpb: setting({
    kind: "integer",
    env: "ATS_CHRONY_MAX_CLOCK_ERROR_PPB",
    description:
      "cardDriver 'chrony': the host oscillator's assumed maximum frequency error, ppb; the bound grows at this plus chrony's skew and |residual frequency| between readings. At least chronyd's maxclockerror (1 ppm by default); the default is RFC 5905's PHI, 15 ppm.",
    default: 15_000,
    min: 0,
    max: 1_000_000,
    secret: false,
  }),
  gpsdHost: setting({
    kind: "string",
    env: "ATS_GPSD_HOST",
    description:
      "gpsd's host (its TCP socket, gpsd_json(5)): the card's GPS reference (fix, satellites, PPS offset), reported beside each proof as unsigned metadata, comes from it (node/card/gpsdClient.ts). Never the signed moment: the card's clock is signed. Empty (default): no gpsd; the dev card reports a simulated reference, the chrony card none.",
    default: "",
    pattern: /^(?:|[0-9A-Za-z.:\-[\]]{1,255})$/,
    patternHint: "a host name or IP address, or empty",
    secret: false,
  }),
  gpsdPort: setting({
    kind: "integer",
    env: "ATS_GPSD_PORT",
    description: "gpsd's TCP port (gpsd's default 2947).",
    default: 2_947,
    min: 1,
    max: MAX_PORT,
    secret: false,
  }),
  gpsRequired: setting({
    kind: "boolean",
    env: "ATS_GPS_REQUIRED",
    description:
      "With gpsdHost: the card signs nothing without a fresh 2-D or 3-D fix from gpsd (no fix, a report older than gpsStaleAfterMs, or gpsd unreachable): the node is degraded, as when the card's error exceeds its bound, and GET /health and /node/info say why.",
    default: false,
    secret: false,
  }),
  gpsStaleAfterMs: setting({
    kind: "integer",
    env: "ATS_GPS_STALE_AFTER_MS",
    description: "With gpsdHost: a gpsd report older than this no longer counts, ms (a TPV that old is no fix). gpsd reports once per receiver cycle, typically 1 s.",
    default: 5_000,
    min: 100,
    max: 600_000,
    secret: false,
  }),
  tickIntervalNs: setting({
    kind: "ns",
    env: "ATS_TICK_INTERVAL_NS",
    description: "Interval between attestations (card + node signature). Each costs ~0.3 ms of CPU on this class of machine.",
    default: NS_PER_MILLISECOND,
    min: 100_000n,
    max: 60n * NS_PER_SECOND,
    secret: false,
  }),
  refreshAfterNs: setting({
    kind: "ns",
    env: "ATS_REFRESH_AFTER_NS",
    description:
      "0 (default): serve what the last tick produced; under saturation a busy event loop runs the tick late and served proofs age by that delay. Otherwise a proof request that finds the cached proof older than this has the node sign a new one first (with libsecp256k1 signing in the main thread), which bounds the age of every served proof whatever the load, at the price of up to one attestation (~0.2-0.4 ms of CPU) per this interval under load: 1 ms costs about half of one core of this class at saturation.",
    default: 0n,
    min: 0n,
    max: 60n * NS_PER_SECOND,
    secret: false,
  }),
  signerThread: setting({
    kind: "choice",
    env: "ATS_SIGNER_THREAD",
    description:
      "Where attestation ticks sign. 'on': in a worker thread (`ats-node-signer`). With the dev card the thread makes whole ticks on its own: it reads the card clock, makes the card's P-256 signature and the node's EIP-712 secp256k1 signature, and leaves the result in shared memory; the serving event loop takes each result, checks tamper and accuracy (withholding the thread's permit to sign when they fail) and publishes it, and posts nothing per tick (about 2 % of a busy serving core is left of the tick). With a card whose driver signs (hardware), the serving thread reads the card clock and the driver signs there, and the thread signs the node entry of each tick it is asked for. 'off': every signature in the serving thread (about 10 % of a busy core at 1 ms ticks). 'auto' (default): the thread when it can tick on its own and the machine has at least two cores (and refreshAfterNs is 0), or when signing is pure JS (~0.35-1.5 ms a tick); else the serving thread. refreshAfterNs needs the serving thread: 'on' with it is refused, and 'auto' with pure-JS signing ignores it.",
    default: "auto",
    choices: ["auto", "on", "off"],
    secret: false,
  }),
  accuracyNs: setting({
    kind: "integer",
    env: "ATS_ACCURACY_NS",
    description: "Accuracy the node advertises and signs into every proof (uint32 ns). The default suits the dev card (host clock anchored to within a few hundred ns).",
    default: DEV_CARD_DRIVER_ACCURACY_NS,
    min: 1,
    max: UINT32_MAX,
    secret: false,
  }),
  maxMeasuredErrorNs: setting({
    kind: "integer",
    env: "ATS_MAX_MEASURED_ERROR_NS",
    description:
      "The node refuses to sign while the card's measured error exceeds this. 0 means 'equal to accuracyNs'; a non-zero value must not exceed accuracyNs (the node never signs an accuracy it does not meet).",
    default: 0,
    min: 0,
    max: UINT32_MAX,
    secret: false,
  }),
  apiKeys: setting({
    kind: "apiKeyList",
    env: "ATS_API_KEYS",
    description:
      "API keys accepted on the attested-time API (empty = no key required). Entries are keys or 'sha256:<hex>'; only SHA-256 hashes are kept in memory and compared in constant time.",
    default: [],
    max: 10_000,
    secret: true,
  }),
  clientPublicKeys: setting({
    kind: "map",
    env: "ATS_CLIENT_PUBLIC_KEYS",
    description:
      "Registered clients for gRPC client_signature: clientId -> secp256k1 Ethereum address of the client's key (signed bytes documented in node/api/auth.ts). JSON object in the environment.",
    default: {},
    max: 10_000,
    pattern: ADDRESS_PATTERN,
    patternHint: "a 20-byte 0x address",
    secret: false,
  }),
  requireClientSignature: setting({
    kind: "boolean",
    env: "ATS_REQUIRE_CLIENT_SIGNATURE",
    description:
      "false (default): client_signature is checked only when a gRPC GetCurrentTime names a client_id registered in clientPublicKeys; any other id passes unsigned (the API key is then the only authentication). true: every GetCurrentTime must name a registered client_id and carry its valid signature, else UNAUTHENTICATED. Needs a non-empty clientPublicKeys.",
    default: false,
    secret: false,
  }),
  maxRequestsPerSecond: setting({
    kind: "integer",
    env: "ATS_MAX_REQUESTS_PER_SECOND",
    envAliases: ["MAX_REQUESTS_PER_SECOND"],
    description:
      "Per-client request budget per second on every transport (0 = unlimited). Env ATS_MAX_REQUESTS_PER_SECOND or MAX_REQUESTS_PER_SECOND (the service description's name); both set to different values is an error.",
    default: 100,
    min: 0,
    max: 10_000_000,
    secret: false,
  }),
  corsAllowedOrigins: setting({
    kind: "list",
    env: "ATS_CORS_ALLOWED_ORIGINS",
    description:
      "Web origins whose pages may read the node's public GET routes from another site (CORS): /node/info, /health, /mesh/state, and /time/current when apiKeys is empty. Each entry is an origin exactly as browsers send it (scheme://host[:port], lowercase, no default port, no path), or '*' alone for every origin. Answers carry Vary: Origin, preflights are answered with a max-age of 600 s, credentials are never allowed; POST, schedule, authenticated and operator routes never get CORS headers; a preflight refused by the rate limit (429) carries them too. The same list decides which pages may open the WebSocket stream (/v1/stream): an upgrade whose Origin is not on it is refused with 403 (browsers apply no same-origin rule to WebSockets, so any page could otherwise take a visitor's stream slots); an upgrade without Origin (not a browser) is unaffected; '*' admits every page. Empty (default): no CORS headers and no stream for any browser page (list the node's own origin too when a page served from it uses the stream), so browsers keep other sites' pages from reading the node.",
    default: [],
    max: 100,
    pattern: CORS_ORIGIN_PATTERN,
    patternHint: "an origin such as https://app.example.org or http://localhost:5173, or '*'",
    secret: false,
  }),
  wsMinIntervalNs: setting({
    kind: "ns",
    env: "ATS_WS_MIN_INTERVAL_NS",
    description: "Smallest subscription interval a WebSocket client may ask for.",
    default: NS_PER_MILLISECOND,
    min: 100_000n,
    max: 3_600n * NS_PER_SECOND,
    secret: false,
  }),
  wsMaxIntervalNs: setting({
    kind: "ns",
    env: "ATS_WS_MAX_INTERVAL_NS",
    description: "Largest subscription interval a WebSocket client may ask for.",
    default: 3_600n * NS_PER_SECOND,
    min: 100_000n,
    max: NS_PER_DAY,
    secret: false,
  }),
  grpcMinStreamIntervalNs: setting({
    kind: "ns",
    env: "ATS_GRPC_MIN_STREAM_INTERVAL_NS",
    description: "Smallest StreamTime interval a gRPC client may ask for.",
    default: NS_PER_MILLISECOND,
    min: 100_000n,
    max: 3_600n * NS_PER_SECOND,
    secret: false,
  }),
  grpcMaxStreamIntervalNs: setting({
    kind: "ns",
    env: "ATS_GRPC_MAX_STREAM_INTERVAL_NS",
    description: "Largest StreamTime interval a gRPC client may ask for.",
    default: 3_600n * NS_PER_SECOND,
    min: 100_000n,
    max: NS_PER_DAY,
    secret: false,
  }),
  wsMaxConnections: setting({
    kind: "integer",
    env: "ATS_WS_MAX_CONNECTIONS",
    description: "Concurrent streams (WebSocket connections plus gRPC StreamTime calls); more are refused (503 / UNAVAILABLE).",
    default: 1_000,
    min: 1,
    max: 1_000_000,
    secret: false,
  }),
  maxStreamsPerClient: setting({
    kind: "integer",
    env: "ATS_MAX_STREAMS_PER_CLIENT",
    description: "Concurrent streams (WebSocket connections plus gRPC StreamTime calls) one client (API key, else IP) may hold; more get 'Rate limit exceeded'.",
    default: 8,
    min: 1,
    max: 1_000_000,
    secret: false,
  }),
  streamMaxPushesPerSecond: setting({
    kind: "integer",
    env: "ATS_STREAM_MAX_PUSHES_PER_SECOND",
    description:
      "Updates per second pushed to all streams together (WebSocket subscriptions and gRPC StreamTime); beyond it updates are skipped, spread over the subscribers, so streams cannot take the node from request clients.",
    default: 20_000,
    min: 1,
    max: 10_000_000,
    secret: false,
  }),
  wsMaxSubscriptionsPerConnection: setting({
    kind: "integer",
    env: "ATS_WS_MAX_SUBSCRIPTIONS_PER_CONNECTION",
    description: "Active subscriptions per WebSocket connection.",
    default: 8,
    min: 1,
    max: 1_000,
    secret: false,
  }),
  wsMaxMessageBytes: setting({
    kind: "integer",
    env: "ATS_WS_MAX_MESSAGE_BYTES",
    description: "Largest WebSocket frame a client may send.",
    default: 4_096,
    min: 128,
    max: 1_048_576,
    secret: false,
  }),
  grpcMaxMessageBytes: setting({
    kind: "integer",
    env: "ATS_GRPC_MAX_MESSAGE_BYTES",
    description: "Largest gRPC message received.",
    default: 65_536,
    min: 1_024,
    max: 16_777_216,
    secret: false,
  }),
  maxConnections: setting({
    kind: "integer",
    env: "ATS_MAX_CONNECTIONS",
    description:
      "Open REST/WebSocket connections, all clients together; more are closed as they are accepted. Keep it below the process's file-descriptor limit (ulimit -n).",
    default: 8_192,
    min: 1,
    max: 1_000_000,
    secret: false,
  }),
  maxConnectionsPerAddress: setting({
    kind: "integer",
    env: "ATS_MAX_CONNECTIONS_PER_ADDRESS",
    description:
      "Open REST/WebSocket connections from one remote address; more are closed as they are accepted. Behind a reverse proxy every client has the proxy's address: raise it there.",
    default: 256,
    min: 1,
    max: 1_000_000,
    secret: false,
  }),
  listenBacklog: setting({
    kind: "integer",
    env: "ATS_LISTEN_BACKLOG",
    description:
      "Listen backlog: connections the kernel queues on the REST/WebSocket and temporal RPC ports until the node accepts them (Linux caps it at net.core.somaxconn: the node warns at start when it does; gRPC's port keeps Node's 511). When the queue is full a new connection's SYN is dropped and its client retries after 1 s, then 2 s later, then 4 s later: Node's 511 filled in a fraction of a second under a connection flood. Node accepts one queued connection per event-loop turn, so a longer queue lengthens no turn: a connection queued behind others waits their turns instead of a SYN retry.",
    default: 4_096,
    min: 1,
    max: 65_535,
    secret: false,
  }),
  maxPipelinedRequests: setting({
    kind: "integer",
    env: "ATS_MAX_PIPELINED_REQUESTS",
    description:
      "HTTP/1.1 requests one connection may have received and not yet been answered (pipelining); a connection beyond it is closed and its address's new connections are refused for 1 s, doubling on repeat up to 60 s. A connection answered 429 is not read for a moment, and one answered 429 eight times in a row is closed and penalised the same way.",
    default: 16,
    min: 1,
    max: 1_024,
    secret: false,
  }),
  requestTimeoutMs: setting({
    kind: "integer",
    env: "ATS_REQUEST_TIMEOUT_MS",
    description: "Per-request timeout of the servers.",
    default: 10_000,
    min: 100,
    max: 600_000,
    secret: false,
  }),
  bodyLimitBytes: setting({
    kind: "integer",
    env: "ATS_BODY_LIMIT_BYTES",
    description: "Largest REST request body.",
    default: 65_536,
    min: 1_024,
    max: 16_777_216,
    secret: false,
  }),
  shutdownGraceMs: setting({
    kind: "integer",
    env: "ATS_SHUTDOWN_GRACE_MS",
    description: "On SIGINT/SIGTERM, how long in-flight requests get before connections are cut.",
    default: 10_000,
    min: 0,
    max: 600_000,
    secret: false,
  }),
  trustedRootsPem: setting({
    kind: "pemList",
    env: "ATS_TRUSTED_ROOTS",
    description:
      "Manufacturer root certificates that POST /time/verify accepts card chains from: PEM text or PEM file paths (comma-separated in the environment).",
    default: [],
    max: 1_000,
    secret: false,
  }),
  trustedNodeAddresses: setting({
    kind: "list",
    env: "ATS_TRUSTED_NODE_ADDRESSES",
    description: "Other nodes whose signatures verify() accepts (this node's own address is always accepted).",
    default: [],
    max: 10_000,
    pattern: ADDRESS_PATTERN,
    patternHint: "a 20-byte 0x address",
    secret: false,
  }),
  revokedCardIds: setting({
    kind: "list",
    env: "ATS_REVOKED_CARD_IDS",
    description: "Card ids verify() rejects as revoked.",
    default: [],
    max: 10_000,
    pattern: BYTES32_PATTERN,
    patternHint: "a 32-byte 0x card id",
    secret: false,
  }),
  maxAttestationAgeNs: setting({
    kind: "ns",
    env: "ATS_MAX_ATTESTATION_AGE_NS",
    description: "verify(): oldest acceptable proof (same rule as on-chain); current() also refuses to serve an older cached proof.",
    default: DEFAULT_MAX_ATTESTATION_AGE_NS,
    min: NS_PER_MILLISECOND,
    max: NS_PER_DAY,
    secret: false,
  }),
  maxFutureDriftNs: setting({
    kind: "ns",
    env: "ATS_MAX_FUTURE_DRIFT_NS",
    description: "verify(): how far ahead of the node clock a proof may be.",
    default: DEFAULT_MAX_FUTURE_DRIFT_NS,
    min: 0n,
    max: NS_PER_DAY,
    secret: false,
  }),
  maxAcceptableDriftNs: setting({
    kind: "ns",
    env: "ATS_MAX_ACCEPTABLE_DRIFT_NS",
    description: "verify(): largest acceptable proof accuracy.",
    default: DEFAULT_MAX_ACCEPTABLE_DRIFT_NS,
    min: 0n,
    max: BigInt(UINT32_MAX),
    secret: false,
  }),
  nodeQuorum: setting({
    kind: "integer",
    env: "ATS_NODE_QUORUM",
    description: "verify(): distinct node signatures required.",
    default: DEFAULT_NODE_QUORUM,
    min: 1,
    max: 1_000,
    secret: false,
  }),
  role: setting({
    kind: "choice",
    env: "ATS_ROLE",
    description:
      "The node's role (docs/protocol.md §7.6), reported in node info, hellos and mesh state. Only a 'primary' proposes consensus rounds over its card's moments; 'secondary', 'archive' and 'bridge' nodes never sign as a card.",
    default: "primary",
    choices: ["primary", "secondary", "archive", "bridge"],
    secret: false,
  }),
  // The temporal gateway it runs in process when rpcUpstreamUrl is set: the gateway's own table (gateway/config.ts).
  ...TEMPORAL_GATEWAY_SETTINGS,
  meshPort: setting({
    kind: "integer",
    env: "ATS_MESH_PORT",
    description:
      "UDP port of the mesh (docs/protocol.md §7.3), on `host`. Used only with meshPeers; 0 picks a free port. The node binds it once per peer (a socket connected to that peer's meshPeers address, SO_REUSEADDR) plus once for everything else (counted as unknown-source, never decoded); start fails with EADDRINUSE when another socket holds it.",
    default: 50061,
    min: 0,
    max: MAX_PORT,
    secret: false,
  }),
  meshPeers: setting({
    kind: "list",
    env: "ATS_MESH_PEERS",
    description:
      "The other mesh members as <nodeId>@<host>:<port>[/<role>] (node id: the peer's secp256k1 address; role primary (default), secondary, archive or bridge: this node's word on the peer, and a peer announcing another role is refused, docs/protocol.md §7.6). Empty: a lone node, serving one-entry proofs. Non-empty: the node serves co-signed proofs of ⌈2n/3⌉ of the n = peers + 1 members. A peer's packets must come from the host and port its entry names (its own meshPort; no NAT rewriting ports between members): anything else is dropped unread.",
    default: [],
    max: 31,
    pattern: /^0x[0-9a-fA-F]{40}@[0-9A-Za-z.-]{1,253}:[0-9]{1,5}(\/(primary|secondary|archive|bridge))?$/,
    patternHint: "0x<40 hex>@<host>:<port>[/primary|secondary|archive|bridge]",
    secret: false,
  }),
  meshWindowNs: setting({
    kind: "ns",
    env: "ATS_MESH_WINDOW_NS",
    description:
      "W: a reading counts in a round when within this of the median (docs/protocol.md §7). 100 ns needs hardware timestamping; a loopback cluster of this software needs tens of µs. Members co-sign no accuracy above 2 × this + meshMaxPeerUncertaintyNs (§7.5): every member of a mesh needs the same value.",
    default: 100n,
    min: 0n,
    max: NS_PER_SECOND,
    secret: false,
  }),
  meshRoundIntervalMs: setting({
    kind: "integer",
    env: "ATS_MESH_ROUND_INTERVAL_MS",
    description: "Pause between consensus rounds (a round also runs on demand); the served proof is at most about this old.",
    default: 100,
    min: 1,
    max: 60_000,
    secret: false,
  }),
  meshProbeIntervalMs: setting({
    kind: "integer",
    env: "ATS_MESH_PROBE_INTERVAL_MS",
    description: "Interval of the clock probes to every peer (one reachability bit per interval).",
    default: 1_000,
    min: 10,
    max: 600_000,
    secret: false,
  }),
  meshRoundTimeoutMs: setting({
    kind: "integer",
    env: "ATS_MESH_ROUND_TIMEOUT_MS",
    description:
      "How long a round waits for each of its two exchanges; also the staleness a co-signer tolerates. A peer that leaves 3 exchanges in a row unanswered this long is absent: rounds stop waiting for it until it answers a probe (docs/protocol.md §7.1).",
    default: 250,
    min: 1,
    max: 10_000,
    secret: false,
  }),
  meshMaxRoundsInFlight: setting({
    kind: "integer",
    env: "ATS_MESH_MAX_ROUNDS_IN_FLIGHT",
    description:
      "Rounds a primary may run at once when proofs are asked for faster than one round completes (attestNow, schedules): pipelining raises rounds/s; 1 runs them one after another.",
    default: 4,
    min: 1,
    max: MAX_ROUNDS_IN_FLIGHT,
    secret: false,
  }),
  meshMaxPeerUncertaintyNs: setting({
    kind: "ns",
    env: "ATS_MESH_MAX_PEER_UNCERTAINTY_NS",
    description:
      "Readings whose uncertainty (delay / 2 + card accuracy) exceeds this are left out of rounds. With meshWindowNs it bounds the accuracy a member co-signs: at most 2 × meshWindowNs + this (docs/protocol.md §7.5); every member of a mesh needs the same value.",
    default: 10n * NS_PER_MILLISECOND,
    min: 0n,
    max: NS_PER_SECOND,
    secret: false,
  }),
  meshCoSignSlackNs: setting({
    kind: "ns",
    env: "ATS_MESH_COSIGN_SLACK_NS",
    description:
      "How much later than this node's own measurement of the path a round's exchange may arrive after the proposer's moment and still be co-signed (docs/protocol.md §7.5): room for queueing in busy event loops. It is also the most a faulty proposer can backdate a moment beyond the accuracy it claims.",
    default: 20n * NS_PER_MILLISECOND,
    min: 0n,
    max: NS_PER_SECOND,
    secret: false,
  }),
  meshMaxProofAgeNs: setting({
    kind: "ns",
    env: "ATS_MESH_MAX_PROOF_AGE_NS",
    description: "A mesh node refuses to serve (503) a co-signed proof older than this: no fresh consensus, no proof.",
    default: 2n * NS_PER_SECOND,
    min: NS_PER_MILLISECOND,
    max: NS_PER_DAY,
    secret: false,
  }),
  meshPeerCoSignRequestsPerSecond: setting({
    kind: "integer",
    env: "ATS_MESH_PEER_COSIGN_REQUESTS_PER_SECOND",
    description:
      "Co-sign requests this node handles per second from one peer (a token bucket, burst the same); more are dropped and counted (docs/protocol.md §7.3). An honest primary sends one per round: at least 1000 / meshRoundIntervalMs, with room for on-demand and back-to-back rounds.",
    default: 2_000,
    min: 1,
    max: 100_000,
    secret: false,
  }),
  meshPeerRelayedProofsPerSecond: setting({
    kind: "integer",
    env: "ATS_MESH_PEER_RELAYED_PROOFS_PER_SECOND",
    description:
      "Relayed proofs this node checks per second from one peer (a token bucket, burst the same); more are dropped and counted (docs/protocol.md §7.3). A primary relays one per successful round: at least 1000 / meshRoundIntervalMs.",
    default: 2_000,
    min: 1,
    max: 100_000,
    secret: false,
  }),
  meshMaxClockSkewMs: setting({
    kind: "integer",
    env: "ATS_MESH_MAX_CLOCK_SKEW_MS",
    description: "A mesh packet whose nonce time is further than this from the host clock is refused (replay bound).",
    default: 10_000,
    min: 100,
    max: 600_000,
    secret: false,
  }),
  scheduleMaxAttempts: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_MAX_ATTEMPTS",
    description: "Callback delivery attempts before a schedule is marked failed.",
    default: 8,
    min: 1,
    max: 100,
    secret: false,
  }),
  scheduleBaseBackoffMs: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_BASE_BACKOFF_MS",
    description: "First retry delay; doubles per attempt, with full jitter.",
    default: 500,
    min: 1,
    max: 3_600_000,
    secret: false,
  }),
  scheduleMaxBackoffMs: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_MAX_BACKOFF_MS",
    description: "Cap of the retry delay.",
    default: 60_000,
    min: 1,
    max: 86_400_000,
    secret: false,
  }),
  scheduleDeliveryTimeoutMs: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_DELIVERY_TIMEOUT_MS",
    description: "Timeout of one callback POST.",
    default: 5_000,
    min: 10,
    max: 300_000,
    secret: false,
  }),
  scheduleMaxHorizonNs: setting({
    kind: "ns",
    env: "ATS_SCHEDULE_MAX_HORIZON_NS",
    description: "How far in the future executeAt may be.",
    default: 366n * NS_PER_DAY,
    min: NS_PER_SECOND,
    max: 36_600n * NS_PER_DAY,
    secret: false,
  }),
  scheduleMaxPastNs: setting({
    kind: "ns",
    env: "ATS_SCHEDULE_MAX_PAST_NS",
    description: "How far in the past executeAt may be (then it is delivered at once).",
    default: 60n * NS_PER_SECOND,
    min: 0n,
    max: NS_PER_DAY,
    secret: false,
  }),
  scheduleMaxPending: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_MAX_PENDING",
    description: "Schedules not yet delivered or failed; more are refused (bounds disk and memory).",
    default: 100_000,
    min: 1,
    max: 10_000_000,
    secret: false,
  }),
  scheduleMaxPendingPerClient: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_MAX_PENDING_PER_CLIENT",
    description: "Pending schedules one client (API key, else IP) may hold, so that no client can fill the node-wide bound for everyone.",
    default: 1_000,
    min: 1,
    max: 10_000_000,
    secret: false,
  }),
  scheduleMaxCreatesPerSecond: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_MAX_CREATES_PER_SECOND",
    description:
      "New schedules the node accepts per second, all clients together (0 = unlimited); more get 429 with Retry-After. Each accepted schedule is committed to disk before the answer, on the serving thread: this keeps floods from many addresses (each within its own rate) from taking that thread from everyone.",
    default: 500,
    min: 0,
    max: 1_000_000,
    secret: false,
  }),
  scheduleMaxConcurrentDeliveries: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_MAX_CONCURRENT_DELIVERIES",
    description: "Callback deliveries in flight at once, node-wide.",
    default: 16,
    min: 1,
    max: 1_024,
    secret: false,
  }),
  scheduleMaxConcurrentDeliveriesPerClient: setting({
    kind: "integer",
    env: "ATS_SCHEDULE_MAX_CONCURRENT_DELIVERIES_PER_CLIENT",
    description:
      "Callback deliveries of one client (API key, else IP) in flight at once; free slots go to the client with the fewest in flight, so one client's hanging or overdue callbacks cannot delay the others'. At most scheduleMaxConcurrentDeliveries.",
    default: 4,
    min: 1,
    max: 1_024,
    secret: false,
  }),
  scheduleAllowedCallbackHosts: setting({
    kind: "list",
    env: "ATS_SCHEDULE_ALLOWED_CALLBACK_HOSTS",
    description:
      "SSRF guard: callback hosts allowed besides loopback (localhost, 127.0.0.0/8, ::1), each a host name or IP matched exactly. '*' allows every host name and public IP literal (non-public literals must be listed exactly). Each delivery attempt resolves the host and connects only to the addresses it checked: a name admitted by '*' must resolve to public addresses only, localhost to loopback only; an exactly listed name may resolve to private addresses (list internal receivers by name), and an exactly listed IP is accepted whatever name resolves to it. Empty (default) allows loopback only.",
    default: [],
    max: 1_000,
    pattern: /^[0-9A-Za-z.:\-*[\]]{1,255}$/,
    patternHint: "a host name, an IP address or '*'",
    secret: false,
  }),
  ntpEnabled: setting({
    kind: "boolean",
    env: "ATS_NTP_ENABLED",
    description:
      "Serve the card's time over NTPv4 (RFC 5905 server mode, UDP; docs/protocol.md §9.8) on ntpHost:ntpPort: stratum 1, the signed accuracy as root dispersion, leap indicator 3 while the node would not sign. No NTS, no mode 6/7 queries. Off by default.",
    default: false,
    secret: false,
  }),
  ntpHost: setting({
    kind: "string",
    env: "ATS_NTP_HOST",
    description: "Interface the NTP time host binds to (its own, so that NTP can be public while the other servers stay on loopback). Loopback by default.",
    default: "127.0.0.1",
    pattern: /^[0-9A-Za-z.:\-[\]]{1,255}$/,
    patternHint: "a host name or IP address",
    secret: false,
  }),
  ntpPort: setting({
    kind: "integer",
    env: "ATS_NTP_PORT",
    description: "UDP port of the NTP time host. 123, the NTP port, needs root or CAP_NET_BIND_SERVICE; 0 picks a free port (printed at start).",
    default: 123,
    min: 0,
    max: MAX_PORT,
    secret: false,
  }),
  ntpClientIntervalMs: setting({
    kind: "integer",
    env: "ATS_NTP_CLIENT_INTERVAL_MS",
    description:
      "The average interval one client address may keep up between NTP requests, ms; faster, it is answered with a Kiss-o'-Death RATE (RFC 5905 §7.4). Clients poll every 64–1024 s; 0: no limit.",
    default: 2_000,
    min: 0,
    max: 3_600_000,
    secret: false,
  }),
  ntpClientBurst: setting({
    kind: "integer",
    env: "ATS_NTP_CLIENT_BURST",
    description: "NTP requests one client address may send at once before ntpClientIntervalMs applies (an iburst start sends 4–8).",
    default: 8,
    min: 1,
    max: 1_000,
    secret: false,
  }),
  archiveIntervalNs: setting({
    kind: "ns",
    env: "ATS_ARCHIVE_INTERVAL_NS",
    description: "One proof is archived per this interval (not every tick) for HISTORICAL_PROOF.",
    default: 100n * NS_PER_MILLISECOND,
    min: NS_PER_MILLISECOND,
    max: NS_PER_DAY,
    secret: false,
  }),
  archiveCapacity: setting({
    kind: "integer",
    env: "ATS_ARCHIVE_CAPACITY",
    description: "Proofs kept in the archive; the oldest are evicted beyond this.",
    default: 864_000,
    min: 1,
    max: 100_000_000,
    secret: false,
  }),
  ...BASE_SETTINGS,
} as const;

export type SettingName = keyof typeof SETTINGS;

/** The validated configuration. `logLevel` and `logFormat` are narrowed to their choices. */
export type NodeConfig = {
  readonly [N in SettingName]: N extends "logLevel" ? LogLevel : N extends "logFormat" ? LogFormat : SettingValues<typeof SETTINGS>[N];
};

const NODE_SETTINGS = defineSettings(SETTINGS, {
  checkCrossFieldRules: (values, fail) => checkCrossFieldRules(values as NodeConfig, fail),
});

export const SETTING_NAMES: readonly SettingName[] = NODE_SETTINGS.names;

/** Every setting at its declared default (paths unresolved): for code that needs defaults without loading. */
export const SETTING_DEFAULTS = Object.freeze(
  Object.fromEntries(SETTING_NAMES.map((name) => [name, SETTINGS[name].default])),
) as unknown as NodeConfig;

export interface LoadConfigOptions extends LoadSettingsOptions {
  /** Applied after file and env (tests, `ats-node dev`). Values take the file's JSON shapes or parsed values. */
  overrides?: Partial<Record<SettingName, unknown>>;
}

/**
 * Loads and validates the node's configuration: defaults, then the file, then the environment, then `overrides`.
 * Throws ValidationError (field `config.<name>`) naming the setting, its source, its env variable and the bound.
 */
export function loadConfig(options: LoadConfigOptions = {}): NodeConfig {
  return NODE_SETTINGS.load(options) as NodeConfig;
}

/** Every setting with its variable, default, bounds and description (for `ats-node settings` and docs/node.md). */
export function describeSettings(): SettingDescription[] {
  return NODE_SETTINGS.describe();
}

/** A JSON-safe view of the configuration for logs: secrets hidden, ns as decimal strings, PEMs counted. */
export function redactedConfig(config: NodeConfig): Record<string, unknown> {
  return NODE_SETTINGS.redact(config as SettingValues<typeof SETTINGS>);
}

/** Rules that involve two settings. */
function checkCrossFieldRules(config: NodeConfig, fail: SettingFailure): void {
  checkTemporalGatewaySettings(config, fail);
  if (config.maxMeasuredErrorNs > config.accuracyNs) {
    throw new ValidationError(
      "config.maxMeasuredErrorNs",
      `must not exceed accuracyNs (${config.accuracyNs}); got ${config.maxMeasuredErrorNs} [env ${SETTINGS.maxMeasuredErrorNs.env}]`,
      { setting: "maxMeasuredErrorNs" },
    );
  }
  if (config.wsMinIntervalNs > config.wsMaxIntervalNs) {
    fail("wsMinIntervalNs", `must not exceed wsMaxIntervalNs (${config.wsMaxIntervalNs})`, config.wsMinIntervalNs);
  }
  if (config.grpcMinStreamIntervalNs > config.grpcMaxStreamIntervalNs) {
    fail("grpcMinStreamIntervalNs", `must not exceed grpcMaxStreamIntervalNs (${config.grpcMaxStreamIntervalNs})`, config.grpcMinStreamIntervalNs);
  }
  if (config.scheduleMaxConcurrentDeliveriesPerClient > config.scheduleMaxConcurrentDeliveries) {
    fail("scheduleMaxConcurrentDeliveriesPerClient",
      `must not exceed scheduleMaxConcurrentDeliveries (${config.scheduleMaxConcurrentDeliveries})`,
      config.scheduleMaxConcurrentDeliveriesPerClient,
    );
  }
  if (config.scheduleBaseBackoffMs > config.scheduleMaxBackoffMs) {
    fail("scheduleBaseBackoffMs", `must not exceed scheduleMaxBackoffMs (${config.scheduleMaxBackoffMs})`, config.scheduleBaseBackoffMs);
  }
  if (config.signerThread === "on" && config.refreshAfterNs > 0n) {
    fail("signerThread", "'on' cannot be combined with refreshAfterNs > 0 (a request refreshes the proof by signing in the serving thread): use 'auto' or 'off'", "on");
  }
  if (config.grpcEnabled && config.restPort !== 0 && config.restPort === config.grpcPort) {
    fail("grpcPort", "must differ from restPort", config.grpcPort);
  }
  if (config.requireClientSignature && Object.keys(config.clientPublicKeys).length === 0) {
    fail("requireClientSignature", "needs at least one registered client in clientPublicKeys, or every GetCurrentTime would be refused", true);
  }
  checkTlsPair(config);
  checkCorsAllowedOrigins(config.corsAllowedOrigins, fail);
  checkPkcs11Settings(config, fail);
  if (config.meshPeers.length > 0 && config.meshPort !== 0 && (config.meshPort === config.restPort || (config.grpcEnabled && config.meshPort === config.grpcPort))) {
    // UDP and TCP ports do not collide, but one number for two services is a configuration mistake worth naming.
    fail("meshPort", "must differ from restPort and grpcPort", config.meshPort);
  }
  // An honest primary at this node's round interval sends one co-sign request and one relayed proof per round: a
  // budget below that would refuse it every interval.
  const roundsPerSecond = Math.ceil(1_000 / config.meshRoundIntervalMs);
  for (const name of ["meshPeerCoSignRequestsPerSecond", "meshPeerRelayedProofsPerSecond"] as const) {
    if (config.meshPeers.length > 0 && config[name] < roundsPerSecond) {
      fail(name, `must be at least 1000 / meshRoundIntervalMs (${roundsPerSecond}), or an honest primary's rounds are refused`, config[name]);
    }
  }
  if (config.gpsRequired && config.gpsdHost === "") {
    fail("gpsRequired", "needs gpsdHost: there is no GPS reference to require without gpsd", config.gpsRequired);
  }
  if (config.cardDriver === "chrony" && BigInt(config.chronyMaxBoundNs) > config.maxAcceptableDriftNs) {
    fail("chronyMaxBoundNs", `must not exceed maxAcceptableDriftNs (${config.maxAcceptableDriftNs}), or the node's own proofs fail verification`, config.chronyMaxBoundNs);
  }
  if (BigInt(config.accuracyNs) > config.maxAcceptableDriftNs) {
    // Not fatal for the node itself, but then its own proofs fail its own verify(): refuse the mistake early.
    fail("accuracyNs", `must not exceed maxAcceptableDriftNs (${config.maxAcceptableDriftNs}), or the node's own proofs fail verification`, config.accuracyNs);
  }
  if (config.ntpEnabled && config.meshPeers.length > 0 && config.ntpPort !== 0 && config.ntpPort === config.meshPort && config.ntpHost === config.host) {
    fail("ntpPort", "must differ from meshPort: both are UDP sockets on the same host", config.ntpPort);
  }
}

/**
 * The token settings, when a key lives in a token: a module, one way to find the token, two labels, and what a token
 * node key cannot do (sign in the signer thread, derive the mesh's ECDH keys).
 */
function checkPkcs11Settings(config: NodeConfig, fail: SettingFailure): void {
  const cardInToken = config.cardKeySource === "pkcs11";
  const nodeInToken = config.nodeKeySource === "pkcs11";
  if (!cardInToken && !nodeInToken) return;
  if (config.pkcs11Module === "") fail("pkcs11Module", "must name the PKCS#11 module when cardKeySource or nodeKeySource is 'pkcs11'", "");
  if ((config.pkcs11SlotId === -1) === (config.pkcs11TokenLabel === "")) {
    fail("pkcs11TokenLabel", "set exactly one of pkcs11TokenLabel and pkcs11SlotId, to name the token", config.pkcs11TokenLabel);
  }
  if (cardInToken && nodeInToken && config.pkcs11CardKeyLabel === config.pkcs11NodeKeyLabel) {
    fail("pkcs11NodeKeyLabel", "must differ from pkcs11CardKeyLabel (one label names one key pair)", config.pkcs11NodeKeyLabel);
  }
  if (nodeInToken && config.signerThread === "on") {
    fail("signerThread", "'on' cannot be used with nodeKeySource 'pkcs11': the signer thread signs with key bytes, which a token key never becomes; use 'auto' or 'off'", "on");
  }
  if (nodeInToken && config.meshPeers.length > 0) {
    fail("nodeKeySource", "'pkcs11' cannot serve a mesh yet (meshPeers is set): the mesh derives its transport keys from the node key by ECDH", "pkcs11");
  }
}

/** The origins of corsAllowedOrigins as lib/cors.ts checks them (exactly as browsers send them; "*" only alone). */
function checkCorsAllowedOrigins(origins: readonly string[], fail: SettingFailure): void {
  for (const problem of corsOriginProblems(origins)) fail("corsAllowedOrigins", problem.message, problem.value);
}

/**
 * The threshold above which the attestor refuses to sign (maxMeasuredErrorNs, or accuracyNs when 0). With the
 * chrony card, chronyMaxBoundNs: the card's own bound is checked against it (attestor.ts).
 */
export function signingErrorBoundNs(config: NodeConfig): number {
  if (config.cardDriver === "chrony") return config.chronyMaxBoundNs;
  return config.maxMeasuredErrorNs === 0 ? config.accuracyNs : config.maxMeasuredErrorNs;
}

/**
 * The accuracy the node advertises (GET /node/info, the mesh hello, the NTP root dispersion): accuracyNs, or with
 * the chrony card chronyMaxBoundNs, the most it ever signs (each proof carries the card's bound at its moment).
 */
export function advertisedAccuracyNs(config: NodeConfig): number {
  return config.cardDriver === "chrony" ? config.chronyMaxBoundNs : config.accuracyNs;
}

// ---------------------------------------------------------------------------------------------------------------
// TLS of the node's servers

/** tlsCertFile and tlsKeyFile come together or not at all. */
export function checkTlsPair(config: Pick<NodeConfig, "tlsCertFile" | "tlsKeyFile">): void {
  if ((config.tlsCertFile === "") === (config.tlsKeyFile === "")) return;
  const [missing, present] = config.tlsCertFile === "" ? (["tlsCertFile", "tlsKeyFile"] as const) : (["tlsKeyFile", "tlsCertFile"] as const);
  throw new ValidationError(
    `config.${missing}`,
    `must be set when ${present} is (TLS needs both the certificate and its key, or neither) [env ${SETTINGS[missing].env}]`,
    { setting: missing },
  );
}
