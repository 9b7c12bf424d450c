/**
 * A whole local network on 127.0.0.1, as `npm start` runs it and the relayer's end-to-end tests use it:
 *
 * - attesting nodes: a mesh of `meshNodes` dev nodes (node/cluster.ts), or one dev node when meshNodes is 1;
 * - two chains: Hardhat node (or, with `chainKind: "anvil"`, anvil) processes with chain ids 31337 ("alpha") and
 *   31338 ("beta"), each with the oracle, scheduler, bridge and example vault deployed, and every node's card and
 *   address registered (nodeQuorum = the mesh's threshold);
 * - each node's NTP time host (node/ntp) on a free UDP port, named in the network file (`ntp`) and, node 1's, in
 *   the manifest's catalog as `time-host` (ntp://127.0.0.1:PORT; `ntsVerified: false`: no NTS is offered);
 * - the network file (wire/network.ts) and a relayer config beside it, in `dir`;
 * - optionally the relayer (`ats-relayer` as a child process);
 * - optionally the catalog (`ats-catalog` as a child process, catalog/): the time explorer of this network, the
 *   downloads of its own release, the evidence gateway the mesh's contradiction evidence is published into, and a
 *   faucet on alpha; each service in the network file (`programs`) and the manifest's catalog by name.
 *
 * Keys: the deployer, the relayer and the faucet use Hardhat's public development accounts #0, #1 and #3 (their keys
 * are printed in every Hardhat node banner, and anvil funds the same accounts; never use them on a real chain).
 * Nothing here reads outside the repository.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HardhatRuntimeEnvironment } from "hardhat/types";
import type { Logger } from "pino";
import { createPublicClient, createWalletClient, defineChain, getAddress, http, type Account, type Address, type Chain, type Hex, type PublicClient, type Transport, type WalletClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createTimeClient } from "../client";
import { childEnv, printedJson, startProgram } from "../lib/childProgram";
import { CLUSTER_MAX_ACCEPTABLE_DRIFT_NS, startDevCluster, type ClusterNode } from "../node/cluster";
import { publicDevIdentity } from "../node/devNode";
import { startDevNodeProcess } from "../node/devNodeProcess";
import { verifyCardCertificateChain } from "../protocol";
import { consensusThreshold } from "../protocol/consensus";
import { NETWORK_FILE_VERSION, type NetworkFileJson } from "../wire/network";
import { MANIFEST_VERSION, parseManifest, TIME_HOST_SERVICE } from "../wire/manifest";
import { ChainControl } from "./chainControl";
import { startChainProcess, stopChainProcess, type ChainKind, type ChainProcess } from "./chainProcess";
import { deployAttestedTime, type AttestedTimeDeployment, type CardRegistration, type NodeRegistration } from "../deploy";
import { startRelayerProcess, stopRelayerProcess, type RelayerProcess } from "./relayerProcess";
import type { CatalogServices } from "../catalog/server";
import type { RunningProgram } from "../lib/childProgram";

/**
 * Hardhat's development accounts #0–#3 (public test keys, funded with 10,000 ETH on every Hardhat node and by
 * anvil): development only, never on a real chain. The faucet has an account of its own so that its transfers never
 * race the deployer's or the relayer's nonces.
 */
export const HARDHAT_DEV_KEYS = {
  deployer: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  relayer: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  user: "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
  faucet: "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
} as const satisfies Record<string, Hex>;

/** How often the local catalog publishes the mesh's contradiction evidence, ms (the catalog's default is 10 s). */
const LOCAL_EVIDENCE_POLL_MS = 2_000;

/** The operator API key of the local relayer (a development value, printed by `npm start`). */
export const LOCAL_RELAYER_API_KEY = "local-operator-key";

/** The local chains mine a block at least this often, ms (and one per transaction). */
export const BLOCK_INTERVAL_MS = 1_000;

export const LOCAL_CHAINS = [
  { name: "alpha", chainId: 31337 },
  { name: "beta", chainId: 31338 },
] as const;

