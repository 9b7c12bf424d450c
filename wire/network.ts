/**
 * The network file: which chains the relayer serves (RPC URL, chain id, contract addresses, how deep a block must
 * be before its events count) and which attesting nodes it asks for proofs. `npm start` writes one
 * (`.ats/network.json`); an operator writes their own. Validated once, here, by a closed schema: an unknown key,
 * a malformed address or a chain listed twice is a start-up error naming the field. It lies in wire/ because three
 * programs agree on it: the relayer reads it, the catalog's explorer shows it, `npm start` writes it.
 */
import { readFileSync } from "node:fs";
import { Type, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { getAddress } from "viem";
import { ValidationError } from "../protocol/errors";
import type { Address } from "../protocol/types";

export const NETWORK_FILE_VERSION = "ats-network/1";
/** Chains one relayer serves at most (bounded loops over chains and pairs). */
export const MAX_CHAINS = 16;
/** Deepest confirmation count accepted (a deeper wait is better served by "finalized"). */
export const MAX_CONFIRMATIONS = 256;

const AddressString = Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" });
const DecimalString = Type.String({ pattern: "^(0|[1-9][0-9]{0,19})$" });

const ChainEntry = Type.Object(
  {
    name: Type.String({ pattern: "^[a-z][a-z0-9-]{0,31}$" }),
    chainId: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
    rpcUrl: Type.String({ pattern: "^https?://", maxLength: 2048 }),
    oracle: AddressString,
    scheduler: Type.Optional(AddressString),
    bridge: Type.Optional(AddressString),
    /** First block whose events count (the deployment block), decimal. */
    startBlock: DecimalString,
    /** Blocks on top of an event's block before it is acted on (0: the head), or "finalized". */
    confirmations: Type.Union([Type.Integer({ minimum: 0, maximum: MAX_CONFIRMATIONS }), Type.Literal("finalized")]),
  },
  { additionalProperties: false },
);

export const NetworkFileSchema = Type.Object(
  {
    version: Type.Literal(NETWORK_FILE_VERSION),
    chains: Type.Array(ChainEntry, { minItems: 1, maxItems: MAX_CHAINS }),
    /** REST base URLs of attesting nodes (a cluster client picks among them). */
    nodes: Type.Array(Type.String({ pattern: "^https?://", maxLength: 2048 }), { minItems: 1, maxItems: 32 }),
    /** The nodes' temporal JSON-RPC gateways (docs/protocol.md §9.5), for other tools; the relayer does not use them. */
    temporalRpc: Type.Optional(Type.Array(Type.String({ pattern: "^https?://", maxLength: 2048 }), { maxItems: 32 })),
    /** The nodes' NTP time hosts as ntp://host:port (docs/protocol.md §9.8), for other tools; the relayer does not use them. */
    ntp: Type.Optional(Type.Array(Type.String({ pattern: "^ntp://[^\\s]{1,2040}$" }), { maxItems: 32 })),
    /** A local network's programs (`npm start`): each process and every endpoint it serves, by name; for tools and tests. */
    programs: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 64 }),
            program: Type.String({ minLength: 1, maxLength: 64 }),
            pid: Type.Integer({ minimum: 1 }),
            endpoints: Type.Record(Type.String({ pattern: "^[a-z][a-zA-Z0-9-]{0,31}$" }), Type.String({ minLength: 1, maxLength: 2048 })),
          },
          { additionalProperties: false },
        ),
        { maxItems: 64 },
      ),
    ),
    /** "stopped": the network this file describes has been stopped, its endpoints are closed (the relayer refuses it). */
    status: Type.Optional(Type.Union([Type.Literal("running"), Type.Literal("stopped")])),
  },
  { additionalProperties: false },
);
export type NetworkFileJson = Static<typeof NetworkFileSchema>;

/** One chain, validated and normalised (checksummed addresses, bigint start block). */
export interface ChainConfig {
  name: string;
  chainId: number;
  rpcUrl: string;
  oracle: Address;
  scheduler: Address | undefined;
  bridge: Address | undefined;
  startBlock: bigint;
  confirmations: number | "finalized";
}

export interface NetworkConfig {
  chains: readonly ChainConfig[];
  nodes: readonly string[];
}

/** Validates a parsed network file; `source` names it in errors. */
export function parseNetwork(json: unknown, source: string): NetworkConfig {
  const problem = Value.Errors(NetworkFileSchema, json).First();
  if (problem !== undefined) {
    throw new ValidationError(`network${problem.path}`, `${source}: ${problem.message}`);
  }
  const file = json as NetworkFileJson;
  if (file.status === "stopped") throw new ValidationError("network/status", `${source}: the network it describes has been stopped (its endpoints are closed); start it again`);
  const seenIds = new Set<number>();
  const seenNames = new Set<string>();
  for (const chain of file.chains) {
    if (seenIds.has(chain.chainId)) throw new ValidationError("network/chains", `${source}: chain id ${chain.chainId} is listed twice`);
    if (seenNames.has(chain.name)) throw new ValidationError("network/chains", `${source}: chain name ${chain.name} is listed twice`);
    seenIds.add(chain.chainId);
    seenNames.add(chain.name);
  }
  return {
    chains: file.chains.map((chain) => ({
      name: chain.name,
      chainId: chain.chainId,
      rpcUrl: chain.rpcUrl,
      oracle: getAddress(chain.oracle),
      scheduler: chain.scheduler === undefined ? undefined : getAddress(chain.scheduler),
      bridge: chain.bridge === undefined ? undefined : getAddress(chain.bridge),
      startBlock: BigInt(chain.startBlock),
      confirmations: chain.confirmations,
    })),
    nodes: [...new Set(file.nodes)],
  };
}

export function loadNetworkFile(file: string): NetworkConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new ValidationError("config.networkFile", `${file} cannot be read: ${(error as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ValidationError("config.networkFile", `${file} is not JSON: ${(error as Error).message}`);
  }
  return parseNetwork(json, `network file ${file}`);
}
