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
 */
import { errorCodes } from "fastify";
import { ValidationError } from "../../protocol/errors";
import { parseJsonLossless } from "../../protocol/json";

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

/** The value of a raw JSON body: strict UTF-8 without BOM, lossless numbers, bounded nesting. Errors name "body". */
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
  return parseJsonLossless(text, "body");
}
