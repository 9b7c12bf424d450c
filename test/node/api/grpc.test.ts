import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../../protocol/constants";
import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createVerifyContext, verifyTimeProof } from "../../../protocol/verify";
import { clientRequestMessage } from "../../../wire/auth";
import { Root } from "protobufjs";
import { consensusProofMessage } from "../../../node/api/grpcMessages";
import { loadProtos, TIME_PROTO_PATH, type TimeResponseMessage } from "../../../wire/grpc";
import { proofJsonFromMessage } from "../../../client";
import { proofFromJson } from "../../../protocol/json";
import { ValidationError } from "../../../protocol/errors";
import { loadConfig } from "../../../node/config";
import { concatEntries, entriesOf, NODE_ADDRESSES, validProof } from "../../protocol/fixtures";
import { freezeCurrentProof, http, startTestNode, waitFor, type TestNode } from "./helpers";

/** The round fields of a lone node's ConsensusProof: proto3 defaults (docs/protocol.md §9.4). */
const LONE_NODE_ROUND = { members: 0, threshold: 0, time_ns: "", deviation_ns: "", window_ns: "", readings: [], excluded: [] };

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
function rawUnary(target: string, method: string, bytes: Buffer): Promise<{ code: grpc.status; details: string; response?: Buffer }> {
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      `/ats.v1.TimeRPC/${method}`,
      (value: Buffer) => value,
      (value: Buffer) => value,
      bytes,
      { deadline: Date.now() + 10_000 },
      (error, response?: Buffer) => {
        client.close();
        resolve(error === null ? { code: grpc.status.OK, details: "", ...(response === undefined ? {} : { response }) } : { code: error.code, details: error.details });
      },
    );
  });
}

/** A TimeRequest as a client built from the service description encodes it: type 3 (varint), at_ns 4 (string). */
function describedRequest(type: number, atNs?: bigint): Buffer {
  const at = atNs === undefined ? [] : [...Buffer.from(atNs.toString(), "ascii")];
  return Buffer.from([0x18, type, ...(at.length === 0 ? [] : [0x22, at.length, ...at])]);
}

const timeRoot = new Root().loadSync(TIME_PROTO_PATH, { keepCase: true });
const timeResponseType = timeRoot.lookupType("ats.v1.TimeResponse");

function decodeTimeResponse(bytes: Buffer | undefined): { nano_moment: string; node?: { node_id: string } } {
  return timeResponseType.toObject(timeResponseType.decode(bytes ?? Buffer.alloc(0))) as { nano_moment: string; node?: { node_id: string } };
}

