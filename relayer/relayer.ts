/**
 * The relayer, composed: network file → one ChainClient and ChainWorker per chain, the store, the proof source
 * (a cluster client over the attesting nodes), the operator API. `startRelayer` runs the start-up checks (a bad
 * config or an unreachable chain fails here, with the reason), then one loop per chain: tick, sleep, repeat (no
 * busy wait: the next tick starts pollIntervalMs after the last one ended). `stop()` lets the current ticks end,
 * so no submission is left half-recorded, then closes the API and the database.
 */
import { readFileSync, statSync } from "node:fs";
import type { Logger } from "pino";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { createClusterClient } from "../client";
import { decodeNodeKeystore } from "../protocol/keystore";
import type { Hex } from "../protocol/types";
import { createOperatorApi, type HealthReport } from "./api";
import { ChainClient, StartupError } from "./chain";
import type { RelayerConfig } from "./config";
import { createRelayerMetrics } from "./metrics";
import { loadNetworkFile } from "../wire/network";
import { RelayerStore } from "./store";
import { CRASH_POINTS, type CrashPoint, type SubmitterOptions } from "./submitter";
import { collectTamperAlerts } from "./guardian";
import { ChainWorker, pushItem, revokeItem } from "./worker";

/** How often the guardian reads the nodes' tamper alerts, ms (at least pollIntervalMs). */
const GUARDIAN_INTERVAL_MS = 1_000;

export interface RunningRelayer {
  /** Base URL of the operator API. */
  readonly apiUrl: string;
  readonly signer: Hex;
  readonly store: RelayerStore;
  readonly workers: readonly ChainWorker[];
  stop(): Promise<void>;
}

export interface StartRelayerOptions {
  log: Logger;
  nowMs?: () => number;
}

/** The signer account: from the private key setting, or decrypted from the V3 keystore. Never logged. */
export function signerAccount(config: Pick<RelayerConfig, "signerPrivateKey" | "signerKeystoreFile" | "signerKeystorePassword">): PrivateKeyAccount {
  if (config.signerPrivateKey !== "") return privateKeyToAccount(config.signerPrivateKey as Hex);
  let text: string;
  try {
    // As ssh does with its keys: a keystore others may read is refused, so a leaked permission is noticed.
    const mode = statSync(config.signerKeystoreFile).mode & 0o777;
    if ((mode & 0o077) !== 0) throw new Error(`its mode is ${mode.toString(8)}; allow only its owner (chmod 600)`);
    text = readFileSync(config.signerKeystoreFile, "utf8");
  } catch (error) {
    throw new StartupError(`signerKeystoreFile ${config.signerKeystoreFile} cannot be used: ${(error as Error).message}`);
  }
  let privateKey: Hex;
  try {
    const parsed = JSON.parse(text) as { crypto?: unknown };
    if (typeof parsed !== "object" || parsed === null || parsed.crypto === undefined) throw new Error("it is not an encrypted (V3) keystore");
    privateKey = decodeNodeKeystore(text, { password: config.signerKeystorePassword }).exportPrivateKey();
  } catch (error) {
    throw new StartupError(`signerKeystoreFile ${config.signerKeystoreFile} cannot be decrypted: ${(error as Error).message}`);
  }
  return privateKeyToAccount(privateKey);
}

/**
 * The end-to-end tests' crash hook (SubmitterOptions.crashAt): ATS_RELAYER_TEST_CRASH_AT=<point>:<submission>,
 * e.g. "after-record:2". Not a setting: it exists for tests and is refused in any other form.
 */
export function crashHookFromEnv(env: NodeJS.ProcessEnv): SubmitterOptions["crashAt"] {
  const value = env.ATS_RELAYER_TEST_CRASH_AT;
  if (value === undefined || value === "") return undefined;
  const match = /^([a-z-]+):([1-9][0-9]{0,5})$/.exec(value);
  if (match === null || !(CRASH_POINTS as readonly string[]).includes(match[1]!)) {
    throw new StartupError(`ATS_RELAYER_TEST_CRASH_AT must be <${CRASH_POINTS.join("|")}>:<n>, got ${value}`);
  }
  return { point: match[1] as CrashPoint, submission: Number(match[2]) };
}

