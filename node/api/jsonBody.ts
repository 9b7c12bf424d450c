/**
 * REST request bodies: `application/json` in UTF-8, decoded strictly, then parsed losslessly and depth-bounded
 * (protocol/json.ts parseJsonLossless). Every refusal names the problem (400 / 415 through errorMapping.ts).
 *
 * Why strict: decoding with Buffer#toString("utf8") (what fastify's `parseAs: "string"` does) silently replaces
 * invalid bytes with U+FFFD, so a mangled body was accepted and stored (a schedule's callback with a replacement
 * character in it). And the charset parameter was ignored, so UTF-16 text was read as UTF-8. JSON exchanged
 * between systems is UTF-8 (RFC 8259 §8.1): any other declared charset is refused with 415, not guessed at.
 *
 * A UTF-8 byte order mark is refused too (400): RFC 8259 forbids sending one and only allows a parser to ignore
 * it; refusing tells the client its encoder is off instead of accepting bytes the next JSON reader may not.
 *
 * Detail: docs/protocol.md §9.2.
 */
import { errorCodes } from "fastify";
import { LosslessNumber } from "lossless-json";
import { ValidationError } from "../../protocol/errors";
import { parseJsonLossless } from "../../protocol/json";

/*
 * Refused as well: a lone UTF-16 surrogate escape (`"\ud800"`, a high one not followed by a low one, or a low one alone) in any
 * string, key or value (400, naming the field and the character): the bytes are valid UTF-8, but the parsed string
 * holds a code unit no UTF-8 can encode, so SQLite stored it as U+FFFD (RFC 8259 §8.2: such strings make readers
 * behave unpredictably). The same bytes strict decoding refuses as raw UTF-8 (ED A0 80) are refused as an escape.
 */
/** `fatal`: invalid bytes throw instead of becoming U+FFFD. `ignoreBOM`: a BOM is kept (and refused below). */
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);
/** Every `charset` parameter of a content type: RFC 9110 §8.3.2, case-insensitive name and value, optional quotes. */
const CHARSET_PARAMETER = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/giu;
/** How much of a refused charset the 415 message repeats (the header is the client's text). */
const MAX_ECHOED_CHARSET_CHARS = 32;

/**
 * Accepts a JSON content type without a charset or with charset=utf-8; throws fastify's own 415 error for any
 * other charset, so errorMapping.ts answers it like every other unsupported media type.
 */
export function checkJsonCharset(contentType: string | undefined): void {
  for (const match of (contentType ?? "").matchAll(CHARSET_PARAMETER)) {
    const charset = match[1] ?? match[2] ?? "";
    if (charset.toLowerCase() === "utf-8") continue;
    const error = new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE();
    error.message = `Unsupported Media Type: charset "${charset.slice(0, MAX_ECHOED_CHARSET_CHARS)}" (JSON bodies are UTF-8: send no charset or charset=utf-8)`;
    throw error;
  }
}

/** A surrogate escape (`\uD800`–`\uDFFF`, any case) in JSON text: without one, no parsed string can hold a lone surrogate. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/u;
/** The first lone surrogate of a string (code units, hence no `u` flag): a high one without a low one after it, or a low one without a high one before it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** Keys named as `.key` in a field path; any other as `["…"]`, at most this many characters of it. */
const PLAIN_KEY = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/u;
const MAX_ECHOED_KEY_CHARS = 32;
const SURROGATE_PAIR_HINT = "write a character outside the Basic Multilingual Plane as a surrogate pair, high then low (RFC 8259 §7, §8.2)";

function loneSurrogateIn(text: string): { index: number; escape: string } | null {
  const match = LONE_SURROGATE.exec(text);
  if (match === null) return null;
  return { index: match.index, escape: `\\u${text.charCodeAt(match.index).toString(16)}` };
}

function keyPath(path: string, key: string): string {
  return PLAIN_KEY.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key.slice(0, MAX_ECHOED_KEY_CHARS) + (key.length > MAX_ECHOED_KEY_CHARS ? "…" : ""))}]`;
}

/**
 * Throws a ValidationError naming the first string (a key: its object) of a parsed JSON value that holds a lone
 * UTF-16 surrogate, and where in it. Recursion is bounded by the parser's nesting bound (32 levels).
 */
export function rejectLoneSurrogates(value: unknown, path: string): void {
  if (typeof value === "string") {
    const found = loneSurrogateIn(value);
    if (found !== null) {
      throw new ValidationError(path, `contains a lone UTF-16 surrogate (${found.escape} at character ${found.index}); ${SURROGATE_PAIR_HINT}`, found);
    }
  } else if (Array.isArray(value)) {
    value.forEach((item, index) => rejectLoneSurrogates(item, `${path}[${index}]`));
  } else if (typeof value === "object" && value !== null && !(value instanceof LosslessNumber)) {
    for (const [key, item] of Object.entries(value)) {
      const found = loneSurrogateIn(key);
      if (found !== null) {
        throw new ValidationError(path, `a key contains a lone UTF-16 surrogate (${found.escape} at character ${found.index}); ${SURROGATE_PAIR_HINT}`, found);
      }
      rejectLoneSurrogates(item, keyPath(path, key));
    }
  }
}

/**
 * The value of a raw JSON body: strict UTF-8 without BOM, lossless numbers, bounded nesting, no lone surrogate.
 * Errors name "body" (a lone surrogate: its field, `body.callback`).
 */
export function parseJsonBody(body: Buffer): unknown {
  if (body.subarray(0, UTF8_BOM.length).equals(UTF8_BOM)) {
    throw new ValidationError("body", "must not start with a byte order mark (send UTF-8 JSON without one, RFC 8259 §8.1)");
  }
  let text: string;
  try {
    text = STRICT_UTF8.decode(body);
  } catch (cause) {
    throw new ValidationError("body", "is not valid UTF-8", {}, { cause });
  }
  const value = parseJsonLossless(text, "body");
  // Only an escape can make a lone surrogate (the text itself is strict UTF-8): most bodies skip the walk.
  if (SURROGATE_ESCAPE.test(text)) rejectLoneSurrogates(value, "body");
  return value;
}
