/**
 * gRPC refusals (RESOURCE_EXHAUSTED) are answered after the refusal pause, as REST 429s are not read for it
 * (a refusal flood must not be answered as fast as a client can ask); and a connection's calls in flight are bounded.
 */
import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import * as http2 from "node:http2";
import { DEFAULT_CONNECTION_LIMITS } from "../../../node/api/connectionGuard";
import { loadProtos } from "../../../wire/grpc";
import { startTestNode, type TestNode } from "./helpers";

describe("node/api/grpc refusals", function () {
  this.timeout(30_000);
  let t: TestNode | undefined;
  let client: grpc.Client | undefined;
  afterEach(async () => {
    client?.close();
    client = undefined;
    await t?.close();
    t = undefined;
  });

  /** GetCurrentTime on `client`: the status code it ends with. */
  const callCode = (target: grpc.Client): Promise<number> =>
    new Promise((resolve) => {
      (target as unknown as { GetCurrentTime: (request: object, done: (error: grpc.ServiceError | null) => void) => void }).GetCurrentTime(
        { request_id: "refusal-test" },
        (error) => resolve(error?.code ?? grpc.status.OK),
      );
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

  it("closes a channel refused maxRefusalsPerConnection times in a row and penalises its address, as REST does", async () => {
    t = await startTestNode({
      overrides: { maxRequestsPerSecond: 1 },
      limits: { connections: { ...DEFAULT_CONNECTION_LIMITS, refusalPauseMs: 0, maxRefusalsPerConnection: 4, penaltyMs: 60_000 } },
    });
    const Client = loadProtos().timeClient;
    client = new Client(t.node.endpoints.grpc, grpc.credentials.createInsecure());
    expect(await callCode(client)).to.equal(grpc.status.OK); // the one token
    // Together, so that no token refills (1 a second) between them on a busy machine.
    const codes = await Promise.all(Array.from({ length: 4 }, () => callCode(client!)));
    expect(codes).to.deep.equal(Array(4).fill(grpc.status.RESOURCE_EXHAUSTED));
    // The next refusal closes the channel's connection unanswered, and its address is penalised: the channel's
    // reconnection is closed on accept, so its calls fail without an answer from the node.
    expect(await callCode(client)).to.equal(grpc.status.UNAVAILABLE);
    expect(await callCode(client)).to.equal(grpc.status.UNAVAILABLE);
    const text = await t.node.metrics.render();
    expect(text).to.match(/timerpc_connections_dropped_total\{reason="refusals"\} 1\b/);
    expect(text).to.match(/timerpc_connections_dropped_total\{reason="penalised"\} [1-9]/);
  });

  it("keeps a channel whose refusals are interrupted by answers", async () => {
    t = await startTestNode({
      overrides: { maxRequestsPerSecond: 1 },
      limits: { connections: { ...DEFAULT_CONNECTION_LIMITS, refusalPauseMs: 0, maxRefusalsPerConnection: 4 } },
    });
    const Client = loadProtos().timeClient;
    client = new Client(t.node.endpoints.grpc, grpc.credentials.createInsecure());
    const codes: number[] = [];
    for (let round = 0; round < 3; round += 1) {
      codes.push(await callCode(client)); // a token has refilled: answered
      for (let index = 0; index < 3; index += 1) codes.push(await callCode(client));
      await new Promise((resolve) => setTimeout(resolve, 1_050));
    }
    expect(codes.filter((code) => code === grpc.status.UNAVAILABLE)).to.deep.equal([]);
    expect(codes.filter((code) => code === grpc.status.OK)).to.have.length(3);
  });

  it("lets a connection have 16 calls in flight (maxStreamsPerClient + 8 when more): one connection's burst stays short", async () => {
    for (const [maxStreamsPerClient, expected] of [
      [8, 16],
      [20, 28],
    ] as const) {
      t = await startTestNode({ overrides: { maxStreamsPerClient } });
      const session = http2.connect(`http://${t.node.endpoints.grpc}`);
      try {
        const settings = await new Promise<http2.Settings>((resolve, reject) => {
          session.once("remoteSettings", resolve);
          session.once("error", reject);
        });
        expect(settings.maxConcurrentStreams, `maxStreamsPerClient ${maxStreamsPerClient}`).to.equal(expected);
      } finally {
        session.destroy();
        await t.close();
        t = undefined;
      }
    }
  });
});
