/**
 * What a schedule request must be (docs/protocol.md §9.2, §9.7): executeAt a uint128 of ns inside the node's window,
 * the callback an http(s) URL without credentials whose host the SSRF guard admits (callbackGuard.ts). Pure; each
 * refusal is a ValidationError naming the field.
 */
import { UINT128_MAX } from "../../protocol/constants";
import { ValidationError } from "../../protocol/errors";
import { admitCallbackHost } from "./callbackGuard";

const DECIMAL_NS = /^(0|[1-9][0-9]{0,38})$/;
const MAX_CALLBACK_URL_LENGTH = 2_048;

/** Parses an untrusted executeAt: a decimal string of ns (or a bigint), uint128. Throws ValidationError. */
export function parseExecuteAt(value: unknown, field = "executeAt"): bigint {
  let parsed: bigint;
  if (typeof value === "bigint") parsed = value;
  else if (typeof value === "string" && DECIMAL_NS.test(value)) parsed = BigInt(value);
  else throw new ValidationError(field, "must be a decimal string of nanoseconds since the Unix epoch", { type: typeof value });
  if (parsed < 0n || parsed > UINT128_MAX) throw new ValidationError(field, "must be a uint128 of nanoseconds", {});
  return parsed;
}

/**
 * Validates a callback URL against the SSRF guard and returns it normalised (WHATWG URL serialisation).
 * Throws ValidationError naming the problem.
 */
export function validateCallbackUrl(value: unknown, allowedHosts: readonly string[], field = "callback"): string {
  if (typeof value !== "string" || value.length === 0) throw new ValidationError(field, "must be a URL string", {});
  if (value.length > MAX_CALLBACK_URL_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_CALLBACK_URL_LENGTH} characters`, { length: value.length });
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValidationError(field, "is not a valid absolute URL", {});
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ValidationError(field, "must use http or https", { protocol: url.protocol });
  }
  if (url.username !== "" || url.password !== "") throw new ValidationError(field, "must not carry credentials", {});
  const host = url.hostname.toLowerCase();
  // Addresses are checked at delivery (they may change until then); here only the host itself.
  if (admitCallbackHost(host, allowedHosts) === null) {
    throw new ValidationError(field, `host ${host} is not allowed (loopback only unless scheduleAllowedCallbackHosts lists it)`, { host });
  }
  return url.toString();
}

export interface ScheduleWindow {
  nowNs: bigint;
  /** How far ahead executeAt may be, ns. */
  maxHorizonNs: bigint;
  /** How far behind now executeAt may be, ns. */
  maxPastNs: bigint;
}

/** Checks executeAt against the window; throws ValidationError. */
export function validateExecuteAt(executeAtNs: unknown, window: ScheduleWindow, field = "executeAt"): bigint {
  const value = parseExecuteAt(executeAtNs, field);
  if (value + window.maxPastNs < window.nowNs) {
    throw new ValidationError(field, `is more than ${window.maxPastNs} ns in the past`, { nowNs: window.nowNs.toString() });
  }
  if (value > window.nowNs + window.maxHorizonNs) {
    throw new ValidationError(field, `is more than ${window.maxHorizonNs} ns in the future`, { nowNs: window.nowNs.toString() });
  }
  return value;
}