/** TimeResponse.node as this node fills it. */
function expectedNode(t: TestNode): { node_id: string; card_id: Buffer; version: string; protocol: string } {
  const info = t.service.info();
  return { node_id: t.identity.nodeAddress, card_id: Buffer.from(t.identity.cardId.slice(2), "hex"), version: info.version, protocol: "ATS/1" };
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
    // The records of the description: NodeInfo (from service.info()) and ConsensusProof, not strings.
    expect(response.node).to.deep.equal(expectedNode(t));
    expect(response.node.card_id.equals(response.proof.hardware_id)).to.equal(true);
    expect(response.consensus).to.deep.equal({ responders: 1, quorum: 1, node_ids: [t.identity.nodeAddress], ...LONE_NODE_ROUND });
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

  it("FUTURE_SCHEDULE answers UNAVAILABLE with the cause when the node cannot sign at the moment (the core's proofAtOrAfter)", async function () {
    t.card.simulateMeasuredError(DEV_CARD_DRIVER_ACCURACY_NS + 1); // the node refuses to sign: no newer proof will arrive
    try {
      const atNs = BigInt(Date.now()) * 1_000_000n + 20_000_000n;
      const stalled = await status(call(client, "GetCurrentTime", { type: "FUTURE_SCHEDULE", at_ns: atNs.toString() }));
      expect(stalled.code).to.equal(grpc.status.UNAVAILABLE);
      expect(stalled.details).to.match(new RegExp(`^card measured error ${DEV_CARD_DRIVER_ACCURACY_NS + 1} ns exceeds`));
    } finally {
      t.card.simulateMeasuredError(0);
    }
    await waitFor(() => t.service.health().status === "ok", "signing again", 10_000);
  });

  it("follows the description's RequestType numbering on the wire: 0 (or absent) CURRENT_TIME, 1 HISTORICAL_PROOF, 2 FUTURE_SCHEDULE", async function () {
    const target = t.node.endpoints.grpc;
    await waitFor(() => t.service.stats().archivedProofs > 0, "an archived proof");
    // type = 0: the current proof. CURRENT_TIME takes no at_ns, which tells it apart from the other two.
    const before = t.service.current().proof.nanoMoment;
    const current = await rawUnary(target, "GetCurrentTime", describedRequest(0));
    expect(current.code, current.details).to.equal(grpc.status.OK);
    const currentResponse = decodeTimeResponse(current.response);
    expect(BigInt(currentResponse.nano_moment) >= before).to.equal(true);
    expect(currentResponse.node?.node_id).to.equal(t.identity.nodeAddress);
    expect(await rawUnary(target, "GetCurrentTime", describedRequest(0, 5n))).to.deep.equal({
      code: grpc.status.INVALID_ARGUMENT,
      details: "at_ns: must be empty for CURRENT_TIME",
    });
    // No type at all (an empty TimeRequest) is type 0 in proto3: CURRENT_TIME, no longer refused.
    const absent = await rawUnary(target, "GetCurrentTime", Buffer.alloc(0));
    expect(absent.code, absent.details).to.equal(grpc.status.OK);
    expect(BigInt(decodeTimeResponse(absent.response).nano_moment) >= before).to.equal(true);
    expect((await call<TimeResponseMessage>(client, "GetCurrentTime", {})).nano_moment).to.match(/^[1-9]/);
    // type = 1: HISTORICAL_PROOF (NOT_FOUND before the archive, which only a historical lookup answers).
    const atNs = BigInt(Date.now()) * 1_000_000n;
    const historical = await rawUnary(target, "GetCurrentTime", describedRequest(1, atNs));
    expect(historical.code, historical.details).to.equal(grpc.status.OK);
    expect(BigInt(decodeTimeResponse(historical.response).nano_moment) <= atNs).to.equal(true);
    expect((await rawUnary(target, "GetCurrentTime", describedRequest(1, 1000n))).code).to.equal(grpc.status.NOT_FOUND);
    // type = 2: FUTURE_SCHEDULE (waits for a proof at or after the moment; too far ahead names FUTURE_SCHEDULE).
    const soonNs = BigInt(Date.now()) * 1_000_000n + 30_000_000n;
    const future = await rawUnary(target, "GetCurrentTime", describedRequest(2, soonNs));
    expect(future.code, future.details).to.equal(grpc.status.OK);
    expect(BigInt(decodeTimeResponse(future.response).nano_moment) >= soonNs).to.equal(true);
    const far = await rawUnary(target, "GetCurrentTime", describedRequest(2, soonNs + 3_600_000_000_000n));
    expect(far.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(far.details).to.match(/^at_ns: .* for FUTURE_SCHEDULE/);
  });

  it("rejects unknown enum values, bad ns and oversized fields with INVALID_ARGUMENT and keeps serving", async function () {
    const cases: Array<[unknown, RegExp]> = [
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
    // type = 7 (and 3, FUTURE_SCHEDULE before the renumbering) on the wire (hand-encoded TimeRequest: field 3,
    // varint), which no typed client would send: proto-loader hands the number through, the handler refuses it.
    for (const value of [7, 3]) {
      const unknownEnum = await rawUnary(t.node.endpoints.grpc, "GetCurrentTime", describedRequest(value));
      expect(unknownEnum.code).to.equal(grpc.status.INVALID_ARGUMENT);
      expect(unknownEnum.details).to.equal(`type: unknown RequestType ${value} (CURRENT_TIME = 0, HISTORICAL_PROOF = 1, FUTURE_SCHEDULE = 2)`);
    }
    // Garbage bytes are not a TimeRequest at all: a client error naming the problem, not INTERNAL.
    const garbage = await rawUnary(t.node.endpoints.grpc, "GetCurrentTime", Buffer.from([0xff, 0xff, 0xff, 0xff]));
    expect(garbage.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(garbage.details).to.match(/^request: truncated: tag at byte 0/);
    // Oversized message: field 1 (request_id), 200,000 bytes, length as a varint.
    const idLength = 200_000;
    const lengthVarint = [(idLength & 0x7f) | 0x80, ((idLength >> 7) & 0x7f) | 0x80, idLength >> 14];
    const big = await rawUnary(t.node.endpoints.grpc, "GetCurrentTime", Buffer.concat([Buffer.from([0x0a, ...lengthVarint]), Buffer.alloc(idLength, 0x78)]));
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
    expect(received[0]?.node).to.deep.equal(expectedNode(t));
    expect(received[0]?.consensus).to.deep.equal({ responders: 1, quorum: 1, node_ids: [t.identity.nodeAddress], ...LONE_NODE_ROUND });
    const bad = (client as unknown as { StreamTime(request: unknown): grpc.ClientReadableStream<TimeResponseMessage> }).StreamTime({ interval_ns: "5" });
    const error = await new Promise<grpc.ServiceError>((resolve) => bad.on("error", resolve));
    expect(error.code).to.equal(grpc.status.INVALID_ARGUMENT);
  });

  it("StreamTime never repeats a moment: a tick with no newer proof sends nothing", async function () {
    // The served proof stands still (as between two node ticks) while the stream's interval ticks on.
    const { frozen, reads, restore } = freezeCurrentProof(t.service);
    const stream = (client as unknown as { StreamTime(request: unknown): grpc.ClientReadableStream<TimeResponseMessage> }).StreamTime({
      interval_ns: "2000000",
    });
    const moments: bigint[] = [];
    stream.on("data", (message: TimeResponseMessage) => moments.push(BigInt(message.nano_moment)));
    stream.on("error", () => undefined);
    try {
      await waitFor(() => reads() >= 5, "five pushes due while the proof stands still");
    } finally {
      restore();
    }
    try {
      // A newer proof ends the wait; messages arrive in order, so every push made meanwhile arrived before it.
      await waitFor(() => moments.some((moment) => moment > frozen.proof.nanoMoment), "a newer moment");
    } finally {
      stream.cancel();
    }
    expect(moments.filter((moment) => moment === frozen.proof.nanoMoment), "the standing proof, once").to.have.length(1);
    for (let i = 1; i < moments.length; i += 1) expect(moments[i]! > moments[i - 1]!, `push ${i} newer than push ${i - 1}`).to.equal(true);
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
      const fields = { requestId: "r-1", nonce: "1", type: "CURRENT_TIME", atNs: "", clientId: "client-a", issuedAtMs };
      const signature = await account.signMessage({ message: clientRequestMessage(fields) });
      const request = {
        request_id: "r-1",
        nonce: "1",
        type: "CURRENT_TIME",
        client_id: "client-a",
        issued_at_ms: issuedAtMs,
        client_signature: Buffer.from(signature.slice(2), "hex"),
      };
      const ok = await call<TimeResponseMessage>(client, "GetCurrentTime", request);
      expect(ok.request_id).to.equal("r-1");
      const replay = await status(call(client, "GetCurrentTime", request));
      expect(replay).to.deep.equal({ code: grpc.status.UNAUTHENTICATED, details: "Nonce already used" });
      const unsigned = await status(call(client, "GetCurrentTime", { ...request, nonce: "2", client_signature: Buffer.alloc(0) }));
      expect(unsigned.code).to.equal(grpc.status.UNAUTHENTICATED);
      const wrongSigner = await privateKeyToAccount(generatePrivateKey()).signMessage({ message: clientRequestMessage({ ...fields, nonce: "3" }) });
      const forged = await status(call(client, "GetCurrentTime", { ...request, nonce: "3", client_signature: Buffer.from(wrongSigner.slice(2), "hex") }));
      expect(forged).to.deep.equal({ code: grpc.status.UNAUTHENTICATED, details: "Invalid client signature" });
      // Signed long ago (outside half the 10-minute window): refused even with a fresh nonce.
      const staleFields = { ...fields, nonce: "4", issuedAtMs: String(Date.now() - 6 * 60_000) };
      const stale = await account.signMessage({ message: clientRequestMessage(staleFields) });
      const staleRequest = { ...request, nonce: "4", issued_at_ms: staleFields.issuedAtMs, client_signature: Buffer.from(stale.slice(2), "hex") };
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

  it("signs the uint64 nonce in decimal: round-trips up to 2^64 - 1, is accepted once whatever its encoding, and must be non-zero", async function () {
    const t = await startTestNode({ overrides: { clientPublicKeys: { "client-a": account.address } } });
    const client = timeClient(t.node.endpoints.grpc);
    const signedRequest = async (nonceSigned: string, nonceSent: unknown, type = "CURRENT_TIME") => {
      const fields = { requestId: "r-n", nonce: nonceSigned, type, atNs: "", clientId: "client-a", issuedAtMs: String(Date.now()) };
      const signature = await account.signMessage({ message: clientRequestMessage(fields) });
      return {
        request_id: fields.requestId,
        nonce: nonceSent,
        type,
        client_id: fields.clientId,
        issued_at_ms: fields.issuedAtMs,
        client_signature: Buffer.from(signature.slice(2), "hex"),
      };
    };
    try {
      // The largest uint64, as a decimal string: signed and checked in exactly that form, then a replay.
      const max = (2n ** 64n - 1n).toString();
      expect(max).to.equal("18446744073709551615");
      const maxRequest = await signedRequest(max, max);
      expect((await call<TimeResponseMessage>(client, "GetCurrentTime", maxRequest)).request_id).to.equal("r-n");
      expect(await status(call(client, "GetCurrentTime", maxRequest))).to.deep.equal({ code: grpc.status.UNAUTHENTICATED, details: "Nonce already used" });
      // 42 sent as a number; the same nonce sent again as "042" (another encoding of the same uint64) is a replay.
      const fortyTwo = await signedRequest("42", 42);
      expect((await call<TimeResponseMessage>(client, "GetCurrentTime", fortyTwo)).request_id).to.equal("r-n");
      expect(await status(call(client, "GetCurrentTime", { ...fortyTwo, nonce: "042" }))).to.deep.equal({
        code: grpc.status.UNAUTHENTICATED,
        details: "Nonce already used",
      });
      // The signed text is the canonical decimal: a signature over "043" does not cover nonce 43.
      expect(await status(call(client, "GetCurrentTime", await signedRequest("043", 43)))).to.deep.equal({
        code: grpc.status.UNAUTHENTICATED,
        details: "Invalid client signature",
      });
      // A type left at its default is signed by its name, CURRENT_TIME.
      const defaultType = await signedRequest("44", 44);
      const { type: _omitted, ...withoutType } = defaultType;
      expect((await call<TimeResponseMessage>(client, "GetCurrentTime", withoutType)).request_id).to.equal("r-n");
      // Nonce 0 and an absent nonce are the same in proto3: refused when a signature is checked.
      for (const request of [await signedRequest("0", 0), await signedRequest("0", undefined)]) {
        expect(await status(call(client, "GetCurrentTime", request))).to.deep.equal({
          code: grpc.status.UNAUTHENTICATED,
          details: "A signed request needs a non-zero nonce",
        });
      }
      // Unsigned requests of unregistered clients may leave it out.
      expect((await call<TimeResponseMessage>(client, "GetCurrentTime", { client_id: "someone-else" })).nano_moment).to.match(/^[1-9]/);
      // A nonce sent as a string field (a client built from the older time.proto) is refused, naming nonce.
      const oldClient = await rawUnary(t.node.endpoints.grpc, "GetCurrentTime", Buffer.from([0x12, 0x03, ...Buffer.from("n-1")]));
      expect(oldClient.code).to.equal(grpc.status.INVALID_ARGUMENT);
      expect(oldClient.details).to.match(/^nonce: wire type 2 \(length-delimited\) at byte 0, expected 0 \(varint\)/);
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
      const unsigned = await status(call(client, "GetCurrentTime", { type: "CURRENT_TIME", client_id: "client-a", nonce: "1", issued_at_ms: String(Date.now()) }));
      expect(unsigned.code).to.equal(grpc.status.UNAUTHENTICATED);
      expect(unsigned.details).to.match(/^Missing client_signature/);
      const fields = { requestId: "r-1", nonce: "1", type: "CURRENT_TIME", atNs: "", clientId: "client-a", issuedAtMs: String(Date.now()) };
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

describe("node/api/grpc ConsensusProof of a served proof", function () {
  const self = { nodeId: NODE_ADDRESSES[0]!, nodeQuorum: 2 };

  it("lists the signers of a co-signed proof in its (ascending) order, and this node alone for its own attestation", function () {
    const cosigned = validProof();
    const ascending = [...NODE_ADDRESSES].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
    expect(NODE_ADDRESSES.length).to.be.greaterThan(1);
    expect(consensusProofMessage(cosigned, self)).to.deep.equal({ responders: NODE_ADDRESSES.length, quorum: 2, node_ids: ascending, ...LONE_NODE_ROUND });
    const own = { ...cosigned, nodeSignature: entriesOf(cosigned)[0]! };
    expect(consensusProofMessage(own, self)).to.deep.equal({ responders: 1, quorum: 2, node_ids: [self.nodeId], ...LONE_NODE_ROUND });
  });

  it("counts entries that do not recover but names no signer for them, instead of failing the call", function () {
    const cosigned = validProof();
    const [first, second] = entriesOf(cosigned);
    const broken = { ...cosigned, nodeSignature: concatEntries([first!, `0x${"00".repeat(80)}`, second!]) };
    expect(consensusProofMessage(broken, self)).to.deep.equal({ responders: 3, quorum: 2, node_ids: [], ...LONE_NODE_ROUND });
  });
});
