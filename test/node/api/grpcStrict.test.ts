/**
 * Strict gRPC request decoding (node/api/grpcWire.ts): requests are sent as raw bytes through a generic client
 * with identity serializers, so that the wire can carry what no typed client would encode (invalid UTF-8,
 * truncated or overrunning fields, wrong wire types).
 */
import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { Root, parse } from "protobufjs";
import { ValidationError } from "../../../protocol/errors";
import { TIME_PROTO_PATH } from "../../../wire/grpc";
import { checkWireMessage, MAX_NESTING_DEPTH, messageRule } from "../../../node/api/grpcWire";
import { startTestNode, type TestNode } from "./helpers";

// ------------------------------------------------------------------ hand encoding

function varint(value: number): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return bytes;
}

function tag(fieldNumber: number, wireType: number): number[] {
  return varint(fieldNumber * 8 + wireType);
}

/** A length-delimited field (string, bytes, message). */
function lengthField(fieldNumber: number, content: ArrayLike<number>): number[] {
  return [...tag(fieldNumber, 2), ...varint(content.length), ...Array.from(content)];
}

function varintField(fieldNumber: number, value: number): number[] {
  return [...tag(fieldNumber, 0), ...varint(value)];
}

const ascii = (text: string): number[] => Array.from(Buffer.from(text, "utf8"));
/** "r-" then 0xC3 0x28: a two-byte lead followed by a non-continuation byte. */
const INVALID_UTF8 = [0x72, 0x2d, 0xc3, 0x28];
/** RequestType numbering of the service description (proto/time.proto): CURRENT_TIME = 0. */
const CURRENT_TIME = 0;

// TimeRequest field numbers (proto/time.proto).
const REQUEST_ID = 1;
const NONCE = 2;
const TYPE = 3;
const CLIENT_ID = 6;

// ------------------------------------------------------------------ a raw client

type Answer = { code: grpc.status; details: string; response?: Buffer };

const identity = (value: Buffer): Buffer => value;
const rawMethod = (name: string, responseStream: boolean) => ({
  path: `/ats.v1.TimeRPC/${name}`,
  requestStream: false,
  responseStream,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
});
const RawTimeClient = grpc.makeGenericClientConstructor(
  {
    GetCurrentTime: rawMethod("GetCurrentTime", false),
    StreamTime: rawMethod("StreamTime", true),
    VerifyTime: rawMethod("VerifyTime", false),
    ScheduleAttestation: rawMethod("ScheduleAttestation", false),
  },
  "RawTimeRPC",
);
type RawClient = grpc.Client & {
  [method: string]: (request: Buffer, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, response?: Buffer) => void) => void;
};

function unary(client: RawClient, method: string, bytes: number[]): Promise<Answer> {
  return new Promise((resolve) => {
    client[method]!.call(client, Buffer.from(bytes), { deadline: Date.now() + 10_000 }, (error, response) => {
      resolve(error === null ? { code: grpc.status.OK, details: "", ...(response === undefined ? {} : { response }) } : { code: error.code, details: error.details });
    });
  });
}

/** A StreamTime call: the first message (OK) or the error that ends it. */
function firstStreamAnswer(client: grpc.Client, bytes: number[]): Promise<Answer> {
  return new Promise((resolve) => {
    const stream = client.makeServerStreamRequest("/ats.v1.TimeRPC/StreamTime", identity, identity, Buffer.from(bytes), { deadline: Date.now() + 10_000 });
    stream.on("data", (response: Buffer) => {
      stream.cancel();
      resolve({ code: grpc.status.OK, details: "", response });
    });
    stream.on("error", (error: grpc.ServiceError) => resolve({ code: error.code, details: error.details }));
  });
}

const timeRoot = new Root().loadSync(TIME_PROTO_PATH, { keepCase: true });
timeRoot.resolveAll();

// ------------------------------------------------------------------ the walk, without a server

