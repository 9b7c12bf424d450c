/**
 * A gpsd client: the GPS reference (docs/protocol.md §9.1) a card driver reports beside each proof, from gpsd's
 * JSON protocol on its TCP socket (gpsd_json(5)). It connects, sends ?WATCH (JSON, PPS), reads TPV, SKY and PPS
 * reports line by line (gpsdReports.ts parses them, no I/O there), keeps the latest of each with the monotonic
 * time it arrived, and reconnects with exponential backoff when gpsd closes, refuses or times out.
 *
 * What it is not: a clock. gpsd's time (TPV.time) is never used for a signed moment: the card's clock is what the
 * card signs, and this reference is unsigned metadata for operators (and, with gpsRequired, a condition for
 * signing at all). A driver that wanted to discipline its clock to GPS would say so in its own code and docs.
 *
 * Staleness: a report older than staleAfterMs no longer counts. A TPV that old (or none) is "no fix", whatever its
 * mode said, so a gpsd that went silent, or a connection that dropped, never leaves a fix standing; a SKY or PPS
 * that old reports 0. The state survives a reconnect (gpsd restarting for a second does not flap the node), and
 * only age decides.
 */
import { Socket } from "node:net";
import type { GpsFixState, GpsReference } from "../../protocol/types";
import { GPSD_WATCH_COMMAND, MAX_GPSD_LINE_BYTES, MAX_REPORTED_SATELLITES, parseGpsdLine, type GpsdFixMode } from "./gpsdReports";

/** The last of each report kind, each with the monotonic time it arrived (ns). Plain data: the pure functions below read it. */
export interface GpsdState {
  readonly tpv: { readonly mode: GpsdFixMode; readonly time: string | null; readonly device: string | null; readonly atMonotonicNs: bigint } | null;
  readonly sky: { readonly satellitesUsed: number; readonly satellitesVisible: number; readonly atMonotonicNs: bigint } | null;
  readonly pps: { readonly offsetNs: number; readonly atMonotonicNs: bigint } | null;
}

export const EMPTY_GPSD_STATE: GpsdState = { tpv: null, sky: null, pps: null };

/** What a GPS reference source gives a card: the reference now, and why it has no fix (null when it has one). */
export interface GpsReading {
  readonly reference: GpsReference;
  /** Null with a 2-D or 3-D fix that is fresh; else why not, with the evidence (mode, age, connection). */
  readonly noFixReason: string | null;
}

/**
 * A card driver's optional GPS input (dev.ts, chrony.ts): reference metadata, never the signed moment. `required`
 * (the gpsRequired setting) makes "no fix" a reason for the card to refuse signing (TimeCard.signingRefusal).
 */
export interface GpsReferenceSource {
  /** The reference for a card whose clock reads `cardNowNs` now (observedAtNs is on that clock). */
  read(cardNowNs: bigint): GpsReading;
  /** Whether the card must not sign without a fix (gpsRequired). */
  readonly required: boolean;
  /** Where the reference comes from, for reports ("gpsd 127.0.0.1:2947"). */
  readonly name: string;
  close(): void;
}

const FIX_STATE_OF_MODE: Record<GpsdFixMode, GpsFixState> = { 0: "none", 1: "none", 2: "2d", 3: "3d" };
const NS_PER_MS = 1_000_000n;

function ageMs(nowNs: bigint, atNs: bigint): number {
  return Number((nowNs - atNs) / NS_PER_MS);
}

/**
 * The GPS reference `state` gives at monotonic time `nowMonotonicNs`, for a card whose clock reads `cardNowNs` (pure).
 * observedAtNs is the card clock when the TPV arrived (now minus its age), or now when there is none.
 */
export function gpsReadingAt(state: GpsdState, nowMonotonicNs: bigint, staleAfterMs: number, cardNowNs: bigint, connectionProblem: string | null = null): GpsReading {
  const staleAfterNs = BigInt(staleAfterMs) * NS_PER_MS;
  const fresh = (entry: { atMonotonicNs: bigint } | null): boolean => entry !== null && nowMonotonicNs - entry.atMonotonicNs <= staleAfterNs;
  const { tpv, sky, pps } = state;
  const satellites = fresh(sky) && sky !== null ? Math.min(sky.satellitesUsed, MAX_REPORTED_SATELLITES) : 0;
  // No PPS edge seen (a receiver without PPS, or none within staleAfterMs): 0, as the reference's type has no null.
  const ppsOffsetNs = fresh(pps) && pps !== null ? pps.offsetNs : 0;
  const connection = connectionProblem === null ? "" : `; ${connectionProblem}`;
  if (tpv === null) {
    return { reference: { fixState: "none", satellites, ppsOffsetNs, observedAtNs: cardNowNs.toString() }, noFixReason: `no TPV report from gpsd yet${connection}` };
  }
  const tpvAgeNs = nowMonotonicNs > tpv.atMonotonicNs ? nowMonotonicNs - tpv.atMonotonicNs : 0n;
  const observedAtNs = (cardNowNs > tpvAgeNs ? cardNowNs - tpvAgeNs : 0n).toString();
  if (!fresh(tpv)) {
    return {
      reference: { fixState: "none", satellites, ppsOffsetNs, observedAtNs },
      noFixReason: `gpsd's last TPV report (mode ${tpv.mode}) is ${ageMs(nowMonotonicNs, tpv.atMonotonicNs)} ms old, stale after ${staleAfterMs} ms${connection}`,
    };
  }
  const fixState = FIX_STATE_OF_MODE[tpv.mode];
  const noFixReason = fixState === "none" ? `gpsd reports no fix (TPV mode ${tpv.mode}${tpv.device === null ? "" : ` on ${tpv.device}`}, ${satellites} satellites used)` : null;
  return { reference: { fixState, satellites, ppsOffsetNs, observedAtNs }, noFixReason };
}

