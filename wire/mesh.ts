/**
 * The mesh wire (proto/mesh.proto, docs/protocol.md §7.3): packets between attesting nodes, decoded once into
 * checked values, and the cryptography that authenticates them (hello and alert signatures, pair keys, packet
 * tags). Pure: no socket, no clock; node/mesh/transport.ts owns those.
 */
import { createECDH, createHmac, hkdfSync, timingSafeEqual } from "node:crypto";
import { join } from "node:path";
import * as protobuf from "protobufjs";
import { readUint128, writeUint128 } from "../protocol/bytes";
import { HARDWARE_SIGNATURE_LENGTH, MAX_NODE_ENTRIES, NODE_ENTRY_LENGTH, UNCOMPRESSED_PUBLIC_KEY_LENGTH } from "../protocol/constants";
import { ProtocolError } from "../protocol/errors";
import { keccak256Bytes } from "../protocol/keccak";
import { addressOfUncompressedKey, checksumAddressBytes, nodePrivateKeyHex, type NodeKeyInput } from "../protocol/keys";
import { recoverNodeAddressFromDigest, signDigestCompact } from "../protocol/sign";
import type { Address, Hex, TimeProof } from "../protocol/types";
import { PROTO_DIR } from "./grpc";

export const MESH_PROTO_PATH = join(PROTO_DIR, "mesh.proto");
/** Largest datagram a node sends or reads: a Hello with a four-certificate chain fits with room to spare. */
export const MAX_MESH_PACKET_BYTES = 16_384;
/** Most certificates a Hello may carry (leaf first). */
export const MAX_HELLO_CHAIN_LENGTH = 4;
/** Longest alert reason, in UTF-16 code units (the text is logged and shown in mesh state). */
export const MAX_ALERT_REASON_LENGTH = 512;
/** Longest `consensus` JSON text a relayed proof may carry. */
export const MAX_CONSENSUS_JSON_LENGTH = 12_000;
/** Rounds a responder remembers per proposer between a round's exchange and its co-sign request. */
export const MAX_PENDING_ROUNDS_PER_PROPOSER = 16;
/**
 * The most rounds a proposer may pipeline (the bound of meshMaxRoundsInFlight): half of what a responder remembers
 * per proposer, so a proposer's own rounds in flight never push each other out of a responder's memory.
 */
export const MAX_ROUNDS_IN_FLIGHT = MAX_PENDING_ROUNDS_PER_PROPOSER / 2;

/** Longest role / version / state / refusal string. */
const MAX_SHORT_STRING = 256;
const MAX_PEM_LENGTH = 8_192;

export const MESH_ROLES = ["primary", "secondary", "archive", "bridge"] as const;
export type MeshRole = (typeof MESH_ROLES)[number];

const HELLO_DOMAIN = Buffer.from("ATS/1 MESH HELLO", "latin1");
const ALERT_DOMAIN = Buffer.from("ATS/1 MESH ALERT", "latin1");
const PAIR_KEY_SALT = Buffer.from("ATS/1 MESH PAIR", "latin1");
const MAC_LENGTH = 32;
const SIGNATURE_LENGTH = 64;
/** Bytes of a hello's per-boot session id (Hello.session_id). */
export const MESH_SESSION_ID_LENGTH = 16;

// keepCase: the field names of the .proto file (snake_case), as the gRPC wire keeps them too.
const root = new protobuf.Root().loadSync(MESH_PROTO_PATH, { keepCase: true });
const PacketType = root.lookupType("ats.mesh.v1.Packet");
const EnvelopeType = root.lookupType("ats.mesh.v1.Envelope");
const TO_OBJECT: protobuf.IConversionOptions = { longs: String, defaults: true, oneofs: true };

export interface HelloPayload {
  readonly nodePublicKey: Buffer;
  /** Empty for a node without a card. */
  readonly cardPublicKey: Buffer;
  readonly certificateChainPem: readonly string[];
  readonly cardAccuracyNs: number;
  readonly role: MeshRole;
  readonly version: string;
  /**
   * MESH_SESSION_ID_LENGTH random bytes drawn when the sender's transport started: bound into the pair key, so a
   * restart of either member retires every packet tagged before it (docs/protocol.md §7.3).
   */
  readonly sessionId: Buffer;
}

export interface AlertPayload {
  readonly kind: "tamper";
  readonly cardId: Hex;
  readonly reason: string;
  readonly atNs: bigint;
  /** 64 bytes: the subject node's signature (alertDigest). */
  readonly signature: Buffer;
}

