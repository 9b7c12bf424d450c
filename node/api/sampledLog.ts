/**
 * Sampled, stackless logging of client errors (refusals, bad requests, abandoned requests) for every transport.
 * One instance per node, owned by the TransportContext, so REST, the fast path, WebSocket and gRPC share it.
 *
 * Why: a refused request costs its client ~35 bytes, and logging each one at info level with its stack trace
 * cost ~760 bytes of log (103 MB in 10 s from 4 connections): refusing a flood filled the disk for the flood.
 * Client errors are the caller's doing; the metrics count every one of them (timerpc_requests_total by status),
 * so the log only has to show that they happen and what they look like:
 *
 * Detail: docs/node.md "Signing, transports and limits".
 */
import type { Logger } from "pino";
import type { Transport } from "./metrics";

/*
 * - at most one line per key (transport + status) per window (DEFAULT_SAMPLE_WINDOW_MS). The first error of a
 *   quiet key is written at once; the others of its window are counted, and when the window ends one line
 *   carries that count (`suppressed`) with the latest of them as the example, and opens the next window;
 * - of the error only `{name, message, code}`: never the stack (it says where the node threw, which does not
 *   help with a client's mistake and was most of the bytes), never nested causes or details.
 *
 * Server faults are not sampled here: the transports log them at error level with the stack, each one.
 */
/** Length of a sampling window. */
export const DEFAULT_SAMPLE_WINDOW_MS = 10_000;

export interface ClientErrorEvent {
  transport: Transport;
  /** The answer: HTTP status, gRPC status name or WebSocket outcome. With `transport`, the sampling key. */
  status: string;
  /** Route, URL or RPC name of the request. */
  route: string;
  error: unknown;
}

/** What a client-error line shows of the error. */
export interface ErrorSummary {
  name: string;
  message: string;
  code?: string | number;
}

export function summarizeError(error: unknown): ErrorSummary {
  if (!(error instanceof Error)) return { name: typeof error, message: String(error) };
  const { code } = error as Error & { code?: unknown };
  return typeof code === "string" || typeof code === "number"
    ? { name: error.name, message: error.message, code }
    : { name: error.name, message: error.message };
}

interface WindowState {
  /** Events since the last line that got no line of their own. */
  suppressed: number;
  latest: ClientErrorEvent;
  timer: NodeJS.Timeout;
}

export class SampledLog {
  readonly #logger: Logger;
  readonly #windowMs: number;
  /** Keys with an open window. Bounded: a handful of transports times their finite statuses. */
  readonly #windows = new Map<string, WindowState>();

  constructor(logger: Logger, options: { windowMs?: number } = {}) {
    this.#logger = logger;
    this.#windowMs = options.windowMs ?? DEFAULT_SAMPLE_WINDOW_MS;
  }

  /** Logs a client error now if its key is quiet, else counts it for the line that closes the key's window. */
  clientError(event: ClientErrorEvent): void {
    const key = `${event.transport} ${event.status}`;
    const open = this.#windows.get(key);
    if (open !== undefined) {
      open.suppressed += 1;
      open.latest = event;
      return;
    }
    this.#write(event, 0);
    this.#windows.set(key, { suppressed: 0, latest: event, timer: this.#closeLater(key) });
  }

  /** Writes the counts of all open windows now and stops their timers (node shutdown, tests). */
  flush(): void {
    for (const state of this.#windows.values()) {
      clearTimeout(state.timer);
      if (state.suppressed > 0) this.#write(state.latest, state.suppressed);
    }
    this.#windows.clear();
  }

  #closeLater(key: string): NodeJS.Timeout {
    // unref: a pending summary never keeps the process alive.
    return setTimeout(() => this.#close(key), this.#windowMs).unref();
  }

  #close(key: string): void {
    const state = this.#windows.get(key);
    if (state === undefined) return;
    if (state.suppressed === 0) {
      this.#windows.delete(key); // a quiet window: the key's next error is written at once
      return;
    }
    this.#write(state.latest, state.suppressed);
    state.suppressed = 0;
    state.timer = this.#closeLater(key); // that line opens the next window
  }

  #write(event: ClientErrorEvent, suppressed: number): void {
    this.#logger.info(
      {
        transport: event.transport,
        status: event.status,
        route: event.route,
        error: summarizeError(event.error),
        suppressed,
        sampleWindowMs: this.#windowMs,
      },
      "request rejected",
    );
  }
}
