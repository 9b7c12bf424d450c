/**
 * What the agent can see of a running node, read over its public interfaces only: GET /node/info (identity,
 * version, role), its temporal JSON-RPC (chain identity, finalized head, health, mesh state, time quality) and,
 * through that RPC, the oracle's registration of its node and card. Nothing here writes.
 */
import { decodeFunctionResult, encodeFunctionData, type Address, type Hex } from "viem";
import { timeOracleAbi } from "../abi";
import { createTemporalClient, type TemporalClient } from "../client/temporal";

/** A node's chain view, health and mesh, as one reading. */
export interface NodeReading {
  nodeId: string;
  cardId: string;
  version: string;
  /** The source revision the node reports (GET /node/info `revision`); null when it reports none. */
  revision: string | null;
  role: string;
  chainId: number;
  genesisHash: string;
  finalizedNumber: bigint | null;
  peers: number;
  isSyncing: boolean;
  convergenceState: string;
  members: number;
  timeQuality: number | null;
  /** Oracle status of the node and card (0 none, 1 active, 2 inactive/revoked) and their validity windows, as text. */
  registration: string;
}

export interface Probe {
  read(): Promise<NodeReading>;
  /** The hash of block `number` as this node's RPC serves it. */
  blockHash(number: bigint): Promise<string | null>;
}

const TIMEOUT_MS = 3_000;

export function rpcClient(url: string): TemporalClient {
  return createTemporalClient({ url, retries: 0, timeoutMs: TIMEOUT_MS });
}

export async function finalizedNumberOf(client: TemporalClient): Promise<bigint | null> {
  const head = (await client.call("chain_getFinalizedHead")) as string | null;
  if (head === null) return null;
  const block = (await client.call("eth_getBlockByHash", [head, false])) as { number: string } | null;
  return block === null ? null : BigInt(block.number);
}

export async function blockHashOf(client: TemporalClient, number: bigint): Promise<string | null> {
  const hash = (await client.call("chain_getBlockHash", [`0x${number.toString(16)}`])) as string | null;
  return hash === null ? null : hash.toLowerCase();
}

export function createProbe(endpoints: { rest: string; rpc: string }, oracle: Address): Probe {
  const rpc = rpcClient(endpoints.rpc);
  const ethCall = async (data: Hex) => (await rpc.call("eth_call", [{ to: oracle, data }, "latest"])) as Hex;
  const asText = (what: string, entry: { status: number; validFromNs: bigint; validUntilNs: bigint }) => `${what}:${entry.status}:${entry.validFromNs}:${entry.validUntilNs}`;
  async function nodeRegistration(node: Address): Promise<string> {
    const data = await ethCall(encodeFunctionData({ abi: timeOracleAbi, functionName: "getNode", args: [node] }));
    return asText("getNode", decodeFunctionResult({ abi: timeOracleAbi, functionName: "getNode", data }));
  }
  async function cardRegistration(cardId: Hex): Promise<string> {
    const data = await ethCall(encodeFunctionData({ abi: timeOracleAbi, functionName: "getCard", args: [cardId] }));
    return asText("getCard", decodeFunctionResult({ abi: timeOracleAbi, functionName: "getCard", data }));
  }
  return {
    async read() {
      const response = await fetch(new URL("/node/info", endpoints.rest), { signal: AbortSignal.timeout(TIMEOUT_MS) });
      if (!response.ok) throw new Error(`GET /node/info answered HTTP ${response.status}`);
      const info = (await response.json()) as { nodeId: string; cardId: string; version: string; revision?: string | null; role: string };
      const chainId = Number(BigInt((await rpc.call("eth_chainId")) as string));
      const genesisHash = String(await rpc.call("chain_getBlockHash", [0])).toLowerCase();
      const health = (await rpc.call("system_health")) as { peers: number; isSyncing: boolean };
      const mesh = (await rpc.call("temporal_getMeshState")) as { convergenceState: string; members: number };
      const quality = (await rpc.call("temporal_getValidatorTimeQuality")) as { timeQuality: number | null } | null;
      const registration = `${await nodeRegistration(info.nodeId as Address)}|${await cardRegistration(info.cardId as Hex)}`;
      return {
        nodeId: info.nodeId.toLowerCase(),
        cardId: info.cardId.toLowerCase(),
        version: info.version,
        revision: typeof info.revision === "string" ? info.revision : null,
        role: info.role,
        chainId,
        genesisHash,
        finalizedNumber: await finalizedNumberOf(rpc),
        peers: health.peers,
        isSyncing: health.isSyncing,
        convergenceState: mesh.convergenceState,
        members: mesh.members,
        timeQuality: typeof quality?.timeQuality === "number" ? quality.timeQuality : null,
        registration,
      };
    },
    blockHash: (number) => blockHashOf(rpc, number),
  };
}
