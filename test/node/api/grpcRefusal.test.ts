/**
 * gRPC refusals (RESOURCE_EXHAUSTED) are answered after the refusal pause, as REST 429s are not read for it
 * (a refusal flood must not be answered as fast as a client can ask).
 */
import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { DEFAULT_CONNECTION_LIMITS } from "../../../node/api/connectionGuard";
import { loadProtos } from "../../../wire/grpc";
import { startTestNode, type TestNode } from "./helpers";

describe("node/api/grpc refusals", function () {
  this.timeout(30_000);
  let t: TestNode | undefined;
  let client: grpc.Client | undefined;
  after(async () => {
    client?.close();
    await t?.close();
  });

  it("answers RESOURCE_EXHAUSTED only after refusalPauseMs", async () => {
    t = await startTestNode({
      overrides: { maxRequestsPerSecond: 1 },
      limits: { connections: { ...DEFAULT_CONNECTION_LIMITS, refusalPauseMs: 400 } },
    });
    const Client = loadProtos().timeClient;
    client = new Client(t.node.endpoints.grpc, grpc.credentials.createInsecure());
    const call = () =>
      new Promise<{ code: number; elapsedMs: number }>((resolve) => {
        const startedMs = performance.now();
        (client as unknown as { GetCurrentTime: (request: object, done: (error: grpc.ServiceError | null) => void) => void }).GetCurrentTime(
          { request_id: "refusal-test" },
          (error) => resolve({ code: error?.code ?? grpc.status.OK, elapsedMs: performance.now() - startedMs }),
        );
      });
    const first = await call(); // takes the one token (answered whatever the request's content)
    expect(first.code).to.not.equal(grpc.status.RESOURCE_EXHAUSTED);
    const refused = await call();
    expect(refused.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
    // A lower bound only: a busy machine can make it later, never earlier.
    expect(refused.elapsedMs).to.be.at.least(350);
  });
});
