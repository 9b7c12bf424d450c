/**
 * Strict decoding of gRPC requests: a walk over the protobuf wire format of each request, against its message
 * type, before protobufjs decodes it.
 *
 * Detail: docs/protocol.md §9.4.
 */
import type * as grpc from "@grpc/grpc-js";
import { Enum, Root, Type, type Field } from "protobufjs";
import { TextDecoder } from "node:util";
import { ValidationError } from "../../protocol/errors";

/*
 * Why: protobufjs is lenient by design. It replaces invalid UTF-8 in `string` fields with U+FFFD (a mangled
 * request_id or callback_url is accepted and stored), reads a string whose declared length runs past the end of
 * the message as whatever bytes are there, ignores the wire type of a known field (field 1 sent as a varint is
 * read as a string), and throws a plain Error on the rest, which grpc-js answers INTERNAL ("Error deserializing
 * request") although the fault is the client's. This walk rejects all of that with a ValidationError naming the
 * field and the byte offset:
 *   - a tag, varint or length that runs past the end of the message or of the enclosing nested message;
 *   - field number 0, wire types 3/4 (groups: proto3 has none), 6 and 7;
 *   - a known field sent with a wire type its type cannot have (repeated scalars may also come packed);
 *   - invalid UTF-8 in a known `string` field (TextDecoder with fatal: true: overlong forms, surrogates, > U+10FFFF);
 *   - nested messages deeper than MAX_NESTING_DEPTH (the walk recurses only into known message fields).
 * Unknown fields are kept compatible with proto3 (a newer client may send them): their framing is checked, their
 * content skipped. Enum values and bounds are the handlers' to judge, as before.
 *
 * Cost: one pass over the bytes, linear in the message size (grpc-js caps it at grpcMaxMessageBytes before this
 * runs), recursion bounded by MAX_NESTING_DEPTH, no per-field objects, ASCII strings checked without the decoder:
 * about 0.25 µs for a signed 120-byte TimeRequest here, a fraction of protobufjs' own decode (~1 µs).
 * GetCurrentTime is on the node benchmark, so keep it that way.
 *
 * grpc-js answers INTERNAL whenever a request deserializer throws, so the wrapped deserializer never throws: it
 * returns a RejectedRequest carrying the ValidationError, and the handlers answer that through the error mapping
 * (INVALID_ARGUMENT) with `throwIfRejected`.
 */
/** Deepest nesting of messages accepted (the top-level request is depth 0). time.proto needs 1. */
export const MAX_NESTING_DEPTH = 16;

/** Largest field number protobuf allows (2^29 - 1). */
const MAX_FIELD_NUMBER = 536_870_911;

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;

const WIRE_TYPE_NAMES: Readonly<Record<number, string>> = {
  0: "varint",
  1: "64-bit",
  2: "length-delimited",
  3: "start group",
  4: "end group",
  5: "32-bit",
};

/** How a field's value is framed on the wire. */
type FieldEncoding = "varint" | "fixed64" | "fixed32" | "string" | "bytes" | "message";

const ENCODING_OF_SCALAR: Readonly<Record<string, FieldEncoding>> = {
  double: "fixed64",
  float: "fixed32",
  int32: "varint",
  uint32: "varint",
  sint32: "varint",
  int64: "varint",
  uint64: "varint",
  sint64: "varint",
  bool: "varint",
  fixed32: "fixed32",
  sfixed32: "fixed32",
  fixed64: "fixed64",
  sfixed64: "fixed64",
  string: "string",
  bytes: "bytes",
};

const WIRE_TYPE_OF_ENCODING: Readonly<Record<FieldEncoding, number>> = {
  varint: WIRE_VARINT,
  fixed64: WIRE_FIXED64,
  fixed32: WIRE_FIXED32,
  string: WIRE_LENGTH_DELIMITED,
  bytes: WIRE_LENGTH_DELIMITED,
  message: WIRE_LENGTH_DELIMITED,
};

interface FieldRule {
  /** As in the .proto file; errors name the dotted path from the request, e.g. "proof.hardware_signature". */
  name: string;
  encoding: FieldEncoding;
  wireType: number;
  /** Repeated varint / fixed fields may also arrive packed (one length-delimited run). */
  packable: boolean;
  /** For encoding "message". */
  message?: MessageRule;
}

/** What the walk knows of one message type: its fields by number. */
export interface MessageRule {
  /** Full name, e.g. "ats.v1.TimeRequest". */
  typeName: string;
  fields: Map<number, FieldRule>;
}

/** Compiles the rules of `type` (and of every message type it reaches; recursive types are fine). */
export function messageRule(type: Type): MessageRule {
  return compile(type, new Map());
}

function compile(type: Type, seen: Map<Type, MessageRule>): MessageRule {
  const known = seen.get(type);
  if (known !== undefined) return known; // a recursive or shared type: one rule
  const rule: MessageRule = { typeName: type.fullName.replace(/^\./, ""), fields: new Map() };
  seen.set(type, rule);
  for (const field of type.fieldsArray) rule.fields.set(field.id, fieldRule(field, seen));
  return rule;
}

