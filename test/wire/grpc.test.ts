/**
 * The hand-written gRPC message interfaces of wire/grpc.ts against proto/time.proto, the source of truth: the
 * compiler ties each MESSAGE_FIELDS list to its interface, this test ties the list to the .proto.
 */
import { expect } from "chai";
import { Root } from "protobufjs";
import { MESSAGE_FIELDS, REQUEST_TYPES, TIME_PROTO_PATH } from "../../wire/grpc";

describe("wire/grpc message shapes", () => {
  const root = new Root().loadSync(TIME_PROTO_PATH, { keepCase: true });

  it("declares exactly the fields of every message of proto/time.proto", () => {
    const declared = Object.keys(MESSAGE_FIELDS).sort();
    const inProto = root
      .lookup("ats.v1")!
      .toJSON()
      .nested!;
    const messageNames = Object.entries(inProto)
      .filter(([, definition]) => "fields" in (definition as object))
      .map(([name]) => name)
      .sort();
    expect(declared).to.deep.equal(messageNames);
    for (const [name, fields] of Object.entries(MESSAGE_FIELDS)) {
      const protoFields = root.lookupType(`ats.v1.${name}`).fieldsArray.map((field) => field.name);
      expect([...fields].sort(), name).to.deep.equal([...protoFields].sort());
    }
  });

  it("lists RequestType names in wire order (index = enum number)", () => {
    const values = root.lookupEnum("ats.v1.RequestType").values;
    expect(REQUEST_TYPES.map((name) => values[name])).to.deep.equal([0, 1, 2]);
    expect(Object.keys(values)).to.have.length(REQUEST_TYPES.length);
  });
});
