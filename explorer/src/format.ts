/**
 * How the explorer writes time: nanoseconds since the Unix epoch stay decimal strings (lossless: they pass 2^53, so
 * never through a JavaScript number) and read as UTC with all nine fraction digits. BigInt does the split, so
 * every digit shown is the node's.
 */

const NS_PER_S = 1_000_000_000n;
const DECIMAL = /^-?(0|[1-9][0-9]*)$/;

/** A decimal ns string as a bigint; throws on anything else (the gateway never sends another shape). */
export function parseNs(value: string): bigint {
  if (!DECIMAL.test(value)) throw new Error(`not a decimal nanosecond value: ${JSON.stringify(value).slice(0, 60)}`);
  return BigInt(value);
}

/** `1795590328759123456` → `2026-11-25 11:05:28.759123456 UTC` (ns since the epoch, UTC, nine fraction digits). */
export function utcWithNs(ns: string | bigint): string {
  const value = typeof ns === "bigint" ? ns : parseNs(ns);
  if (value < 0n) throw new Error(`a moment before 1970 is not a timestamp here: ${value}`);
  const seconds = value / NS_PER_S;
  const fraction = (value % NS_PER_S).toString().padStart(9, "0");
  const iso = new Date(Number(seconds) * 1000).toISOString(); // whole seconds: exact as a double up to year 275760
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}.${fraction} UTC`;
}

/** A signed ns quantity in a readable unit: `-1234` → `-1.234 µs`; exact digits stay in the title. */
export function durationNs(ns: string | bigint): string {
  const value = typeof ns === "bigint" ? ns : parseNs(ns);
  const sign = value < 0n ? "-" : "";
  const abs = value < 0n ? -value : value;
  const units: [bigint, string][] = [
    [NS_PER_S, "s"],
    [1_000_000n, "ms"],
    [1_000n, "µs"],
  ];
  for (const [size, unit] of units) {
    if (abs >= size) {
      const whole = abs / size;
      const rest = ((abs % size) * 1000n) / size;
      return `${sign}${whole}.${rest.toString().padStart(3, "0")} ${unit}`;
    }
  }
  return `${sign}${abs} ns`;
}

/** `0x1234…abcd` for a long hex value (the full value goes in the element's title). */
export function shortHex(hex: string, keep = 6): string {
  return hex.length <= 2 + 2 * keep ? hex : `${hex.slice(0, 2 + keep)}…${hex.slice(-keep)}`;
}
