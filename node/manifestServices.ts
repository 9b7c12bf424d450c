/**
 * `ats-node manifest verify`'s live half: every service of a manifest's catalog (wire/manifest.ts) is asked, now,
 * for what its name promises, and each answers ok with the evidence it gave, or failed with what went wrong (a
 * refused connection, a timeout, a wrong chain, an answer off its shape). Checks are read-only and cost the service
 * nothing it keeps: no faucet nonce is issued (a nonce counts against the client's hourly claims), the faucet's
 * terms are read instead.
 *
 * Detail: docs/catalog.md "In the local network and the manifest".
 */
import { createSocket } from "node:dgram";
import { connect as connectHttp2 } from "node:http2";
import WebSocket from "ws";
import type { Hex } from "viem";
import { rootCauseMessage } from "../protocol/errors";
import type { NetworkManifest } from "../wire/manifest";
import { TIME_HOST_SERVICE } from "../wire/manifest";
import { decodeNtpReply, encodeNtpRequest } from "./ntp/packet";

/*
 * By name (the catalog's names, docs/protocol.md §9.5; the local network's in docs/local-network.md):
 * - `rpc`: eth_chainId is the manifest's chain id; `time`: the temporal JSON-RPC serves the manifest's chain id and
 *   genesis hash (client/temporal.ts verifyChainIdentity);
 * - `node-N`: GET /node/info answers a node id, the one `meshPeers` lists for that endpoint when it lists it;
 * - `downloads`: GET answers the JSON index of releases (catalog/downloads.ts);
 * - `evidence`: an identifier nobody published is 404 and a malformed one 400, each as a JSON error
 *   (catalog/ipfs.ts: the gateway parses identifiers and serves only its own store);
 * - `faucet`: GET answers its terms, for the manifest's chain id (catalog/faucet.ts);
 * - `explorer`: the page is HTML and its config.json names the manifest's chain (catalog/explorer.ts);
 * - `time-host`: an NTPv4 request gets a server reply (mode 4) with a stratum;
 * - any ws(s):// service: the WebSocket handshake completes; `…-grpc`: an HTTP/2 request gets a grpc-status;
 * - any other http(s):// service: it answers HTTP below 500.
 */
/** Each check's deadline, ms. */
export const SERVICE_CHECK_TIMEOUT_MS = 5_000;
/** Largest answer body a check reads, bytes (a releases index of 200 releases is well under). */
const MAX_ANSWER_BYTES = 1024 * 1024;
/**
 * A well-formed identifier (CIDv1, raw, sha2-256) of content no gateway is given: the CID of the UTF-8 text
 * "ats-node manifest verify: content no gateway holds" (a test recomputes it).
 */
export const UNPUBLISHED_CONTENT_ID = "bafkreidd5633uhmakgdszzz4pmevuwwemzggwzn3lj6kepfj6qp5jukmp4";

export type ServiceVerdict = { url: string; ok: true; evidence: string } | { url: string; ok: false; error: string };

export interface ServiceCheckOptions {
  /** The `time` service's URL to check instead of the manifest's (`--rpc`). */
  timeUrl?: string;
  timeoutMs?: number;
}

/** What went wrong, with its root cause when that says more (e.g. "fetch failed: connect ECONNREFUSED …"). */
function failureText(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const root = rootCauseMessage(error);
  return root === message || message.includes(root) ? message : `${message}: ${root}`;
}

async function readBounded(response: Response): Promise<string> {
  const text = await response.text();
  if (Buffer.byteLength(text) > MAX_ANSWER_BYTES) throw new Error(`answered more than ${MAX_ANSWER_BYTES} bytes`);
  return text;
}

/** GET (or POST a JSON body) → status, content type and the parsed JSON body (null when not JSON). */
async function request(url: string, timeoutMs: number, body?: unknown): Promise<{ status: number; type: string; text: string; json: unknown }> {
  const response = await fetch(url, {
    method: body === undefined ? "GET" : "POST",
    ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    redirect: "error",
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await readBounded(response);
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON: the check says what it expected
  }
  return { status: response.status, type: response.headers.get("content-type") ?? "", text, json };
}

function expectStatus(answer: { status: number; text: string }, status: number, what: string): void {
  if (answer.status !== status) throw new Error(`${what} answered HTTP ${answer.status}, not ${status}: ${answer.text.slice(0, 200)}`);
}

async function checkRpc(url: string, manifest: NetworkManifest, timeoutMs: number): Promise<string> {
  const answer = await request(url, timeoutMs, { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] });
  expectStatus(answer, 200, "eth_chainId");
  const result = (answer.json as { result?: unknown } | null)?.result;
  if (typeof result !== "string" || !/^0x[0-9a-f]+$/i.test(result)) throw new Error(`eth_chainId answered no chain id: ${answer.text.slice(0, 200)}`);
  const chainId = Number(BigInt(result));
  if (chainId !== manifest.chain.evmChainId) throw new Error(`serves chain id ${chainId}, the manifest says ${manifest.chain.evmChainId}`);
  return `eth_chainId ${chainId}`;
}