export type MeshPayload =
  | { readonly kind: "hello"; readonly hello: HelloPayload }
  | { readonly kind: "helloReply"; readonly hello: HelloPayload }
  | { readonly kind: "probe"; readonly t1Ns: bigint; readonly roundId: bigint }
  | { readonly kind: "probeReply"; readonly t2Ns: bigint; readonly t3Ns: bigint; readonly cardAccuracyNs: number; readonly state: string }
  | {
      readonly kind: "cosignRequest";
      readonly roundId: bigint;
      readonly nanoMoment: bigint;
      readonly accuracyNs: number;
      readonly hardwareSignature: Hex;
    }
  | { readonly kind: "cosignReply"; readonly nodeEntry: Hex | null; readonly refusal: string }
  | { readonly kind: "alert"; readonly alert: AlertPayload }
  | { readonly kind: "relayedProof"; readonly proof: TimeProof; readonly consensusJson: string };

export type MeshPayloadKind = MeshPayload["kind"];

export interface MeshEnvelope {
  readonly sender: Address;
  readonly receiver: Address;
  readonly nonce: bigint;
  /** 0n for a request. */
  readonly inReplyTo: bigint;
  readonly payload: MeshPayload;
}

/** The proto oneof member name of each payload kind. */
const ONEOF_FIELD = {
  hello: "hello",
  helloReply: "hello_reply",
  probe: "probe",
  probeReply: "probe_reply",
  cosignRequest: "cosign_request",
  cosignReply: "cosign_reply",
  alert: "alert",
  relayedProof: "relayed_proof",
} as const satisfies Record<MeshPayloadKind, string>;
const KIND_OF_FIELD = new Map<string, MeshPayloadKind>(Object.entries(ONEOF_FIELD).map(([kind, field]) => [field, kind as MeshPayloadKind]));

/** Whether a payload kind travels signed (hellos) or under the pair key's tag (everything else). */
export function isSignedKind(kind: MeshPayloadKind): boolean {
  return kind === "hello" || kind === "helloReply";
}

// ------------------------------------------------------------------------------------------------ encoding

function ns16(value: bigint): Buffer {
  const bytes = Buffer.alloc(16);
  writeUint128(bytes, 0, value);
  return bytes;
}

function addressBytes(address: Address): Buffer {
  return Buffer.from(address.slice(2), "hex");
}

function helloMessage(hello: HelloPayload): Record<string, unknown> {
  return {
    node_public_key: hello.nodePublicKey,
    card_public_key: hello.cardPublicKey,
    certificate_chain_pem: [...hello.certificateChainPem],
    card_accuracy_ns: hello.cardAccuracyNs,
    role: hello.role,
    version: hello.version,
    session_id: hello.sessionId,
  };
}

function payloadMessage(payload: MeshPayload): Record<string, unknown> {
  switch (payload.kind) {
    case "hello":
    case "helloReply":
      return helloMessage(payload.hello);
    case "probe":
      return { t1_ns: ns16(payload.t1Ns), round_id: payload.roundId.toString() };
    case "probeReply":
      return { t2_ns: ns16(payload.t2Ns), t3_ns: ns16(payload.t3Ns), card_accuracy_ns: payload.cardAccuracyNs, state: payload.state };
    case "cosignRequest":
      return {
        round_id: payload.roundId.toString(),
        nano_moment: ns16(payload.nanoMoment),
        accuracy_ns: payload.accuracyNs,
        hardware_signature: Buffer.from(payload.hardwareSignature.slice(2), "hex"),
      };
    case "cosignReply":
      return { node_entry: payload.nodeEntry === null ? Buffer.alloc(0) : Buffer.from(payload.nodeEntry.slice(2), "hex"), refusal: payload.refusal };
    case "alert": {
      const { alert } = payload;
      return { kind: alert.kind, card_id: Buffer.from(alert.cardId.slice(2), "hex"), reason: alert.reason, at_ns: ns16(alert.atNs), signature: alert.signature };
    }
    case "relayedProof":
      return {
        nano_moment: ns16(payload.proof.nanoMoment),
        hardware_signature: Buffer.from(payload.proof.hardwareSignature.slice(2), "hex"),
        node_signature: Buffer.from(payload.proof.nodeSignature.slice(2), "hex"),
        accuracy_ns: payload.proof.accuracy,
        consensus_json: payload.consensusJson,
      };
  }
}

/** The body bytes of an envelope (what a packet's signature or tag covers). */
export function encodeEnvelope(envelope: MeshEnvelope): Buffer {
  const message = EnvelopeType.fromObject({
    sender: addressBytes(envelope.sender),
    receiver: addressBytes(envelope.receiver),
    nonce: envelope.nonce.toString(),
    in_reply_to: envelope.inReplyTo.toString(),
    [ONEOF_FIELD[envelope.payload.kind]]: payloadMessage(envelope.payload),
  });
  return Buffer.from(EnvelopeType.encode(message).finish());
}

