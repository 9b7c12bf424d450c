/**
 * Listen-backlog probes: how many TCP handshakes a server's accept queue takes while the server accepts nothing.
 * Linux only (the kernel's accept queue and its cap: lib/listenBacklog.ts).
 */
import { Worker } from "node:worker_threads";

/** What the worker below does: connect `attempts` times, count the handshakes seen within `waitMs`, report. */
const CONNECTING_WORKER = `
const { workerData } = require("node:worker_threads");
const { connect } = require("node:net");
const { shared, port, attempts, waitMs } = workerData;
const state = new Int32Array(shared); // [0]: 0 until the count is in [1]; [1]: handshakes completed
let connected = 0;
const sockets = [];
for (let i = 0; i < attempts; i++) {
  const socket = connect({ host: "127.0.0.1", port });
  socket.on("connect", () => { connected += 1; });
  socket.on("error", () => {});
  sockets.push(socket);
}
// One more poll phase after the timer, so that no handshake completed in time is still waiting for its event.
setTimeout(() => setImmediate(() => {
  for (const socket of sockets) socket.destroy();
  Atomics.store(state, 1, connected);
  Atomics.store(state, 0, 1);
  Atomics.notify(state, 0);
}), waitMs);
`;

/**
 * Opens `attempts` connections to 127.0.0.1:`port` from a worker thread while this thread, which runs the server
 * under test, is blocked until the worker has counted, so the server accepts none of them: returns how many
 * completed their TCP handshake within `waitMs`. A handshake completes only while the server's accept queue (its
 * listen backlog) has room; beyond it the SYN is dropped and the client would retry after 1 s.
 */
export async function handshakesWhileBlocked(port: number, attempts: number, waitMs: number): Promise<number> {
  const shared = new SharedArrayBuffer(8);
  const state = new Int32Array(shared);
  const worker = new Worker(CONNECTING_WORKER, { eval: true, workerData: { shared, port, attempts, waitMs } });
  try {
    if (Atomics.wait(state, 0, 0, waitMs + 10_000) === "timed-out") throw new Error(`the connecting worker did not report within ${waitMs + 10_000} ms`);
    return Atomics.load(state, 1);
  } finally {
    await worker.terminate();
  }
}
