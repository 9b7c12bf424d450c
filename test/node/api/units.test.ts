import { expect } from "chai";
import * as grpc from "@grpc/grpc-js";
import { AtsError, AuthError, NotFoundError, ProtocolError, RateLimitError, UnavailableError, ValidationError } from "../../../protocol/errors";
import { hashApiKey } from "../../../lib/apiKeys";
import { privateKeyToAccount } from "viem/accounts";
import { ApiKeyAuth, ClientSignatureVerifier } from "../../../node/api/auth";
import { clientRequestMessage, type ClientRequestFields } from "../../../wire/auth";
import { INTERNAL_ERROR_MESSAGE, fromGrpcStatus, fromHttpStatus, toGrpcError, toHttpError, toJsonRpcError } from "../../../wire/errorMapping";
import { RateLimiter } from "../../../lib/rateLimit";
import { expectRejects } from "../core/helpers";

describe("node/api/rateLimit RateLimiter", function () {
  it("allows `burst` requests at once, then refills at ratePerSecond", function () {
    let nowMs = 0;
    const limiter = new RateLimiter({ ratePerSecond: 10, nowMs: () => nowMs });
    for (let i = 0; i < 10; i += 1) expect(limiter.tryTake("a")).to.equal(true);
    expect(limiter.tryTake("a")).to.equal(false);
    expect(limiter.tryTake("b")).to.equal(true); // per client
    nowMs += 100; // one token
    expect(limiter.tryTake("a")).to.equal(true);
    expect(limiter.tryTake("a")).to.equal(false);
  });

  it("throws RateLimitError with the fixed message", function () {
    const limiter = new RateLimiter({ ratePerSecond: 1, nowMs: () => 0 });
    limiter.take("a");
    expect(() => limiter.take("a")).to.throw(RateLimitError, "Rate limit exceeded");
  });

  it("keeps memory bounded: evicts the least recently used bucket and sweeps full ones", function () {
    let nowMs = 0;
    const limiter = new RateLimiter({ ratePerSecond: 2, maxClients: 3, nowMs: () => nowMs });
    for (const key of ["a", "b", "c", "d"]) limiter.tryTake(key);
    expect(limiter.size).to.equal(3);
    nowMs += 10_000;
    expect(limiter.sweepIdle()).to.equal(3);
    expect(limiter.size).to.equal(0);
  });

  it("is off at 0", function () {
    const limiter = new RateLimiter({ ratePerSecond: 0 });
    for (let i = 0; i < 1_000; i += 1) expect(limiter.tryTake("a")).to.equal(true);
    expect(limiter.size).to.equal(0);
  });
});

describe("node/api/auth", function () {
  it("ApiKeyAuth accepts configured keys only, and is off without keys", function () {
    const auth = new ApiKeyAuth([hashApiKey("key-number-one-0123")]);
    expect(auth.required).to.equal(true);
    expect(auth.authenticate("key-number-one-0123")).to.match(/^key:[0-9a-f]{16}$/);
    expect(() => auth.authenticate(undefined)).to.throw(AuthError, /Missing API key/);
    expect(() => auth.authenticate("key-number-two-0123")).to.throw(AuthError, "Invalid API key");
    expect(new ApiKeyAuth([]).authenticate(undefined)).to.equal(null);
  });

  it("clientRequestMessage is the documented text", function () {
    expect(
      clientRequestMessage({ requestId: "r-1", nonce: "n-1", type: "CURRENT_TIME", atNs: "", clientId: "client-a", issuedAtMs: "1795386819572" }),
    ).to.equal("ATS/1 REQ|r-1|n-1|CURRENT_TIME||client-a|1795386819572");
  });
});

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

describe("node/api/auth ClientSignatureVerifier nonces", function () {
  const account = privateKeyToAccount(`0x${"11".repeat(32)}`);
  const other = privateKeyToAccount(`0x${"22".repeat(32)}`);
  const WINDOW_MS = 600_000;
  let nowMs = 1_800_000_000_000;

  function verifier(maxNoncesPerClient: number) {
    return new ClientSignatureVerifier({
      clientAddresses: { a: account.address, b: other.address },
      nonceWindowMs: WINDOW_MS,
      maxNoncesPerClient,
      nowMs: () => nowMs,
    });
  }

  async function signed(clientId: "a" | "b", nonce: string, issuedAtMs = nowMs): Promise<[ClientRequestFields, Uint8Array]> {
    const fields = { requestId: "r", nonce, type: "CURRENT_TIME", atNs: "", clientId, issuedAtMs: String(issuedAtMs) };
    const signature = await (clientId === "a" ? account : other).signMessage({ message: clientRequestMessage(fields) });
    return [fields, Buffer.from(signature.slice(2), "hex")];
  }

  it("accepts a nonce once while its issued_at keeps the request fresh, then the request is stale anyway", async function () {
    const v = verifier(10);
    const request = await signed("a", "n-1");
    await v.check(...request);
    nowMs += WINDOW_MS / 2; // the last moment issued_at is still fresh: the nonce must still be remembered
    await expectRejects(v.check(...request), AuthError, "Nonce already used");
    nowMs += 1;
    await expectRejects(v.check(...request), AuthError, "outside the replay window");
  });

  it("refuses a flooding client with 'Rate limit exceeded' instead of forgetting a live nonce; others unaffected", async function () {
    const v = verifier(3);
    const first = await signed("a", "n-1");
    await v.check(...first);
    await v.check(...(await signed("a", "n-2")));
    await v.check(...(await signed("a", "n-3")));
    await expectRejects(v.check(...(await signed("a", "n-4"))), RateLimitError, "Rate limit exceeded");
    await expectRejects(v.check(...first), AuthError, "Nonce already used"); // still remembered: no replay
    await v.check(...(await signed("b", "n-1"))); // another client's nonces are its own
    // Once the first nonces expire (issued_at out of the window), the client has room again.
    nowMs += WINDOW_MS / 2 + 1;
    await v.check(...(await signed("a", "n-5")));
  });
});