export interface MeshPacket {
  readonly body: Buffer;
  /** Hellos: 64 bytes; otherwise empty. */
  readonly signature: Buffer;
  /** Everything but hellos: 32 bytes; otherwise empty. */
  readonly mac: Buffer;
}

export function encodePacket(packet: MeshPacket): Buffer {
  return Buffer.from(PacketType.encode(PacketType.fromObject({ body: packet.body, signature: packet.signature, mac: packet.mac })).finish());
}

// ------------------------------------------------------------------------------------------------ decoding

function fail(field: string, problem: string, details: Record<string, unknown> = {}): never {
  throw new ProtocolError(`mesh ${field}: ${problem}`, { field, ...details });
}

function bytesField(value: unknown, field: string, lengths: readonly number[]): Buffer {
  if (!(value instanceof Uint8Array)) fail(field, "not bytes");
  if (!lengths.includes(value.length)) fail(field, `${value.length} bytes, expected ${lengths.join(" or ")}`, { actualBytes: value.length });
  return Buffer.from(value.buffer, value.byteOffset, value.length);
}

function nsField(value: unknown, field: string): bigint {
  return readUint128(bytesField(value, field, [16]), 0);
}

function stringField(value: unknown, field: string, maxLength: number): string {
  if (typeof value !== "string") fail(field, "not a string");
  if (value.length > maxLength) fail(field, `longer than ${maxLength} characters`, { length: value.length });
  return value;
}

function uint64Field(value: unknown, field: string): bigint {
  if (typeof value !== "string" || !/^(0|[1-9][0-9]{0,19})$/.test(value)) fail(field, "not an unsigned 64-bit integer");
  return BigInt(value);
}

function uint32Field(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 0xffff_ffff) fail(field, "not a uint32");
  return value;
}

function addressField(value: unknown, field: string): Address {
  return checksumAddressBytes(bytesField(value, field, [20]));
}

function decodeHello(message: Record<string, unknown>, field: string): HelloPayload {
  const chain = message["certificate_chain_pem"];
  if (!Array.isArray(chain) || chain.length > MAX_HELLO_CHAIN_LENGTH) fail(`${field}.certificate_chain_pem`, `at most ${MAX_HELLO_CHAIN_LENGTH} certificates`);
  const role = stringField(message["role"], `${field}.role`, MAX_SHORT_STRING);
  if (!(MESH_ROLES as readonly string[]).includes(role)) fail(`${field}.role`, `unknown role "${role}" (known: ${MESH_ROLES.join(", ")})`);
  return {
    nodePublicKey: bytesField(message["node_public_key"], `${field}.node_public_key`, [UNCOMPRESSED_PUBLIC_KEY_LENGTH]),
    cardPublicKey: bytesField(message["card_public_key"], `${field}.card_public_key`, [0, UNCOMPRESSED_PUBLIC_KEY_LENGTH]),
    certificateChainPem: chain.map((pem, index) => stringField(pem, `${field}.certificate_chain_pem[${index}]`, MAX_PEM_LENGTH)),
    cardAccuracyNs: uint32Field(message["card_accuracy_ns"], `${field}.card_accuracy_ns`),
    role: role as MeshRole,
    version: stringField(message["version"], `${field}.version`, MAX_SHORT_STRING),
    sessionId: bytesField(message["session_id"], `${field}.session_id`, [MESH_SESSION_ID_LENGTH]),
  };
}

