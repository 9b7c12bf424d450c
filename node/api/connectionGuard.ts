/**
 * Connection-level defences of the node's servers: what a per-client rate limit cannot do on its own. One guard
 * per node (TransportContext.connections) watches the REST/WebSocket server and gRPC's listening servers alike;
 * the pipelining and refusal rules apply to HTTP/1.1 requests.
 *
 * Detail: docs/node.md "Signing, transports and limits".
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Server as NetServer, Socket } from "node:net";
import type { Duplex } from "node:stream";

/*
 * - Connection caps: at most `maxConnections` open connections in all and `maxConnectionsPerAddress` from one
 *   remote address (both ports counted together); a connection beyond either is closed as it is accepted, before a byte is parsed. Without them
 *   idle or slow connections from one address exhaust the process's file descriptors and everyone's requests fail.
 * - Pipelining depth: Node parses a whole socket read (64 kB, ~1,800 pipelined GETs) at once and dispatches every
 *   request in it, and a cheap 429 keeps the connection open, so one pipelining connection can take the event loop
 *   from everyone, and one that never reads its answers makes the server buffer them without bound. A connection
 *   with more than `maxPipelinedRequests` requests received and not yet answered is closed (browsers and ordinary
 *   clients never pipeline; an honest pipelining client stays far below the bound).
 * - Refusals: after a 429 (client over its rate) the connection is not read for `refusalPauseMs` (100 ms by
 *   default: ten tokens at the default 100 requests/s), so an over-rate client is slowed by backpressure instead of being
 *   answered as fast as it can send; a connection whose last `maxRefusalsPerConnection` answers were all 429 (a
 *   pipelined batch) is closed instead of being answered again. gRPC calls (HTTP/2 streams) are counted the same
 *   way by the gRPC server (noteCall), and a channel refused that many times in a row is closed too.
 * - Penalty: an address whose connection was closed (pipelining or refusals) has new connections closed on accept for
 *   `penaltyMs`, doubled on each repeat (at most `maxPenaltyMs`), so its sockets are not read at all meanwhile.
 *   Penalties are kept for at most `maxPenalisedAddresses` addresses (the oldest is dropped).
 * - Stalls: a connection with a request in flight on which no byte was read or written for
 *   `stalledRequestTimeoutMs` is destroyed (a client that stops reading a large answer, a request no handler
 *   ends). Node's own bounds cover the rest of a connection's life: headersTimeout and requestTimeout until the
 *   request is received, keepAliveTimeout between requests. Every request Node would answer on its own and keep
 *   the connection open (417 for an unknown Expect) is routed through admit() by the server (rest.ts).
 *
 * Cost per request is what matters here: `GET /time/current` is answered tens of thousands of times a second
 * (currentTimeFastPath.ts). admit() adds no listener and no property to the request or response: it keeps the
 * connection's unfinished answers in a short queue, dropping the finished ones from its front as it goes
 * (HTTP/1.1 answers leave in order). Stalls are found by one sweep over the open connections every
 * `stalledRequestTimeoutMs / 10` (100 ms to 1 s), not by Node's socket timeout (`server.setTimeout`), which Node
 * arms anew at every request's start and refreshes on every read and write: a measurable share of a saturated
 * node's CPU (docs/benchmarks.md).
 *
 * A connection closed while open is closed gracefully: it is no longer read, requests after the violation are not
 * answered, and the answers already given are flushed before the socket is destroyed (at most CLOSE_GRACE_MS
 * later, for a client that does not read them). The rest of the read being parsed is dropped unparsed
 * (stopParsing); where Node's parser does not offer that hook, `admit()` turns each of its requests
 * away with a single check.
 */
