/**
 * The node's NTP time host (docs/protocol.md §9.8): one UDP socket answering NTP client requests (RFC 5905 server
 * mode) with the clock and state an `NtpClock` gives (source.ts). One job: the socket and its per-client policy.
 *
 * Detail: docs/protocol.md §9.8.
 */
import { createSocket, type RemoteInfo, type Socket } from "node:dgram";
import { isIPv6 } from "node:net";
import type { Logger } from "pino";
import { UnavailableError } from "../../protocol/errors";
import { RateLimiter } from "../../lib/rateLimit";
import { encodeKissOfDeath, encodeNtpReply, NTP_DROP_REASONS, parseNtpRequest, type NtpDropReason } from "./packet";
import type { NtpClock } from "./source";

/*
 * Per datagram, in this order:
 * 1. the clock is read first (the receive timestamp: the event loop's delay before this point counts as network
 *    delay for the client, which is where it belongs);
 * 2. packet.ts classifies it; anything that is not a mode-3 request of version 1–4 of at least 48 bytes is dropped
 *    and counted by reason (mode 6/7 control and monitor queries included: never answered);
 * 3. the client's address draws a token from its bucket (lib/rateLimit.ts; keyed by IP, not port: clients pick a
 *    new source port per request). Over its rate it gets a Kiss-o'-Death RATE (RFC 5905 §7.4), itself limited
 *    node-wide (kissesPerSecond) so that a spoofed flood cannot turn the node into a 1:1 reflector at line rate;
 *    beyond that budget the datagram is dropped and counted;
 * 4. the reply (48 bytes, never longer than the request) is sent with the transmit timestamp read just before.
 *
 * Memory is bounded: the rate limiter keeps at most maxClients buckets (least recently used evicted, which only
 * ever helps the evicted client) and drops refilled ones every RATE_LIMIT_SWEEP_INTERVAL_MS; nothing else grows
 * per client or per packet.
 */
/** Default most rate-limit buckets held (~100 bytes each with the key: a few MB at most). */
export const DEFAULT_MAX_NTP_CLIENTS = 65_536;
/** Default node-wide Kiss-o'-Death replies per second (beyond: the over-rate datagram is dropped unanswered). */
export const DEFAULT_KISSES_PER_SECOND = 100;
const RATE_LIMIT_SWEEP_INTERVAL_MS = 60_000;

export interface NtpServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  clock: NtpClock;
  /**
   * Per client address: the average interval its requests may keep up, ms (0: no limit), and how many may come
   * at once (a client's iburst sends 4–8 requests 2 s apart).
   */
  clientIntervalMs: number;
  clientBurst: number;
  maxClients?: number;
  kissesPerSecond?: number;
  logger: Logger;
  /** How a bind failure names the settings to change (the node: ntpPort / ntpHost and their variables). */
  settingNames?: { port: string; host: string };
  /** Monotonic ms for the rate limiters (tests). */
  nowMs?: () => number;
}

/** Counts since start (read by node/api/metrics.ts at scrape time). */
export interface NtpServerStats {
  /** Requests answered with the time. */
  answeredTotal: number;
  /** Requests answered with a Kiss-o'-Death RATE. */
  kissOfDeathTotal: number;
  /** Over-rate requests dropped unanswered because the node-wide Kiss-o'-Death budget was spent. */
  rateLimitedDroppedTotal: number;
  /** Datagrams dropped by packet.ts, by reason. */
  dropped: Record<NtpDropReason, number>;
  /** Replies the socket failed to send. */
  sendErrorsTotal: number;
  /** Requests left unanswered because the clock's state could not be read (logged once a minute). */
  stateErrorsTotal: number;
}

export interface RunningNtpServer {
  readonly host: string;
  readonly port: number;
  /** "ntp://host:port" (IPv6 bracketed). */
  readonly url: string;
  stats(): NtpServerStats;
  /** Closes the socket; idempotent. */
  close(): Promise<void>;
}

function urlHost(host: string): string {
  return isIPv6(host) ? `[${host}]` : host;
}

/** A bind failure as one sentence naming the port, the host and the setting to change, with the cause attached. */
export function ntpListenError(error: unknown, host: string, port: number, names: { port: string; host: string }): unknown {
  if (!(error instanceof Error)) return error;
  const code = String((error as NodeJS.ErrnoException).code ?? "");
  let problem: string;
  if (code === "EADDRINUSE") problem = `NTP port ${port} is already in use on ${host} (another NTP server such as chronyd or ntpd? set ${names.port})`;
  else if (code === "EACCES") problem = `NTP port ${port} on ${host} may not be bound by this user (EACCES: ports below 1024 need root or CAP_NET_BIND_SERVICE; set ${names.port})`;
  else if (code === "EADDRNOTAVAIL") problem = `host ${host} is not an address of this machine, so NTP port ${port} cannot be bound (set ${names.host})`;
  else return error;
  return new UnavailableError(problem, { host, port }, { cause: error });
}

