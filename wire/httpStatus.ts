/**
 * HTTP error answers back to the error classes of protocol/errors.ts: the client side of wire/errorMapping.ts
 * (its `toHttpError` is the inverse), in a module of its own because errorMapping.ts loads @grpc/grpc-js for the
 * gRPC status table, and the browser client (client/browser.ts) may load nothing that needs Node.
 */
import { AtsError, AuthError, NotFoundError, RateLimitError, UnavailableError, ValidationError } from "../protocol/errors";

/** The error a client library raises for an HTTP error answer (the inverse of errorMapping.ts toHttpError). */
export function fromHttpStatus(statusCode: number, message: string): AtsError {
  const details = { statusCode };
  switch (statusCode) {
    case 400:
    case 413:
    case 415:
      return new ValidationError("request", message, details);
    case 401:
      return new AuthError(message, details);
    case 404:
      return new NotFoundError(message, details);
    case 429:
      return new RateLimitError(details, { message });
    case 503:
      return new UnavailableError(message, details);
    default:
      return new AtsError("INTERNAL", message, details);
  }
}
