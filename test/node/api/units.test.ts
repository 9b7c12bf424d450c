import { expect } from "chai";
import { AuthError, RateLimitError } from "../../../protocol/errors";
import { hashApiKey } from "../../../lib/apiKeys";
import { privateKeyToAccount } from "viem/accounts";
import { ApiKeyAuth, ClientSignatureVerifier } from "../../../node/api/auth";
import { clientRequestMessage, type ClientRequestFields } from "../../../wire/auth";
import { expectRejects } from "../core/helpers";

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