/** Splits a byte stream into lines, bounded: a line longer than maxLineBytes is dropped whole and reported (pure). */
export class GpsdLineSplitter {
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** Inside an overlong line: everything up to its newline is dropped. */
  #discarding = false;

  constructor(readonly maxLineBytes: number = MAX_GPSD_LINE_BYTES) {}

  /** The complete lines in `chunk` (with what was pending), and how many overlong lines were dropped. */
  push(chunk: Buffer): { lines: string[]; overlong: number } {
    const lines: string[] = [];
    let overlong = 0;
    let start = 0;
    for (let newline = chunk.indexOf(10, start); newline !== -1; newline = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, newline);
      start = newline + 1;
      if (this.#discarding || this.#pendingBytes + piece.length > this.maxLineBytes) {
        if (!this.#discarding) overlong += 1;
        this.#discarding = false;
      } else {
        lines.push(Buffer.concat([...this.#pending, piece]).toString("utf8").replace(/\r$/, ""));
      }
      this.#pending = [];
      this.#pendingBytes = 0;
    }
    const rest = chunk.subarray(start);
    if (!this.#discarding && rest.length > 0) {
      if (this.#pendingBytes + rest.length > this.maxLineBytes) {
        // Counted now, not at its newline: a peer that never sends one is still seen misbehaving.
        overlong += 1;
        this.#discarding = true;
        this.#pending = [];
        this.#pendingBytes = 0;
      } else {
        this.#pending.push(Buffer.from(rest));
        this.#pendingBytes += rest.length;
      }
    }
    return { lines, overlong };
  }

  reset(): void {
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#discarding = false;
  }
}

/** The first reconnect delay, ms; doubled after each failed attempt up to DEFAULT_RECONNECT_MAX_MS. */
export const DEFAULT_RECONNECT_MIN_MS = 250;
export const DEFAULT_RECONNECT_MAX_MS = 10_000;
/** How long a TCP connect to gpsd may take, ms (a local socket answers in microseconds). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 2_000;

export interface GpsdClientOptions {
  host: string;
  port: number;
  /** A report older than this no longer counts (a TPV: no fix), ms. */
  staleAfterMs: number;
  /** Whether the card must refuse to sign without a fix (gpsRequired). */
  required: boolean;
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  connectTimeoutMs?: number;
  /** Monotonic clock, ns (tests give a fake to age reports deterministically). */
  monotonicNs?: () => bigint;
  /** Called on connection changes and malformed lines, with the evidence (logs, tests). */
  onEvent?: (event: GpsdClientEvent) => void;
}

export type GpsdClientEvent =
  | { readonly kind: "connected"; readonly attempt: number }
  | { readonly kind: "disconnected"; readonly error: string; readonly retryInMs: number }
  | { readonly kind: "malformed"; readonly error: string; readonly malformedLinesTotal: number };

/** Counters for reports and tests. */
export interface GpsdClientStats {
  readonly connected: boolean;
  readonly connectsTotal: number;
  readonly reportsTotal: number;
  readonly malformedLinesTotal: number;
  readonly lastError: string | null;
}

export class GpsdClient implements GpsReferenceSource {
  readonly name: string;
  readonly required: boolean;
  readonly #options: GpsdClientOptions;
  readonly #monotonicNs: () => bigint;
  readonly #splitter = new GpsdLineSplitter();
  #state: GpsdState = EMPTY_GPSD_STATE;
  #socket: Socket | null = null;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;
  #connected = false;
  #failedAttempts = 0;
  #connectsTotal = 0;
  #reportsTotal = 0;
  #malformedLinesTotal = 0;
  #lastError: string | null = null;

  constructor(options: GpsdClientOptions) {
    if (!Number.isInteger(options.staleAfterMs) || options.staleAfterMs < 1) throw new RangeError(`staleAfterMs must be a positive integer, got ${options.staleAfterMs}`);
    this.#options = options;
    this.name = `gpsd ${options.host.includes(":") ? `[${options.host}]` : options.host}:${options.port}`;
    this.required = options.required;
    this.#monotonicNs = options.monotonicNs ?? process.hrtime.bigint;
  }

  /** Connects (and keeps reconnecting until close()). */
  start(): this {
    if (this.#socket === null && this.#timer === null && !this.#closed) this.#connect();
    return this;
  }

  get state(): GpsdState {
    return this.#state;
  }

  stats(): GpsdClientStats {
    return { connected: this.#connected, connectsTotal: this.#connectsTotal, reportsTotal: this.#reportsTotal, malformedLinesTotal: this.#malformedLinesTotal, lastError: this.#lastError };
  }

  read(cardNowNs: bigint): GpsReading {
    const problem = this.#connected ? null : `${this.name} not connected${this.#lastError === null ? "" : ` (${this.#lastError})`}`;
    return gpsReadingAt(this.#state, this.#monotonicNs(), this.#options.staleAfterMs, cardNowNs, problem);
  }

  /** Applies one line gpsd sent (exposed for tests: the socket path calls it for each line). */
  applyLine(line: string): void {
    const parsed = parseGpsdLine(line);
    if (!parsed.ok) {
      this.#malformed(parsed.error);
      return;
    }
    const { report } = parsed;
    const atMonotonicNs = this.#monotonicNs();
    switch (report.kind) {
      case "tpv":
        this.#state = { ...this.#state, tpv: { mode: report.mode, time: report.time, device: report.device, atMonotonicNs } };
        break;
      case "sky":
        this.#state = { ...this.#state, sky: { satellitesUsed: report.satellitesUsed, satellitesVisible: report.satellitesVisible, atMonotonicNs } };
        break;
      case "pps":
        this.#state = { ...this.#state, pps: { offsetNs: report.offsetNs, atMonotonicNs } };
        break;
      case "ignored":
        return;
    }
    this.#reportsTotal += 1;
  }

  #malformed(error: string): void {
    this.#malformedLinesTotal += 1;
    this.#options.onEvent?.({ kind: "malformed", error, malformedLinesTotal: this.#malformedLinesTotal });
  }

  #connect(): void {
    const socket = new Socket();
    this.#socket = socket;
    this.#splitter.reset();
    const attempt = this.#failedAttempts + 1;
    socket.setTimeout(this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS);
    socket.once("timeout", () => socket.destroy(new Error(`connect timed out after ${this.#options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS} ms`)));
    socket.once("connect", () => {
      // Connected: no timeout on reads (gpsd is silent while no device reports); staleness handles silence.
      socket.setTimeout(0);
      socket.setKeepAlive(true, 10_000);
      this.#connected = true;
      this.#failedAttempts = 0;
      this.#connectsTotal += 1;
      this.#lastError = null;
      socket.write(GPSD_WATCH_COMMAND);
      this.#options.onEvent?.({ kind: "connected", attempt });
    });
    socket.on("data", (chunk: Buffer) => {
      const { lines, overlong } = this.#splitter.push(chunk);
      for (let index = 0; index < overlong; index += 1) this.#malformed(`line longer than ${this.#splitter.maxLineBytes} bytes dropped`);
      for (const line of lines) this.applyLine(line);
    });
    let lastError: string | null = null;
    socket.on("error", (error: NodeJS.ErrnoException) => {
      lastError = `${error.code ?? "error"}: ${error.message}`;
    });
    socket.once("close", () => {
      if (this.#socket === socket) this.#socket = null;
      this.#connected = false;
      if (this.#closed) return;
      this.#lastError = lastError ?? "gpsd closed the connection";
      this.#failedAttempts += 1;
      const min = this.#options.reconnectMinMs ?? DEFAULT_RECONNECT_MIN_MS;
      const max = this.#options.reconnectMaxMs ?? DEFAULT_RECONNECT_MAX_MS;
      // Exponential backoff: a gpsd that is down is not hammered, one that restarts is found again within max.
      const retryInMs = Math.min(max, min * 2 ** Math.min(this.#failedAttempts - 1, 20));
      this.#options.onEvent?.({ kind: "disconnected", error: this.#lastError, retryInMs });
      this.#timer = setTimeout(() => {
        this.#timer = null;
        if (!this.#closed) this.#connect();
      }, retryInMs);
      // The client never keeps the process alive on its own.
      this.#timer.unref();
    });
    socket.connect({ host: this.#options.host, port: this.#options.port });
    socket.unref();
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#socket?.destroy();
    this.#socket = null;
    this.#connected = false;
  }
}

/**
 * Why a card with this GPS input must not sign now, or null: only a required source (gpsRequired) refuses, and only
 * without a fresh 2-D or 3-D fix. The card's clock is what is signed either way (module comment).
 */
export function gpsSigningRefusal(gps: GpsReferenceSource, cardNowNs: bigint): string | null {
  if (!gps.required) return null;
  const { noFixReason } = gps.read(cardNowNs);
  return noFixReason === null ? null : `GPS fix required (gpsRequired) but ${gps.name}: ${noFixReason}`;
}

/** The reference for reports: "gpsd 127.0.0.1:2947: 3d fix, 8 satellites, PPS offset 120 ns". */
export function describeGpsReading(gps: GpsReferenceSource, reading: GpsReading): string {
  const { fixState, satellites, ppsOffsetNs } = reading.reference;
  return `${gps.name}: ${fixState === "none" ? "no fix" : `${fixState} fix`}, ${satellites} satellites, PPS offset ${ppsOffsetNs} ns`;
}
