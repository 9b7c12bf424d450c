/**
 * The catalog program: the public, read-only services of the toolkit around the nodes, on one listener
 * - downloads (`/releases`, catalog/downloads.ts), when `releasesDir` is set;
 * - the evidence gateway (`/ipfs/<cid>`, catalog/ipfs.ts) and the index of what was published into it
 *   (`/evidence`, catalog/publish.ts);
 * - the faucet (`/faucet`, catalog/faucet.ts), when `faucetRpcUrl` and `faucetPrivateKey` are set;
 * - the time explorer (`/explorer/`, catalog/explorer.ts), when `explorerNetworkFile` is set.
 * `GET /` names each service's URL. Errors are the package's (wire/errorMapping.ts): a JSON body with status.
 */
import fastifyStatic from "@fastify/static";
import { Type } from "@sinclair/typebox";
import Fastify, { type FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { createPublicClient, createWalletClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { NotFoundError } from "../protocol/errors";
import { toHttpError } from "../wire/errorMapping";
import { MAX_CONTENT_ID_CHARS } from "../lib/contentId";
import { ContentStore } from "./contentStore";
import { registerDownloads } from "./downloads";
import { EXPLORER_PREFIX, explorerOptionsOf, registerExplorer } from "./explorer";
import { Faucet, MAX_SIWE_MESSAGE_CHARS } from "./faucet";
import { registerEvidenceGateway } from "./ipfs";
import { publishMeshEvidence, publishReleases, type PublishedEvidence } from "./publish";
import type { CatalogConfig } from "./settings";

/** Largest request body, bytes (a faucet claim: a message and a signature). */
const MAX_BODY_BYTES = 16 * 1024;
/** Deadline of one node's GET /mesh/state, ms. */
const EVIDENCE_READ_TIMEOUT_MS = 5_000;

export interface CatalogServices {
  /** The JSON index of releases; null without releasesDir. */
  downloads: string | null;
  /** Base of `/ipfs/<cid>`. */
  evidence: string;
  /** What the store holds, by source. */
  evidenceIndex: string;
  /** The faucet's terms (GET), nonce and claim routes below it; null without a faucet. */
  faucet: string | null;
  /** The time explorer's page; null without explorerNetworkFile. */
  explorer: string | null;
}

export interface CatalogServer {
  readonly url: string;
  readonly services: CatalogServices;
  /** Publishes releases and the nodes' evidence now (the poll does it every evidencePollMs). */
  publishNow(): Promise<void>;
  close(): Promise<void>;
}

const ClaimBody = Type.Object(
  {
    message: Type.String({ minLength: 1, maxLength: MAX_SIWE_MESSAGE_CHARS }),
    signature: Type.String({ pattern: "^0x[0-9a-fA-F]+$", maxLength: 2 + 2 * 4096 }),
  },
  { additionalProperties: false },
);

async function createFaucet(config: CatalogConfig, domain: string, uri: string): Promise<Faucet> {
  const transport = http(config.faucetRpcUrl, { timeout: 10_000, retryCount: 0 });
  const publicClient = createPublicClient({ transport });
  const chainId = await publicClient.getChainId();
  if (chainId !== config.faucetChainId) throw new Error(`faucetRpcUrl serves chain ${chainId}, not faucetChainId ${config.faucetChainId}`);
  const account = privateKeyToAccount(config.faucetPrivateKey as Hex);
  const wallet = createWalletClient({ account, transport });
  const chain = { id: chainId, name: `chain ${chainId}`, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [config.faucetRpcUrl] } } };
  return new Faucet({
    chainId,
    domain,
    uri,
    amountWei: BigInt(config.faucetAmountWei),
    addressIntervalMs: config.faucetAddressIntervalMs,
    claimsPerClientPerHour: config.faucetClaimsPerClientPerHour,
    nonceTtlMs: config.faucetNonceTtlMs,
    maxOutstandingNonces: config.faucetMaxOutstandingNonces,
    verifySignature: (address, message, signature) => publicClient.verifyMessage({ address, message, signature }),
    send: (to, valueWei) => wallet.sendTransaction({ to, value: valueWei, chain }),
  });
}