export interface ConnectionLimits {
  /** Open connections of the server, all addresses together. */
  maxConnections: number;
  /** Open connections from one remote address. */
  maxConnectionsPerAddress: number;
  /** Requests received on one connection and not yet answered. */
  maxPipelinedRequests: number;
  /** Consecutive 429 answers on one connection before it is closed. */
  maxRefusalsPerConnection: number;
  /** How long a connection is not read after a 429 (0: not paused). */
  refusalPauseMs: number;
  /** First penalty of an address whose connection was closed for abuse; doubles on repeat. */
  penaltyMs: number;
  maxPenaltyMs: number;
  maxPenalisedAddresses: number;
  /**
   * A connection with a request in flight (admitted, its answer not yet finished; or bytes waiting to be written)
   * on which nothing was read or written for this long is destroyed; 0: never. A node sets it to its
   * requestTimeoutMs (transportLimitsFromConfig); limits given whole keep what they say.
   */
  stalledRequestTimeoutMs: number;
}

export const DEFAULT_CONNECTION_LIMITS: Readonly<ConnectionLimits> = {
  maxConnections: 8_192,
  maxConnectionsPerAddress: 256,
  maxPipelinedRequests: 16,
  maxRefusalsPerConnection: 8,
  refusalPauseMs: 100,
  penaltyMs: 1_000,
  maxPenaltyMs: 60_000,
  maxPenalisedAddresses: 10_000,
  stalledRequestTimeoutMs: 10_000,
};

/** Why a connection was dropped (label of timerpc_connections_dropped_total). */
export const DROP_REASONS = ["server_full", "address_full", "penalised", "pipelining", "refusals", "stalled"] as const;
export type DropReason = (typeof DROP_REASONS)[number];

/** Longest a connection being closed waits for its client to read the answers it was given. */
const CLOSE_GRACE_MS = 1_000;
/**
 * What a parser's per-request hook answers to stop at the request it is given: llhttp's "upgrade" code, which
 * makes it return from the read it is executing without parsing the rest (Node's own upgrade path answers it).
 */
const STOP_PARSING = 2;

/** The part of Node's internal HTTP parser (socket.parser) the guard uses: its per-request hook. */
interface ParserHook {
  onIncoming?: unknown;
}

/**
 * Node's HTTP parser executes a whole socket read (64 kB: ~1,800 pipelined GETs) and builds a request and a
 * response object for each request in it, even when admit() then turns every one away, so a closing connection's
 * last read held the event loop for hundreds of ms under a pipelined flood (figures: docs/benchmarks.md). Once
 * the connection is closing, its parser's per-request hook answers STOP_PARSING, so the rest of that read is
 * dropped unparsed. The hook is replaced only then, never wrapped for every connection: a wrapper would sit on
 * every request's path. The hook is internal to Node (parser.onIncoming, looked up for every
 * request; Node sets it anew for each connection that takes a parser from its pool and clears it when the parser
 * goes back, so the replacement never reaches another connection): where it is missing, nothing changes and
 * admit() still refuses those requests one by one; a test pins the behaviour on the Node version in use.
 */
function stopParsing(socket: Socket): void {
  const parser = (socket as Socket & { parser?: ParserHook | null }).parser;
  if (parser === undefined || parser === null || typeof parser.onIncoming !== "function") return;
  parser.onIncoming = answerStopParsing;
}

function answerStopParsing(): number {
  return STOP_PARSING;
}

interface SocketState {
  readonly socket: Socket;
  address: string;
  /**
   * Admitted responses not yet seen finished, oldest first: its length after unfinished() is the number of requests
   * received and not yet answered. At most maxPipelinedRequests long.
   */
  readonly inFlight: ServerResponse[];
  /** Closed for a violation: nothing more is admitted; destroyed once its answers are finished (or after the grace). */
  closing: boolean;
  /** The latest request's response: its status is known by the next request of a pipelined read. */
  last: ServerResponse | null;
  consecutiveRefusals: number;
  /** Bytes read plus written when the stall sweep last saw them change, and when (ms; -1: nothing in flight then). */
  activityBytes: number;
  quietSinceMs: number;
}

