/**
 * gpsd's JSON reports (gpsd_json(5)) parsed, with no I/O: the gpsd client (gpsdClient.ts) feeds each line it reads
 * from gpsd's socket here; tests feed recorded lines. Only what a GPS reference needs (docs/protocol.md §9.1) is
 * kept: the fix mode (TPV), the satellites used (SKY) and the PPS edge against the host clock (PPS).
 *
 * Every object is checked against a schema before any field is read: gpsd is another process, and a line that is
 * not what the schema says (truncated by a reconnect, a gpsd version that changed a field) is reported as
 * malformed with the reason, for the client to count and drop. Classes the node does not use (VERSION, DEVICES,
 * WATCH, DEVICE, TOFF, GST, ATT, ...) are "ignored", not malformed: gpsd sends them to every watcher.
 */
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";

/**
 * The longest line accepted, bytes. gpsd bounds its own JSON reports at GPS_JSON_RESPONSE_MAX (4096 bytes in gpsd
 * 3.22); a SKY report listing many satellites is the longest. Four times that leaves room for newer gpsd versions
 * while a peer that never sends a newline cannot grow the client's buffer without bound.
 */
export const MAX_GPSD_LINE_BYTES = 16_384;

/** The most satellites a GPS reference may report (protocol/json.ts parseGpsReference: 0..64). */
export const MAX_REPORTED_SATELLITES = 64;

/** gpsd's TPV mode: 0 unknown (no data yet), 1 no fix, 2 2-D fix, 3 3-D fix. */
export type GpsdFixMode = 0 | 1 | 2 | 3;

/** The command that asks gpsd to stream JSON reports, PPS included, to this connection (gpsd_json(5) ?WATCH). */
export const GPSD_WATCH_COMMAND = '?WATCH={"enable":true,"json":true,"pps":true};\n';

// Only the fields the node reads are declared; gpsd's others are allowed (additionalProperties is not false)
// because gpsd adds fields across versions and a report must not become malformed for that.
const TpvSchema = Type.Object({
  class: Type.Literal("TPV"),
  device: Type.Optional(Type.String({ maxLength: 256 })),
  mode: Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal(2), Type.Literal(3)]),
  /** ISO 8601 UTC of the fix; absent while the receiver has no time. Reported, never used for the signed moment. */
  time: Type.Optional(Type.String({ maxLength: 64 })),
});

const SkySatelliteSchema = Type.Object({ used: Type.Boolean() });

const SkySchema = Type.Object({
  class: Type.Literal("SKY"),
  device: Type.Optional(Type.String({ maxLength: 256 })),
  /** Satellites used in the solution (gpsd ≥ 3.20); older versions only mark each satellite's `used`. */
  uSat: Type.Optional(Type.Integer({ minimum: 0, maximum: 1024 })),
  nSat: Type.Optional(Type.Integer({ minimum: 0, maximum: 1024 })),
  satellites: Type.Optional(Type.Array(SkySatelliteSchema, { maxItems: 1024 })),
});

// PPS: the edge as gpsd timed it on the host clock (clock_*) and the GPS second it marks (real_*).
const PpsSchema = Type.Object({
  class: Type.Literal("PPS"),
  device: Type.Optional(Type.String({ maxLength: 256 })),
  real_sec: Type.Integer({ minimum: 0 }),
  real_nsec: Type.Integer({ minimum: 0, maximum: 999_999_999 }),
  clock_sec: Type.Integer({ minimum: 0 }),
  clock_nsec: Type.Integer({ minimum: 0, maximum: 999_999_999 }),
});

const ClassOnlySchema = Type.Object({ class: Type.String({ minLength: 1, maxLength: 32 }) });

