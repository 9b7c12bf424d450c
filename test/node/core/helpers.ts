/** Shared fixtures of the node core tests: dev identities, silent loggers, temp folders, a callback server. */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino, { type Logger } from "pino";
import { createDevIdentity, type DevIdentity } from "../../../protocol/devca";
import { DevTimeCard } from "../../../node/card/dev";
import { loadConfig, type NodeConfig, type SettingName } from "../../../node/config";
import { createTimeService, type CreateTimeServiceParameters } from "../../../node/compose";
import type { CoreTimeService } from "../../../node/core/service";
import type { AttestorOptions } from "../../../node/core/attestor";
import type { ScheduleServiceOptions } from "../../../node/schedules";
import { buildSignedTime } from "../../../node/core/signedTime";
import type { TimeProof } from "../../../protocol/types";
import { createVerifyContext, verifyTimeProof } from "../../../protocol/verify";

export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), `ats-${prefix}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export function testConfig(dataDir: string, overrides: Partial<Record<SettingName, unknown>> = {}): NodeConfig {
  return loadConfig({ env: {}, overrides: { dataDir, restPort: 0, grpcPort: 0, ...overrides } });
}

let sharedIdentity: Promise<DevIdentity> | undefined;
/** One dev identity (CA + card + node key) per test run: certificate generation is slow-ish. */
export function devIdentity(): Promise<DevIdentity> {
  sharedIdentity ??= createDevIdentity();
  return sharedIdentity;
}

export interface TestNode {
  service: CoreTimeService;
  card: DevTimeCard;
  identity: DevIdentity;
}

export async function buildService(
  config: NodeConfig,
  extra: Partial<Omit<CreateTimeServiceParameters, "config" | "card" | "nodeKey" | "logger">> = {},
): Promise<TestNode> {
  const identity = await devIdentity();
  // A card reporting no measured error: these tests sign their fixtures' accuracy whatever the host clock's anchor
  // achieved (the dev card's honest report, its anchor's uncertainty, is tested in test/node/core/card.test.ts).
  const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem, measuredErrorNs: 0 });
  const service = createTimeService({ config, card, nodeKey: identity.nodeKey, logger: silentLogger(), ...extra });
  return { service, card, identity };
}

/** Polls `predicate` every 10 ms; rejects after `timeoutMs` (a safety net, not a speed assertion). */
export async function waitFor(predicate: () => boolean, timeoutMs = 20_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export interface CallbackServer {
  url: string;
  received: { body: unknown; headers: IncomingMessage["headers"] }[];
  /** Status codes to answer, in order; 200 once exhausted. */
  statuses: number[];
  close(): Promise<void>;
}

/** A local HTTP server on 127.0.0.1:0 that records JSON POST bodies. */
export async function startCallbackServer(statuses: number[] = []): Promise<CallbackServer> {
  const received: CallbackServer["received"] = [];
  const queue = [...statuses];
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({ body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown, headers: request.headers });
      response.statusCode = queue.shift() ?? 200;
      response.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/callback`,
    received,
    statuses: queue,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Awaits `promise` and checks that it rejects with an instance of `type` (optionally containing `message`). */
export async function expectRejects(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => Error,
  message?: string,
): Promise<Error> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  if (!(caught instanceof type)) throw new Error(`expected a rejection with ${type.name}, got ${String(caught)}`);
  if (message !== undefined && !caught.message.includes(message)) {
    throw new Error(`expected "${caught.message}" to contain "${message}"`);
  }
  return caught;
}

/**
 * Attestor options for the shared dev identity (accuracy 50 ns, 1 ms tick), and a verifier that accepts exactly
 * that card and node at the card's current time.
 */
export async function attestorSetup(overrides: Partial<AttestorOptions> = {}) {
  const identity = await devIdentity();
  // A card reporting no measured error: these tests sign their fixtures' accuracy whatever the host clock's anchor
  // achieved (the dev card's honest report, its anchor's uncertainty, is tested in test/node/core/card.test.ts).
  const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem, measuredErrorNs: 0 });
  const options: AttestorOptions = {
    card,
    nodeKey: identity.nodeKey,
    accuracyNs: 50,
    signingErrorBoundNs: 50,
    tickIntervalNs: 1_000_000n,
    maxServeAgeNs: 60_000_000_000n,
    nodeClockNs: () => card.readTimeNs(),
    logger: silentLogger(),
    ...overrides,
  };
  const verifyAt = (proof: TimeProof) =>
    verifyTimeProof(
      proof,
      createVerifyContext({
        cards: { [identity.cardId]: { publicKey: identity.cardPublicKey, revoked: false } },
        nodes: [identity.nodeAddress],
        nowNs: card.readTimeNs(),
      }),
    );
  return { identity, card, options, verifyAt };
}

const HELPER_MS = 1_000_000n;
const helperNowNs = (): bigint => BigInt(Date.now()) * HELPER_MS;

/**
 * Options of a ScheduleService on its own, for tests about delivery (not proofs): short backoffs, loopback
 * callbacks only, and a well-formed (unsigned) proof at executeAt. `overrides` win.
 */
export function scheduleServiceOptions(dataDir: string, overrides: Partial<ScheduleServiceOptions> = {}): ScheduleServiceOptions {
  return {
    dataDir,
    maxAttempts: 2,
    baseBackoffMs: 10,
    maxBackoffMs: 20,
    deliveryTimeoutMs: 5_000,
    maxHorizonNs: 3_600_000n * HELPER_MS,
    maxPastNs: 60_000n * HELPER_MS,
    maxPending: 100,
    // A quarter of the slots per client, no creation limit, and the whole pending bound per client (a test that
    // sets maxPending gets it per client too).
    maxPendingPerClient: overrides.maxPending ?? 100,
    maxConcurrentDeliveries: 16,
    maxConcurrentDeliveriesPerClient: Math.max(1, Math.floor((overrides.maxConcurrentDeliveries ?? 16) / 4)),
    maxCreatesPerSecond: 0,
    allowedCallbackHosts: [],
    nowNs: helperNowNs,
    proofAtOrAfter: async (executeAtNs) =>
      buildSignedTime(
        { nanoMoment: executeAtNs, hardwareSignature: `0x${"11".repeat(96)}`, nodeSignature: `0x${"22".repeat(80)}`, accuracy: 50 },
        helperNowNs(),
      ),
    logger: silentLogger(),
    ...overrides,
  };
}
