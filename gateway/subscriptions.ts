/**
 * What the gateway's subscriptions carry (./ws.ts), pure but for the upstream fetches: `eth_subscribe` params
 * checked as geth checks them, a log filter matched as geth matches it, and the headers and logs of final blocks,
 * fetched from the chain once per block however many subscriptions want them.
 *
 * Log filters (geth's eth/filters rules): `address` one 20-byte address or a list of them (at most
 * MAX_FILTER_ADDRESSES); `topics` at most 4 positions (MAX_TOPIC_POSITIONS), each null (any), one 32-byte topic,
 * or a list of at most MAX_TOPICS_PER_POSITION alternatives (a null among them makes the position match any). A
 * log matches when its address is listed (or none is) and each position's topic is among that position's
 * alternatives; a filter with more positions than the log has topics does not match it, as in geth.
 */
import { JSON_RPC_ERRORS, JsonRpcError } from "./jsonrpc";
import type { Upstream } from "./methods";
import type { BlockRecord } from "./store";

/** geth: vm.LOG4 - vm.LOG0. */
export const MAX_TOPIC_POSITIONS = 4;
/** geth's maxSubTopics. */
export const MAX_TOPICS_PER_POSITION = 1_000;
export const MAX_FILTER_ADDRESSES = 1_000;
/** Blocks whose header and logs are kept for subscribers that are behind (each fetched once while kept). */
const CACHED_BLOCKS = 256;

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const TOPIC = /^0x[0-9a-fA-F]{64}$/;

export interface LogFilter {
  /** Lower-case addresses; null matches any. */
  addresses: ReadonlySet<string> | null;
  /** Per position: lower-case alternatives, or null for any. */
  topics: readonly (ReadonlySet<string> | null)[];
}

export interface RpcLog {
  address: string;
  topics: string[];
  [field: string]: unknown;
}

export type EthSubscription = { kind: "newHeads" } | { kind: "logs"; filter: LogFilter };

function invalidParams(message: string): JsonRpcError {
  return new JsonRpcError(JSON_RPC_ERRORS.INVALID_PARAMS, "Invalid params", message);
}

function addressesOf(value: unknown): ReadonlySet<string> | null {
  if (value === undefined || value === null) return null;
  const list = Array.isArray(value) ? value : [value];
  if (list.length > MAX_FILTER_ADDRESSES) throw invalidParams(`exceed max addresses: at most ${MAX_FILTER_ADDRESSES}`);
  for (const address of list) if (typeof address !== "string" || !ADDRESS.test(address)) throw invalidParams("invalid address: each must be 20 bytes of 0x-hex");
  // An empty list, as in geth, is no restriction.
  return list.length === 0 ? null : new Set(list.map((address: string) => address.toLowerCase()));
}

function topicOf(value: unknown): string {
  if (typeof value !== "string" || !TOPIC.test(value)) throw invalidParams("invalid topic(s): each must be 32 bytes of 0x-hex, null, or a list of those");
  return value.toLowerCase();
}

function positionOf(value: unknown): ReadonlySet<string> | null {
  if (value === null) return null;
  if (!Array.isArray(value)) return new Set([topicOf(value)]);
  if (value.length > MAX_TOPICS_PER_POSITION) throw invalidParams(`exceed max topics: at most ${MAX_TOPICS_PER_POSITION} alternatives per position`);
  if (value.length === 0 || value.includes(null)) return null;
  return new Set(value.map(topicOf));
}

/** A `logs` filter object, checked whole: only `address` and `topics` (a subscription has no block range). */
export function parseLogFilter(value: unknown): LogFilter {
  if (value === undefined) return { addresses: null, topics: [] };
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalidParams("the logs filter must be an object { address?, topics? }");
  for (const key of Object.keys(value)) {
    if (key !== "address" && key !== "topics") throw invalidParams(`the logs filter takes address and topics only, not "${key}" (a subscription follows new final blocks)`);
  }
  const { address, topics } = value as { address?: unknown; topics?: unknown };
  if (topics !== undefined && topics !== null && !Array.isArray(topics)) throw invalidParams("invalid topic(s): topics must be a list");
  const positions = (topics ?? []) as unknown[];
  if (positions.length > MAX_TOPIC_POSITIONS) throw invalidParams(`exceed max topics: at most ${MAX_TOPIC_POSITIONS} positions`);
  return { addresses: addressesOf(address), topics: positions.map(positionOf) };
}

