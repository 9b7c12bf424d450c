import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import WebSocket from "ws";
import { RateLimitError } from "../../../protocol/errors";
import { toGrpcError, toHttpError } from "../../../wire/errorMapping";
import { loadProtos } from "../../../wire/grpc";
import { RateLimiter } from "../../../lib/rateLimit";
import { http, startTestNode, type TestNode } from "./helpers";

/** Every 429 of the request rate says when to come back (Retry-After), on every transport (docs/protocol.md §11.2). */
describe("Retry-After on rate-limit refusals", function () {
  it("the rate limiter names the time to the client's next token; the mapping turns it into whole seconds", function () {
    let now = 1_000;
    const limiter = new RateLimiter({ ratePerSecond: 2, burst: 1, nowMs: () => now });
    limiter.take("a");
    const refusal = (): RateLimitError => {
      try {
        limiter.take("a");
      } catch (error) {
        return error as RateLimitError;
      }
      throw new Error("expected a refusal");
    };
    expect(refusal().details["retryAfterMs"]).to.equal(500); // 2 tokens/s: the next one in 500 ms
    now += 200;
    expect(refusal().details["retryAfterMs"]).to.equal(300);
    expect(limiter.msUntilNextToken("fresh-client")).to.equal(0);

    expect(toHttpError(new RateLimitError({ retryAfterMs: 300 })).headers).to.deep.equal({ "retry-after": "1" }); // at least 1
    expect(toHttpError(new RateLimitError({ retryAfterMs: 2_001 })).headers).to.deep.equal({ "retry-after": "3" });
    expect(toGrpcError(new RateLimitError({ retryAfterMs: 2_001 })).metadata).to.deep.equal({ "retry-after": "3" });
    // A quota without a refill time (streams, pending schedules) has nothing to promise.
    expect(toHttpError(new RateLimitError({ openStreams: 8 })).headers).to.equal(undefined);
  });

  describe("on a node limited to 1 request/s", function () {
    let t: TestNode;
    before(async function () {
      t = await startTestNode({ overrides: { maxRequestsPerSecond: 1 } });
    });
    after(async function () {
      await t?.close();
    });

    /** Repeats `attempt` until it is refused (one token refills per second: the second try in a row is refused). */
    async function refused<T>(attempt: () => Promise<T>, isRefusal: (answer: T) => boolean): Promise<T> {
      for (let i = 0; i < 5; i += 1) {
        const answer = await attempt();
        if (isRefusal(answer)) return answer;
      }
      throw new Error("never refused");
    }

    it("REST: 429 with Retry-After from the fast path and from fastify's error handler", async function () {
      const base = t.node.endpoints.rest;
      const fast = await refused(() => http(base, "GET", "/time/current"), (answer) => answer.status === 429);
      expect(fast.headers.get("retry-after")).to.equal("1");
      expect(fast.json).to.deep.include({ statusCode: 429, message: "Rate limit exceeded" });
      // A query string goes to fastify's route (its onRequest hook, then the error handler).
      const routed = await refused(() => http(base, "GET", "/time/current?via=fastify"), (answer) => answer.status === 429);
      expect(routed.headers.get("retry-after")).to.equal("1");
      const verify = await refused(() => http(base, "POST", "/time/verify", { body: "{}" }), (answer) => answer.status === 429);
      expect(verify.headers.get("retry-after")).to.equal("1");
    });

    it("WebSocket: the refused upgrade (429) carries Retry-After", async function () {
      const upgrade = () =>
        new Promise<{ status: number; retryAfter: string | undefined }>((resolve, reject) => {
          const socket = new WebSocket(t.node.endpoints.ws);
          socket.on("unexpected-response", (_request, response) => {
            const retryAfter = response.headers["retry-after"];
            resolve({ status: response.statusCode ?? 0, retryAfter: typeof retryAfter === "string" ? retryAfter : undefined });
            socket.terminate();
          });
          socket.on("open", () => {
            socket.terminate();
            resolve({ status: 101, retryAfter: undefined });
          });
          socket.on("error", (error) => {
            if (!/Unexpected server response/.test(error.message)) reject(error);
          });
        });
      const answer = await refused(upgrade, (result) => result.status === 429);
      expect(answer.retryAfter).to.equal("1");
    });

    it("gRPC: RESOURCE_EXHAUSTED carries retry-after metadata", async function () {
      const { timeClient } = loadProtos();
      const client = new timeClient(t.node.endpoints.grpc, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
        GetCurrentTime(request: unknown, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null) => void): void;
      };
      try {
        const once = () =>
          new Promise<grpc.ServiceError | null>((resolve) =>
            client.GetCurrentTime({ type: "CURRENT_TIME" }, { deadline: Date.now() + 5_000 }, (error) => resolve(error)),
          );
        const error = await refused(once, (result) => result?.code === grpc.status.RESOURCE_EXHAUSTED);
        expect(error?.details).to.equal("Rate limit exceeded");
        expect(error?.metadata.get("retry-after")).to.deep.equal(["1"]);
      } finally {
        client.close();
      }
    });
  });
});
