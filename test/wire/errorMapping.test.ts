import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { AtsError, AuthError, NotFoundError, ProtocolError, RateLimitError, UnavailableError, ValidationError } from "../../protocol/errors";
import { INTERNAL_ERROR_MESSAGE, fromGrpcStatus, fromHttpStatus, toGrpcError, toHttpError, toJsonRpcError } from "../../wire/errorMapping";

describe("wire/errorMapping", function () {
  it("maps every error class to one HTTP status, gRPC status and JSON-RPC code", function () {
    const cases: Array<[AtsError, number, grpc.status, number]> = [
      [new ValidationError("f", "bad"), 400, grpc.status.INVALID_ARGUMENT, -32602],
      [new ProtocolError("bad bytes"), 400, grpc.status.INVALID_ARGUMENT, -32602],
      [new NotFoundError("none"), 404, grpc.status.NOT_FOUND, -32004],
      [new AuthError("who"), 401, grpc.status.UNAUTHENTICATED, -32001],
      [new RateLimitError(), 429, grpc.status.RESOURCE_EXHAUSTED, -32005],
      [new UnavailableError("tampered"), 503, grpc.status.UNAVAILABLE, -32003],
    ];
    for (const [error, httpStatus, grpcStatus, jsonRpcCode] of cases) {
      expect(toHttpError(error)).to.include({ statusCode: httpStatus, message: error.message, serverFault: false });
      expect(toGrpcError(error)).to.include({ code: grpcStatus, details: error.message });
      expect(toJsonRpcError(error)).to.include({ code: jsonRpcCode, message: error.message });
      // Back on the client side, a ProtocolError arrives as a ValidationError (both are bad input).
      const expected = error instanceof ProtocolError ? ValidationError : error.constructor;
      expect(fromHttpStatus(httpStatus, "m")).to.be.instanceOf(expected);
      expect(fromGrpcStatus(grpcStatus, "m")).to.be.instanceOf(expected);
    }
    expect(toJsonRpcError(new RateLimitError()).message).to.equal("Rate limit exceeded");
  });

  it("leaks nothing of unexpected errors", function () {
    const secret = new Error("ENOENT /home/node/keys/card.key.pem");
    expect(toHttpError(secret)).to.deep.equal({ statusCode: 500, error: "Internal Server Error", message: INTERNAL_ERROR_MESSAGE, serverFault: true });
    expect(toGrpcError(secret)).to.deep.equal({ code: grpc.status.INTERNAL, details: INTERNAL_ERROR_MESSAGE, serverFault: true });
    expect(toJsonRpcError(secret)).to.deep.equal({ code: -32603, message: INTERNAL_ERROR_MESSAGE, serverFault: true });
  });
});
