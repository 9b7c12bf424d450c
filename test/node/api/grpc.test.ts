import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createVerifyContext, verifyTimeProof } from "../../../protocol/verify";
import { clientRequestMessage } from "../../../node/api/auth";
import { loadProtos, type TimeResponseMessage } from "../../../node/api/grpc";
import { proofJsonFromMessage } from "../../../node/client";
import { proofFromJson } from "../../../protocol/json";
import { ValidationError } from "../../../protocol/errors";
import { loadConfig } from "../../../node/config";
import { http, startTestNode, waitFor, type TestNode } from "./helpers";

type Callback<T> = (error: grpc.ServiceError | null, response?: T) => void;
type UnaryMethod = (request: unknown, metadata: grpc.Metadata, options: grpc.CallOptions, callback: Callback<unknown>) => void;

function timeClient(target: string): grpc.Client {
  const { timeClient: Ctor } = loadProtos();
  return new Ctor(target, grpc.credentials.createInsecure());
}

function call<T>(client: grpc.Client, method: string, request: unknown, metadata = new grpc.Metadata()): Promise<T> {
  return new Promise((resolve, reject) => {
    const fn = (client as unknown as Record<string, UnaryMethod>)[method]!;
    fn.call(client, request, metadata, { deadline: Date.now() + 10_000 }, (error, response) => {
      if (error !== null) reject(error);
      else resolve(response as T);
    });
  });
}

async function status(promise: Promise<unknown>): Promise<{ code: grpc.status; details: string }> {
  try {
    await promise;
  } catch (error) {
    const serviceError = error as grpc.ServiceError;
    return { code: serviceError.code, details: serviceError.details };
  }
  throw new Error("expected the call to fail");
}

/** Sends raw bytes as a TimeRequest (to put values on the wire that the typed client cannot). */
function rawUnary(target: string, method: string, bytes: Buffer): Promise<{ code: grpc.status; details: string }> {
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      `/ats.v1.TimeRPC/${method}`,
      (value: Buffer) => value,
      (value: Buffer) => value,
      bytes,
      (error) => {
        client.close();
        resolve(error === null ? { code: grpc.status.OK, details: "" } : { code: error.code, details: error.details });
      },
    );
  });
}

function context(t: TestNode) {
  return createVerifyContext({
    cards: { [t.identity.cardId]: { publicKey: t.identity.cardPublicKey, revoked: false } },
    nodes: [t.identity.nodeAddress],
    nowNs: BigInt(Date.now()) * 1_000_000n,
  });
}

