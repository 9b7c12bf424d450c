/**
 * The NTP packet codec of the node's time host (docs/protocol.md §9.8): pure functions, no sockets, no clocks.
 *
 * - `parseNtpRequest` decides once, at the boundary, whether a datagram is a client request this server answers
 *   (RFC 5905 §7.3 header, mode 3, version 1–4), and names the reason when it is not;
 * - `encodeNtpReply` builds the 48-byte server reply (mode 4) of RFC 5905 Appendix A.5.3 `fast_xmit`;
 * - `encodeKissOfDeath` builds a Kiss-o'-Death (RFC 5905 §7.4: stratum 0, the kiss code in the reference id);
 * - timestamps convert between Unix nanoseconds and the 64-bit NTP format (RFC 5905 §6) across eras: the 32-bit
 *   seconds field wraps every 2^32 s (era 1 starts 2^32 s after the 1900 epoch, in 2036), and a decoder picks the era nearest a
 *   pivot time, as §6 prescribes ("the correct era ... from the nearest 68 years");
 * - durations (root delay, root dispersion) go to the 32-bit NTP short format (16.16 s), rounded UP, so that a
 *   bound carried in them is never understated.
 */

/** Length of the NTP header without extension fields or MAC (RFC 5905 §7.3, Figure 8), bytes. */
export const NTP_HEADER_BYTES = 48;
/** Seconds from the NTP prime epoch (1900-01-01T00:00:00Z) to the Unix epoch (1970-01-01T00:00:00Z). */
export const NTP_UNIX_EPOCH_OFFSET_SECONDS = 2_208_988_800n;
/** One NTP era: the 32-bit seconds field's range (RFC 5905 §6), seconds. */
export const NTP_ERA_SECONDS = 1n << 32n;
const NS_PER_SECOND = 1_000_000_000n;
const NTP_ERA_NS = NTP_ERA_SECONDS * NS_PER_SECOND;
const UINT32_MAX = 0xffff_ffff;

/** Modes of RFC 5905 §7.3 (Figure 10). 6 and 7 are ntpd's control and private (monitor) messages. */
export const NTP_MODE = { reserved: 0, symmetricActive: 1, symmetricPassive: 2, client: 3, server: 4, broadcast: 5, control: 6, private: 7 } as const;
/** Leap indicator values (RFC 5905 §7.3, Figure 9); 3 is "unknown (clock unsynchronized)". */
export const NTP_LEAP = { none: 0, lastMinute61: 1, lastMinute59: 2, unsynchronised: 3 } as const;
/** Lowest and highest version answered: RFC 5905 is version 4 and interoperates with versions 1–3 (§1, A.5.1). */
export const NTP_MIN_VERSION = 1;
export const NTP_MAX_VERSION = 4;
/** Stratum 16 is "unsynchronized" (RFC 5905 §7.3, Figure 11); a server announcing it is useless to clients. */
export const NTP_MAX_STRATUM = 15;

/** Why a datagram is not answered (each is counted: node/api/metrics.ts `timerpc_ntp_packets_dropped_total`). */
export type NtpDropReason =
  /** Shorter than the 48-byte header. */
  | "short"
  /** Mode 6 (control) or 7 (private/monitor): never answered, their replies amplify (e.g. ntpd's monlist). */
  | "control"
  /** Any other mode than 3 (client): this host is a server only, no symmetric or broadcast association. */
  | "mode"
  /** Version 0 or 5–7. */
  | "version";

export const NTP_DROP_REASONS: readonly NtpDropReason[] = ["short", "control", "mode", "version"];

/** What a reply needs from a client request (the rest of the request is not read). */
export interface NtpRequest {
  /** The request's version, 1–4: the reply carries the same (RFC 5905 A.5.3 `x.version = r->version`). */
  readonly version: number;
  /** The client's poll exponent, copied into the reply (A.5.3 `x.poll = r->poll`). */
  readonly poll: number;
  /** The client's transmit timestamp, the raw 8 bytes: copied into the reply's origin field (§8, A.5.3). */
  readonly transmitTimestamp: Uint8Array;
}

export type ParsedNtpRequest = { readonly ok: true; readonly request: NtpRequest } | { readonly ok: false; readonly reason: NtpDropReason };

/**
 * Classifies one datagram. Bytes beyond the header (extension fields, a MAC: RFC 5905 §7.5, RFC 7822) are ignored:
 * the reply is unauthenticated, so a client that asked for authentication discards it, and a reply is never
 * longer than its request (no amplification).
 */