function fieldRule(field: Field, seen: Map<Type, MessageRule>): FieldRule {
  const where = `${field.parent?.fullName ?? ""}.${field.name}`;
  if (field.map) throw new Error(`${where}: map fields are not supported by the strict request decoder (grpcWire.ts)`);
  field.resolve();
  const resolved = field.resolvedType;
  let encoding: FieldEncoding | undefined;
  let message: MessageRule | undefined;
  if (resolved instanceof Type) {
    encoding = "message";
    message = compile(resolved, seen);
  } else if (resolved instanceof Enum) {
    encoding = "varint";
  } else {
    encoding = ENCODING_OF_SCALAR[field.type];
  }
  if (encoding === undefined) throw new Error(`${where}: unknown field type ${field.type}`);
  const packable = field.repeated && (encoding === "varint" || encoding === "fixed32" || encoding === "fixed64");
  return { name: field.name, encoding, wireType: WIRE_TYPE_OF_ENCODING[encoding], packable, ...(message === undefined ? {} : { message }) };
}

// ------------------------------------------------------------------ the walk

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** True when bytes [start, end) are all ASCII, hence valid UTF-8. */
function isAscii(bytes: Uint8Array, start: number, end: number): boolean {
  for (let index = start; index < end; index += 1) {
    if ((bytes[index] as number) >= 0x80) return false;
  }
  return true;
}

/**
 * Where a problem is, as ValidationError's field: "request_id", "proof.hardware_signature", "#9" for an unknown
 * field 9, or the enclosing message ("request", "proof") when no field is known yet (a bad tag). Built only when
 * an error is raised, so the success path concatenates no strings.
 */
function pathOf(prefix: string, name: string): string {
  if (name !== "") return `${prefix}${name}`;
  return prefix === "" ? "request" : prefix.slice(0, -1);
}

class WireWalker {
  /** Offset just after the varint the last `varint()` call read (kept here so that the walk allocates nothing). */
  private afterVarint = 0;

  constructor(private readonly bytes: Uint8Array) {}

  /** Walks the fields of one message in bytes [start, end). `prefix` is "" for the request, "proof." below. */
  message(rule: MessageRule, start: number, end: number, depth: number, prefix: string): void {
    const scope = rule.typeName;
    let offset = start;
    while (offset < end) {
      const tagOffset = offset;
      const tag = this.varint(offset, end, prefix, "", "tag", 5, scope);
      offset = this.afterVarint;
      const fieldNumber = Math.floor(tag / 8);
      const wireType = tag % 8;
      if (fieldNumber === 0 || fieldNumber > MAX_FIELD_NUMBER) {
        throw this.error(prefix, "", `invalid field number ${fieldNumber} at byte ${tagOffset} of ${scope}`, tagOffset);
      }
      const field = rule.fields.get(fieldNumber);
      const name = field?.name ?? `#${fieldNumber}`;
      if (wireType !== WIRE_VARINT && wireType !== WIRE_FIXED64 && wireType !== WIRE_LENGTH_DELIMITED && wireType !== WIRE_FIXED32) {
        throw this.error(prefix, name, `unsupported wire type ${wireType}${wireTypeName(wireType)} at byte ${tagOffset} (field ${fieldNumber})`, tagOffset);
      }
      if (field !== undefined && wireType !== field.wireType && !(field.packable && wireType === WIRE_LENGTH_DELIMITED)) {
        throw this.error(
          prefix,
          name,
          `wire type ${wireType}${wireTypeName(wireType)} at byte ${tagOffset}, expected ${field.wireType}${wireTypeName(field.wireType)} for a ${field.encoding} field`,
          tagOffset,
        );
      }
      offset = this.value(field, prefix, name, wireType, offset, end, depth, scope);
    }
  }

  /** Checks one value starting at `offset`; returns the offset after it. */
  private value(field: FieldRule | undefined, prefix: string, name: string, wireType: number, offset: number, end: number, depth: number, scope: string): number {
    switch (wireType) {
      case WIRE_VARINT:
        this.varint(offset, end, prefix, name, "varint", 10, scope);
        return this.afterVarint;
      case WIRE_FIXED64:
        return this.fixed(offset, end, prefix, name, 8, scope);
      case WIRE_FIXED32:
        return this.fixed(offset, end, prefix, name, 4, scope);
      default: {
        const length = this.varint(offset, end, prefix, name, "length", 5, scope);
        const valueStart = this.afterVarint;
        const valueEnd = valueStart + length;
        if (valueEnd > end) {
          throw this.error(prefix, name, `truncated: declares ${length} bytes at byte ${offset} but only ${end - valueStart} remain in ${scope} (ends at byte ${end})`, offset);
        }
        if (field !== undefined) this.content(field, prefix, valueStart, valueEnd, depth);
        return valueEnd;
      }
    }
  }