export async function startNtpServer(options: NtpServerOptions): Promise<RunningNtpServer> {
  const { clock, logger } = options;
  if (!Number.isFinite(options.clientIntervalMs) || options.clientIntervalMs < 0) throw new RangeError(`clientIntervalMs must be ≥ 0, got ${options.clientIntervalMs}`);
  if (!Number.isInteger(options.clientBurst) || options.clientBurst < 1) throw new RangeError(`clientBurst must be an integer ≥ 1, got ${options.clientBurst}`);
  const nowMs = options.nowMs === undefined ? {} : { nowMs: options.nowMs };
  const perClient = new RateLimiter({
    ratePerSecond: options.clientIntervalMs === 0 ? 0 : 1_000 / options.clientIntervalMs,
    burst: options.clientBurst,
    maxClients: options.maxClients ?? DEFAULT_MAX_NTP_CLIENTS,
    ...nowMs,
  });
  const kissesPerSecond = options.kissesPerSecond ?? DEFAULT_KISSES_PER_SECOND;
  const kisses = new RateLimiter({ ratePerSecond: kissesPerSecond, burst: Math.max(1, kissesPerSecond), maxClients: 1, ...nowMs });

  const stats: NtpServerStats = {
    answeredTotal: 0,
    kissOfDeathTotal: 0,
    rateLimitedDroppedTotal: 0,
    dropped: Object.fromEntries(NTP_DROP_REASONS.map((reason) => [reason, 0])) as Record<NtpDropReason, number>,
    sendErrorsTotal: 0,
    stateErrorsTotal: 0,
  };
  let lastSendErrorLogMs = -Infinity;
  const onSent = (error: Error | null): void => {
    if (error === null) return;
    stats.sendErrorsTotal += 1;
    // One line a minute at most: a send error repeats per packet (e.g. ENOBUFS under a flood).
    const now = performance.now();
    if (now - lastSendErrorLogMs >= 60_000) {
      lastSendErrorLogMs = now;
      logger.warn({ err: error, sendErrorsTotal: stats.sendErrorsTotal }, "NTP reply not sent");
    }
  };

  let lastStateErrorLogMs = -Infinity;
  const onStateError = (error: unknown): void => {
    stats.stateErrorsTotal += 1;
    const now = performance.now();
    if (now - lastStateErrorLogMs >= 60_000) {
      lastStateErrorLogMs = now;
      logger.error({ err: error, stateErrorsTotal: stats.stateErrorsTotal }, "NTP request unanswered: the clock's state could not be read");
    }
  };

  const socket: Socket = createSocket({ type: isIPv6(options.host) ? "udp6" : "udp4" });
  const onMessage = (datagram: Buffer, remote: RemoteInfo): void => {
    const receiveNs = clock.readTimeNs();
    const parsed = parseNtpRequest(datagram);
    if (!parsed.ok) {
      stats.dropped[parsed.reason] += 1;
      return;
    }
    if (!perClient.tryTake(remote.address)) {
      if (!kisses.tryTake("")) {
        stats.rateLimitedDroppedTotal += 1;
        return;
      }
      stats.kissOfDeathTotal += 1;
      socket.send(encodeKissOfDeath(parsed.request, "RATE"), remote.port, remote.address, onSent);
      return;
    }
    let reply: Uint8Array;
    try {
      reply = encodeNtpReply(parsed.request, clock.state(), receiveNs, clock.readTimeNs());
    } catch (error) {
      // A source that cannot say what its clock is (an invalid state from a driver) gets no answer, and the node
      // keeps running: an exception here would be uncaught (a socket event handler).
      onStateError(error);
      return;
    }
    stats.answeredTotal += 1;
    socket.send(reply, remote.port, remote.address, onSent);
  };

  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(options.port, options.host, () => {
      socket.off("error", reject);
      resolve();
    });
  }).catch((error: unknown) => {
    try {
      socket.close();
    } catch {
      // never bound: nothing to close
    }
    throw ntpListenError(error, options.host, options.port, options.settingNames ?? { port: "the port", host: "the host" });
  });
  socket.on("message", onMessage);
  socket.on("error", (error) => logger.error({ err: error }, "NTP socket error"));
  const sweepTimer = setInterval(() => perClient.sweepIdle(), RATE_LIMIT_SWEEP_INTERVAL_MS);
  sweepTimer.unref();

  const port = socket.address().port;
  let closing: Promise<void> | undefined;
  logger.info({ host: options.host, port }, "NTP time host listening");
  return {
    host: options.host,
    port,
    url: `ntp://${urlHost(options.host)}:${port}`,
    stats: () => ({ ...stats, dropped: { ...stats.dropped } }),
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        clearInterval(sweepTimer);
        socket.close(() => resolve());
      })),
  };
}
