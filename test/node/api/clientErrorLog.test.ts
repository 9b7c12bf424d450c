/**
 * Client errors in the log: refusals and other client errors of every transport are
 * logged sampled (one line per transport + status and window, with the count left out) and without stacks;
 * a client that abandons its request is a client error (info, 400-class, counted "aborted"), not a server fault.
 */
import { expect } from "chai";
import { get as httpGet } from "node:http";
import { connect } from "node:net";
import type { AddressInfo } from "node:net";
import * as grpc from "@grpc/grpc-js";
import pino, { type Logger } from "pino";
import WebSocket from "ws";
import { RateLimitError, ValidationError } from "../../../protocol/errors";
import { createTransportContext, type CreateTransportContextParameters, type TransportContext } from "../../../node/api/context";
import { CLIENT_ABORT_MESSAGE, toHttpError } from "../../../wire/errorMapping";
import { startGrpcServer } from "../../../node/api/grpc";
import { loadProtos } from "../../../wire/grpc";
import { buildRestApp } from "../../../node/api/rest";
import { SampledLog, type ClientErrorEvent } from "../../../node/api/sampledLog";
import { attachStreamServer } from "../../../node/api/ws";
import { DEFAULT_CONNECTION_LIMITS } from "../../../node/api/connectionGuard";
import { startTestNode, waitFor, type TestNode } from "./helpers";

interface LogLine {
  level: number;
  msg: string;
  transport?: string;
  status?: string;
  route?: string;
  error?: { name: string; message: string; code?: string };
  suppressed?: number;
}

/** A pino logger at info level writing into memory (the node's own JSON lines, unparsed and parsed). */
function capturingLogger(): { logger: Logger; raw: string[]; lines: () => LogLine[] } {
  const raw: string[] = [];
  const logger = pino({ level: "info" }, { write: (line: string) => void raw.push(line) });
  return { logger, raw, lines: () => raw.map((line) => JSON.parse(line) as LogLine) };
}

/** A window far longer than any test: every line after the first of a key comes from flush(). */
const LONG_WINDOW_MS = 60_000;

/** The sampled lines of one key, checked: no stack anywhere, first written at once, all counted. */
function expectSampled(raw: string[], lines: LogLine[], transport: string, status: string, refused: number): void {
  const sampled = lines.filter((line) => line.msg === "request rejected" && line.transport === transport && line.status === status);
  // The first refusal on its own line, the rest in the flush line's count.
  expect(sampled, `${transport} ${status}`).to.have.length(2);
  expect(sampled[0]?.suppressed).to.equal(0);
  expect(sampled[1]?.suppressed).to.equal(refused - 1);
  for (const line of raw) expect(line).not.to.contain('"stack"');
  expect(lines.filter((line) => line.level >= 50)).to.deep.equal([]);
}

/** One GET on a fresh connection (the connection guard closes a keep-alive connection after repeated 429s). */
function getStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    httpGet(url, { agent: false }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
    }).on("error", reject);
  });
}

const refusal = (status = "429"): ClientErrorEvent => ({ transport: "rest", status, route: "/time/current", error: new RateLimitError({ clientKey: "ip:x" }) });