function decodePayload(kind: MeshPayloadKind, message: Record<string, unknown>): MeshPayload {
  const field = ONEOF_FIELD[kind];
  switch (kind) {
    case "hello":
    case "helloReply":
      return { kind, hello: decodeHello(message, field) };
    case "probe":
      return { kind, t1Ns: nsField(message["t1_ns"], `${field}.t1_ns`), roundId: uint64Field(message["round_id"], `${field}.round_id`) };
    case "probeReply":
      return {
        kind,
        t2Ns: nsField(message["t2_ns"], `${field}.t2_ns`),
        t3Ns: nsField(message["t3_ns"], `${field}.t3_ns`),
        cardAccuracyNs: uint32Field(message["card_accuracy_ns"], `${field}.card_accuracy_ns`),
        state: stringField(message["state"], `${field}.state`, MAX_SHORT_STRING),
      };
    case "cosignRequest":
      return {
        kind,
        roundId: uint64Field(message["round_id"], `${field}.round_id`),
        nanoMoment: nsField(message["nano_moment"], `${field}.nano_moment`),
        accuracyNs: uint32Field(message["accuracy_ns"], `${field}.accuracy_ns`),
        hardwareSignature: `0x${bytesField(message["hardware_signature"], `${field}.hardware_signature`, [HARDWARE_SIGNATURE_LENGTH]).toString("hex")}`,
      };
    case "cosignReply": {
      const entry = bytesField(message["node_entry"], `${field}.node_entry`, [0, NODE_ENTRY_LENGTH]);
      const refusal = stringField(message["refusal"], `${field}.refusal`, MAX_SHORT_STRING);
      if ((entry.length === 0) === (refusal === "")) fail(field, "exactly one of node_entry and refusal must be set");
      return { kind, nodeEntry: entry.length === 0 ? null : `0x${entry.toString("hex")}`, refusal };
    }
    case "relayedProof": {
      const nodeSignature = message["node_signature"];
      if (!(nodeSignature instanceof Uint8Array) || nodeSignature.length === 0 || nodeSignature.length % NODE_ENTRY_LENGTH !== 0 || nodeSignature.length > NODE_ENTRY_LENGTH * MAX_NODE_ENTRIES) {
        fail(`${field}.node_signature`, `must be 1..${MAX_NODE_ENTRIES} entries of ${NODE_ENTRY_LENGTH} bytes`);
      }
      return {
        kind,
        proof: {
          nanoMoment: nsField(message["nano_moment"], `${field}.nano_moment`),
          hardwareSignature: `0x${bytesField(message["hardware_signature"], `${field}.hardware_signature`, [HARDWARE_SIGNATURE_LENGTH]).toString("hex")}`,
          nodeSignature: `0x${Buffer.from(nodeSignature).toString("hex")}`,
          accuracy: uint32Field(message["accuracy_ns"], `${field}.accuracy_ns`),
        },
        consensusJson: stringField(message["consensus_json"], `${field}.consensus_json`, MAX_CONSENSUS_JSON_LENGTH),
      };
    }
    case "alert": {
      const alertKind = stringField(message["kind"], `${field}.kind`, MAX_SHORT_STRING);
      if (alertKind !== "tamper") fail(`${field}.kind`, `unknown alert kind "${alertKind}"`);
      return {
        kind,
        alert: {
          kind: alertKind,
          cardId: `0x${bytesField(message["card_id"], `${field}.card_id`, [32]).toString("hex")}`,
          reason: stringField(message["reason"], `${field}.reason`, MAX_ALERT_REASON_LENGTH),
          atNs: nsField(message["at_ns"], `${field}.at_ns`),
          signature: bytesField(message["signature"], `${field}.signature`, [SIGNATURE_LENGTH]),
        },
      };
    }
  }
}

/** Decodes a datagram into its packet. Throws ProtocolError for anything that is not one. */
export function decodePacket(datagram: Uint8Array): MeshPacket {
  if (datagram.length > MAX_MESH_PACKET_BYTES) fail("packet", `${datagram.length} bytes, at most ${MAX_MESH_PACKET_BYTES}`);
  let message: Record<string, unknown>;
  try {
    message = PacketType.toObject(PacketType.decode(datagram), TO_OBJECT);
  } catch (cause) {
    throw new ProtocolError("mesh packet: not a Packet message", { field: "packet" }, { cause });
  }
  const body = message["body"];
  if (!(body instanceof Uint8Array) || body.length === 0) fail("packet.body", "missing");
  return { body: Buffer.from(body.buffer, body.byteOffset, body.length), signature: bytesField(message["signature"], "packet.signature", [0, SIGNATURE_LENGTH]), mac: bytesField(message["mac"], "packet.mac", [0, MAC_LENGTH]) };
}

/** Decodes and checks an envelope body. Throws ProtocolError naming the offending field. */
export function decodeEnvelope(body: Uint8Array): MeshEnvelope {
  let message: Record<string, unknown>;
  try {
    message = EnvelopeType.toObject(EnvelopeType.decode(body), TO_OBJECT);
  } catch (cause) {
    throw new ProtocolError("mesh envelope: not an Envelope message", { field: "envelope" }, { cause });
  }
  const oneof = message["payload"];
  const kind = typeof oneof === "string" ? KIND_OF_FIELD.get(oneof) : undefined;
  if (kind === undefined) fail("envelope.payload", "missing or unknown payload");
  const payloadMessage = message[ONEOF_FIELD[kind]];
  if (typeof payloadMessage !== "object" || payloadMessage === null) fail("envelope.payload", "empty payload");
  return {
    sender: addressField(message["sender"], "envelope.sender"),
    receiver: addressField(message["receiver"], "envelope.receiver"),
    nonce: uint64Field(message["nonce"], "envelope.nonce"),
    inReplyTo: uint64Field(message["in_reply_to"], "envelope.in_reply_to"),
    payload: decodePayload(kind, payloadMessage as Record<string, unknown>),
  };
}

