/**
 * The mesh port's catch-all socket (docs/protocol.md §7.3): it receives what the kernel does not hand to a peer's
 * own connected socket (peerSockets.ts), that is every datagram from an address and port no peer is configured at.
 * Nothing from there is a member's packet, so nothing is decoded: each datagram is only counted (`unknown-source`).
 *
 * Even counting costs this process a wake-up per datagram, so the socket has a budget: past
 * MESH_STRANGER_DATAGRAMS_PER_SECOND datagrams in one second it is closed for MESH_STRANGER_PAUSE_MS, during which
 * the kernel discards strangers' datagrams without waking this process (and answers them with ICMP port
 * unreachable, as for any closed port), then bound again. The peers' sockets are not touched: their packets keep
 * arriving in their own receive queues throughout. While it is closed nothing is counted, so `unknown-source` is a
 * lower bound of what strangers sent.
 */
import { createSocket, type Socket, type SocketType } from "node:dgram";
import type { Logger } from "pino";

/** Datagrams from strangers read per second before the catch-all socket closes for a pause. */
export const MESH_STRANGER_DATAGRAMS_PER_SECOND = 1_000;
/** How long the catch-all socket stays closed once over its budget, ms. */
export const MESH_STRANGER_PAUSE_MS = 1_000;
/** Its receive buffer: nothing in it is worth keeping, so a small one (the kernel doubles it). */
const STRANGER_RECV_BUFFER_BYTES = 64 * 1024;
/** The budget's window, ms. */
const WINDOW_MS = 1_000;

export interface StrangerSocketOptions {
  readonly type: SocketType;
  readonly host: string;
  /** The mesh port, already bound by nobody else (transport start checks). */
  readonly port: number;
  /** Called for each datagram read, before anything else is done with it (the transport counts it). */
  readonly onDatagram: (source: { address: string; port: number }, bytes: number) => void;
  /** A monotonic clock, ms (the budget's window). */
  readonly nowMs: () => number;
  readonly logger: Logger;
}

/** Binds a socket sharing the mesh port (SO_REUSEADDR, like the peers' sockets). Rejects with the bind error. */
export function bindShared(type: SocketType, host: string, port: number, recvBufferSize: number): Promise<Socket> {
  const socket = createSocket({ type, reuseAddr: true, recvBufferSize });
  return new Promise<Socket>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(port, host, () => {
      socket.off("error", reject);
      resolve(socket);
    });
  });
}

export class StrangerSocket {
  readonly #options: StrangerSocketOptions;
  #socket: Socket | null = null;
  #pauseTimer: NodeJS.Timeout | null = null;
  #windowStartMs = Number.NEGATIVE_INFINITY;
  #windowDatagrams = 0;
  #pauses = 0;
  #closed = false;

  constructor(options: StrangerSocketOptions) {
    this.#options = options;
  }

  /** Times the budget closed the socket since start. */
  get pauses(): number {
    return this.#pauses;
  }

  /** Whether the socket is bound now (false while paused). */
  get listening(): boolean {
    return this.#socket !== null;
  }

  /** Binds the socket. Rejects with the bind error. */
  async open(): Promise<void> {
    const { type, host, port } = this.#options;
    const socket = await bindShared(type, host, port, STRANGER_RECV_BUFFER_BYTES);
    if (this.#closed) {
      socket.close();
      return;
    }
    socket.on("message", (datagram, remote) => this.#receive(datagram.length, remote));
    // Errors on a socket that only reads (ICMP reports of its own sends: it sends none) are not worth a line each.
    socket.on("error", () => undefined);
    this.#socket = socket;
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#pauseTimer !== null) clearTimeout(this.#pauseTimer);
    this.#pauseTimer = null;
    await this.#closeSocket();
  }

  #receive(bytes: number, remote: { address: string; port: number }): void {
    if (this.#socket === null) return; // datagrams read in the batch that crossed the budget
    this.#options.onDatagram(remote, bytes);
    const nowMs = this.#options.nowMs();
    if (nowMs - this.#windowStartMs >= WINDOW_MS) {
      this.#windowStartMs = nowMs;
      this.#windowDatagrams = 0;
    }
    this.#windowDatagrams += 1;
    if (this.#windowDatagrams > MESH_STRANGER_DATAGRAMS_PER_SECOND) this.#pause(remote);
  }

  #pause(lastSource: { address: string; port: number }): void {
    this.#pauses += 1;
    this.#options.logger.warn(
      { lastSource: `${lastSource.address}:${lastSource.port}`, budgetPerSecond: MESH_STRANGER_DATAGRAMS_PER_SECOND, pauseMs: MESH_STRANGER_PAUSE_MS, pauses: this.#pauses },
      "mesh port flooded from addresses no peer is configured at: not reading them for a while (peers are unaffected)",
    );
    void this.#closeSocket();
    this.#pauseTimer = setTimeout(() => {
      this.#pauseTimer = null;
      if (this.#closed) return;
      this.open().catch((error: unknown) => {
        // Someone else took the port meanwhile (only possible with SO_REUSEADDR too): try again after another pause.
        this.#options.logger.warn({ err: error }, "cannot bind the mesh port's catch-all socket again");
        this.#pause(lastSource);
      });
    }, MESH_STRANGER_PAUSE_MS);
    this.#pauseTimer.unref();
  }

  async #closeSocket(): Promise<void> {
    const socket = this.#socket;
    this.#socket = null;
    if (socket !== null) await new Promise<void>((resolve) => socket.close(() => resolve()));
  }
}
