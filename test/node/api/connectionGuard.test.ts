/**
 * Connection-level defences of the REST server: pipelining depth, refusals, connection
 * caps per address and in total, and request/header timeouts enforced on time. Raw TCP on loopback; the "other
 * client" connects from 127.0.0.2 (Linux routes all of 127.0.0.0/8 to lo).
 */
import { expect } from "chai";
import { createServer } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { createConnectionGuard, DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from "../../../node/api/connectionGuard";
import { startTestNode, waitFor, type TestNode } from "./helpers";

const GET_CURRENT = "GET /time/current HTTP/1.1\r\nHost: node\r\n\r\n";

interface RawConnection {
  socket: Socket;
  /** Everything received so far. */
  received(): string;
  /** Statuses of the answers received so far, in order. */
  statuses(): number[];
  closed: Promise<void>;
  isClosed(): boolean;
}

/** A raw TCP connection to the node's REST port, from `localAddress`; destroyed by `cleanups`. */
async function rawConnection(restUrl: string, localAddress = "127.0.0.1"): Promise<RawConnection> {
  const { port } = new URL(restUrl);
  const socket = connect({ host: "127.0.0.1", port: Number(port), localAddress });
  let text = "";
  let closed = false;
  socket.setEncoding("latin1");
  socket.on("data", (chunk: string) => {
    text += chunk;
  });
  socket.on("error", () => undefined);
  const closedPromise = new Promise<void>((resolve) =>
    socket.once("close", () => {
      closed = true;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  return {
    socket,
    received: () => text,
    statuses: () => [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => Number(match[1])),
    closed: closedPromise,
    isClosed: () => closed,
  };
}

describe("node/api connection guard", function () {
  this.timeout(30_000);
  let t: TestNode | undefined;
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await t?.close();
    t = undefined;
  });

  async function start(connections: Partial<ConnectionLimits>, overrides: Record<string, unknown> = {}): Promise<TestNode> {
    t = await startTestNode({ overrides, limits: { connections: { ...DEFAULT_CONNECTION_LIMITS, ...connections } } });
    return t;
  }
  async function open(localAddress = "127.0.0.1"): Promise<RawConnection> {
    const connection = await rawConnection(t!.node.endpoints.rest, localAddress);
    sockets.push(connection.socket);
    return connection;
  }
  /** A counter of the node's metrics (read in-process: a scrape would be one more connection to the guard). */
  async function metric(reason: string): Promise<number> {
    const text = await t!.node.metrics.render();
    const match = new RegExp(`timerpc_connections_dropped_total\\{reason="${reason}"\\} (\\d+)`).exec(text);
    return match === null ? 0 : Number(match[1]);
  }

  it("closes a connection that pipelines beyond maxPipelinedRequests, and refuses its address for the penalty", async () => {
    await start({ maxPipelinedRequests: 4, penaltyMs: 60_000 });
    const flooder = await open();
    flooder.socket.write(GET_CURRENT.repeat(1_800));
    await flooder.closed;
    // The answers given before the violation are flushed; none after it.
    expect(flooder.statuses()).to.deep.equal([200, 200, 200, 200]);
    // The same address is refused on accept while penalised: closed without an answer.
    const again = await open();
    again.socket.write(GET_CURRENT);
    await again.closed;
    expect(again.received()).to.equal("");
    // Another address is served meanwhile.
    const other = await open("127.0.0.2");
    other.socket.write(GET_CURRENT);
    await waitFor(() => other.statuses().length === 1, "the other client's answer");
    expect(other.statuses()).to.deep.equal([200]);
    expect(await metric("pipelining")).to.equal(1);
    expect(await metric("penalised")).to.equal(1);
  });

  it("stops parsing a closing connection's read: the pipelined requests after the violation are never dispatched", async () => {
    // The guard alone on a plain node:http server, to count every request Node's parser dispatches.
    const guard = createConnectionGuard({ limits: { ...DEFAULT_CONNECTION_LIMITS, maxPipelinedRequests: 4, penaltyMs: 1 }, onDrop: () => undefined });
    let dispatched = 0;
    const server = createServer((request, response) => {
      dispatched += 1;
      if (guard.admit(request, response)) response.end("ok");
    });
    guard.watch(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const flooder = await rawConnection(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      sockets.push(flooder.socket);
      flooder.socket.write(GET_CURRENT.repeat(1_800)); // one write: ~1,800 requests in the node's first reads
      await flooder.closed;
      expect(flooder.statuses()).to.deep.equal([200, 200, 200, 200]);
      // The four answered and the one that closed the connection; not the rest of the read (~1,800 without the hook).
      expect(dispatched).to.equal(5);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("sends Node's own 417 answers (unknown Expect) through the guard: pipelined beyond the bound, the connection closes", async () => {
    await start({ maxPipelinedRequests: 4, penaltyMs: 60_000 });
    const flooder = await open();
    flooder.socket.write("GET /time/current HTTP/1.1\r\nHost: node\r\nExpect: x\r\n\r\n".repeat(1_800));
    await flooder.closed;
    expect(flooder.statuses()).to.deep.equal([417, 417, 417, 417]);
    expect(await metric("pipelining")).to.equal(1);
  });

  it("gives no WebSocket handshake to an upgrade request on a connection it is closing", async () => {
    await start({ maxPipelinedRequests: 4, penaltyMs: 1 });
    const flooder = await open();
    const upgrade =
      "GET /v1/stream HTTP/1.1\r\nHost: node\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    flooder.socket.write(GET_CURRENT.repeat(5) + upgrade); // the fifth GET closes it; the upgrade comes next
    await flooder.closed;
    expect(flooder.statuses()).to.deep.equal([200, 200, 200, 200]);
    expect(flooder.received()).to.not.contain("101 Switching Protocols");
  });

  it("survives clients that reset a closing connection while it is handed to the WebSocket upgrade (no uncaught 'error')", async () => {
    await start({ maxPipelinedRequests: 4, penaltyMs: 1 });
    const upgrade =
      "GET /v1/stream HTTP/1.1\r\nHost: node\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    // Each: the fifth request closes the connection and reaches the upgrade listener (the parser stopped on it);
    // the client, which reads nothing, resets while the four answers are still being written. Without the
    // listener, the first reset whose write error lands there ends the process (here: in a few of 200).
    for (let index = 0; index < 200; index += 1) {
      const client = await open();
      client.socket.pause();
      client.socket.write("GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n".repeat(5) + upgrade);
      await new Promise((resolve) => setImmediate(resolve));
      client.socket.resetAndDestroy();
    }
    const other = await open("127.0.0.2");
    other.socket.write(GET_CURRENT);
    await waitFor(() => other.statuses().length === 1, "an answer after the resets");
    expect(other.statuses()).to.deep.equal([200]);
  });

  it("closes a connection that never reads its answers before the server buffers more than the pipelining bound", async () => {
    await start({ maxPipelinedRequests: 16 });
    const silent = await open();
    silent.socket.pause(); // reads nothing: answers pile up in the node until the bound
    for (let batch = 0; batch < 50 && !silent.isClosed(); batch += 1) {
      silent.socket.write(GET_CURRENT.repeat(500));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await silent.closed;
    expect(await metric("pipelining")).to.equal(1);
  });

  it("closes a connection answered 429 maxRefusalsPerConnection times in a row", async () => {
    await start({ maxPipelinedRequests: 64, maxRefusalsPerConnection: 8 }, { maxRequestsPerSecond: 5 });
    const client = await open();
    client.socket.write(GET_CURRENT.repeat(30));
    await client.closed;
    // The burst of 5, then 8 refusals; the 14th request closes the connection unanswered.
    expect(client.statuses()).to.deep.equal([200, 200, 200, 200, 200, 429, 429, 429, 429, 429, 429, 429, 429]);
    expect(client.received()).to.contain("Rate limit exceeded");
    expect(await metric("refusals")).to.equal(1);
  });

  it("rate-limits the open routes per address too (/metrics, /health, /node/info), so their floods meet the guard", async () => {
    await start({ maxPipelinedRequests: 64 }, { maxRequestsPerSecond: 5 });
    const client = await open();
    client.socket.write("GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n".repeat(4) + "GET /health HTTP/1.1\r\nHost: node\r\n\r\n".repeat(4));
    await waitFor(() => client.statuses().length === 8, "eight answers");
    expect(client.statuses()).to.deep.equal([200, 200, 200, 200, 200, 429, 429, 429]);
  });

  for (const [path, request] of [
    ["the GET /time/current fast path", GET_CURRENT],
    ["a fastify route", "GET /health HTTP/1.1\r\nHost: node\r\n\r\n"],
  ] as const) {
    it(`does not read a connection for refusalPauseMs after a 429 (${path})`, async () => {
      await start({ refusalPauseMs: 400 }, { maxRequestsPerSecond: 1 });
      const client = await open();
      client.socket.write(request);
      await waitFor(() => client.statuses().length === 1, "the first answer");
      // Timed from before the request refused: the pause starts after its answer, so the third answer cannot come
      // sooner than the pause after this moment, however late this process sees the refusal.
      const refusedSentAtMs = performance.now();
      client.socket.write(request);
      await waitFor(() => client.statuses().length === 2, "the refusal");
      client.socket.write(request);
      await waitFor(() => client.statuses().length === 3, "the third answer");
      expect(client.statuses().slice(0, 2)).to.deep.equal([200, 429]);
      // A lower bound only (a timer may fire up to 1 ms early on the millisecond clock): later is always possible.
      expect(performance.now() - refusedSentAtMs).to.be.at.least(398);
    });
  }

  it("caps connections per address: the one beyond is closed on accept, another address still connects", async () => {
    await start({ maxConnectionsPerAddress: 3 });
    for (let index = 0; index < 3; index += 1) await open();
    const beyond = await open();
    await beyond.closed;
    expect(beyond.received()).to.equal("");
    const other = await open("127.0.0.2");
    other.socket.write(GET_CURRENT);
    await waitFor(() => other.statuses().length === 1, "the other address's answer");
    expect(other.statuses()).to.deep.equal([200]);
    expect(await metric("address_full")).to.equal(1);
  });

  it("caps connections in total", async () => {
    await start({ maxConnections: 4, maxConnectionsPerAddress: 3 });
    for (let index = 0; index < 3; index += 1) await open("127.0.0.1");
    await open("127.0.0.3");
    const beyond = await open("127.0.0.2");
    await beyond.closed;
    expect(beyond.received()).to.equal("");
    expect(await metric("server_full")).to.equal(1);
  });

  it("caps the gRPC port too, counting its connections with the REST port's (one process, one descriptor limit)", async () => {
    await start({ maxConnectionsPerAddress: 3 });
    const grpcPort = Number(t!.node.endpoints.grpc.split(":").pop());
    const grpcRaw = async (): Promise<RawConnection> => {
      const connection = await rawConnection(`http://127.0.0.1:${grpcPort}`);
      sockets.push(connection.socket);
      return connection;
    };
    await grpcRaw();
    await grpcRaw();
    await open(); // the third from this address, on the REST port
    const beyond = await grpcRaw();
    await beyond.closed;
    expect(beyond.received()).to.equal("");
    expect(await metric("address_full")).to.equal(1);
  });

  it("cuts a slowloris request (headers trickled) within requestTimeoutMs, not Node's 30 s sweep", async () => {
    await start({}, { requestTimeoutMs: 500 });
    const slow = await open();
    const startedMs = performance.now();
    slow.socket.write("GET /time/current HTTP/1.1\r\n");
    const trickle = setInterval(() => slow.socket.write("X"), 100);
    try {
      await Promise.race([slow.closed, new Promise((_, reject) => setTimeout(() => reject(new Error("not cut within 5 s")), 5_000))]);
    } finally {
      clearInterval(trickle);
    }
    expect(performance.now() - startedMs).to.be.below(5_000);
    expect(slow.statuses()).to.deep.equal([408]);
  });

  it("cuts a request whose body never comes within requestTimeoutMs", async () => {
    await start({}, { requestTimeoutMs: 500 });
    const slow = await open();
    slow.socket.write("POST /time/verify HTTP/1.1\r\nHost: node\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
    await Promise.race([slow.closed, new Promise((_, reject) => setTimeout(() => reject(new Error("not cut within 5 s")), 5_000))]);
    // The request is already being handled, so Node closes the connection without a 408.
    expect(slow.isClosed()).to.equal(true);
  });

  describe("requests in flight that stall (stalledRequestTimeoutMs)", () => {
    const STALL_MS = 300;
    /** The guard alone on a plain node:http server (no socket timeout of its own), and the reasons it dropped. */
    async function guarded(handler: (answer: () => void, response: import("node:http").ServerResponse) => void, stallMs = STALL_MS) {
      const drops: string[] = [];
      const guard = createConnectionGuard({ limits: { ...DEFAULT_CONNECTION_LIMITS, stalledRequestTimeoutMs: stallMs }, onDrop: (reason) => drops.push(reason) });
      const server = createServer({ keepAliveTimeout: 60_000, requestTimeout: 60_000, headersTimeout: 60_000 }, (request, response) => {
        if (guard.admit(request, response)) handler(() => response.end("ok"), response);
      });
      guard.watch(server);
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const connection = await rawConnection(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
      sockets.push(connection.socket);
      const close = async (): Promise<void> => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      };
      return { drops, connection, close };
    }

    it("destroys a connection whose request no handler ends, once nothing moved on it for the timeout", async () => {
      const { drops, connection, close } = await guarded(() => undefined);
      try {
        const sentAtMs = performance.now();
        connection.socket.write(GET_CURRENT);
        await Promise.race([connection.closed, new Promise((_, reject) => setTimeout(() => reject(new Error("not cut within 5 s")), 5_000))]);
        // Between the timeout and the timeout plus two sweeps (a sweep every 100 ms here); a busy machine only delays.
        expect(performance.now() - sentAtMs).to.be.at.least(STALL_MS - 50);
        expect(drops).to.deep.equal(["stalled"]);
      } finally {
        await close();
      }
    });

    it("destroys a connection whose client stops reading a large answer", async () => {
      const answerBytes = 64 * 1024 * 1024; // far beyond what loopback's socket buffers take
      const { drops, connection, close } = await guarded((_answer, response) => response.end(Buffer.alloc(answerBytes)));
      try {
        connection.socket.pause(); // reads nothing (and so would not see the end of the connection either)
        connection.socket.write(GET_CURRENT);
        await waitFor(() => drops.length > 0, "the connection dropped");
        expect(drops).to.deep.equal(["stalled"]);
        connection.socket.resume();
        await connection.closed;
      } finally {
        await close();
      }
    });

    it("leaves a socket handed to a WebSocket (upgraded()) to its new owner: a write its client does not read is not a stalled request", async () => {
      for (const handOver of [true, false]) {
        const drops: string[] = [];
        const guard = createConnectionGuard({ limits: { ...DEFAULT_CONNECTION_LIMITS, stalledRequestTimeoutMs: STALL_MS }, onDrop: (reason) => drops.push(reason) });
        const server = createServer({ keepAliveTimeout: 60_000, requestTimeout: 60_000, headersTimeout: 60_000 }, (request, response) => {
          if (guard.admit(request, response)) response.end("ok");
        });
        // The upgraded socket's owner writes far more than loopback's buffers take, to a client that reads nothing.
        const upgradedSockets: Socket[] = [];
        server.on("upgrade", (_request, socket: Socket) => {
          upgradedSockets.push(socket);
          socket.on("error", () => undefined); // destroyed by the sweep (the control) or by this test
          if (handOver) guard.upgraded(socket);
          socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n");
          socket.write(Buffer.alloc(64 * 1024 * 1024));
        });
        guard.watch(server);
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        try {
          const connection = await rawConnection(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
          sockets.push(connection.socket);
          connection.socket.write(GET_CURRENT); // admitted first: the guard tracks this connection
          await waitFor(() => connection.statuses().length === 1, "the first answer");
          connection.socket.pause();
          connection.socket.write("GET /stream HTTP/1.1\r\nHost: node\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n");
          if (handOver) {
            await new Promise((resolve) => setTimeout(resolve, STALL_MS * 4)); // several sweeps past the timeout
            expect(drops, "the upgraded socket is not swept").to.deep.equal([]);
          } else {
            await waitFor(() => drops.length > 0, "the control: without upgraded(), the sweep takes the unread write for a stall");
            expect(drops).to.deep.equal(["stalled"]);
          }
        } finally {
          for (const socket of upgradedSockets) socket.destroy(); // no longer the HTTP server's: closeAllConnections skips it
          server.closeAllConnections();
          await new Promise((resolve) => server.close(resolve));
        }
      }
    });

    it("keeps a connection that is slow but moving, and an idle one between requests", async () => {
      // A longer timeout than the other tests: a busy machine must not turn a 200 ms gap into a stall.
      const stallMs = 1_000;
      let answer: (() => void) | null = null;
      const { drops, connection, close } = await guarded((end) => {
        answer = end;
      }, stallMs);
      try {
        // A request whose body trickles in: a byte every fifth of the timeout, for two timeouts.
        connection.socket.write("POST / HTTP/1.1\r\nHost: node\r\nContent-Length: 10\r\n\r\n");
        for (let index = 0; index < 10; index += 1) {
          await new Promise((resolve) => setTimeout(resolve, stallMs / 5));
          connection.socket.write("x");
        }
        expect(connection.isClosed()).to.equal(false);
        answer!();
        answer = null;
        await waitFor(() => connection.statuses().length === 1, "the first answer");
        // Idle with nothing in flight for longer than the timeout: the keep-alive timeout's business, not the sweep's.
        await new Promise((resolve) => setTimeout(resolve, 1.5 * stallMs));
        connection.socket.write(GET_CURRENT);
        await waitFor(() => answer !== null, "the second request");
        answer!();
        await waitFor(() => connection.statuses().length === 2, "the second answer");
        expect(connection.isClosed()).to.equal(false);
        expect(drops).to.deep.equal([]);
      } finally {
        await close();
      }
    });
  });
});