  /** The content of a length-delimited value of a known field. */
  private content(field: FieldRule, prefix: string, start: number, end: number, depth: number): void {
    switch (field.encoding) {
      case "string":
        if (isAscii(this.bytes, start, end)) return; // the common case, ~5x cheaper than asking the decoder
        try {
          utf8.decode(this.bytes.subarray(start, end));
        } catch {
          throw this.error(prefix, field.name, `invalid UTF-8 in string field (bytes ${start}..${end - 1})`, start);
        }
        return;
      case "message":
        if (depth + 1 > MAX_NESTING_DEPTH) {
          throw this.error(prefix, field.name, `messages nested deeper than ${MAX_NESTING_DEPTH} levels (at byte ${start})`, start);
        }
        this.message(field.message as MessageRule, start, end, depth + 1, `${prefix}${field.name}.`);
        return;
      case "varint": // a packed run
        for (let offset = start; offset < end; offset = this.afterVarint) {
          this.varint(offset, end, prefix, field.name, "packed varint", 10, "its packed run");
        }
        return;
      case "fixed32":
      case "fixed64": {
        const size = field.encoding === "fixed32" ? 4 : 8;
        if ((end - start) % size !== 0) {
          throw this.error(prefix, field.name, `truncated: packed ${field.encoding} run of ${end - start} bytes at byte ${start} is not a multiple of ${size}`, start);
        }
        return;
      }
      case "bytes":
        return;
    }
  }

  /**
   * Reads a varint of at most `maxBytes` bytes at `offset` (tags and lengths fit 5; values 10) and sets
   * `afterVarint`. The value is exact up to 2^53, which tags and lengths never reach; varint field values are only
   * skipped.
   */
  private varint(offset: number, end: number, prefix: string, name: string, what: string, maxBytes: number, scope: string): number {
    let value = 0;
    let scale = 1;
    for (let index = 0; index < maxBytes; index += 1) {
      const position = offset + index;
      if (position >= end) {
        throw this.error(prefix, name, `truncated: ${what} at byte ${offset} runs past the end of ${scope} (byte ${end})`, offset);
      }
      const byte = this.bytes[position] as number;
      value += (byte & 0x7f) * scale;
      scale *= 128;
      if (byte < 0x80) {
        this.afterVarint = position + 1;
        return value;
      }
    }
    throw this.error(prefix, name, `${what} at byte ${offset} is longer than ${maxBytes} bytes`, offset);
  }

  private fixed(offset: number, end: number, prefix: string, name: string, size: number, scope: string): number {
    if (offset + size > end) {
      throw this.error(prefix, name, `truncated: ${size * 8}-bit value at byte ${offset} needs ${size} bytes, ${end - offset} remain in ${scope}`, offset);
    }
    return offset + size;
  }

  private error(prefix: string, name: string, message: string, offset: number): ValidationError {
    return new ValidationError(pathOf(prefix, name), message, { offset, requestBytes: this.bytes.length });
  }
}

function wireTypeName(wireType: number): string {
  const name = WIRE_TYPE_NAMES[wireType];
  return name === undefined ? "" : ` (${name})`;
}

/** The first problem of `bytes` as a message of `rule`, or undefined when it is well-formed. */
export function checkWireMessage(bytes: Uint8Array, rule: MessageRule): ValidationError | undefined {
  try {
    new WireWalker(bytes).message(rule, 0, bytes.length, 0, "");
    return undefined;
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
}

// ------------------------------------------------------------------ grpc-js integration

/** What a strict deserializer returns for a malformed request (grpc-js would answer INTERNAL if it threw). */
export class RejectedRequest {
  constructor(readonly error: ValidationError) {}
}

/** Throws the ValidationError of a request the strict deserializer rejected; a handler's first check. */
export function throwIfRejected(request: unknown): void {
  if (request instanceof RejectedRequest) throw request.error;
}

/**
 * A copy of `definition` (as proto-loader built it) whose request deserializers check the wire format first.
 * `protoFile` and `serviceName` name the same service for protobufjs reflection (field names kept as in the file).
 */
export function withStrictRequestDecoding(definition: grpc.ServiceDefinition, protoFile: string, serviceName: string): grpc.ServiceDefinition {
  const root = new Root().loadSync(protoFile, { keepCase: true });
  root.resolveAll();
  const service = root.lookupService(serviceName);
  const strict: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(definition as Record<string, grpc.MethodDefinition<unknown, unknown>>)) {
    const requestType = service.methods[name]?.resolvedRequestType;
    if (requestType === undefined || requestType === null) throw new Error(`${serviceName}.${name}: no request type in ${protoFile}`);
    const rule = messageRule(requestType);
    const decode = method.requestDeserialize;
    strict[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer): unknown => {
        const problem = checkWireMessage(bytes, rule);
        if (problem !== undefined) return new RejectedRequest(problem);
        try {
          return decode(bytes);
        } catch (cause) {
          // Not expected after the walk; still the client's bytes, so still a client error.
          return new RejectedRequest(new ValidationError("request", `not a valid ${rule.typeName}`, { requestBytes: bytes.length }, { cause }));
        }
      },
    };
  }
  return strict as grpc.ServiceDefinition;
}