describe("node/api/grpc", function () {
  let t: TestNode;
  let client: grpc.Client;

  before(async function () {
    t = await startTestNode();
    client = timeClient(t.node.endpoints.grpc);
  });
  after(async function () {
    client?.close();
    await t?.close();
  });

  it("GetCurrentTime CURRENT_TIME answers a proof that verifies off-chain, echoing request_id", async function () {
    const response = await call<TimeResponseMessage>(client, "GetCurrentTime", { request_id: "r-1", type: "CURRENT_TIME" });
    expect(response.request_id).to.equal("r-1");
    expect(response.node).to.equal(t.identity.nodeAddress);
    expect(response.consensus).to.deep.equal({ responders: 1, quorum: 1, node_ids: [t.identity.nodeAddress] });
    expect(response.proof.hardware_signature).to.have.length(96);
    expect(response.proof.node_signature).to.have.length(80);
    expect(`0x${response.proof.hardware_id.toString("hex")}`).to.equal(t.identity.cardId);
    const { proof } = proofFromJson(proofJsonFromMessage(response.nano_moment, response.proof));
    expect(verifyTimeProof(proof, context(t))).to.deep.include({ valid: true });
  });

  it("HISTORICAL_PROOF answers an archived proof at or before the moment, NOT_FOUND before the archive", async function () {
    await waitFor(() => t.service.stats().archivedProofs > 0, "an archived proof");
    const atNs = BigInt(Date.now()) * 1_000_000n;
    const response = await call<TimeResponseMessage>(client, "GetCurrentTime", { type: "HISTORICAL_PROOF", at_ns: atNs.toString() });
    expect(BigInt(response.nano_moment) <= atNs).to.equal(true);
    const missing = await status(call(client, "GetCurrentTime", { type: "HISTORICAL_PROOF", at_ns: "1000" }));
    expect(missing.code).to.equal(grpc.status.NOT_FOUND);
  });

  it("FUTURE_SCHEDULE waits for the first proof at or after the moment; too far ahead is INVALID_ARGUMENT", async function () {
    const atNs = BigInt(Date.now()) * 1_000_000n + 50_000_000n;
    const response = await call<TimeResponseMessage>(client, "GetCurrentTime", { type: "FUTURE_SCHEDULE", at_ns: atNs.toString() });
    expect(BigInt(response.nano_moment) >= atNs).to.equal(true);
    const far = await status(call(client, "GetCurrentTime", { type: "FUTURE_SCHEDULE", at_ns: (atNs + 3_600_000_000_000n).toString() }));
    expect(far.code).to.equal(grpc.status.INVALID_ARGUMENT);
  });

  it("FUTURE_SCHEDULE gives up with UNAVAILABLE when no proof comes (signing refused), instead of waiting forever", async function () {
    t.card.simulateMeasuredError(1_000); // the node refuses to sign: no newer proof will arrive
    try {
      const atNs = BigInt(Date.now()) * 1_000_000n + 20_000_000n;
      const stalled = await status(call(client, "GetCurrentTime", { type: "FUTURE_SCHEDULE", at_ns: atNs.toString() }));
      expect(stalled.code).to.equal(grpc.status.UNAVAILABLE);
      expect(stalled.details).to.contain("no proof at or after");
    } finally {
      t.card.simulateMeasuredError(0);
    }
    await waitFor(() => t.service.health().status === "ok", "signing again", 10_000);
  });

  it("rejects UNSPECIFIED and unknown enum values, bad ns and oversized fields with INVALID_ARGUMENT and keeps serving", async function () {
    const cases: Array<[unknown, RegExp]> = [
      [{ type: "REQUEST_TYPE_UNSPECIFIED" }, /type/],
      [{}, /type/],
      [{ type: "HISTORICAL_PROOF", at_ns: "-1" }, /at_ns/],
      [{ type: "HISTORICAL_PROOF", at_ns: "1.5" }, /at_ns/],
      [{ type: "HISTORICAL_PROOF", at_ns: "" }, /at_ns/],
      [{ type: "CURRENT_TIME", at_ns: "5" }, /at_ns/],
      [{ type: "CURRENT_TIME", request_id: "x".repeat(200) }, /request_id/],
    ];
    for (const [request, details] of cases) {
      const answer = await status(call(client, "GetCurrentTime", request));
      expect(answer.code, JSON.stringify(request)).to.equal(grpc.status.INVALID_ARGUMENT);
      expect(answer.details).to.match(details);
    }
    // type = 7 on the wire (hand-encoded TimeRequest: field 3, varint 7), which no typed client would send.
    const unknownEnum = await rawUnary(t.node.endpoints.grpc, "GetCurrentTime", Buffer.from([0x18, 0x07]));
    expect(unknownEnum.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(unknownEnum.details).to.match(/unknown RequestType 7/);
    // Garbage bytes are not a TimeRequest at all: a client error naming the problem, not INTERNAL.
    const garbage = await rawUnary(t.node.endpoints.grpc, "GetCurrentTime", Buffer.from([0xff, 0xff, 0xff, 0xff]));
    expect(garbage.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(garbage.details).to.match(/^request: truncated: tag at byte 0/);
    // Oversized message: field 2 (nonce), 200,000 bytes, length as a varint.
    const nonceLength = 200_000;
    const lengthVarint = [(nonceLength & 0x7f) | 0x80, ((nonceLength >> 7) & 0x7f) | 0x80, nonceLength >> 14];
    const big = await rawUnary(t.node.endpoints.grpc, "GetCurrentTime", Buffer.concat([Buffer.from([0x12, ...lengthVarint]), Buffer.alloc(nonceLength, 0x78)]));
    expect(big.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
    const ok = await call<TimeResponseMessage>(client, "GetCurrentTime", { type: "CURRENT_TIME" });
    expect(ok.nano_moment).to.match(/^[1-9]/);
  });

  it("VerifyTime answers valid for a served proof and valid:false with the reason for a bogus one", async function () {
    const response = await call<TimeResponseMessage>(client, "GetCurrentTime", { type: "CURRENT_TIME" });
    const valid = await call<{ valid: boolean; reason: string }>(client, "VerifyTime", { nano_moment: response.nano_moment, proof: response.proof });
    expect(valid).to.deep.include({ valid: true, reason: "" });
    const short = await call<{ valid: boolean; reason: string }>(client, "VerifyTime", {
      nano_moment: response.nano_moment,
      proof: { ...response.proof, hardware_signature: Buffer.alloc(10) },
    });
    expect(short).to.deep.include({ valid: false, reason: "hardware-signature-length" });
    const badNs = await status(call(client, "VerifyTime", { nano_moment: "abc", proof: response.proof }));
    expect(badNs.code).to.equal(grpc.status.INVALID_ARGUMENT);
    const noProof = await status(call(client, "VerifyTime", { nano_moment: response.nano_moment }));
    expect(noProof.code).to.equal(grpc.status.INVALID_ARGUMENT);
  });

  it("ScheduleAttestation stores a schedule readable over REST; bad input is INVALID_ARGUMENT", async function () {
    const executeAt = (BigInt(Date.now()) * 1_000_000n + 3_600_000_000_000n).toString();
    const created = await call<{ id: string; status: string; execute_at_ns: string }>(client, "ScheduleAttestation", {
      execute_at_ns: executeAt,
      callback_url: "http://127.0.0.1:9/hook",
    });
    expect(created).to.include({ status: "scheduled", execute_at_ns: executeAt });
    const read = await http(t.node.endpoints.rest, "GET", `/time/schedule/${created.id}`);
    expect(read.status).to.equal(200);
    for (const request of [{ execute_at_ns: "-1", callback_url: "http://127.0.0.1:9/x" }, { execute_at_ns: executeAt, callback_url: "" }, { execute_at_ns: executeAt, callback_url: "gopher://x" }]) {
      expect((await status(call(client, "ScheduleAttestation", request))).code).to.equal(grpc.status.INVALID_ARGUMENT);
    }
  });

  it("StreamTime streams proofs every interval; a bad interval is INVALID_ARGUMENT", async function () {
    const stream = (client as unknown as { StreamTime(request: unknown): grpc.ClientReadableStream<TimeResponseMessage> }).StreamTime({
      request_id: "s-1",
      interval_ns: "5000000",
    });
    const received: TimeResponseMessage[] = [];
    stream.on("data", (message: TimeResponseMessage) => received.push(message));
    stream.on("error", () => undefined);
    await waitFor(() => received.length >= 2, "two streamed proofs");
    stream.cancel();
    expect(received[0]?.request_id).to.equal("s-1");
    const bad = (client as unknown as { StreamTime(request: unknown): grpc.ClientReadableStream<TimeResponseMessage> }).StreamTime({ interval_ns: "5" });
    const error = await new Promise<grpc.ServiceError>((resolve) => bad.on("error", resolve));
    expect(error.code).to.equal(grpc.status.INVALID_ARGUMENT);
  });

  it("StreamTime counts against the client's stream share: beyond maxStreamsPerClient, RESOURCE_EXHAUSTED", async function () {
    const limited = await startTestNode({ overrides: { maxStreamsPerClient: 1 } });
    const limitedClient = timeClient(limited.node.endpoints.grpc);
    const open = (): grpc.ClientReadableStream<TimeResponseMessage> =>
      (limitedClient as unknown as { StreamTime(request: unknown): grpc.ClientReadableStream<TimeResponseMessage> }).StreamTime({ interval_ns: "5000000" });
    try {
      const first = open();
      const received: TimeResponseMessage[] = [];
      first.on("data", (message: TimeResponseMessage) => received.push(message));
      first.on("error", () => undefined);
      await waitFor(() => received.length >= 1, "the first stream flowing");
      const second = open();
      const error = await new Promise<grpc.ServiceError>((resolve) => second.on("error", resolve));
      expect(error.code).to.equal(grpc.status.RESOURCE_EXHAUSTED);
      expect(error.details).to.equal("Rate limit exceeded");
      first.cancel();
    } finally {
      limitedClient.close();
      await limited.close();
    }
  });

  it("serves the standard health service", async function () {
    const { healthClient } = loadProtos();
    const health = new healthClient(t.node.endpoints.grpc, grpc.credentials.createInsecure());
    try {
      expect(await call(health, "Check", { service: "" })).to.deep.equal({ status: "SERVING" });
      expect(await call(health, "Check", { service: "ats.v1.TimeRPC" })).to.deep.equal({ status: "SERVING" });
      expect((await status(call(health, "Check", { service: "nope" }))).code).to.equal(grpc.status.NOT_FOUND);
    } finally {
      health.close();
    }
  });

  it("counts RPCs in timerpc_requests_total", async function () {
    await call(client, "GetCurrentTime", { type: "CURRENT_TIME" });
    const metrics = await http(t.node.endpoints.rest, "GET", "/metrics");
    expect(metrics.text).to.match(/timerpc_requests_total\{transport="grpc",route="GetCurrentTime",status="OK"\} [1-9]/);
    expect(metrics.text).to.match(/timerpc_requests_total\{transport="grpc",route="GetCurrentTime",status="INVALID_ARGUMENT"\} [1-9]/);
  });
});

describe("node/api/grpc auth, client signatures, rate limit and tamper", function () {
  const apiKey = "grpc-test-api-key-0123456789";
  const clientKey = generatePrivateKey();
  const account = privateKeyToAccount(clientKey);

  it("requires metadata x-api-key (UNAUTHENTICATED), and RESOURCE_EXHAUSTED 'Rate limit exceeded' beyond the rate", async function () {
    const t = await startTestNode({ overrides: { apiKeys: [apiKey], maxRequestsPerSecond: 3 } });
    const client = timeClient(t.node.endpoints.grpc);
    try {
      expect((await status(call(client, "GetCurrentTime", { type: "CURRENT_TIME" }))).code).to.equal(grpc.status.UNAUTHENTICATED);
      const wrong = new grpc.Metadata();
      wrong.set("x-api-key", "wrong-key-0123456789");
      expect((await status(call(client, "GetCurrentTime", { type: "CURRENT_TIME" }, wrong))).code).to.equal(grpc.status.UNAUTHENTICATED);
      const metadata = new grpc.Metadata();
      metadata.set("x-api-key", apiKey);
      const answers: Array<{ code: grpc.status; details: string }> = [];
      for (let i = 0; i < 12; i += 1) {
        answers.push(
          await call(client, "GetCurrentTime", { type: "CURRENT_TIME" }, metadata).then(
            () => ({ code: grpc.status.OK, details: "" }),
            (error: grpc.ServiceError) => ({ code: error.code, details: error.details }),
          ),
        );
      }
      expect(answers[0]?.code).to.equal(grpc.status.OK);
      const limited = answers.find((answer) => answer.code === grpc.status.RESOURCE_EXHAUSTED);
      expect(limited?.details).to.equal("Rate limit exceeded");
      // The health service stays open.
      const { healthClient } = loadProtos();
      const health = new healthClient(t.node.endpoints.grpc, grpc.credentials.createInsecure());
      expect(await call(health, "Check", { service: "" })).to.deep.equal({ status: "SERVING" });
      health.close();
    } finally {
      client.close();
      await t.close();
    }
  });

  it("checks client_signature of a registered client and refuses a reused nonce or a stale issued_at_ms", async function () {
    const t = await startTestNode({ overrides: { clientPublicKeys: { "client-a": account.address } } });
    const client = timeClient(t.node.endpoints.grpc);
    try {
      const issuedAtMs = String(Date.now());
      const fields = { requestId: "r-1", nonce: "n-1", type: "CURRENT_TIME", atNs: "", clientId: "client-a", issuedAtMs };
      const signature = await account.signMessage({ message: clientRequestMessage(fields) });
      const request = {
        request_id: "r-1",
        nonce: "n-1",
        type: "CURRENT_TIME",
        client_id: "client-a",
        issued_at_ms: issuedAtMs,
        client_signature: Buffer.from(signature.slice(2), "hex"),
      };
      const ok = await call<TimeResponseMessage>(client, "GetCurrentTime", request);
      expect(ok.request_id).to.equal("r-1");
      const replay = await status(call(client, "GetCurrentTime", request));
      expect(replay).to.deep.equal({ code: grpc.status.UNAUTHENTICATED, details: "Nonce already used" });
      const unsigned = await status(call(client, "GetCurrentTime", { ...request, nonce: "n-2", client_signature: Buffer.alloc(0) }));
      expect(unsigned.code).to.equal(grpc.status.UNAUTHENTICATED);
      const wrongSigner = await privateKeyToAccount(generatePrivateKey()).signMessage({ message: clientRequestMessage({ ...fields, nonce: "n-3" }) });
      const forged = await status(call(client, "GetCurrentTime", { ...request, nonce: "n-3", client_signature: Buffer.from(wrongSigner.slice(2), "hex") }));
      expect(forged).to.deep.equal({ code: grpc.status.UNAUTHENTICATED, details: "Invalid client signature" });
      // Signed long ago (outside half the 10-minute window): refused even with a fresh nonce.
      const staleFields = { ...fields, nonce: "n-4", issuedAtMs: String(Date.now() - 6 * 60_000) };
      const stale = await account.signMessage({ message: clientRequestMessage(staleFields) });
      const staleRequest = { ...request, nonce: "n-4", issued_at_ms: staleFields.issuedAtMs, client_signature: Buffer.from(stale.slice(2), "hex") };
      expect(await status(call(client, "GetCurrentTime", staleRequest))).to.deep.equal({
        code: grpc.status.UNAUTHENTICATED,
        details: "Signed request outside the replay window",
      });
      // Unregistered clients need no signature (the default policy, requireClientSignature false).
      const anonymous = await call<TimeResponseMessage>(client, "GetCurrentTime", { type: "CURRENT_TIME", client_id: "someone-else" });
      expect(anonymous.nano_moment).to.match(/^[1-9]/);
    } finally {
      client.close();
      await t.close();
    }
  });

  it("requireClientSignature: every GetCurrentTime needs a registered client_id and its signature (UNAUTHENTICATED saying what is missing)", async function () {
    const t = await startTestNode({ overrides: { clientPublicKeys: { "client-a": account.address }, requireClientSignature: true } });
    const client = timeClient(t.node.endpoints.grpc);
    try {
      const noClientId = await status(call(client, "GetCurrentTime", { type: "CURRENT_TIME" }));
      expect(noClientId.code).to.equal(grpc.status.UNAUTHENTICATED);
      expect(noClientId.details).to.match(/^Missing client_id: this node requires signed requests/);
      const unregistered = await status(call(client, "GetCurrentTime", { type: "CURRENT_TIME", client_id: "someone-else" }));
      expect(unregistered.code).to.equal(grpc.status.UNAUTHENTICATED);
      expect(unregistered.details).to.match(/^Unregistered client_id: this node requires signed requests/);
      const unsigned = await status(call(client, "GetCurrentTime", { type: "CURRENT_TIME", client_id: "client-a", nonce: "n-1", issued_at_ms: String(Date.now()) }));
      expect(unsigned.code).to.equal(grpc.status.UNAUTHENTICATED);
      expect(unsigned.details).to.match(/^Missing client_signature/);
      const fields = { requestId: "r-1", nonce: "n-1", type: "CURRENT_TIME", atNs: "", clientId: "client-a", issuedAtMs: String(Date.now()) };
      const signature = await account.signMessage({ message: clientRequestMessage(fields) });
      const signed = await call<TimeResponseMessage>(client, "GetCurrentTime", {
        request_id: fields.requestId,
        nonce: fields.nonce,
        type: fields.type,
        client_id: fields.clientId,
        issued_at_ms: fields.issuedAtMs,
        client_signature: Buffer.from(signature.slice(2), "hex"),
      });
      expect(signed.request_id).to.equal("r-1");
    } finally {
      client.close();
      await t.close();
    }
  });

  it("requireClientSignature without any clientPublicKeys fails at config load, naming the setting", function () {
    let caught: unknown;
    try {
      loadConfig({ env: { ATS_REQUIRE_CLIENT_SIGNATURE: "true" } });
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(ValidationError);
    expect((caught as ValidationError).field).to.equal("config.requireClientSignature");
    expect((caught as ValidationError).message).to.contain("clientPublicKeys").and.contain("ATS_REQUIRE_CLIENT_SIGNATURE");
    const config = loadConfig({ env: { ATS_REQUIRE_CLIENT_SIGNATURE: "true", ATS_CLIENT_PUBLIC_KEYS: JSON.stringify({ "client-a": account.address }) } });
    expect(config.requireClientSignature).to.equal(true);
    expect(loadConfig({ env: {} }).requireClientSignature).to.equal(false);
  });

  it("answers UNAVAILABLE after tamper and ends open streams with the reason", async function () {
    const t = await startTestNode();
    const client = timeClient(t.node.endpoints.grpc);
    try {
      const stream = (client as unknown as { StreamTime(request: unknown): grpc.ClientReadableStream<TimeResponseMessage> }).StreamTime({ interval_ns: "5000000" });
      let received = 0;
      stream.on("data", () => (received += 1));
      const ended = new Promise<grpc.ServiceError>((resolve) => stream.on("error", resolve));
      await waitFor(() => received > 0, "a streamed proof");
      t.card.simulateTamper("enclosure opened");
      const error = await ended;
      expect(error.code).to.equal(grpc.status.UNAVAILABLE);
      expect(error.details).to.contain("enclosure opened");
      const unary = await status(call(client, "GetCurrentTime", { type: "CURRENT_TIME" }));
      expect(unary.code).to.equal(grpc.status.UNAVAILABLE);
      const { healthClient } = loadProtos();
      const health = new healthClient(t.node.endpoints.grpc, grpc.credentials.createInsecure());
      expect(await call(health, "Check", { service: "" })).to.deep.equal({ status: "NOT_SERVING" });
      health.close();
    } finally {
      client.close();
      await t.close();
    }
  });
});
