/**
 * The upgrade tests' network on 127.0.0.1: a Hardhat node chain (scripts/chainProcess.ts, free port, a block every
 * second) with the oracle deployed and every node registered; N attesting nodes, each run by a local-supervisor
 * unit from a versioned install (so each is its own process, started from a release bundle, not from the
 * repository); a meshed cluster with a temporal gateway in front of the chain on every node; an independent
 * trusted dev node (in this process) whose gateway the agent compares finality with; the network manifest.
 * `close()` stops every process it started, whatever state the test left them in.
 */
import { cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { HardhatRuntimeEnvironment } from "hardhat/types";
import pino from "pino";
import { createPublicClient, createWalletClient, defineChain, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startDevNode, type DevNode } from "../../node/devNode";
import { CLUSTER_MAX_ACCEPTABLE_DRIFT_NS, CLUSTER_WINDOW_NS, freeUdpPorts } from "../../node/cluster";
import { consensusThreshold } from "../../protocol/consensus";
import { createDevIdentity, createDevManufacturerCa, type DevIdentity } from "../../protocol/devca";
import { saveKeyDir } from "../../protocol/keystore";
import { freeTcpPort, startChainProcess, stopChainProcess, type ChainProcess } from "../../scripts/chainProcess";
import { deployAttestedTime } from "../../deploy";
import { HARDHAT_DEV_KEYS } from "../../scripts/network";
import { fetchVerifiedRelease } from "../../upgrade/fetchRelease";
import { writeInstallEnv } from "../../upgrade/installEnv";
import { stageInstall } from "../../upgrade/installs";
import { createLocalUnit } from "../../upgrade/localUnit";
import { MANIFEST_VERSION, parseManifest } from "../../wire/manifest";
import type { BundlePlan, PlanNode } from "../../upgrade/plan";
import type { NodeUnit } from "../../upgrade/unit";

const ROOT = join(__dirname, "..", "..");
const CHAIN_ID = 31337;
const BLOCK_INTERVAL_MS = 1_000;

export interface ClusterNode {
  host: string;
  identity: DevIdentity;
  unit: NodeUnit;
  planNode: PlanNode;
  /** Folders the agent must never change: keys, node config, unit definition. */
  keyDir: string;
  dataDir: string;
  configFile: string;
  unitFile: string;
}

export interface UpgradeCluster {
  nodes: ClusterNode[];
  chain: ChainProcess;
  manifestFile: string;
  trustedRpc: string;
  close(): Promise<void>;
}

/** The published release of `tag`: what plan.release.source.dir points at. */
export interface PublishedRelease {
  tag: string;
  dir: string;
}

export async function until(condition: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/**
 * Waits until every node of the cluster reports Converged: a rollout preflight refuses a degraded network, and
 * after a rollout the last restarted node takes a few rounds to converge again (longer on a loaded machine).
 */
export async function waitConverged(cluster: UpgradeCluster, timeoutMs = 60_000, nodes: readonly ClusterNode[] = cluster.nodes): Promise<void> {
  for (const node of nodes) {
    await until(async () => (await meshState(node.planNode.rest)).convergenceState === "Converged", timeoutMs, `${node.host} to converge`);
  }
}

export async function meshState(rest: string): Promise<{ convergenceState: string; peerCount: number }> {
  const response = await fetch(new URL("/mesh/state", rest), { signal: AbortSignal.timeout(2_000) });
  return (await response.json()) as { convergenceState: string; peerCount: number };
}

/**
 * Starts the network, every node on `initial` (a release published in a folder). The caller must call close(),
 * also when this rejects partway: the returned promise's cluster is built incrementally into `sink`.
 */
export async function startUpgradeCluster(options: {
  hre: Pick<HardhatRuntimeEnvironment, "viem">;
  root: string;
  nodeCount: number;
  initial: PublishedRelease & { releaseId: string; sourceRevision: string; artifactSha256: string };
  sink: { close?: () => Promise<void> };
}): Promise<UpgradeCluster> {
  const closers: (() => Promise<void>)[] = [];
  options.sink.close = async () => {
    for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  };
  const chain = await startChainProcess(CHAIN_ID);
  closers.push(() => stopChainProcess(chain));
  const viemChain = defineChain({ id: CHAIN_ID, name: "upgrade-test", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [chain.rpcUrl] } } });
  const publicClient = createPublicClient({ chain: viemChain, transport: http(chain.rpcUrl) });
  const deployer = createWalletClient({ account: privateKeyToAccount(HARDHAT_DEV_KEYS.deployer), chain: viemChain, transport: http(chain.rpcUrl) });

  const ca = await createDevManufacturerCa();
  const identities = await Promise.all(Array.from({ length: options.nodeCount }, () => createDevIdentity({ ca })));
  const deployment = await deployAttestedTime(options.hre, {
    deployer,
    publicClient,
    cards: identities.map((identity) => ({ publicKey: identity.cardPublicKey })),
    nodes: identities.map((identity) => ({ address: identity.nodeAddress })),
    settings: { nodeQuorum: BigInt(consensusThreshold(options.nodeCount)), maxAcceptableDriftNs: CLUSTER_MAX_ACCEPTABLE_DRIFT_NS },
  });
  await publicClient.request({ method: "evm_setIntervalMining" as never, params: [BLOCK_INTERVAL_MS] as never });

  // The trusted node: a lone dev node in this process with its own gateway; the rollout never touches it.
  const trusted: DevNode = await startDevNode({
    env: {},
    cwd: ROOT,
    logger: () => pino({ level: "silent" }),
    overrides: { rpcUpstreamUrl: chain.rpcUrl, rpcPort: 0, grpcEnabled: false },
  });
  closers.push(() => trusted.close());

  const meshPorts = await freeUdpPorts(options.nodeCount);
  const nodes: ClusterNode[] = [];
  const release = await fetchVerifiedRelease({
    tag: options.initial.tag,
    release_id: options.initial.releaseId,
    source_revision: options.initial.sourceRevision,
    artifact: { kind: "bundle", sha256: options.initial.artifactSha256 },
    source: { dir: options.initial.dir },
  });
  try {
    for (const [index, identity] of identities.entries()) {
      const host = `node-${index}`;
      const dir = join(options.root, host);
      const keyDir = join(dir, "keys");
      const dataDir = join(dir, "data");
      const unitDir = join(dir, "unit");
      const installRoot = join(dir, "installs");
      mkdirSync(unitDir, { recursive: true });
      mkdirSync(installRoot);
      await saveKeyDir(keyDir, identity);
      const [restPort, rpcPort] = [await freeTcpPort(), await freeTcpPort()];
      const configFile = join(unitDir, "node.json");
      writeFileSync(
        configFile,
        `${JSON.stringify(
          {
            host: "127.0.0.1",
            restPort,
            grpcEnabled: false,
            keyDir,
            dataDir,
            trustedRootsPem: [ca.certificatePem],
            rpcUpstreamUrl: chain.rpcUrl,
            rpcPort,
            rpcChainName: "alpha",
            meshPort: meshPorts[index],
            meshPeers: identities.flatMap((other, otherIndex) => (otherIndex === index ? [] : [`${other.nodeAddress}@127.0.0.1:${meshPorts[otherIndex]}`])),
            trustedNodeAddresses: identities.filter((_, otherIndex) => otherIndex !== index).map((other) => other.nodeAddress),
            meshWindowNs: CLUSTER_WINDOW_NS.toString(),
            maxAcceptableDriftNs: CLUSTER_MAX_ACCEPTABLE_DRIFT_NS.toString(),
            nodeQuorum: consensusThreshold(options.nodeCount),
            logLevel: "info",
          },
          null,
          2,
        )}\n`,
      );
      const unitFile = join(unitDir, "unit.json");
      writeFileSync(unitFile, JSON.stringify({ configFile: "node.json", modulesDir: join(ROOT, "node_modules") }));
      const unit = createLocalUnit(unitDir);
      closers.push(() => unit.stop());
      writeInstallEnv(unit.installEnvFile, stageInstall(installRoot, release));
      await unit.start();
      const planNode: PlanNode = { host, role: "primary", rest: `http://127.0.0.1:${restPort}`, rpc: `http://127.0.0.1:${rpcPort}`, installRoot, unit: { kind: "local", dir: unitDir } };
      nodes.push({ host, identity, unit, planNode, keyDir, dataDir, configFile, unitFile });
    }
  } finally {
    release.dispose();
  }
  for (const node of nodes) {
    const logFile = join(options.root, node.host, "unit", "node.log");
    await until(async () => (await meshState(node.planNode.rest)).convergenceState === "Converged", 60_000, `${node.host} to converge`).catch((error: Error) => {
      // The folder is removed when the test ends: the evidence goes into the error (the log's last warnings).
      const warnings = readFileSync(logFile, "utf8").split("\n").filter((line) => /"level":(40|50|60)/.test(line));
      throw new Error(`${error.message}; last warnings of ${logFile}:\n${warnings.slice(-8).join("\n")}`);
    });
  }

  const genesisHash = (await publicClient.getBlock({ blockNumber: 0n })).hash.toLowerCase();
  const manifestFile = join(options.root, "manifest.json");
  const manifest = parseManifest({
    version: MANIFEST_VERSION,
    name: "upgrade-test",
    chain: { evmChainId: CHAIN_ID, genesisHash, ntsVerified: false },
    services: { rpc: chain.rpcUrl, time: trusted.node.endpoints.rpc! },
    bootnodes: [],
    meshPeers: nodes.map((node) => ({ nodeId: node.identity.nodeAddress, endpoint: node.planNode.rest })),
    contracts: { TimeOracle: deployment.oracle },
    trustedCardRootsPem: [ca.certificatePem],
  });
  writeFileSync(manifestFile, `${JSON.stringify(manifest, null, 2)}\n`);
  return { nodes, chain, manifestFile, trustedRpc: trusted.node.endpoints.rpc!, close: options.sink.close };
}