export function parseNtpRequest(datagram: Uint8Array): ParsedNtpRequest {
  if (datagram.length < NTP_HEADER_BYTES) return { ok: false, reason: "short" };
  const first = datagram[0]!;
  const mode = first & 0x07;
  const version = (first >> 3) & 0x07;
  // Control and monitor queries first: whatever their version, they are the amplification vector to refuse.
  if (mode === NTP_MODE.control || mode === NTP_MODE.private) return { ok: false, reason: "control" };
  if (version < NTP_MIN_VERSION || version > NTP_MAX_VERSION) return { ok: false, reason: "version" };
  if (mode !== NTP_MODE.client) return { ok: false, reason: "mode" };
  const poll = (datagram[2]! << 24) >> 24; // signed 8-bit
  return { ok: true, request: { version, poll, transmitTimestamp: datagram.slice(40, 48) } };
}

/** What the server says about its clock in every reply (RFC 5905 §7.3 system variables). */
export interface NtpServerState {
  /** LI: 0 while the node would sign, 3 (unsynchronised) while it would not. */
  readonly leap: number;
  /** 1 for a card or GPS reference; a secondary source's stratum + 1 otherwise; 1–15. */
  readonly stratum: number;
  /** The clock's precision, log2 seconds (e.g. -20 ≈ 1 µs), −128…127. */
  readonly precisionLog2: number;
  /** Root delay, ns: the round-trip delay to the primary reference (0 when the card is the reference). */
  readonly rootDelayNs: bigint;
  /** Root dispersion, ns: the rest of the bound (docs/protocol.md §9.8). */
  readonly rootDispersionNs: bigint;
  /**
   * Reference id: a stratum-1 source code of 1–4 ASCII characters ("GPS", "LOCL"), NUL-padded on the wire; or, for
   * stratum ≥ 2, the upstream server's 32-bit id (§7.3: its IPv4 address or a hash of its IPv6 one).
   */
  readonly referenceId: string | number;
  /** When the clock was last checked against its reference, Unix ns; 0n for never (encoded as NTP zero). */
  readonly referenceTimeNs: bigint;
}

/**
 * Unix ns → the 64-bit NTP timestamp (RFC 5905 §6): seconds since 1900 modulo 2^32 (the era is implicit), and the
 * fraction in units of 2^-32 s, truncated (an error below 0.24 ns). Throws RangeError before 1900.
 */
export function encodeNtpTimestamp(unixNs: bigint, out: Uint8Array, offset: number): void {
  const ntpNs = unixNs + NTP_UNIX_EPOCH_OFFSET_SECONDS * NS_PER_SECOND;
  if (ntpNs < 0n) throw new RangeError(`NTP timestamps start in 1900: ${unixNs} ns since the Unix epoch is earlier`);
  const seconds = ntpNs / NS_PER_SECOND;
  const fraction = ((ntpNs % NS_PER_SECOND) << 32n) / NS_PER_SECOND;
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  view.setUint32(offset, Number(seconds % NTP_ERA_SECONDS));
  view.setUint32(offset + 4, Number(fraction));
}

/**
 * The 64-bit NTP timestamp at `offset` → Unix ns, in the era that puts it nearest `pivotUnixNs` (RFC 5905 §6: an
 * NTP timestamp is unambiguous within 68 years of a known time). The fraction is rounded to the nearest ns.
 */
export function decodeNtpTimestamp(bytes: Uint8Array, offset: number, pivotUnixNs: bigint): bigint {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const seconds = BigInt(view.getUint32(offset));
  const fraction = BigInt(view.getUint32(offset + 4));
  const withinEraNs = seconds * NS_PER_SECOND + ((fraction * NS_PER_SECOND + (1n << 31n)) >> 32n);
  const pivotNtpNs = pivotUnixNs + NTP_UNIX_EPOCH_OFFSET_SECONDS * NS_PER_SECOND;
  // The era of the pivot, then one era either side if that lands nearer (floor division also below 1900).
  const pivotEra = pivotNtpNs >= 0n ? pivotNtpNs / NTP_ERA_NS : -((-pivotNtpNs + NTP_ERA_NS - 1n) / NTP_ERA_NS);
  let best = pivotEra * NTP_ERA_NS + withinEraNs;
  for (const candidate of [best - NTP_ERA_NS, best + NTP_ERA_NS]) {
    if (abs(candidate - pivotNtpNs) < abs(best - pivotNtpNs)) best = candidate;
  }
  return best - NTP_UNIX_EPOCH_OFFSET_SECONDS * NS_PER_SECOND;
}

