/**
 * Test nodes: a real TimeService (dev card, real signatures, SQLite in a temporary folder) behind the real
 * transports, listening on 127.0.0.1 with free ports. Every test closes what it starts (`close()` in after/finally).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import pino, { type Logger } from "pino";
import WebSocket, { type ClientOptions } from "ws";
import { parseJsonLossless } from "../../../protocol/json";
import type { ProofJson } from "../../../protocol/types";
import { loadProtos, type TimeResponseMessage } from "../../../wire/grpc";
import { proofJsonFromMessage } from "../../../client";
import { createDevIdentity, type DevIdentity } from "../../../protocol/devca";
import { DevTimeCard } from "../../../node/card/dev";
import { loadConfig, type NodeConfig, type SettingName } from "../../../node/config";
import { createTimeService } from "../../../node/compose";
import type { CoreTimeService } from "../../../node/core";
import type { SignedTime } from "../../../node/core/types";
import type { TransportLimits } from "../../../node/api/context";
import { startNode, type RunningNode } from "../../../node/server";

export interface TestNode {
  node: RunningNode;
  service: CoreTimeService;
  card: DevTimeCard;
  identity: DevIdentity;
  config: NodeConfig;
  logger: Logger;
  close(): Promise<void>;
}

export interface StartTestNodeOptions {
  /** Settings in their config-file JSON shapes (ns as decimal strings). */
  overrides?: Partial<Record<SettingName, unknown>>;
  limits?: Partial<TransportLimits>;
  /** Reuse keys (e.g. the oracle fixture's registered card and node). */
  identity?: DevIdentity;
  /** The node's logger (default: testLogger()). */
  logger?: Logger;
}

/** A silent logger; set ATS_TEST_LOG=debug to see the node's structured logs. */
export function testLogger(): Logger {
  return pino({ level: process.env.ATS_TEST_LOG ?? "silent" });
}

export async function startTestNode(options: StartTestNodeOptions = {}): Promise<TestNode> {
  const dir = mkdtempSync(join(tmpdir(), "ats-nodeapi-"));
  const identity = options.identity ?? (await createDevIdentity());
  const logger = options.logger ?? testLogger();
  const config = loadConfig({
    env: {},
    cwd: dir,
    overrides: {
      host: "127.0.0.1",
      restPort: 0,
      grpcPort: 0,
      dataDir: join(dir, "data"),
      keyDir: join(dir, "keys"),
      // 5 ms ticks: the suite shares two cores with other work.
      tickIntervalNs: "5000000",
      maxRequestsPerSecond: 0,
      trustedRootsPem: [identity.ca.certificatePem],
      logLevel: "silent",
      ...options.overrides,
    },
  });
  // A card reporting no measured error: these tests sign their fixtures' accuracy whatever the host clock's anchor
  // achieved (the dev card's honest report, its anchor's uncertainty, is tested in test/node/core/card.test.ts).
  const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem, measuredErrorNs: 0 });
  const service = createTimeService({ config, card, nodeKey: identity.nodeKey, logger, ownsCard: true });
  await service.start();
  let node: RunningNode;
  try {
    node = await startNode({ config, logger, service, limits: options.limits ?? {} });
  } catch (error) {
    await service.stop();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    node,
    service,
    card,
    identity,
    config,
    logger,
    async close() {
      try {
        await node.close();
      } finally {
        await service.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Waits (bounded) until `predicate` holds; for events, not for timing assertions. */
export async function waitFor(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** fetch against a node with optional JSON body / headers. */
export async function http(
  base: string,
  method: string,
  path: string,
  options: { body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; text: string; json: unknown; headers: Headers }> {
  const init: RequestInit = { method, headers: options.headers ?? {} };
  if (options.body !== undefined) {
    init.body = options.body;
    init.headers = { "content-type": "application/json", ...options.headers };
  }
  const response = await fetch(`${base}${path}`, init);
  const text = await response.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text) as unknown;
  } catch {
    json = null;
  }
  return { status: response.status, text, json, headers: response.headers };
}

/** The first proof pushed on a `/v1/stream` subscription with includeProof (ws:// or wss:// with `options.ca`). */
export function streamedProof(url: string, options: ClientOptions = {}): Promise<ProofJson> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, options);
    socket.on("open", () => socket.send(JSON.stringify({ type: "subscribe", interval: 1_000_000_000, accuracy: "hardware", includeProof: true })));
    socket.on("message", (data) => {
      const frame = parseJsonLossless(String(data)) as { nanoMoment?: string; proof?: ProofJson["proof"] };
      if (frame.nanoMoment !== undefined && frame.proof !== undefined) {
        socket.terminate();
        resolve({ nanoMoment: frame.nanoMoment, proof: frame.proof });
      }
    });
    socket.on("error", reject);
  });
}

/** One gRPC GetCurrentTime (CURRENT_TIME, 3 s deadline) as the proof's JSON form. */
export function grpcCurrentProof(target: string, credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure()): Promise<ProofJson> {
  const { timeClient } = loadProtos();
  const client = new timeClient(target, credentials) as unknown as grpc.Client & {
    GetCurrentTime(
      request: unknown,
      options: grpc.CallOptions,
      callback: (error: grpc.ServiceError | null, response?: TimeResponseMessage) => void,
    ): void;
  };
  return new Promise((resolve, reject) => {
    client.GetCurrentTime({ type: "CURRENT_TIME" }, { deadline: Date.now() + 3_000 }, (error, response) => {
      client.close();
      if (error !== null || response === undefined) reject(error ?? new Error("no response"));
      else resolve(proofJsonFromMessage(response.nano_moment, response.proof));
    });
  });
}

/**
 * Makes the service serve one proof while the test runs, as between two node ticks: `reads` counts the pushes
 * and requests that asked for it; `restore()` serves the real proofs again.
 */
export function freezeCurrentProof(service: CoreTimeService): { frozen: SignedTime; reads: () => number; restore: () => void } {
  const served = service.current;
  const frozen = served();
  let reads = 0;
  service.current = () => {
    reads += 1;
    return frozen;
  };
  return { frozen, reads: () => reads, restore: () => (service.current = served) };
}