describe("node/api/sampledLog (unit)", function () {
  it("writes a quiet key's first error at once, counts the rest of the window, and closes it with one line", async function () {
    const { logger, lines } = capturingLogger();
    const log = new SampledLog(logger, { windowMs: 40 });
    try {
      for (let i = 0; i < 1_000; i += 1) log.clientError(refusal());
      log.clientError({ transport: "grpc", status: "RESOURCE_EXHAUSTED", route: "GetCurrentTime", error: new RateLimitError() });
      expect(lines().map((line) => [line.transport, line.status, line.suppressed])).to.deep.equal([
        ["rest", "429", 0],
        ["grpc", "RESOURCE_EXHAUSTED", 0], // another key has its own window
      ]);
      await waitFor(() => lines().length === 3, "the window's closing line");
      expect(lines()[2]).to.include({ level: 30, transport: "rest", status: "429", suppressed: 999 });
      // Quiet windows end a key's sampling: after them its next error is written at once again.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(lines()).to.have.length(3);
      log.clientError(refusal());
      expect(lines()).to.have.length(4);
      expect(lines()[3]).to.include({ suppressed: 0 });
    } finally {
      log.flush();
    }
  });

  it("shows only the error's name, message and code: no stack, no details, no cause", function () {
    const { logger, raw, lines } = capturingLogger();
    const log = new SampledLog(logger, { windowMs: LONG_WINDOW_MS });
    const error = new ValidationError("body", "is not valid UTF-8", { secretish: "detail" }, { cause: new Error("inner") });
    log.clientError({ transport: "rest", status: "400", route: "/time/schedule", error });
    log.flush();
    expect(lines()).to.have.length(1);
    expect(lines()[0]?.error).to.deep.equal({ name: "ValidationError", message: "body: is not valid UTF-8", code: "VALIDATION" });
    expect(raw[0]).not.to.contain("stack");
    expect(raw[0]).not.to.contain("secretish");
    expect(raw[0]).not.to.contain("inner");
  });

  it("flush() writes the open windows' counts once and nothing for keys without suppressed errors", function () {
    const { logger, lines } = capturingLogger();
    const log = new SampledLog(logger, { windowMs: LONG_WINDOW_MS });
    log.clientError(refusal("429"));
    log.clientError(refusal("429"));
    log.clientError(refusal("401"));
    log.flush();
    log.flush();
    expect(lines().map((line) => [line.status, line.suppressed])).to.deep.equal([
      ["429", 0],
      ["401", 0],
      ["429", 1],
    ]);
  });

  it("maps a client abort (ECONNRESET 'aborted' from the body reader) to a 400-class client error", function () {
    const aborted = Object.assign(new Error("aborted"), { code: "ECONNRESET", statusCode: 400 });
    expect(toHttpError(aborted)).to.deep.equal({ statusCode: 400, error: "Bad Request", message: CLIENT_ABORT_MESSAGE, serverFault: false });
    // Anything else unexpected stays a server fault.
    expect(toHttpError(new Error("aborted"))).to.include({ statusCode: 500, serverFault: true });
  });
});