/**
 * ns → NTP short format (16.16 s, RFC 5905 §6), rounded up: the encoded duration is never shorter than `ns`.
 * Saturates at the format's maximum (65535.99998 s) rather than wrap; throws RangeError for a negative duration.
 */
export function ntpShortFromNs(ns: bigint): number {
  if (ns < 0n) throw new RangeError(`an NTP short duration cannot be negative: ${ns} ns`);
  const units = ((ns << 16n) + NS_PER_SECOND - 1n) / NS_PER_SECOND;
  return units > BigInt(UINT32_MAX) ? UINT32_MAX : Number(units);
}

/** NTP short format → ns, exact (rounded up to a whole ns), for tests and clients. */
export function nsFromNtpShort(value: number): bigint {
  return (BigInt(value >>> 0) * NS_PER_SECOND + 0xffffn) >> 16n;
}

/**
 * A reference id or kiss code as its 32-bit wire value: a code is ASCII, left-justified, NUL-padded (§7.3); a number
 * (a stratum ≥ 2 upstream's id) is written big-endian.
 */
export function referenceIdBytes(code: string | number): Uint8Array {
  if (typeof code === "number") {
    if (!Number.isInteger(code) || code < 0 || code > UINT32_MAX) throw new RangeError(`a numeric NTP reference id is a uint32, got ${code}`);
    const bytes = new Uint8Array(4);
    new DataView(bytes.buffer).setUint32(0, code);
    return bytes;
  }
  if (!/^[\x20-\x7e]{1,4}$/.test(code)) throw new RangeError(`an NTP reference id is 1–4 printable ASCII characters, got ${JSON.stringify(code)}`);
  const bytes = new Uint8Array(4);
  for (let index = 0; index < code.length; index += 1) bytes[index] = code.charCodeAt(index);
  return bytes;
}

/** The reference id's printable characters (trailing NULs dropped), for tests and clients. */
export function referenceIdText(bytes: Uint8Array, offset: number): string {
  let text = "";
  for (let index = offset; index < offset + 4; index += 1) {
    const byte = bytes[index]!;
    if (byte === 0) break;
    text += String.fromCharCode(byte);
  }
  return text;
}

/** Checks a server state once, where it is made (node/ntp/source.ts), instead of at every reply. */
export function checkNtpServerState(state: NtpServerState): void {
  const problems: string[] = [];
  if (!Number.isInteger(state.leap) || state.leap < 0 || state.leap > 3) problems.push(`leap ${state.leap} is not 0–3`);
  if (!Number.isInteger(state.stratum) || state.stratum < 1 || state.stratum > NTP_MAX_STRATUM) problems.push(`stratum ${state.stratum} is not 1–${NTP_MAX_STRATUM}`);
  if (!Number.isInteger(state.precisionLog2) || state.precisionLog2 < -128 || state.precisionLog2 > 127) problems.push(`precisionLog2 ${state.precisionLog2} is not a signed byte`);
  if (state.rootDelayNs < 0n) problems.push(`rootDelayNs ${state.rootDelayNs} is negative`);
  if (state.rootDispersionNs < 0n) problems.push(`rootDispersionNs ${state.rootDispersionNs} is negative`);
  if (state.referenceTimeNs < 0n) problems.push(`referenceTimeNs ${state.referenceTimeNs} is negative`);
  try {
    referenceIdBytes(state.referenceId);
  } catch (error) {
    problems.push((error as Error).message);
  }
  if (problems.length > 0) throw new RangeError(`invalid NTP server state: ${problems.join("; ")}`);
}

function writeHeader(out: Uint8Array, leap: number, version: number, stratum: number, poll: number, precisionLog2: number): void {
  out[0] = (leap << 6) | (version << 3) | NTP_MODE.server;
  out[1] = stratum;
  out[2] = poll & 0xff;
  out[3] = precisionLog2 & 0xff;
}

/**
 * The server reply to `request` (RFC 5905 A.5.3 fast_xmit): the state's header fields, origin = the client's
 * transmit timestamp, receive = `receiveNs` (the card clock when the request was read), transmit = `transmitNs`
 * (read just before sending). Expects a state checked by checkNtpServerState. 48 bytes.
 */