export interface AvailabilitySample {
  /** Nodes whose unit is stopped or whose process does not serve GET /node/info yet (a restart takes a second or two). */
  down: number;
  /** Some node served a co-signed proof (GET /time/current with a consensus record). */
  served: boolean;
}

/**
 * Samples the cluster every 200 ms until stop() (which returns the samples): how many nodes are down, and whether
 * the network still serves co-signed proofs. A rollout must never take two nodes down at once.
 */
export function sampleAvailability(cluster: UpgradeCluster): { stop(): Promise<AvailabilitySample[]> } {
  const samples: AvailabilitySample[] = [];
  let sampling = true;
  const loop = (async () => {
    while (sampling) {
      let down = 0;
      let served = false;
      for (const node of cluster.nodes) {
        const info = (await node.unit.status()).active ? await fetch(new URL("/node/info", node.planNode.rest), { signal: AbortSignal.timeout(1_000) }).catch(() => undefined) : undefined;
        if (info?.status !== 200) down++;
        if (!served) {
          const response = await fetch(new URL("/time/current", node.planNode.rest), { signal: AbortSignal.timeout(1_000) }).catch(() => undefined);
          served = response?.status === 200 && "consensus" in ((await response.json()) as object);
        }
      }
      samples.push({ down, served });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return {
    async stop() {
      sampling = false;
      await loop;
      return samples;
    },
  };
}

/** A plan for `release` over every node of the cluster, in node order. */
export function planFor(cluster: UpgradeCluster, release: BundlePlan["release"]): BundlePlan {
  return {
    version: "ats-upgrade-plan/1",
    release,
    network: { manifest: cluster.manifestFile, trustedRpc: cluster.trustedRpc },
    nodes: cluster.nodes.map((node) => node.planNode),
    rolloutOrder: cluster.nodes.map((node) => node.host),
    acceptance: { warmupMs: 1_000, timeoutMs: 30_000, maxLogErrors: 0 },
  };
}

/** Copies a release folder to `<root>/published/<tag>`: where a plan's release.source.dir points. */
export function publish(root: string, releaseDir: string, tag: string): PublishedRelease {
  const dir = join(root, "published", tag);
  cpSync(releaseDir, dir, { recursive: true });
  return { tag, dir };
}

/** The private values of a node that a receipt must never hold. */
export function secretsOf(node: ClusterNode): string[] {
  const keystore = JSON.parse(readFileSync(join(node.keyDir, "node.json"), "utf8")) as { privateKey?: Hex };
  return [
    node.identity.nodeKey.exportPrivateKey(),
    ...(keystore.privateKey === undefined ? [] : [keystore.privateKey]),
    node.identity.cardKey.export({ format: "der", type: "pkcs8" }).toString("hex").slice(-64),
    node.identity.nodeAddress,
    node.identity.cardId,
  ];
}