export function logMatches(filter: LogFilter, log: RpcLog): boolean {
  if (filter.addresses !== null && !filter.addresses.has(log.address.toLowerCase())) return false;
  if (filter.topics.length > log.topics.length) return false;
  return filter.topics.every((alternatives, position) => alternatives === null || alternatives.has(log.topics[position]!.toLowerCase()));
}

/** `eth_subscribe` params: ["newHeads"] or ["logs", filter?]; anything else names what is served. */
export function parseEthSubscribe(params: readonly unknown[] | Record<string, unknown>): EthSubscription {
  if (!Array.isArray(params) || params.length === 0) throw invalidParams('expected ["newHeads"] or ["logs", { address?, topics? }]');
  const [kind, ...rest] = params as unknown[];
  if (kind === "newHeads") {
    if (rest.length > 0) throw invalidParams("newHeads takes no options");
    return { kind: "newHeads" };
  }
  if (kind === "logs") {
    if (rest.length > 1) throw invalidParams('expected ["logs", { address?, topics? }]');
    return { kind: "logs", filter: parseLogFilter(rest[0]) };
  }
  throw invalidParams(`unsupported subscription ${JSON.stringify(String(kind)).slice(0, 80)}: this gateway serves newHeads and logs`);
}

/** Block fields that are not the header's (geth's newHeads carries the header: RPCMarshalHeader). */
const NOT_HEADER = new Set(["transactions", "uncles", "size", "totalDifficulty", "withdrawals"]);

/** A block as eth_getBlockByHash gives it, reduced to its header. */
export function headerOf(block: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(block).filter(([key]) => !NOT_HEADER.has(key)));
}

/**
 * The headers and logs of recorded blocks, fetched from the chain by block hash (so they are the recorded block's,
 * whatever happened upstream since) once per block and kept for the last CACHED_BLOCKS blocks. A block the chain
 * no longer has gives null: the caller waits for the follower to record its replacement, and never skips it.
 */
export class FinalBlockFeed {
  readonly #headers = new Map<string, Promise<Record<string, unknown> | null>>();
  readonly #logs = new Map<string, Promise<RpcLog[] | null>>();

  constructor(private readonly upstream: Upstream) {}

  header(block: BlockRecord): Promise<Record<string, unknown> | null> {
    return this.#cached(this.#headers, block.hash, async () => {
      const full = (await this.upstream.call("eth_getBlockByHash", [block.hash, false])) as Record<string, unknown> | null;
      return full === null ? null : headerOf(full);
    });
  }

  logs(block: BlockRecord): Promise<RpcLog[] | null> {
    return this.#cached(this.#logs, block.hash, async () => {
      // Is the block still there? eth_getLogs by a hash the chain does not know is an error on some chains and
      // an empty list on others: asking for its header first makes both mean "wait".
      if ((await this.header(block)) === null) return null;
      return (await this.upstream.call("eth_getLogs", [{ blockHash: block.hash }])) as RpcLog[];
    });
  }

  #cached<T>(cache: Map<string, Promise<T | null>>, hash: string, fetch: () => Promise<T | null>): Promise<T | null> {
    const hit = cache.get(hash);
    if (hit !== undefined) return hit;
    const fetched = fetch().then((value) => {
      if (value === null) cache.delete(hash); // asked again next time: the chain may have it by then
      return value;
    });
    fetched.catch(() => cache.delete(hash)); // a failed fetch is retried at the next pump
    cache.set(hash, fetched);
    if (cache.size > CACHED_BLOCKS) cache.delete(cache.keys().next().value!);
    return fetched;
  }
}