/** One report the node uses, or a class it ignores. */
export type GpsdReport =
  | { readonly kind: "tpv"; readonly mode: GpsdFixMode; readonly device: string | null; readonly time: string | null }
  /** satellitesUsed: uSat, or the satellites marked used; satellitesVisible: nSat, or the satellites listed. */
  | { readonly kind: "sky"; readonly satellitesUsed: number; readonly satellitesVisible: number; readonly device: string | null }
  /** offsetNs: the edge on the host clock minus the GPS second it marks (clock − real), |offsetNs| < 1 s. */
  | { readonly kind: "pps"; readonly offsetNs: number; readonly device: string | null }
  | { readonly kind: "ignored"; readonly class: string };

export type GpsdLineResult = { readonly ok: true; readonly report: GpsdReport } | { readonly ok: false; readonly error: string };

/** The first schema error, as "path: message (got value)", for the malformed-line log. */
function schemaError(schema: TSchema, value: unknown): string {
  const first = Value.Errors(schema, value).First();
  if (first === undefined) return "does not match the schema";
  const got = JSON.stringify(first.value);
  return `${first.path === "" ? "/" : first.path}: ${first.message}${got === undefined ? "" : ` (got ${got.length > 60 ? `${got.slice(0, 60)}…` : got})`}`;
}

function checked<T extends TSchema>(schema: T, value: unknown, what: string): { ok: true; value: Static<T> } | { ok: false; error: string } {
  if (Value.Check(schema, value)) return { ok: true, value };
  return { ok: false, error: `${what}: ${schemaError(schema, value)}` };
}

const NS_PER_S = 1_000_000_000;

/**
 * Parses one line gpsd sent (without its newline). Never throws: a line that is too long, not JSON, not an object
 * with a class, or a TPV/SKY/PPS object that does not match its schema gives { ok: false, error } with the evidence.
 */
export function parseGpsdLine(line: string): GpsdLineResult {
  // Bytes, not characters: the bound is on what the socket delivered (UTF-8).
  const bytes = Buffer.byteLength(line, "utf8");
  if (bytes > MAX_GPSD_LINE_BYTES) return { ok: false, error: `line of ${bytes} bytes exceeds ${MAX_GPSD_LINE_BYTES}` };
  const text = line.trim();
  if (text === "") return { ok: false, error: "empty line" };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `not JSON (${error instanceof Error ? error.message : String(error)}): ${text.slice(0, 60)}` };
  }
  const head = checked(ClassOnlySchema, value, "report");
  if (!head.ok) return head;
  switch (head.value.class) {
    case "TPV": {
      const tpv = checked(TpvSchema, value, "TPV");
      if (!tpv.ok) return tpv;
      return { ok: true, report: { kind: "tpv", mode: tpv.value.mode, device: tpv.value.device ?? null, time: tpv.value.time ?? null } };
    }
    case "SKY": {
      const sky = checked(SkySchema, value, "SKY");
      if (!sky.ok) return sky;
      const listed = sky.value.satellites ?? [];
      const satellitesUsed = sky.value.uSat ?? listed.filter((satellite) => satellite.used).length;
      const satellitesVisible = sky.value.nSat ?? listed.length;
      return { ok: true, report: { kind: "sky", satellitesUsed, satellitesVisible, device: sky.value.device ?? null } };
    }
    case "PPS": {
      const pps = checked(PpsSchema, value, "PPS");
      if (!pps.ok) return pps;
      const { real_sec: realS, real_nsec: realNs, clock_sec: clockS, clock_nsec: clockNs } = pps.value;
      // Seconds differ by at most one for an edge the host clock timed within a second of the GPS second.
      const offsetNs = (clockS - realS) * NS_PER_S + (clockNs - realNs);
      if (!Number.isSafeInteger(offsetNs) || Math.abs(offsetNs) >= NS_PER_S) {
        return { ok: false, error: `PPS: edge ${clockS}.${String(clockNs).padStart(9, "0")} is not within 1 s of GPS second ${realS}.${String(realNs).padStart(9, "0")}` };
      }
      return { ok: true, report: { kind: "pps", offsetNs, device: pps.value.device ?? null } };
    }
    default:
      return { ok: true, report: { kind: "ignored", class: head.value.class } };
  }
}