// ------------------------------------------------------------------------------------------------ authentication

function helloDigest(body: Uint8Array): Buffer {
  return keccak256Bytes(Buffer.concat([HELLO_DOMAIN, body]));
}

/** A hello's 64-byte signature by the sender's node key. */
export function signHello(nodeKey: NodeKeyInput, body: Uint8Array): Buffer {
  return signDigestCompact(nodeKey, helloDigest(body));
}

/**
 * The address that signed a hello; throws ProtocolError when the signature does not recover or the key the
 * hello carries is not the signer's.
 */
export function helloSigner(body: Uint8Array, signature: Uint8Array, hello: HelloPayload): Address {
  if (signature.length !== SIGNATURE_LENGTH) fail("packet.signature", "a hello must be signed (64 bytes)");
  const signer = recoverNodeAddressFromDigest(helloDigest(body), signature);
  const carried = addressOfUncompressedKey(hello.nodePublicKey);
  if (carried !== signer) fail("hello.node_public_key", `belongs to ${carried}, the hello is signed by ${signer}`);
  return signer;
}

/** The digest a tamper alert's signature covers: domain ‖ node id ‖ card id ‖ atNs (16) ‖ reason (UTF-8). */
export function alertDigest(nodeId: Address, cardId: Hex, atNs: bigint, reason: string): Buffer {
  return keccak256Bytes(Buffer.concat([ALERT_DOMAIN, addressBytes(nodeId), Buffer.from(cardId.slice(2), "hex"), ns16(atNs), Buffer.from(reason, "utf8")]));
}

export function signAlert(nodeKey: NodeKeyInput, nodeId: Address, cardId: Hex, atNs: bigint, reason: string): Buffer {
  return signDigestCompact(nodeKey, alertDigest(nodeId, cardId, atNs, reason));
}

/** Whether `alert` is signed by `nodeId` itself (the only node that may say its card is tampered). */
export function alertSignedBy(alert: AlertPayload, nodeId: Address): boolean {
  try {
    return recoverNodeAddressFromDigest(alertDigest(nodeId, alert.cardId, alert.atNs, alert.reason), alert.signature).toLowerCase() === nodeId.toLowerCase();
  } catch {
    return false;
  }
}

/** One side of a pair key: a member's address and the session id of its current boot. */
export interface PairKeySide {
  readonly address: Address;
  readonly sessionId: Uint8Array;
}

/**
 * The key two nodes share for packet tags: HKDF-SHA256 over the x coordinate of their static secp256k1 ECDH
 * secret, salted with the mesh domain, info = both addresses then their session ids, in ascending order of
 * address (so both sides derive the same key). Only the two key holders can compute it, and it changes whenever
 * either member restarts (a new session id): packets captured before a restart do not check after it, although
 * the restarted member's replay window starts empty.
 */
export function pairKey(ownKey: NodeKeyInput, own: PairKeySide, peerPublicKey: Uint8Array, peer: PairKeySide): Buffer {
  for (const side of [own, peer]) {
    if (side.sessionId.length !== MESH_SESSION_ID_LENGTH) {
      throw new RangeError(`session id of ${side.address} is ${side.sessionId.length} bytes, expected ${MESH_SESSION_ID_LENGTH}`);
    }
  }
  const ecdh = createECDH("secp256k1");
  ecdh.setPrivateKey(Buffer.from(nodePrivateKeyHex(ownKey).slice(2), "hex"));
  const shared = ecdh.computeSecret(Buffer.from(peerPublicKey));
  const [low, high] = own.address.toLowerCase() < peer.address.toLowerCase() ? [own, peer] : [peer, own];
  const info = Buffer.concat([addressBytes(low.address), addressBytes(high.address), low.sessionId, high.sessionId]);
  return Buffer.from(hkdfSync("sha256", shared, PAIR_KEY_SALT, info, 32));
}

export function packetMac(key: Uint8Array, body: Uint8Array): Buffer {
  return createHmac("sha256", key).update(body).digest();
}

/** Constant-time check of a packet's tag. */
export function macMatches(key: Uint8Array, body: Uint8Array, mac: Uint8Array): boolean {
  return mac.length === MAC_LENGTH && timingSafeEqual(packetMac(key, body), mac);
}