describe("node/api/grpcWire checkWireMessage", function () {
  const timeRequest = messageRule(timeRoot.lookupType("ats.v1.TimeRequest"));
  const verifyRequest = messageRule(timeRoot.lookupType("ats.v1.VerifyRequest"));

  it("accepts what protobufjs encodes, and skips unknown fields of any wire type (proto3 compatibility)", function () {
    const encoded = timeRoot
      .lookupType("ats.v1.TimeRequest")
      .encode({ request_id: "r-é", nonce: "18446744073709551615", type: 2, at_ns: "5", client_signature: Buffer.alloc(65, 1), client_id: "c", issued_at_ms: "1" })
      .finish();
    expect(checkWireMessage(encoded, timeRequest)).to.equal(undefined);
    const unknown = [...encoded, ...varintField(20, 300), ...tag(21, 1), ...Array(8).fill(0), ...tag(22, 5), 0, 0, 0, 0, ...lengthField(23, [0xff, 0xfe])];
    expect(checkWireMessage(Uint8Array.from(unknown), timeRequest)).to.equal(undefined);
  });

  it("names the nested field and the byte offset: invalid UTF-8 in a repeated string, a field overrunning its message", function () {
    const badChain = checkWireMessage(Uint8Array.from([...lengthField(1, ascii("1")), ...lengthField(3, ascii("ok")), ...lengthField(3, INVALID_UTF8)]), verifyRequest);
    expect(badChain).to.be.instanceOf(ValidationError);
    expect(badChain?.field).to.equal("certificate_chain_pem");
    expect(badChain?.message).to.equal("certificate_chain_pem: invalid UTF-8 in string field (bytes 9..12)");
    expect(badChain?.details).to.include({ offset: 9 });
    // proof (2 bytes) holds the start of hardware_signature, which declares 3 more bytes beyond the proof's end.
    const overrun = checkWireMessage(Uint8Array.from([...lengthField(1, ascii("1")), ...tag(2, 2), 2, ...tag(1, 2), 3, 0x61, 0x62, 0x63]), verifyRequest);
    expect(overrun?.field).to.equal("proof.hardware_signature");
    expect(overrun?.message).to.match(/truncated: declares 3 bytes at byte 6 but only 0 remain in ats\.v1\.Proof/);
  });

  it("rejects field number 0, group and undefined wire types, and a known field with the wrong wire type", function () {
    const cases: Array<[number[], string, RegExp]> = [
      [[0x00, 0x01], "request", /invalid field number 0 at byte 0/],
      [[...tag(1, 3)], "request_id", /unsupported wire type 3 \(start group\)/],
      [[...tag(9, 4)], "#9", /unsupported wire type 4 \(end group\)/],
      [[...tag(1, 7), 0x01], "request_id", /unsupported wire type 7 at byte 0/],
      [[...varintField(REQUEST_ID, 1)], "request_id", /wire type 0 \(varint\) at byte 0, expected 2 \(length-delimited\) for a string field/],
      [[...lengthField(TYPE, [1])], "type", /wire type 2 .* expected 0 \(varint\)/],
      // nonce is a uint64: a string nonce (a client built from the older time.proto) is refused, not misread.
      [[...lengthField(NONCE, ascii("n-1"))], "nonce", /^nonce: wire type 2 \(length-delimited\) at byte 0, expected 0 \(varint\) for a varint field$/],
      [[...tag(TYPE, 0), 0x80, 0x80], "type", /truncated: varint at byte 1 runs past the end of ats\.v1\.TimeRequest \(byte 3\)/],
      [[...tag(TYPE, 0), ...Array(10).fill(0x80), 0x01], "type", /varint at byte 1 is longer than 10 bytes/],
      [[0x80, 0x80, 0x80, 0x80, 0x80, 0x01], "request", /tag at byte 0 is longer than 5 bytes/],
    ];
    for (const [bytes, field, message] of cases) {
      const problem = checkWireMessage(Uint8Array.from(bytes), timeRequest);
      expect(problem?.field, JSON.stringify(bytes)).to.equal(field);
      expect(problem?.message, JSON.stringify(bytes)).to.match(message);
    }
  });

  it(`bounds recursion: a recursive type nested ${MAX_NESTING_DEPTH} deep passes, one more level is rejected`, function () {
    const chain = parse("syntax = \"proto3\"; message Chain { Chain next = 1; string label = 2; }", { keepCase: true }).root.lookupType("Chain");
    const rule = messageRule(chain);
    const nested = (levels: number): number[] => (levels === 0 ? lengthField(2, ascii("end")) : lengthField(1, nested(levels - 1)));
    expect(checkWireMessage(Uint8Array.from(nested(MAX_NESTING_DEPTH)), rule)).to.equal(undefined);
    const tooDeep = checkWireMessage(Uint8Array.from(nested(MAX_NESTING_DEPTH + 1)), rule);
    expect(tooDeep?.message).to.match(new RegExp(`messages nested deeper than ${MAX_NESTING_DEPTH} levels`));
    expect(tooDeep?.field).to.equal(`${"next.".repeat(MAX_NESTING_DEPTH)}next`);
  });

  it("accepts packed repeated scalars and rejects a packed run that ends inside a value", function () {
    const packed = parse("syntax = \"proto3\"; message P { repeated uint64 v = 1; repeated fixed32 f = 2; }", { keepCase: true }).root.lookupType("P");
    const rule = messageRule(packed);
    expect(checkWireMessage(packed.encode({ v: [1, 300, 70_000], f: [1, 2] }).finish(), rule)).to.equal(undefined);
    expect(checkWireMessage(Uint8Array.from([...varintField(1, 5), ...varintField(1, 6)]), rule)).to.equal(undefined); // unpacked
    expect(checkWireMessage(Uint8Array.from(lengthField(1, [0x01, 0x80])), rule)?.message).to.match(/^v: truncated: packed varint at byte 3/);
    expect(checkWireMessage(Uint8Array.from(lengthField(2, [1, 2, 3, 4, 5])), rule)?.message).to.match(/^f: truncated: packed fixed32 run of 5 bytes/);
  });
});