export async function startRelayer(config: RelayerConfig, options: StartRelayerOptions): Promise<RunningRelayer> {
  const { log } = options;
  const nowMs = options.nowMs ?? Date.now;
  const network = loadNetworkFile(config.networkFile);
  const account = signerAccount(config);
  const chains = new Map(network.chains.map((chain) => [chain.chainId, new ChainClient(chain, account, config.rpcTimeoutMs)]));
  for (const chain of chains.values()) await chain.checkDeployment();

  if (config.guardianEnabled) {
    for (const chain of chains.values()) {
      if (!(await chain.signerIsGuardian())) {
        throw new StartupError(`chain ${chain.config.name}: guardianEnabled, but the signer ${account.address} does not hold GUARDIAN_ROLE on oracle ${chain.config.oracle}`);
      }
    }
  }
  const store = new RelayerStore(config.dataDir, nowMs);
  const metrics = createRelayerMetrics(() => store.countsByStatus());
  const proofs = createClusterClient({ endpoints: network.nodes, ...(config.nodeApiKey !== "" ? { apiKey: config.nodeApiKey } : {}) });
  const workers = [...chains.values()].map(
    (chain) =>
      new ChainWorker(
        chain,
        chains,
        store,
        proofs,
        {
          maxLogRange: config.maxLogRange,
          pushHeartbeatMs: config.pushHeartbeatMs,
          keeperEnabled: config.keeperEnabled,
          bridgeEnabled: config.bridgeEnabled,
          retryBaseMs: config.retryBaseMs,
          retryMaxMs: config.retryMaxMs,
          deterministicRevertLimit: config.deterministicRevertLimit,
          waitMs: Math.min(config.pollIntervalMs * 2, config.retryBaseMs),
        },
        metrics,
        log,
        nowMs,
        { feeBumpAfterMs: config.feeBumpAfterMs, maxFeePerGasWei: BigInt(config.maxFeePerGasWei), crashAt: crashHookFromEnv(process.env) },
      ),
  );
  try {
    for (const worker of workers) await worker.submitter.init();
  } catch (error) {
    store.close();
    proofs.close();
    throw new StartupError(`nonce recovery failed: ${(error as Error).message.split("\n")[0]}`);
  }

  function health(): HealthReport {
    const chainsReport = workers.map((worker) => ({
      name: worker.chain.config.name,
      chainId: worker.chain.config.chainId,
      lagBlocks: worker.lagBlocks.toString(),
      lastError: worker.lastError,
    }));
    return { ok: chainsReport.every((chain) => chain.lastError === null), chains: chainsReport };
  }

  const api = createOperatorApi({
    store,
    metrics,
    apiKeys: config.apiKeys,
    corsAllowedOrigins: config.apiCorsAllowedOrigins,
    health,
    requestPush(chainId) {
      if (!chains.has(chainId)) return false;
      store.insertItem(pushItem(chainId, nowMs(), true));
      return true;
    },
  });
  const apiUrl = await api.listen({ host: config.apiHost, port: config.apiPort });

  let stopped = false;
  const sleepers = new Set<() => void>();
  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      sleepers.add(wake);
    });
  }
  async function loop(worker: ChainWorker): Promise<void> {
    while (!stopped) {
      await worker.tick();
      metrics.lagSeconds.set({ chain: worker.chain.config.name }, store.oldestDueAgeMs(worker.chain.config.chainId) / 1_000);
      worker.chain
        .balance()
        .then((wei) => metrics.signerBalanceWei.set({ chain: worker.chain.config.name }, Number(wei)))
        .catch(() => undefined);
      if (!stopped) await sleep(config.pollIntervalMs);
    }
  }
  /** The guardian: each signed tamper alert becomes one revocation item per chain (an existing item stays). */
  async function guard(): Promise<void> {
    while (!stopped) {
      try {
        for (const alert of await collectTamperAlerts(network.nodes)) {
          for (const chainId of chains.keys()) {
            if (stopped) break;
            if (store.insertItem(revokeItem(chainId, alert, nowMs()))) {
              log.error({ chainId, cardId: alert.cardId, node: alert.nodeId, reason: alert.reason }, "guardian: signed tamper alert; the card's revocation is queued");
            }
          }
        }
      } catch (error) {
        log.warn({ err: (error as Error).message }, "guardian: reading the alerts failed; retried");
      }
      if (!stopped) await sleep(Math.max(config.pollIntervalMs, GUARDIAN_INTERVAL_MS));
    }
  }
  const loops = [...workers.map((worker) => loop(worker)), ...(config.guardianEnabled ? [guard()] : [])];
  log.info({ apiUrl, signer: account.address, chains: network.chains.map((c) => `${c.name}(${c.chainId})`), nodes: network.nodes }, "relayer started");

  return {
    apiUrl,
    signer: account.address,
    store,
    workers,
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const wake of [...sleepers]) wake();
      await Promise.all(loops);
      await api.close();
      proofs.close();
      store.close();
      log.info("relayer stopped");
    },
  };
}