async function checkTime(url: string, manifest: NetworkManifest, timeoutMs: number): Promise<string> {
  const { createTemporalClient } = await import("../client/temporal");
  const client = createTemporalClient({ url, retries: 1, timeoutMs, expected: { chainId: manifest.chain.evmChainId, genesisHash: manifest.chain.genesisHash as Hex } });
  await client.verifyChainIdentity();
  return `chain id ${manifest.chain.evmChainId} and genesis ${manifest.chain.genesisHash}`;
}

async function checkNode(url: string, manifest: NetworkManifest, timeoutMs: number): Promise<string> {
  const answer = await request(new URL("/node/info", url).href, timeoutMs);
  expectStatus(answer, 200, "GET /node/info");
  const nodeId = (answer.json as { nodeId?: unknown } | null)?.nodeId;
  if (typeof nodeId !== "string") throw new Error(`GET /node/info answered no nodeId: ${answer.text.slice(0, 200)}`);
  const peer = manifest.meshPeers.find((entry) => entry.endpoint === url);
  if (peer !== undefined && peer.nodeId.toLowerCase() !== nodeId.toLowerCase()) throw new Error(`is node ${nodeId}, the manifest's meshPeers say ${peer.nodeId}`);
  return `node ${nodeId}${peer === undefined ? "" : " (as meshPeers lists it)"}`;
}

async function checkDownloads(url: string, timeoutMs: number): Promise<string> {
  const answer = await request(url, timeoutMs);
  expectStatus(answer, 200, "the releases index");
  const releases = (answer.json as { releases?: unknown } | null)?.releases;
  if (!Array.isArray(releases)) throw new Error(`is not a releases index (no "releases" list): ${answer.text.slice(0, 200)}`);
  const newest = (releases[0] as { releaseId?: unknown } | undefined)?.releaseId;
  return `releases index lists ${releases.length}${typeof newest === "string" ? `, newest ${newest}` : ""}`;
}

async function checkEvidence(url: string, timeoutMs: number): Promise<string> {
  const base = url.endsWith("/") ? url : `${url}/`;
  const absent = await request(`${base}${UNPUBLISHED_CONTENT_ID}`, timeoutMs);
  expectStatus(absent, 404, "an unpublished CID");
  const malformed = await request(`${base}not-a-cid`, timeoutMs);
  expectStatus(malformed, 400, "a malformed CID");
  for (const answer of [absent, malformed]) {
    if (typeof (answer.json as { message?: unknown } | null)?.message !== "string") throw new Error(`answered HTTP ${answer.status} without a JSON error: ${answer.text.slice(0, 200)}`);
  }
  return `404 for an unpublished CID, 400 for a malformed one ("${(malformed.json as { message: string }).message.slice(0, 80)}")`;
}

async function checkFaucet(url: string, manifest: NetworkManifest, timeoutMs: number): Promise<string> {
  const answer = await request(url, timeoutMs);
  expectStatus(answer, 200, "the faucet's terms");
  const terms = answer.json as { chainId?: unknown; amountWei?: unknown; domain?: unknown } | null;
  if (typeof terms?.chainId !== "number" || typeof terms.amountWei !== "string") throw new Error(`answered no faucet terms: ${answer.text.slice(0, 200)}`);
  if (terms.chainId !== manifest.chain.evmChainId) throw new Error(`funds chain ${terms.chainId}, the manifest says ${manifest.chain.evmChainId}`);
  return `funds chain ${terms.chainId}, ${terms.amountWei} wei per sign-in at ${String(terms.domain)}`;
}

async function checkExplorer(url: string, manifest: NetworkManifest, timeoutMs: number): Promise<string> {
  const page = await request(url, timeoutMs);
  expectStatus(page, 200, "the explorer's page");
  if (!page.type.startsWith("text/html")) throw new Error(`the page is ${page.type || "untyped"}, not text/html`);
  const config = await request(new URL("config.json", url.endsWith("/") ? url : `${url}/`).href, timeoutMs);
  expectStatus(config, 200, "the explorer's config.json");
  const chainId = (config.json as { chain?: { chainId?: unknown } } | null)?.chain?.chainId;
  if (chainId !== manifest.chain.evmChainId) throw new Error(`its config.json shows chain ${String(chainId)}, the manifest says ${manifest.chain.evmChainId}`);
  return `page ${page.type.split(";")[0]!}, config.json shows chain ${chainId}`;
}

async function checkHttpAnswers(url: string, timeoutMs: number): Promise<string> {
  const response = await fetch(url, { redirect: "manual", signal: AbortSignal.timeout(timeoutMs) });
  await response.body?.cancel();
  if (response.status >= 500) throw new Error(`answered HTTP ${response.status}`);
  return `answered HTTP ${response.status}`;
}