describe("node/api client errors in the log", function () {
  let t: TestNode;
  const contexts: TransportContext[] = [];

  before(async function () {
    t = await startTestNode();
  });
  after(async function () {
    for (const context of contexts) context.clientErrorLog.flush(); // stops their timers
    await t?.close();
  });

  function captured(parameters: Partial<CreateTransportContextParameters> = {}) {
    const capture = capturingLogger();
    const context = createTransportContext({ service: t.service, logger: capture.logger, clientErrorLogWindowMs: LONG_WINDOW_MS, ...parameters });
    contexts.push(context);
    return { ...capture, context };
  }

  /** buildRestApp (fast path included) listening on a free port, with the WebSocket server attached. */
  async function withRestServer(context: TransportContext, run: (base: string) => Promise<void>): Promise<void> {
    const app = buildRestApp(context);
    const streams = attachStreamServer(app.server, context);
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      await run(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
    } finally {
      await streams.close();
      await app.close();
    }
  }

  it("REST: a flood of 429s (fast path and fastify route) leaves 2 short lines, no stacks, every refusal counted", async function () {
    const { context, raw, lines } = captured({ maxRequestsPerSecond: 1 });
    await withRestServer(context, async (base) => {
      let refused = 0;
      for (let i = 0; i < 200; i += 1) {
        // A query string sends the same route through fastify instead of the fast path: both log the same way.
        if ((await getStatus(`${base}/time/current${i % 2 === 0 ? "" : "?via=fastify"}`)) === 429) refused += 1;
      }
      expect(refused).to.be.greaterThan(150);
      expect(lines().filter((line) => line.msg === "request rejected")).to.have.length(1); // before the window ends
      context.clientErrorLog.flush();
      expectSampled(raw, lines(), "rest", "429", refused);
      expect(raw.join("").length).to.be.below(1_500); // was ~760 bytes per refusal
      const metrics = await context.metrics.render();
      const counted = [...metrics.matchAll(/timerpc_requests_total\{transport="rest",route="\/time\/current",status="429"\} (\d+)/g)];
      expect(counted.reduce((sum, match) => sum + Number(match[1]), 0)).to.equal(refused);
    });
  });

  it("gRPC: a flood of RESOURCE_EXHAUSTED leaves 2 lines without stacks", async function () {
    // No refusal pause and no closing after 8 refusals in a row (grpcRefusal.test.ts covers both): 60 sequential
    // refusals on one channel would take 6 s, or end at the eighth.
    const { context, raw, lines } = captured({
      maxRequestsPerSecond: 1,
      limits: { connections: { ...DEFAULT_CONNECTION_LIMITS, refusalPauseMs: 0, maxRefusalsPerConnection: 1_000 } },
    });
    const server = await startGrpcServer(context, "127.0.0.1", 0);
    const { timeClient } = loadProtos();
    const client = new timeClient(server.address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
      GetCurrentTime(request: unknown, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null) => void): void;
    };
    try {
      let refused = 0;
      for (let i = 0; i < 60; i += 1) {
        const code = await new Promise<grpc.status>((resolve) =>
          client.GetCurrentTime({ type: "CURRENT_TIME" }, { deadline: Date.now() + 5_000 }, (error) => resolve(error?.code ?? grpc.status.OK)),
        );
        if (code === grpc.status.RESOURCE_EXHAUSTED) refused += 1;
      }
      expect(refused).to.be.greaterThan(40);
      context.clientErrorLog.flush();
      expectSampled(raw, lines(), "grpc", "RESOURCE_EXHAUSTED", refused);
    } finally {
      client.close();
      await server.close();
    }
  });

  it("WebSocket: a flood of bad messages leaves 2 lines without stacks", async function () {
    // A queue as deep as the flood: the 100 frames may arrive in one read, which the default bound (64) closes as
    // too many at once (ws.test.ts covers that bound); this test is about the log lines.
    const { context, raw, lines } = captured({ limits: { wsMaxErrorsPerConnection: 1_000, wsMaxQueuedMessagesPerConnection: 1_000 } });
    await withRestServer(context, async (base) => {
      const socket = new WebSocket(`${base.replace("http", "ws")}/v1/stream`);
      let errorFrames = 0;
      socket.on("message", () => (errorFrames += 1));
      await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
      for (let i = 0; i < 100; i += 1) socket.send("not json");
      await waitFor(() => errorFrames === 100, "100 error frames");
      socket.terminate();
      context.clientErrorLog.flush();
      expectSampled(raw, lines(), "ws", "error", 100);
    });
  });

  it("a client that abandons its request body is an info-level client error, counted 'aborted', never a 5xx", async function () {
    const { context, raw, lines } = captured();
    await withRestServer(context, async (base) => {
      const { port } = new URL(base);
      // Headers announcing 100 bytes of body, 10 of them, then the client goes away.
      const socket = connect(Number(port), "127.0.0.1");
      await new Promise((resolve) => socket.once("connect", resolve));
      await new Promise((resolve) =>
        socket.write("POST /time/schedule HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"execute", resolve),
      );
      await new Promise((resolve) => setTimeout(resolve, 50)); // let the server start reading the body
      socket.destroy();
      await waitFor(() => lines().some((line) => line.msg === "request rejected" && line.route === "/time/schedule"), "the abort logged");
      const [line] = lines().filter((entry) => entry.route === "/time/schedule");
      expect(line).to.include({ level: 30, transport: "rest", status: "400" });
      expect(line?.error).to.deep.equal({ name: "Error", message: "aborted", code: "ECONNRESET" });
      expect(lines().filter((entry) => entry.level >= 50)).to.deep.equal([]);
      for (const entry of raw) expect(entry).not.to.contain('"stack"');
      const aborted = /timerpc_requests_total\{transport="rest",route="\/time\/schedule",status="aborted"\} 1/;
      let metrics = await context.metrics.render();
      for (const deadline = Date.now() + 5_000; !aborted.test(metrics) && Date.now() < deadline; ) {
        await new Promise((resolve) => setTimeout(resolve, 5)); // the count lands when the request closes
        metrics = await context.metrics.render();
      }
      expect(metrics).to.match(aborted);
      expect(metrics).not.to.match(/timerpc_requests_total\{[^}]*status="5\d\d"\}/);
    });
  });
});