/**
 * Drops the finished answers from the front of the connection's queue and returns how many are left. HTTP/1.1
 * answers leave in order, so the first unfinished one ends the scan. A response is finished once it emitted
 * 'close' (`closed`): after its last bytes were handed to the kernel and Node released the socket to the next
 * answer, or when its connection closed. (writableFinished turns true earlier, as soon as end() writes the bytes,
 * so a pipelined read would see every answer already finished and the bound would slip.)
 */
function unfinished(state: SocketState): number {
  const { inFlight } = state;
  let flushed = 0;
  while (flushed < inFlight.length && inFlight[flushed]!.closed) flushed += 1;
  if (flushed > 0) inFlight.splice(0, flushed);
  return inFlight.length;
}

/**
 * How often a timeout of `timeoutMs` is checked by a sweep: a tenth of it, 100 ms to 1 s. The REST server gives it
 * to Node for headersTimeout/requestTimeout (connectionsCheckingInterval: Node's default, 30 s, cut slow clients
 * after up to 40 s for a 10 s timeout), and the stall sweep below runs at it.
 */
export function timeoutSweepIntervalMs(timeoutMs: number): number {
  return Math.min(1_000, Math.max(100, Math.floor(timeoutMs / 10)));
}

interface Penalty {
  untilMs: number;
  nextMs: number;
}

export interface ConnectionGuard {
  /**
   * Applies the caps and the penalty to every connection `server` accepts (its 'connection' event: the raw TCP
   * socket of http, https and http2 servers alike). One guard may watch several servers of one node (REST and
   * gRPC): they share the counts, so the caps hold for the node's process.
   */
  watch(server: NetServer, options?: WatchOptions): void;
  /**
   * Counts the outcome of a call on a connection of a server watched with `byPeer` (gRPC: its calls are HTTP/2
   * streams admit() never sees), the connection named by its peer as the remote end reports it (`host:port`,
   * grpc-js getPeer()). After maxRefusalsPerConnection refusals in a row (the client over its rate), the next
   * refused call closes the connection and penalises its address, as for a REST connection answered 429 that often.
   */
  noteCall(peer: string, refused: boolean): void;
  /**
   * Call first for every request. False when the request must not be answered: its connection was (or is now)
   * closed for exceeding a bound.
   */
  admit(request: IncomingMessage, response: ServerResponse): boolean;
  /**
   * Call when an admitted `response` refuses its request with 429 (client over its rate): once it is sent, its
   * connection is not read for refusalPauseMs. (Refusals in a row are counted by admit() on its own.)
   */
  refused(response: ServerResponse): void;
  /**
   * Whether the guard is closing this connection. Node hands an upgrade request to the server's 'upgrade'
   * listeners, not to admit(); a closing connection's parser stops on one as on any request, and Node then takes
   * it for an upgrade all the same: the WebSocket handshake asks here first (ws.ts).
   */
  isClosing(socket: Socket | Duplex): boolean;
  /**
   * The socket leaves HTTP for a WebSocket (ws.ts, once the handshake may go ahead): the stall sweep no longer
   * looks at it (a WebSocket's idle time is its own business), as for one that was upgraded on its first request.
   */
  upgraded(socket: Socket | Duplex): void;
  /** Open connections, all addresses. */
  readonly connectionCount: number;
}

export interface WatchOptions {
  /** Track this server's connections by peer (`host:port`) for noteCall(). */
  byPeer?: boolean;
}

export interface ConnectionGuardOptions {
  limits: ConnectionLimits;
  onDrop: (reason: DropReason, address: string) => void;
  /** Monotonic milliseconds (tests). */
  nowMs?: () => number;
}