function checkWebSocket(url: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { handshakeTimeout: timeoutMs, maxPayload: 64 * 1024 });
    socket.once("open", () => {
      socket.terminate();
      resolve("WebSocket handshake completed");
    });
    socket.once("unexpected-response", (_request, response) => {
      socket.terminate();
      reject(new Error(`refused the WebSocket handshake with HTTP ${response.statusCode}`));
    });
    socket.on("error", reject); // a later error after settling changes nothing
  });
}

function checkGrpc(url: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const session = connectHttp2(url);
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no HTTP/2 answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const done = (settle: () => void) => {
      clearTimeout(timer);
      session.close();
      settle();
    };
    session.on("error", (error) => done(() => reject(error)));
    // A method no server has: a gRPC server answers it with a grpc-status (12, UNIMPLEMENTED) in its trailers-only answer.
    const stream = session.request({ ":method": "POST", ":path": "/ats.ManifestVerify/Probe", "content-type": "application/grpc", te: "trailers" });
    stream.once("response", (headers) => {
      const status = headers["grpc-status"];
      done(() => (status === undefined ? reject(new Error(`answered HTTP/2 ${String(headers[":status"])} without a grpc-status: not a gRPC server`)) : resolve(`gRPC server (grpc-status ${String(status)} for an unknown method)`)));
    });
    stream.on("error", (error) => done(() => reject(error)));
    stream.end();
  });
}

function checkNtp(url: string, timeoutMs: number): Promise<string> {
  const match = /^ntp:\/\/\[?([^\]]+?)\]?:(\d+)$/.exec(url);
  if (match === null) return Promise.reject(new Error("is not ntp://host:port"));
  const [, host, port] = match as unknown as [string, string, string];
  return new Promise((resolve, reject) => {
    const socket = createSocket(host.includes(":") ? "udp6" : "udp4");
    const timer = setTimeout(() => {
      socket.close();
      reject(new Error(`no NTP reply within ${timeoutMs} ms`));
    }, timeoutMs);
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      socket.close();
      settle();
    };
    socket.on("error", (error) => finish(() => reject(error)));
    socket.once("message", (datagram) => {
      try {
        const reply = decodeNtpReply(datagram, BigInt(Date.now()) * 1_000_000n);
        if (reply.mode !== 4) throw new Error(`answered NTP mode ${reply.mode}, not a server reply (4)`);
        if (reply.stratum === 0) throw new Error(`answered a kiss-o'-death (${reply.referenceId})`);
        finish(() => resolve(`NTPv${reply.version} server reply, stratum ${reply.stratum}, reference ${reply.referenceId}`));
      } catch (error) {
        finish(() => reject(error));
      }
    });
    socket.send(encodeNtpRequest(BigInt(Date.now()) * 1_000_000n), Number(port), host);
  });
}

/** The check a service gets, by its name and URL (see the module comment). */
function checkFor(name: string, url: string, manifest: NetworkManifest, timeoutMs: number): Promise<string> {
  if (name === "rpc") return checkRpc(url, manifest, timeoutMs);
  if (name === "time") return checkTime(url, manifest, timeoutMs);
  if (name === TIME_HOST_SERVICE) return checkNtp(url, timeoutMs);
  if (/^wss?:\/\//.test(url)) return checkWebSocket(url, timeoutMs);
  if (name.endsWith("-grpc")) return checkGrpc(url, timeoutMs);
  if (/^node-\d+$/.test(name)) return checkNode(url, manifest, timeoutMs);
  if (name === "downloads") return checkDownloads(url, timeoutMs);
  if (name === "evidence") return checkEvidence(url, timeoutMs);
  if (name === "faucet") return checkFaucet(url, manifest, timeoutMs);
  if (name === "explorer") return checkExplorer(url, manifest, timeoutMs);
  return checkHttpAnswers(url, timeoutMs);
}

/** Checks every service of the manifest's catalog at once; each verdict by service name, in the manifest's order. */
export async function checkManifestServices(manifest: NetworkManifest, options: ServiceCheckOptions = {}): Promise<Record<string, ServiceVerdict>> {
  const timeoutMs = options.timeoutMs ?? SERVICE_CHECK_TIMEOUT_MS;
  const services = Object.entries({ ...manifest.services, ...(options.timeUrl === undefined ? {} : { time: options.timeUrl }) });
  const verdicts = await Promise.all(
    services.map(async ([name, url]): Promise<[string, ServiceVerdict]> => {
      try {
        return [name, { url, ok: true, evidence: await checkFor(name, url, manifest, timeoutMs) }];
      } catch (error) {
        return [name, { url, ok: false, error: failureText(error) }];
      }
    }),
  );
  return Object.fromEntries(verdicts);
}