export function encodeNtpReply(request: NtpRequest, state: NtpServerState, receiveNs: bigint, transmitNs: bigint): Uint8Array {
  const out = new Uint8Array(NTP_HEADER_BYTES);
  const view = new DataView(out.buffer);
  writeHeader(out, state.leap, request.version, state.stratum, request.poll, state.precisionLog2);
  view.setUint32(4, ntpShortFromNs(state.rootDelayNs));
  view.setUint32(8, ntpShortFromNs(state.rootDispersionNs));
  out.set(referenceIdBytes(state.referenceId), 12);
  if (state.referenceTimeNs > 0n) encodeNtpTimestamp(state.referenceTimeNs, out, 16);
  out.set(request.transmitTimestamp, 24);
  encodeNtpTimestamp(receiveNs, out, 32);
  encodeNtpTimestamp(transmitNs, out, 40);
  return out;
}

/**
 * A Kiss-o'-Death (RFC 5905 §7.4): LI 3, stratum 0, the kiss code as reference id, origin = the client's transmit
 * timestamp (so that the client can match it to its request and an off-path forger cannot). Receive and transmit
 * carry the client's own transmit timestamp too, as ntpd does, so that a rate-limited client learns no time.
 */
export function encodeKissOfDeath(request: NtpRequest, kissCode: "RATE" | "DENY" | "RSTR"): Uint8Array {
  const out = new Uint8Array(NTP_HEADER_BYTES);
  writeHeader(out, NTP_LEAP.unsynchronised, request.version, 0, request.poll, 0);
  out.set(referenceIdBytes(kissCode), 12);
  out.set(request.transmitTimestamp, 24);
  out.set(request.transmitTimestamp, 32);
  out.set(request.transmitTimestamp, 40);
  return out;
}

/** The fields of a reply a client (the tests, the benchmark) reads; timestamps decoded near `pivotUnixNs`. */
export interface DecodedNtpReply {
  leap: number;
  version: number;
  mode: number;
  stratum: number;
  poll: number;
  precisionLog2: number;
  rootDelayNs: bigint;
  rootDispersionNs: bigint;
  referenceId: string;
  /** null for the NTP zero timestamp. */
  referenceTimeNs: bigint | null;
  originTimestamp: Uint8Array;
  receiveNs: bigint;
  transmitNs: bigint;
}

/** Decodes a server reply (any length ≥ 48; for clients: the server itself never decodes replies). */
export function decodeNtpReply(datagram: Uint8Array, pivotUnixNs: bigint): DecodedNtpReply {
  if (datagram.length < NTP_HEADER_BYTES) throw new RangeError(`an NTP reply is at least ${NTP_HEADER_BYTES} bytes, got ${datagram.length}`);
  const view = new DataView(datagram.buffer, datagram.byteOffset, datagram.byteLength);
  const first = datagram[0]!;
  const referenceIsZero = view.getUint32(16) === 0 && view.getUint32(20) === 0;
  return {
    leap: first >> 6,
    version: (first >> 3) & 0x07,
    mode: first & 0x07,
    stratum: datagram[1]!,
    poll: (datagram[2]! << 24) >> 24,
    precisionLog2: (datagram[3]! << 24) >> 24,
    rootDelayNs: nsFromNtpShort(view.getUint32(4)),
    rootDispersionNs: nsFromNtpShort(view.getUint32(8)),
    referenceId: referenceIdText(datagram, 12),
    referenceTimeNs: referenceIsZero ? null : decodeNtpTimestamp(datagram, 16, pivotUnixNs),
    originTimestamp: datagram.slice(24, 32),
    receiveNs: decodeNtpTimestamp(datagram, 32, pivotUnixNs),
    transmitNs: decodeNtpTimestamp(datagram, 40, pivotUnixNs),
  };
}

/** A client request (mode 3) with `transmitNs` as its transmit timestamp: for tests, the benchmark and clients. */
export function encodeNtpRequest(transmitNs: bigint, version = NTP_MAX_VERSION, poll = 6): Uint8Array {
  const out = new Uint8Array(NTP_HEADER_BYTES);
  out[0] = (version << 3) | NTP_MODE.client;
  out[2] = poll & 0xff;
  encodeNtpTimestamp(transmitNs, out, 40);
  return out;
}

function abs(value: bigint): bigint {
  return value < 0n ? -value : value;
}