/** The faucet's routes; `current()` is null until the faucet is set up (it needs the listener's port), or without one. */
function registerFaucet(app: FastifyInstance, current: () => Faucet | null): void {
  const faucet = (): Faucet => {
    const held = current();
    if (held === null) throw new NotFoundError("this catalog runs no faucet (faucetRpcUrl and faucetPrivateKey are not set)");
    return held;
  };
  app.get("/faucet", async () => faucet().terms());
  app.post("/faucet/nonce", async (request) => faucet().issueNonce(request.ip));
  app.post<{ Body: { message: string; signature: string } }>("/faucet/claim", { schema: { body: ClaimBody } }, async (request) =>
    faucet().claim(request.ip, request.body.message, request.body.signature),
  );
}

/** Statuses @fastify/send answers a file request with that are the client's doing (a range past the end, a failed If-Match). */
const FILE_REFUSALS: Readonly<Record<number, string>> = { 412: "Precondition Failed", 416: "Range Not Satisfiable" };

function fileServingRefusal(error: unknown): { statusCode: number; error: string; message: string; serverFault: false } | null {
  const statusCode = (error as { statusCode?: unknown }).statusCode;
  if (typeof statusCode !== "number" || FILE_REFUSALS[statusCode] === undefined) return null;
  return { statusCode, error: FILE_REFUSALS[statusCode]!, message: (error as Error).message, serverFault: false };
}

export async function startCatalog(config: CatalogConfig, deps: { log: Logger }): Promise<CatalogServer> {
  const { log } = deps;
  const store = new ContentStore(config.contentDir, config.maxContentBytes);
  // maxParamLength: an identifier the gateway refuses is answered by its rule (400), not by fastify's 414.
  const app = Fastify({ bodyLimit: MAX_BODY_BYTES, logger: false, maxParamLength: MAX_CONTENT_ID_CHARS + 56 });
  await app.register(fastifyStatic, { root: store.dir, serve: false });
  app.setErrorHandler((error, request, reply) => {
    const answer = fileServingRefusal(error) ?? toHttpError(error);
    if (answer.serverFault) log.error({ err: error, url: request.url }, "request failed");
    if ("headers" in answer && answer.headers !== undefined) void reply.headers(answer.headers);
    void reply.code(answer.statusCode).send({ statusCode: answer.statusCode, error: answer.error, message: answer.message });
  });
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send({ statusCode: 404, error: "Not Found", message: `Route ${request.method} ${request.url.split("?")[0] ?? ""} not found` });
  });

  let evidence: PublishedEvidence[] = [];
  let releases = new Map<string, string>();
  let publishing: Promise<void> | null = null;
  const publishNow = (): Promise<void> =>
    (publishing ??= (async () => {
      if (config.releasesDir !== "") releases = publishReleases(store, config.releasesDir);
      const published = await publishMeshEvidence(store, config.evidenceNodeUrls, EVIDENCE_READ_TIMEOUT_MS);
      const known = new Set(evidence.map((item) => `${item.reportedBy} ${item.cid}`));
      evidence = [...evidence, ...published.evidence.filter((item) => !known.has(`${item.reportedBy} ${item.cid}`))].slice(-32 * 32);
      for (const failure of published.failures) log.warn({ failure }, "could not read a node's contradiction evidence");
    })().finally(() => {
      publishing = null;
    }));

  let faucet: Faucet | null = null;
  let services: CatalogServices | null = null;
  if (config.releasesDir !== "") registerDownloads(app, config.releasesDir);
  registerEvidenceGateway(app, store);
  app.get("/evidence", async () => ({ evidence, releases: Object.fromEntries(releases) }));
  registerFaucet(app, () => faucet);
  if (config.explorerNetworkFile !== "") await registerExplorer(app, explorerOptionsOf(config));
  app.get("/", async () => ({ services }));

  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : config.port;
  const authority = `${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
  const url = `http://${authority}`;
  try {
    if (config.faucetRpcUrl !== "") faucet = await createFaucet(config, config.faucetDomain === "" ? authority : config.faucetDomain, `${url}/faucet`);
  } catch (error) {
    await app.close();
    throw error;
  }
  services = {
    downloads: config.releasesDir === "" ? null : `${url}/releases`,
    evidence: `${url}/ipfs/`,
    evidenceIndex: `${url}/evidence`,
    faucet: faucet === null ? null : `${url}/faucet`,
    explorer: config.explorerNetworkFile === "" ? null : `${url}${EXPLORER_PREFIX}`,
  };
  await publishNow();
  const timer = setInterval(() => void publishNow().catch((error: unknown) => log.error({ err: error }, "publishing failed")), config.evidencePollMs);
  timer.unref();
  return {
    url,
    services: services satisfies CatalogServices,
    publishNow,
    async close() {
      clearInterval(timer);
      await publishing?.catch(() => undefined);
      await app.close();
    },
  };
}
