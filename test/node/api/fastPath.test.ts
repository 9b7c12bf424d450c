import { expect } from "chai";
import type { FastifyInstance } from "fastify";
import { UnavailableError } from "../../../protocol/errors";
import { hashApiKey } from "../../../lib/apiKeys";
import type { SignedTime } from "../../../node/core/types";
import { DEFAULT_CONNECTION_LIMITS } from "../../../node/api/connectionGuard";
import { createTransportContext, type TransportContext } from "../../../node/api/context";
import { createCurrentTimeFastPath } from "../../../node/api/currentTimeFastPath";
import { buildRestApp } from "../../../node/api/rest";
import { http, startTestNode, testLogger, type TestNode } from "./helpers";

/**
 * GET /time/current is answered by node/api/currentTimeFastPath.ts ahead of fastify. These tests run the same
 * requests against two listening apps over one service — fast path on, fast path off (fastify's declared route)
 * — and require the same status, headers and bytes, and the same metrics.
 */
describe("node/api/currentTimeFastPath", function () {
  const apiKey = "fast-path-key-0123456789";
  let t: TestNode;
  let mode: "ok" | "unavailable" | "broken" = "ok";
  let fixed: SignedTime;
  const apps: FastifyInstance[] = [];
  const contexts: TransportContext[] = [];
  const bases: string[] = [];
  /** GET /time/current requests that reached fastify's router, per app. */
  const routed = [0, 0];

  before(async function () {
    t = await startTestNode();
    fixed = t.service.current();
    // One service for both apps, answering the same proof (or the same failure) to both.
    const service = Object.create(t.service) as typeof t.service;
    service.current = () => {
      if (mode === "unavailable") throw new UnavailableError("time card tampered: lid opened", { reason: "lid opened" });
      if (mode === "broken") throw new Error("secret internals /etc/keys");
      return fixed;
    };
    for (const fastPath of [true, false]) {
      const context = createTransportContext({
        service,
        logger: testLogger(),
        apiKeyHashes: [hashApiKey(apiKey)],
        maxRequestsPerSecond: 8,
        // No read pause after a 429: the two apps' buckets must refill on the same request timeline.
        limits: { connections: { ...DEFAULT_CONNECTION_LIMITS, refusalPauseMs: 0 } },
      });
      const app = buildRestApp(context, { fastPath });
      const index = apps.length;
      app.addHook("onRequest", (request, _reply, done) => {
        if (request.method === "GET" && request.url === "/time/current") routed[index]! += 1;
        done();
      });
      await app.listen({ host: "127.0.0.1", port: 0 });
      const address = app.server.address();
      if (typeof address !== "object" || address === null) throw new Error("no address");
      apps.push(app);
      contexts.push(context);
      bases.push(`http://127.0.0.1:${address.port}`);
    }
  });
  after(async function () {
    for (const app of apps.splice(0)) await app.close();
    await t?.close();
  });
  afterEach(function () {
    mode = "ok";
  });

  /** The same request to both apps; returns [fast, fastify] with the headers a client can rely on. */
  async function both(method: string, path: string, headers: Record<string, string> = { "x-api-key": apiKey }) {
    return Promise.all(
      bases.map(async (base) => {
        const response = await http(base, method, path, { headers });
        const header = (name: string) => response.headers.get(name);
        return {
          status: response.status,
          text: response.text,
          headers: {
            "content-type": header("content-type"),
            "cache-control": header("cache-control"),
            "content-length": header("content-length"),
            "retry-after": header("retry-after"),
          },
        };
      }),
    );
  }

  function expectSame(answers: Awaited<ReturnType<typeof both>>, status: number) {
    const [fast, fastify] = answers;
    expect(fast).to.deep.equal(fastify);
    expect(fast!.status).to.equal(status);
  }

  it("answers 200 with the service's body and the route's headers, byte for byte", async function () {
    const answers = await both("GET", "/time/current");
    expectSame(answers, 200);
    expect(answers[0]!.text).to.equal(fixed.body);
    expect(answers[0]!.headers).to.deep.equal({
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-store",
      "content-length": String(Buffer.byteLength(fixed.body)),
      "retry-after": null,
    });
    // The first app answered without its router; the second through it.
    expect(routed).to.deep.equal([0, 1]);
  });

  it("answers a missing or wrong API key with the same 401", async function () {
    expectSame(await both("GET", "/time/current", {}), 401);
    const wrong = await both("GET", "/time/current", { "x-api-key": "not-the-key-0123456789" });
    expectSame(wrong, 401);
    expect(JSON.parse(wrong[0]!.text)).to.deep.equal({ statusCode: 401, error: "Unauthorized", message: "Invalid API key" });
  });

  it("answers 503 with the reason, and a bare 500 for an unexpected failure", async function () {
    mode = "unavailable";
    const unavailable = await both("GET", "/time/current");
    expectSame(unavailable, 503);
    expect(JSON.parse(unavailable[0]!.text)).to.deep.equal({ statusCode: 503, error: "Service Unavailable", message: "time card tampered: lid opened" });
    mode = "broken";
    const broken = await both("GET", "/time/current");
    expectSame(broken, 500);
    expect(broken[0]!.text).to.not.contain("secret");
  });

  it("leaves HEAD, query strings and other paths to fastify (same answers from both apps)", async function () {
    expectSame(await both("HEAD", "/time/current"), 200);
    expectSame(await both("GET", "/time/current?x=1"), 200);
    expectSame(await both("GET", "/time/current/"), 404); // not the route: fastify's 404 from both
  });

  it("takes rate-limit tokens like the route's hook (the same 429 after the same number of requests)", async function () {
    // New window: wait until the 8 req/s buckets of the earlier tests have refilled.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const statuses: number[][] = [[], []];
    for (let i = 0; i < 14; i += 1) {
      const answers = await both("GET", "/time/current");
      answers.forEach((answer, index) => statuses[index]!.push(answer.status));
      if (answers[0]!.status === 429) {
        expectSame(answers, 429);
        expect(answers[0]!.headers["retry-after"]).to.equal("1"); // 8 tokens/s: the next one within a second
      }
    }
    expect(statuses[0]).to.deep.equal(statuses[1]);
    expect(statuses[0]).to.include(429);
  });

  it("counts the same metrics: requests by status, served proofs and their age", async function () {
    const texts = await Promise.all(contexts.map((context) => context.metrics.render()));
    const line = (text: string, pattern: RegExp) => pattern.exec(text)?.[0];
    for (const pattern of [
      /timerpc_requests_total\{transport="rest",route="\/time\/current",status="200"\} \d+/,
      /timerpc_requests_total\{transport="rest",route="\/time\/current",status="401"\} \d+/,
      /timerpc_requests_total\{transport="rest",route="\/time\/current",status="503"\} \d+/,
      /timerpc_served_proofs_total\{transport="rest"\} \d+/,
    ]) {
      expect(line(texts[0]!, pattern), String(pattern)).to.be.a("string").and.equal(line(texts[1]!, pattern));
    }
  });

  it("steps aside once stopped, so a closing server's fastify answers 503", function () {
    const context = createTransportContext({ service: t.service, logger: testLogger() });
    const fastPath = createCurrentTimeFastPath(context, testLogger());
    let written = 0;
    const response = { writeHead: () => (written += 1), end: () => undefined } as never;
    const request = { method: "GET", url: "/time/current", headers: {}, socket: { remoteAddress: "127.0.0.1" } } as never;
    expect(fastPath.tryServe(request, response)).to.equal(true);
    fastPath.stop();
    expect(fastPath.tryServe(request, response)).to.equal(false);
    expect(written).to.equal(1);
  });
});