export interface LocalChain {
  readonly name: string;
  /** The EVM implementation it runs on. */
  readonly kind: ChainKind;
  /** Its development controls (mining, snapshots, reorgs on anvil) under one interface. */
  readonly control: ChainControl;
  readonly chainId: number;
  readonly rpcUrl: string;
  readonly process: ChainProcess;
  readonly deployment: AttestedTimeDeployment;
  readonly publicClient: PublicClient;
  /** Hardhat account #2, a dApp user. */
  readonly user: WalletClient;
}

export interface LocalNetwork {
  readonly chains: readonly LocalChain[];
  /** REST base URLs of the attesting nodes. */
  readonly nodes: readonly string[];
  /** Each node's temporal JSON-RPC gateway, in front of the first chain (alpha). */
  readonly temporalRpc: readonly string[];
  /** Each node's NTP time host, ntp://127.0.0.1:PORT. */
  readonly ntp: readonly string[];
  readonly networkFile: string;
  /** The network manifest of alpha (wire/manifest.ts): `ats-node manifest verify` checks endpoints against it. */
  readonly manifestFile: string;
  readonly relayerConfigFile: string;
  /** Environment the relayer needs beside its config file (its key). */
  readonly relayerEnv: NodeJS.ProcessEnv;
  relayer: RelayerProcess | undefined;
  catalog: CatalogProcess | undefined;
  /** Every process of the network and every endpoint it serves (also in the network file, `programs`). */
  programs: readonly NetworkProgram[];
  /** Starts the relayer process; `env` adds variables (a test's crash hook). */
  startRelayer(env?: NodeJS.ProcessEnv): Promise<RelayerProcess>;
  stopRelayer(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Starts the catalog process (after the relayer, whose queues its explorer shows): serves the releases under
   * `releasesDir`, names its services in the network file and the manifest.
   */
  startCatalog(options: { releasesDir: string }): Promise<CatalogProcess>;
  close(): Promise<void>;
}

/** `ats-catalog start` as a child process, and the URL of each service it runs (catalog/server.ts). */
export interface CatalogProcess {
  readonly program: RunningProgram<{ url: string; services: CatalogServices }>;
  readonly url: string;
  readonly services: CatalogServices;
}

/** The catalog's services by the names the network file and the manifest give them: the ones it runs. */
export function catalogServiceUrls(services: CatalogServices): Record<string, string> {
  const named: Record<string, string | null> = { explorer: services.explorer, downloads: services.downloads, evidence: services.evidence, faucet: services.faucet };
  return Object.fromEntries(Object.entries(named).filter((entry): entry is [string, string] => entry[1] !== null));
}

export interface StartLocalNetworkOptions {
  hre: Pick<HardhatRuntimeEnvironment, "viem">;
  /** Folder for the network file, the relayer's config and database. */
  dir: string;
  meshNodes: number;
  /** The EVM implementation of both chains (default hardhat). */
  chainKind?: ChainKind;
  /** Relayer settings beside the defaults (e.g. pollIntervalMs, pushHeartbeatMs). */
  relayerSettings?: Record<string, unknown>;
  /** Blocks on top of an event before the relayer acts on it (default 1). */
  confirmations?: number;
  nodeLogger: Logger;
  log?: (line: string) => void;
}

/** The viem chain of a local Hardhat node process. */
function localViemChain(rpcUrl: string, chainId: number): Chain {
  return defineChain({ id: chainId, name: `local-${chainId}`, nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
}

function walletFor(rpcUrl: string, chainId: number, key: Hex): WalletClient<Transport, Chain, Account> {
  return createWalletClient({ account: privateKeyToAccount(key), chain: localViemChain(rpcUrl, chainId), transport: http(rpcUrl) });
}

/** One process of the local network and its endpoints by name (the network file's `programs`). */
export type NetworkProgram = NonNullable<NetworkFileJson["programs"]>[number];

/** A node's endpoints by name: REST (and its /metrics), gRPC, the WebSocket stream, NTP, the mesh's UDP port. */
function nodeEndpoints(node: ClusterNode): Record<string, string> {
  const { rest, grpc, ws, ntp, mesh } = node.endpoints;
  const named: Record<string, string> = { rest, metrics: `${rest}/metrics`, ws };
  if (grpc !== "") named.grpc = grpc;
  if (ntp !== undefined && ntp !== "") named.ntp = ntp;
  if (mesh !== undefined && mesh !== "") named.mesh = mesh;
  return named;
}

/** Each node in the manifest's catalog: `node-N` (REST), `node-N-ws` (its stream), `node-N-grpc` (h2c, plaintext). */
function manifestNodeServices(nodes: readonly ClusterNode[]): Record<string, string> {
  return Object.fromEntries(
    nodes.flatMap((node, index) => [
      [`node-${index + 1}`, node.endpoints.rest],
      [`node-${index + 1}-ws`, node.endpoints.ws],
      ...(node.endpoints.grpc === "" ? [] : [[`node-${index + 1}-grpc`, `http://${node.endpoints.grpc}`]]),
    ]),
  );
}

/** The card and node of each attesting node, read from its /node/info and checked against the dev CA. */
async function registrationsOf(endpoints: readonly string[], trustedRootPem: string): Promise<{ cards: CardRegistration[]; nodes: NodeRegistration[] }> {
  const cards: CardRegistration[] = [];
  const nodes: NodeRegistration[] = [];
  for (const endpoint of endpoints) {
    const client = createTimeClient({ endpoint });
    try {
      const info = await client.info();
      const chain = await verifyCardCertificateChain({ chainPem: info.certificateChainPem, trustedRootsPem: [trustedRootPem], nowMs: Date.now(), cardId: info.cardId as Hex });
      if (!chain.valid) throw new Error(`node ${endpoint}: its card chain does not verify: ${chain.reason}`);
      cards.push({ publicKey: chain.publicKey });
      nodes.push({ address: getAddress(info.nodeId) });
    } finally {
      client.close();
    }
  }
  return { cards, nodes };
}

export async function startLocalNetwork(options: StartLocalNetworkOptions): Promise<LocalNetwork> {
  const log = options.log ?? (() => undefined);
  mkdirSync(options.dir, { recursive: true });
  const closers: (() => Promise<void>)[] = [];
  const closeAll = async () => {
    for (const close of closers.reverse()) await close().catch(() => undefined);
  };
  try {
    // The chains and the attesting nodes start side by side: the nodes need no chain (the gateway, started after
    // both, fronts alpha). Each node is a process of its own, with CORS for every origin on its public reads, so
    // that a dApp's development server (any localhost port) can read them from the browser: the nodes bind
    // loopback and serve only what anyone may read; a deployed node lists its dApps' origins instead.
    log(`starting: chains ${LOCAL_CHAINS.map((chain) => chain.name).join(", ")} and ${options.meshNodes === 1 ? "1 attesting node" : `${options.meshNodes} attesting nodes`}, each a process of its own`);
    const nodeSettings = {
      corsAllowedOrigins: ["*"],
      // The NTP time host on a free port of loopback (123 needs privileges and may be taken by the host's own NTP).
      ntpEnabled: true,
      ntpHost: "127.0.0.1",
      ntpPort: 0,
      logLevel: options.nodeLogger.level,
    };
    const onLogLine = (line: string) => options.nodeLogger.error(line);
    const chainsStarting = Promise.all(
      LOCAL_CHAINS.map(async ({ chainId }) => {
        const chainProcess = await startChainProcess(chainId, options.chainKind ?? "hardhat");
        closers.push(() => stopChainProcess(chainProcess));
        return chainProcess;
      }),
    );
    const nodesStarting = (async (): Promise<{ nodes: readonly ClusterNode[]; trustedRootPem: string }> => {
      if (options.meshNodes === 1) {
        // The public development card and node keys (node/devNode.ts publicDevIdentity), as `ats-node dev` runs.
        const identity = await publicDevIdentity();
        const dev = await startDevNodeProcess({ identity, env: {}, overrides: nodeSettings, name: "node 1", onLogLine });
        closers.push(() => dev.close());
        return { nodes: [{ nodeId: dev.nodeAddress, cardId: dev.cardId, endpoints: dev.node.endpoints, pid: dev.pid }], trustedRootPem: dev.trustedRootPem };
      }
      const cluster = await startDevCluster({ nodes: options.meshNodes, env: {}, cwd: process.cwd(), logger: () => options.nodeLogger, onLogLine, overrides: nodeSettings });
      closers.push(() => cluster.close());
      return cluster;
    })();
    const [chainProcesses, started] = await Promise.all([chainsStarting, nodesStarting]);
    const nodes = started.nodes;
    const trustedRootPem = started.trustedRootPem;
    const endpoints = nodes.map((node) => node.endpoints.rest);
    const ntp = nodes.map((node) => node.endpoints.ntp ?? "");
    log(`chains and nodes are up; the temporal gateway (a process of its own) in front of ${LOCAL_CHAINS[0].name}`);
    const gateway = await startProgram<{ endpoints: { rpc: string; ws: string; metrics: string } }>({
      bin: "ats-gateway.js",
      args: ["start"],
      env: childEnv({
        ATS_RPC_UPSTREAM_URL: chainProcesses[0]!.rpcUrl,
        ATS_RPC_PORT: "0",
        ATS_RPC_CHAIN_NAME: LOCAL_CHAINS[0].name,
        ATS_GATEWAY_NODE_URLS: endpoints.join(","),
        ATS_GATEWAY_DATA_DIR: join(options.dir, "gateway-data"),
        // CORS for every origin, as the nodes': the time explorer's page calls the gateway (docs/explorer.md).
        ATS_RPC_CORS_ALLOWED_ORIGINS: "*",
        ATS_LOG_LEVEL: options.nodeLogger.level,
      }),
      ready: (stdout) => printedJson(stdout),
      name: "gateway",
      timeoutMs: 120_000, // as a node's: a first start may build dist/ first
      onStderrLine: onLogLine,
    });
    closers.push(() => gateway.stop());
    const gateways = [gateway.printed.endpoints.rpc];
    const registrations = await registrationsOf(endpoints, trustedRootPem);

    // The contracts deployed on each chain, the nodes registered.
    log(`deploying the contracts on ${LOCAL_CHAINS.map((chain) => chain.name).join(" and ")} and registering the nodes`);
    const chains: LocalChain[] = [];
    for (const [index, { name, chainId }] of LOCAL_CHAINS.entries()) {
      const chainProcess = chainProcesses[index]!;
      const publicClient = createPublicClient({ chain: localViemChain(chainProcess.rpcUrl, chainId), transport: http(chainProcess.rpcUrl) });
      const deployment = await deployAttestedTime(options.hre, {
        deployer: walletFor(chainProcess.rpcUrl, chainId, HARDHAT_DEV_KEYS.deployer),
        publicClient,
        cards: registrations.cards,
        nodes: registrations.nodes,
        settings: {
          nodeQuorum: BigInt(options.meshNodes === 1 ? 1 : consensusThreshold(options.meshNodes)),
          maxAcceptableDriftNs: CLUSTER_MAX_ACCEPTABLE_DRIFT_NS,
        },
      });
      // A block every second besides the one per transaction (automine): confirmations then come on their own.
      const control = new ChainControl(chainProcess.kind, chainProcess.rpcUrl);
      await control.setIntervalMining(BLOCK_INTERVAL_MS);
      chains.push({ name, kind: chainProcess.kind, control, chainId, rpcUrl: chainProcess.rpcUrl, process: chainProcess, deployment, publicClient, user: walletFor(chainProcess.rpcUrl, chainId, HARDHAT_DEV_KEYS.user) });
      log(`chain ${name} (${chainProcess.kind}, ${chainId}) at ${chainProcess.rpcUrl}: oracle ${deployment.oracle}, scheduler ${deployment.scheduler}, bridge ${deployment.bridge}`);
    }

    // The network file and the relayer's config.
    const networkFile = join(options.dir, "network.json");
    const network: NetworkFileJson = {
      version: NETWORK_FILE_VERSION,
      chains: chains.map((chain) => ({
        name: chain.name,
        chainId: chain.chainId,
        rpcUrl: chain.rpcUrl,
        oracle: chain.deployment.oracle,
        ...(chain.deployment.scheduler !== undefined ? { scheduler: chain.deployment.scheduler } : {}),
        ...(chain.deployment.bridge !== undefined ? { bridge: chain.deployment.bridge } : {}),
        startBlock: chain.deployment.deploymentBlock.toString(),
        confirmations: options.confirmations ?? 1,
      })),
      nodes: endpoints,
      temporalRpc: gateways,
      ntp: ntp.filter((url) => url !== ""),
      programs: [
        ...chains.map((chain) => ({ name: `chain ${chain.name}`, program: chain.process.kind, pid: chain.process.child.pid!, endpoints: { rpc: chain.rpcUrl } })),
        ...nodes.map((node, index) => ({ name: `node ${index + 1}`, program: "ats-node", pid: node.pid!, endpoints: nodeEndpoints(node) })),
        { name: "gateway", program: "ats-gateway", pid: gateway.child.pid!, endpoints: gateway.printed.endpoints },
      ],
      status: "running",
    };
    const writeNetworkFile = () => writeFileSync(networkFile, `${JSON.stringify(network, null, 2)}\n`);
    writeNetworkFile();
    // The network manifest (wire/manifest.ts) of the first chain, checked before it is written.
    const genesis = (await chains[0]!.publicClient.getBlock({ blockNumber: 0n })).hash;
    const alphaDeployment = chains[0]!.deployment;
    let manifest = parseManifest({
      version: MANIFEST_VERSION,
      name: "local",
      chain: { evmChainId: chains[0]!.chainId, genesisHash: genesis, ntsVerified: false },
      services: {
        rpc: chains[0]!.rpcUrl,
        time: gateways[0]!,
        "time-ws": gateway.printed.endpoints.ws,
        ...(ntp[0] === undefined || ntp[0] === "" ? {} : { [TIME_HOST_SERVICE]: ntp[0] }),
        ...manifestNodeServices(nodes),
      },
      bootnodes: [],
      meshPeers: registrations.nodes.map((node, index) => ({ nodeId: node.address, endpoint: endpoints[index]! })),
      contracts: {
        TimeOracle: alphaDeployment.oracle,
        ...(alphaDeployment.scheduler !== undefined ? { TimeScheduler: alphaDeployment.scheduler } : {}),
        ...(alphaDeployment.bridge !== undefined ? { TimeBridge: alphaDeployment.bridge } : {}),
        ...(alphaDeployment.vault !== undefined ? { TimeLockedVault: alphaDeployment.vault } : {}),
        ...(alphaDeployment.checkpoint !== undefined ? { AttestedCheckpoint: alphaDeployment.checkpoint } : {}),
      },
      trustedCardRootsPem: [trustedRootPem],
    });
    const manifestFile = join(options.dir, "manifest.json");
    const writeManifest = () => writeFileSync(manifestFile, `${JSON.stringify(manifest, null, 2)}\n`);
    writeManifest();
    const relayerConfigFile = join(options.dir, "relayer.json");
    writeFileSync(
      relayerConfigFile,
      // apiCorsAllowedOrigins: the time explorer's page reads the queues (read-only routes; docs/explorer.md).
      `${JSON.stringify({ networkFile: "network.json", dataDir: "relayer-data", apiPort: 0, pollIntervalMs: 200, apiKeys: [LOCAL_RELAYER_API_KEY], apiCorsAllowedOrigins: ["*"], ...options.relayerSettings }, null, 2)}\n`,
    );
    const relayerEnv = { ATS_RELAYER_PRIVATE_KEY: HARDHAT_DEV_KEYS.relayer };

    const localNetwork: LocalNetwork = {
      chains,
      nodes: endpoints,
      temporalRpc: gateways,
      ntp,
      networkFile,
      manifestFile,
      relayerConfigFile,
      relayerEnv,
      relayer: undefined,
      catalog: undefined,
      programs: network.programs!,
      async startRelayer(env: NodeJS.ProcessEnv = {}) {
        localNetwork.relayer = await startRelayerProcess(relayerConfigFile, { ...relayerEnv, ...env });
        const api = localNetwork.relayer.api;
        network.programs = [
          ...network.programs!.filter((entry) => entry.name !== "relayer"),
          { name: "relayer", program: "ats-relayer", pid: localNetwork.relayer.child.pid!, endpoints: { api, metrics: `${api}/metrics` } },
        ];
        localNetwork.programs = network.programs;
        writeNetworkFile();
        return localNetwork.relayer;
      },
      async stopRelayer(signal: NodeJS.Signals = "SIGTERM") {
        await stopRelayerProcess(localNetwork.relayer, signal);
        localNetwork.relayer = undefined;
      },
      async startCatalog({ releasesDir }) {
        const configFile = join(options.dir, "catalog.json");
        writeFileSync(
          configFile,
          `${JSON.stringify(
            {
              host: "127.0.0.1",
              port: 0,
              releasesDir,
              contentDir: join(options.dir, "catalog-data", "content"),
              evidenceNodeUrls: endpoints,
              evidencePollMs: LOCAL_EVIDENCE_POLL_MS,
              faucetRpcUrl: chains[0]!.rpcUrl,
              faucetChainId: chains[0]!.chainId,
              explorerNetworkFile: networkFile,
              explorerRelayerUrl: localNetwork.relayer?.api ?? "",
              logLevel: options.nodeLogger.level,
            },
            null,
            2,
          )}\n`,
        );
        const program = await startProgram<{ url: string; services: CatalogServices }>({
          bin: "ats-catalog.js",
          args: ["start", "--config", configFile],
          // The faucet's key in the environment, as its setting asks (never in a file): Hardhat account #3.
          env: childEnv({ ATS_CATALOG_FAUCET_PRIVATE_KEY: HARDHAT_DEV_KEYS.faucet }),
          ready: (stdout) => printedJson(stdout),
          name: "catalog",
          timeoutMs: 120_000, // as a node's: a first start may build dist/ first
          onStderrLine: onLogLine,
        });
        closers.push(() => program.stop());
        const { url, services } = program.printed;
        localNetwork.catalog = { program, url, services };
        const named = catalogServiceUrls(services);
        network.programs = [...network.programs!.filter((entry) => entry.name !== "catalog"), { name: "catalog", program: "ats-catalog", pid: program.child.pid!, endpoints: named }];
        localNetwork.programs = network.programs;
        writeNetworkFile();
        manifest = parseManifest({ ...manifest, services: { ...manifest.services, ...named } });
        writeManifest();
        return localNetwork.catalog;
      },
      close() {
        return (closing ??= closeNetwork());
      },
    };
    let closing: Promise<void> | undefined;
    const closeNetwork = async () => {
        await localNetwork.catalog?.program.stop().catch(() => undefined);
        await localNetwork.stopRelayer("SIGTERM").catch(() => undefined);
        await closeAll();
        // Nothing points at closed ports: the network file says it stopped (the relayer refuses it), the manifest goes.
        network.status = "stopped";
        writeNetworkFile();
        rmSync(manifestFile, { force: true });
    };
    return localNetwork;
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/** The address of a local chain's relayer signer (Hardhat account #1). */
export function localRelayerAddress(): Address {
  return privateKeyToAccount(HARDHAT_DEV_KEYS.relayer).address;
}
