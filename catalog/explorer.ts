/**
 * The time explorer on the catalog's listener (docs/explorer.md): its built page (explorer/build/, made by
 * `npm run build:explorer`) at `/explorer/`, the endpoints the page reads at `/explorer/config.json`, and the proof
 * inspector's `POST /explorer/explain`, which runs `explainTimeProof` (client/explain.ts) against the chain's
 * oracle. The rules run here because protocol/ verifies with node:crypto, which a browser lacks; the page
 * reimplements none of them. The server holds no key: it reads the chain (eth_call, eth_getBlockByNumber).
 *
 * The inspector is bounded: a body of at most MAX_EXPLAIN_BODY_BYTES (a proof of 32 node entries is ~6 KiB of
 * JSON) and EXPLAIN_REQUESTS_PER_SECOND per client address, since each inspection costs the chain a few reads per
 * registered node; beyond, 429 with Retry-After.
 */
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import { createPublicClient, http, type Address, type PublicClient } from "viem";
import { contractProofFromJson } from "../client/contractProof";
import { explainTimeProof, ruleVerdicts } from "../client/explain";
import { AtsError } from "../protocol/errors";
import { RateLimiter } from "../lib/rateLimit";
import type { ExplainAnswer, ExplorerConfig } from "../wire/explorer";
import { parseNetwork, type NetworkFileJson } from "../wire/network";
import type { CatalogConfig } from "./settings";

export const EXPLORER_PREFIX = "/explorer/";
export const MAX_EXPLAIN_BODY_BYTES = 16 * 1024;
export const EXPLAIN_REQUESTS_PER_SECOND = 4;
/** Deadline of one chain read of the inspector, ms. */
const CHAIN_READ_TIMEOUT_MS = 10_000;

export interface ExplorerOptions {
  /** The built page: explorer/build/ (index.html, main.js, main.css). */
  bundleDir: string;
  /** What the page reads (served as config.json). */
  config: ExplorerConfig;
  /** The chain whose oracle judges pasted proofs: its JSON-RPC (read only) and the oracle's address. */
  inspector: { rpcUrl: string; oracle: Address };
}

/**
 * The explorer's configuration for a local network: the first chain (the one the gateways front), its first
 * gateway, every node, and the relayer's operator API when one runs. Throws when the network has no gateway.
 */
export function explorerConfigFromNetwork(network: NetworkFileJson, relayerApi: string | null): { config: ExplorerConfig; inspector: ExplorerOptions["inspector"] } {
  const chain = network.chains[0];
  const gateway = network.temporalRpc?.[0];
  if (chain === undefined) throw new Error("the network file lists no chain");
  if (gateway === undefined) throw new Error("the network file lists no temporal gateway (temporalRpc): the explorer reads blocks from one");
  return {
    config: { chain: { name: chain.name, chainId: chain.chainId }, gateway, nodes: [...(network.nodes ?? [])], relayer: relayerApi, explain: "explain" },
    inspector: { rpcUrl: chain.rpcUrl, oracle: chain.oracle as Address },
  };
}

/** The package's built page: explorer/build/ at its root (this module runs from catalog/ or from dist/catalog/). */
export function packagedExplorerDir(): string {
  const root = basename(dirname(__dirname)) === "dist" ? join(__dirname, "..", "..") : join(__dirname, "..");
  return join(root, "explorer", "build");
}

/** The explorer's options from the catalog's settings: the network file read and checked now. */
export function explorerOptionsOf(config: Pick<CatalogConfig, "explorerNetworkFile" | "explorerRelayerUrl" | "explorerDir">): ExplorerOptions {
  const file = resolve(config.explorerNetworkFile);
  const json: unknown = JSON.parse(readFileSync(file, "utf8"));
  parseNetwork(json, file); // refuses a malformed network file with the field it names
  const { config: explorerConfig, inspector } = explorerConfigFromNetwork(json as NetworkFileJson, config.explorerRelayerUrl === "" ? null : config.explorerRelayerUrl);
  return { bundleDir: config.explorerDir === "" ? packagedExplorerDir() : resolve(config.explorerDir), config: explorerConfig, inspector };
}

/** explainTimeProof's answer as JSON (ns as decimal strings) with every rule's outcome. */
async function explain(publicClient: PublicClient, oracle: Address, body: unknown): Promise<ExplainAnswer> {
  const proof = contractProofFromJson(body);
  const explained = await explainTimeProof(publicClient, oracle, proof);
  const { evidence } = explained;
  return {
    valid: explained.valid,
    reason: explained.reason,
    detail: explained.detail,
    onChainValid: explained.onChainValid,
    hint: explained.hint,
    rules: ruleVerdicts(explained.reason),
    evidence: {
      ...evidence,
      chainNowNs: evidence.chainNowNs.toString(),
      nanoMoment: evidence.nanoMoment.toString(),
      ageNs: evidence.ageNs.toString(),
      maxAttestationAgeNs: evidence.maxAttestationAgeNs.toString(),
      maxFutureDriftNs: evidence.maxFutureDriftNs.toString(),
      maxAcceptableDriftNs: evidence.maxAcceptableDriftNs.toString(),
    },
  };
}

/** Registers the explorer's routes under /explorer/ on `app` (which may already use @fastify/static elsewhere). */
export async function registerExplorer(app: FastifyInstance, options: ExplorerOptions): Promise<void> {
  if (!existsSync(join(options.bundleDir, "index.html"))) {
    throw new Error(`the explorer is not built: no index.html in ${options.bundleDir} (npm run build:explorer)`);
  }
  const publicClient = createPublicClient({ transport: http(options.inspector.rpcUrl, { timeout: CHAIN_READ_TIMEOUT_MS, retryCount: 0 }) }) as PublicClient;
  const limiter = new RateLimiter({ ratePerSecond: EXPLAIN_REQUESTS_PER_SECOND });
  const config = JSON.stringify(options.config);

  await app.register(fastifyStatic, {
    root: options.bundleDir,
    prefix: EXPLORER_PREFIX,
    decorateReply: false, // the catalog's own registration decorates the reply already
    redirect: true, // /explorer → /explorer/
    index: ["index.html"],
    allowedPath: (path) => !path.split("/").some((part) => part.startsWith(".")), // not the build stamp
    setHeaders: (response) => response.setHeader("x-content-type-options", "nosniff"),
  });
  app.get(`${EXPLORER_PREFIX}config.json`, async (_request, reply) => reply.header("cache-control", "no-store").type("application/json").send(config));
  app.post(`${EXPLORER_PREFIX}explain`, { bodyLimit: MAX_EXPLAIN_BODY_BYTES }, async (request, reply) => {
    if (!limiter.tryTake(request.ip)) {
      return reply.code(429).header("retry-after", "1").send({ statusCode: 429, error: "Too Many Requests", message: `at most ${EXPLAIN_REQUESTS_PER_SECOND} inspections per second per client` });
    }
    try {
      return await explain(publicClient, options.inspector.oracle, request.body);
    } catch (error) {
      // A proof that is no proof: the verifier's rule 0 (malformed-proof), with the field it names.
      if (error instanceof AtsError && (error.code === "VALIDATION" || error.code === "PROTOCOL")) {
        return reply.code(400).send({ statusCode: 400, error: "Bad Request", message: `malformed-proof (§6.2 rule 0): ${error.message}` });
      }
      throw error;
    }
  });
}