// ------------------------------------------------------------------ through the server

describe("node/api/grpc strict request decoding", function () {
  let t: TestNode;
  let client: RawClient;
  const timeResponse = timeRoot.lookupType("ats.v1.TimeResponse");

  before(async function () {
    // One pending schedule at most: a mangled ScheduleAttestation that got stored would make the next one fail.
    t = await startTestNode({ overrides: { scheduleMaxPending: 1, scheduleMaxPendingPerClient: 1 } });
    client = new RawTimeClient(t.node.endpoints.grpc, grpc.credentials.createInsecure()) as unknown as RawClient;
  });
  after(async function () {
    client?.close();
    await t?.close();
  });

  it("GetCurrentTime: invalid UTF-8 in request_id or client_id is INVALID_ARGUMENT naming the field (not replaced by U+FFFD)", async function () {
    const badRequestId = await unary(client, "GetCurrentTime", [...lengthField(REQUEST_ID, INVALID_UTF8), ...varintField(TYPE, CURRENT_TIME)]);
    expect(badRequestId).to.deep.equal({ code: grpc.status.INVALID_ARGUMENT, details: "request_id: invalid UTF-8 in string field (bytes 2..5)" });
    const badClientId = await unary(client, "GetCurrentTime", [...varintField(TYPE, CURRENT_TIME), ...lengthField(CLIENT_ID, INVALID_UTF8)]);
    expect(badClientId).to.deep.equal({ code: grpc.status.INVALID_ARGUMENT, details: "client_id: invalid UTF-8 in string field (bytes 4..7)" });
  });

  it("ScheduleAttestation: invalid UTF-8 in callback_url is INVALID_ARGUMENT and stores nothing", async function () {
    const executeAtNs = (BigInt(Date.now()) * 1_000_000n + 3_600_000_000_000n).toString();
    const url = [...ascii("http://127.0.0.1:9/"), 0xff];
    const mangled = await unary(client, "ScheduleAttestation", [...lengthField(1, ascii(executeAtNs)), ...lengthField(2, url)]);
    expect(mangled.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(mangled.details).to.match(/^callback_url: invalid UTF-8 in string field/);
    // scheduleMaxPending is 1: this succeeds only if the mangled request stored nothing, and the next is refused.
    const valid = [...lengthField(1, ascii(executeAtNs)), ...lengthField(2, ascii("http://127.0.0.1:9/hook"))];
    expect((await unary(client, "ScheduleAttestation", valid)).code).to.equal(grpc.status.OK);
    expect((await unary(client, "ScheduleAttestation", valid)).code).to.not.equal(grpc.status.OK);
  });

  it("a truncated field, a field overrunning its nested message, a wrong wire type and garbage are INVALID_ARGUMENT; well-formed bytes still work", async function () {
    // request_id declares 10 bytes; 2 follow (protobufjs read "ab" and answered OK).
    const truncated = await unary(client, "GetCurrentTime", [...varintField(TYPE, CURRENT_TIME), ...tag(REQUEST_ID, 2), 10, 0x61, 0x62]);
    expect(truncated).to.deep.equal({
      code: grpc.status.INVALID_ARGUMENT,
      details: "request_id: truncated: declares 10 bytes at byte 3 but only 2 remain in ats.v1.TimeRequest (ends at byte 6)",
    });
    // VerifyRequest.proof declares 2 bytes, its hardware_signature 3 more beyond them.
    const overrun = await unary(client, "VerifyTime", [...lengthField(1, ascii("1")), ...tag(2, 2), 2, ...tag(1, 2), 3, 0x61, 0x62, 0x63]);
    expect(overrun.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(overrun.details).to.match(/^proof\.hardware_signature: truncated/);
    // request_id sent as a varint (protobufjs read it as a string anyway).
    const wrongWireType = await unary(client, "GetCurrentTime", [...tag(REQUEST_ID, 0), 0x01, 0x61, ...varintField(TYPE, CURRENT_TIME)]);
    expect(wrongWireType.code).to.equal(grpc.status.INVALID_ARGUMENT);
    expect(wrongWireType.details).to.match(/^request_id: wire type 0 \(varint\) at byte 0, expected 2/);
    // Not a message at all (grpc-js answered INTERNAL "Error deserializing request").
    const garbage = await unary(client, "GetCurrentTime", [0xff, 0xff, 0xff, 0xff]);
    expect(garbage).to.deep.equal({
      code: grpc.status.INVALID_ARGUMENT,
      details: "request: truncated: tag at byte 0 runs past the end of ats.v1.TimeRequest (byte 4)",
    });
    // Well-formed bytes (with an unknown field, which proto3 readers skip) are answered as before.
    const valid = await unary(client, "GetCurrentTime", [...lengthField(REQUEST_ID, ascii("raw-1")), ...varintField(TYPE, CURRENT_TIME), ...varintField(15, 1)]);
    expect(valid.code, valid.details).to.equal(grpc.status.OK);
    const response = timeResponse.toObject(timeResponse.decode(valid.response as Buffer)) as {
      request_id: string;
      nano_moment: string;
      node?: { node_id: string; protocol: string };
      consensus?: { responders: number };
    };
    expect(response.request_id).to.equal("raw-1");
    expect(response.nano_moment).to.match(/^[1-9][0-9]*$/);
    expect(response.node).to.include({ node_id: t.identity.nodeAddress, protocol: "ATS/1" });
    expect(response.consensus).to.include({ responders: 1 });
  });

  it("StreamTime: invalid UTF-8 in request_id ends the call with INVALID_ARGUMENT before any proof", async function () {
    const answer = await firstStreamAnswer(client, [...lengthField(1, INVALID_UTF8), ...varintField(2, 5_000_000)]);
    expect(answer).to.deep.equal({ code: grpc.status.INVALID_ARGUMENT, details: "request_id: invalid UTF-8 in string field (bytes 2..5)" });
    const valid = await firstStreamAnswer(client, [...lengthField(1, ascii("s-raw")), ...varintField(2, 5_000_000)]);
    expect(valid.code, valid.details).to.equal(grpc.status.OK);
  });
});