export function createConnectionGuard(options: ConnectionGuardOptions): ConnectionGuard {
  const { limits, onDrop } = options;
  const nowMs = options.nowMs ?? (() => performance.now());
  const perAddress = new Map<string, number>();
  /** Insertion-ordered: the first entry is the oldest penalty. */
  const penalties = new Map<string, Penalty>();
  const states = new WeakMap<Socket, SocketState>();
  /** The connections admit() has seen, until they close: what the stall sweep visits (at most maxConnections). */
  const tracked = new Set<SocketState>();
  let stallSweep: NodeJS.Timeout | null = null;
  let open = 0;

  const drop = (socket: Socket, reason: DropReason, address: string): false => {
    onDrop(reason, address);
    socket.destroy();
    return false;
  };

  function closeGracefully(socket: Socket, state: SocketState, reason: DropReason): void {
    if (state.closing) return;
    state.closing = true;
    onDrop(reason, state.address);
    socket.pause();
    stopParsing(socket);
    if (unfinished(state) === 0) {
      socket.destroy();
      return;
    }
    // The answers already given go out first (a rare path: listeners here cost nothing per request).
    const destroyWhenAnswered = (): void => {
      if (unfinished(state) === 0) socket.destroy();
    };
    for (const response of state.inFlight) response.once("close", destroyWhenAnswered);
    setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
  }

  function penalise(address: string): void {
    const previous = penalties.get(address);
    const durationMs = previous === undefined ? limits.penaltyMs : Math.min(previous.nextMs, limits.maxPenaltyMs);
    penalties.delete(address);
    if (penalties.size >= limits.maxPenalisedAddresses) {
      const oldest = penalties.keys().next();
      if (oldest.done !== true) penalties.delete(oldest.value);
    }
    penalties.set(address, { untilMs: nowMs() + durationMs, nextMs: durationMs * 2 });
  }

  /** Stops reading a socket for refusalPauseMs (requests already read are still answered). */
  function pauseReading(socket: Socket, state: SocketState): void {
    if (limits.refusalPauseMs <= 0 || socket.destroyed || state.closing || socket.isPaused()) return;
    socket.pause();
    setTimeout(() => {
      // A connection being closed stays paused: its remaining requests would only be parsed to be dropped.
      if (!socket.destroyed && !state.closing) socket.resume();
    }, limits.refusalPauseMs).unref();
  }

  /** Destroys the connections whose request in flight saw no byte read or written for stalledRequestTimeoutMs. */
  function sweepStalled(): void {
    const nowMsValue = nowMs();
    for (const state of tracked) {
      const { socket } = state;
      // Destroyed: its 'close' untracks it. Closing: closeGracefully's grace bounds it, and it is counted once.
      if (socket.destroyed || state.closing) continue;
      // In flight: an admitted answer not finished, or bytes Node holds for a client that does not read them
      // (an answer Node writes itself, such as a 400 for a request without Host, is never admitted).
      if (unfinished(state) === 0 && socket.writableLength === 0) {
        state.quietSinceMs = -1;
        continue;
      }
      const activityBytes = socket.bytesRead + socket.bytesWritten;
      if (state.quietSinceMs < 0 || activityBytes !== state.activityBytes) {
        state.activityBytes = activityBytes;
        state.quietSinceMs = nowMsValue;
      } else if (nowMsValue - state.quietSinceMs >= limits.stalledRequestTimeoutMs) {
        onDrop("stalled", state.address);
        socket.destroy();
      }
    }
  }

  /** Takes a connection out of the stall sweep; the sweep stops when none is left. */
  function untrack(state: SocketState): void {
    tracked.delete(state);
    if (tracked.size === 0 && stallSweep !== null) {
      clearInterval(stallSweep);
      stallSweep = null;
    }
  }

  /** The guard's state of an HTTP connection, made on its first request; the sweep runs while any is open. */
  function track(socket: Socket): SocketState {
    const state: SocketState = {
      socket,
      address: socket.remoteAddress ?? "unknown",
      inFlight: [],
      closing: false,
      last: null,
      consecutiveRefusals: 0,
      activityBytes: 0,
      quietSinceMs: -1,
    };
    states.set(socket, state);
    tracked.add(state);
    socket.once("close", () => untrack(state));
    if (stallSweep === null && limits.stalledRequestTimeoutMs > 0) {
      stallSweep = setInterval(sweepStalled, timeoutSweepIntervalMs(limits.stalledRequestTimeoutMs)).unref();
    }
    return state;
  }

  function penalised(address: string): boolean {
    const penalty = penalties.get(address);
    if (penalty === undefined) return false;
    // Past the penalty the entry stays (its doubling remembers the repeat) until the next penalty or eviction.
    return nowMs() < penalty.untilMs;
  }

  // 'connection' is the raw TCP socket for http, https and http2 alike: counted before any TLS handshake or parsing.
  // True when the connection is admitted.
  const onConnection = (socket: Socket): boolean => {
    const address = socket.remoteAddress ?? "unknown";
    if (penalised(address)) return drop(socket, "penalised", address);
    if (open >= limits.maxConnections) return drop(socket, "server_full", address);
    const fromAddress = perAddress.get(address) ?? 0;
    if (fromAddress >= limits.maxConnectionsPerAddress) return drop(socket, "address_full", address);
    open += 1;
    perAddress.set(address, fromAddress + 1);
    socket.once("close", () => {
      open -= 1;
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left <= 0) perAddress.delete(address);
      else perAddress.set(address, left);
    });
    return true;
  };

  /** Connections of the servers watched `byPeer`, by `host:port` of their remote end. */
  const byPeer = new Map<string, { socket: Socket; address: string; consecutiveRefusals: number }>();
  const onPeerConnection = (socket: Socket): void => {
    if (!onConnection(socket)) return;
    const address = socket.remoteAddress ?? "unknown";
    const peer = `${address}:${socket.remotePort ?? ""}`;
    byPeer.set(peer, { socket, address, consecutiveRefusals: 0 });
    // Only its own entry: a late close must not remove a newer connection's from the same address and port.
    socket.once("close", () => {
      if (byPeer.get(peer)?.socket === socket) byPeer.delete(peer);
    });
  };

  return {
    watch(server, options = {}) {
      server.on("connection", options.byPeer === true ? onPeerConnection : onConnection);
    },
    noteCall(peer, refused) {
      const tracked = byPeer.get(peer);
      if (tracked === undefined) return;
      if (!refused) {
        tracked.consecutiveRefusals = 0;
        return;
      }
      // As for REST: maxRefusalsPerConnection refusals are answered; the next one closes the connection instead.
      if (tracked.consecutiveRefusals < limits.maxRefusalsPerConnection) {
        tracked.consecutiveRefusals += 1;
        return;
      }
      byPeer.delete(peer);
      penalise(tracked.address);
      drop(tracked.socket, "refusals", tracked.address);
    },
    get connectionCount() {
      return open;
    },
    isClosing(socket) {
      return states.get(socket as Socket)?.closing === true;
    },
    upgraded(socket) {
      const state = states.get(socket as Socket);
      if (state !== undefined) untrack(state);
    },
    admit(request, response) {
      const socket = request.socket;
      if (socket.destroyed) return false;
      const state = states.get(socket) ?? track(socket);
      if (state.closing) return false;
      const { last } = state;
      if (last !== null && last.headersSent) state.consecutiveRefusals = last.statusCode === 429 ? state.consecutiveRefusals + 1 : 0;
      if (state.consecutiveRefusals >= limits.maxRefusalsPerConnection) {
        penalise(state.address);
        closeGracefully(socket, state, "refusals");
        return false;
      }
      if (unfinished(state) >= limits.maxPipelinedRequests) {
        penalise(state.address);
        closeGracefully(socket, state, "pipelining");
        return false;
      }
      state.inFlight.push(response);
      state.last = response;
      return true;
    },
    refused(response) {
      // The request's socket: a pipelined answer gets response.socket only when its turn comes.
      const socket = response.req.socket;
      const state = states.get(socket);
      if (state === undefined) return;
      // Paused once the answer is flushed: Node resumes a socket itself when it finishes a response (req._dump).
      response.once("close", () => {
        // Still a 429 when it went out (a failed send may have turned it into a 500), and really sent.
        if (response.statusCode === 429 && response.writableFinished) pauseReading(socket, state);
      });
    },
  };
}
