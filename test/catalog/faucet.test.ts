/**
 * The faucet's rules (catalog/faucet.ts), with messages signed by a viem wallet client as a user signs them and an
 * injected clock; the transfer is recorded, not sent (test/catalog/catalog.test.ts sends real ones on a chain).
 */
import { expect } from "chai";
import { createWalletClient, custom, verifyMessage, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createSiweMessage } from "viem/siwe";
import { AuthError, RateLimitError, ValidationError } from "../../protocol/errors";
import { Faucet, FAUCET_STATEMENT, type FaucetOptions } from "../../catalog/faucet";

const DOMAIN = "127.0.0.1:8095";
const URI = "http://127.0.0.1:8095/faucet";
const CHAIN_ID = 31_337;
const START_MS = Date.parse("2026-11-28T06:00:00Z");

describe("catalog: faucet (Sign-In with Ethereum)", () => {
  let nowMs: number;
  let sent: { to: Address; valueWei: bigint }[];
  let faucet: Faucet;
  const user = privateKeyToAccount(generatePrivateKey());
  // A wallet client as a dApp holds one: signMessage is what a browser wallet's personal_sign does.
  const wallet = createWalletClient({ account: user, transport: custom({ request: async () => { throw new Error("no RPC needed to sign"); } }) });

  function makeFaucet(overrides: Partial<FaucetOptions> = {}): Faucet {
    return new Faucet({
      chainId: CHAIN_ID,
      domain: DOMAIN,
      uri: URI,
      amountWei: 10n ** 18n,
      addressIntervalMs: 60_000,
      claimsPerClientPerHour: 100,
      nonceTtlMs: 300_000,
      maxOutstandingNonces: 8,
      verifySignature: (address, message, signature) => verifyMessage({ address, message, signature }),
      send: async (to, valueWei) => {
        sent.push({ to, valueWei });
        return `0x${"ab".repeat(32)}` as Hex;
      },
      nowMs: () => nowMs,
      ...overrides,
    });
  }

  beforeEach(() => {
    nowMs = START_MS;
    sent = [];
    faucet = makeFaucet();
  });

  /** A nonce from the faucet, and the message the user's wallet signs for it (fields overridable). */
  async function signIn(fields: Partial<Parameters<typeof createSiweMessage>[0]> = {}, signer = wallet) {
    const issued = faucet.issueNonce("client-a");
    const message = createSiweMessage({
      domain: issued.domain,
      address: signer.account.address,
      statement: issued.statement,
      uri: issued.uri,
      version: "1",
      chainId: issued.chainId,
      nonce: issued.nonce,
      issuedAt: new Date(nowMs),
      expirationTime: new Date(issued.expiresAt),
      ...fields,
    });
    return { message, signature: await signer.signMessage({ message }) };
  }

  async function refusal(promise: Promise<unknown>): Promise<Error> {
    return promise.then(
      () => expect.fail("claim accepted, a refusal was expected"),
      (error: unknown) => error as Error,
    );
  }

  it("funds the address a wallet proved control of, once per nonce, and says it authorizes nothing else", async () => {
    const { message, signature } = await signIn();
    expect(message).to.contain(FAUCET_STATEMENT).and.to.contain(`Chain ID: ${CHAIN_ID}`);
    const grant = await faucet.claim("client-a", message, signature);
    expect(grant).to.deep.equal({ address: user.address, amountWei: "1000000000000000000", txHash: `0x${"ab".repeat(32)}` });
    expect(sent).to.deep.equal([{ to: user.address, valueWei: 10n ** 18n }]);

    const replay = await refusal(faucet.claim("client-b", message, signature));
    expect(replay).to.be.instanceOf(AuthError);
    expect(replay.message).to.contain("already used");
    expect(sent).to.have.length(1);
  });

  it("refuses a message for another chain, domain or URI, or with another statement (400, naming the field)", async () => {
    for (const [fields, field] of [
      [{ chainId: 1 }, "message.chainId"],
      [{ domain: "evil.example" }, "message.domain"],
      [{ uri: "http://evil.example/faucet" }, "message.uri"],
      [{ statement: "Sign in" }, "message.statement"],
      [{ expirationTime: undefined }, "message.expirationTime"],
    ] as const) {
      const { message, signature } = await signIn(fields);
      const error = await refusal(faucet.claim("client-a", message, signature));
      expect(error, field).to.be.instanceOf(ValidationError);
      expect((error as ValidationError).field, field).to.equal(field);
    }
    const other = await refusal(faucet.claim("client-a", (await signIn({ chainId: 1 })).message, "0x1234"));
    expect(other).to.be.instanceOf(ValidationError);
    expect(sent).to.deep.equal([]);
  });

  it("refuses an expired nonce, a nonce it never issued, an expired message and a message valid only later", async () => {
    const late = await signIn();
    nowMs += 300_000;
    expect((await refusal(faucet.claim("client-a", late.message, late.signature))).message).to.match(/^the nonce expired at /);

    const forged = await signIn({ nonce: "0123456789abcdef0123456789abcdef" });
    expect((await refusal(faucet.claim("client-a", forged.message, forged.signature))).message).to.contain("not issued by this faucet");

    const shortLived = await signIn({ expirationTime: new Date(nowMs + 1_000) });
    nowMs += 1_000;
    expect((await refusal(faucet.claim("client-a", shortLived.message, shortLived.signature))).message).to.match(/^the message expired at /);

    const early = await signIn({ notBefore: new Date(nowMs + 60_000) });
    expect((await refusal(faucet.claim("client-a", early.message, early.signature))).message).to.match(/^the message is not valid before /);
    expect(sent).to.deep.equal([]);
  });

  it("refuses a signature by another key without spending the holder's nonce, and a high-S twin", async () => {
    const { message, signature } = await signIn();
    const intruder = createWalletClient({ account: privateKeyToAccount(generatePrivateKey()), transport: custom({ request: async () => undefined }) });
    const forged = await intruder.signMessage({ message });
    const error = await refusal(faucet.claim("client-a", message, forged));
    expect(error).to.be.instanceOf(AuthError);
    expect(error.message).to.equal(`the signature does not prove control of ${user.address}`);

    // The same signature with s' = n - s (and the other recovery id) still recovers the signer: refused as malleable.
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = BigInt(`0x${signature.slice(66, 130)}`);
    const v = Number.parseInt(signature.slice(130), 16);
    const twin = `${signature.slice(0, 66)}${(n - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
    expect((await refusal(faucet.claim("client-a", message, twin))).message).to.contain("high s value");

    expect(await faucet.claim("client-a", message, signature)).to.include({ address: user.address });
  });

  it("funds an address once per addressIntervalMs (429 with when to come back), and rate-limits each client", async () => {
    await faucet.claim("client-a", ...Object.values(await signIn()) as [string, string]);
    nowMs += 59_000;
    const again = await refusal(faucet.claim("client-a", ...Object.values(await signIn()) as [string, string]));
    expect(again).to.be.instanceOf(RateLimitError);
    expect((again as RateLimitError).details).to.deep.include({ address: user.address, retryAfterMs: 1_000 });
    nowMs += 1_000;
    await faucet.claim("client-a", ...Object.values(await signIn()) as [string, string]);
    expect(sent).to.have.length(2);

    const strict = makeFaucet({ claimsPerClientPerHour: 2 });
    strict.issueNonce("client-c");
    strict.issueNonce("client-c");
    expect(() => strict.issueNonce("client-c")).to.throw(RateLimitError, "over 2 faucet requests per hour from this client");
    expect(() => strict.issueNonce("client-d")).to.not.throw();
  });

  it("withdraws the grant when the transfer fails, and bounds the nonces it holds", async () => {
    const failing = makeFaucet({ send: async () => Promise.reject(new Error("insufficient funds")) });
    faucet = failing;
    const first = await signIn();
    expect((await refusal(failing.claim("client-a", first.message, first.signature))).message).to.contain("could not be sent");
    faucet = makeFaucet();
    const retry = await signIn();
    expect(await faucet.claim("client-a", retry.message, retry.signature)).to.include({ address: user.address });

    const bounded = makeFaucet({ maxOutstandingNonces: 2 });
    bounded.issueNonce("a");
    bounded.issueNonce("b");
    expect(() => bounded.issueNonce("c")).to.throw("outstanding nonces");
    nowMs += 300_000; // both expire: swept at the next issue
    expect(() => bounded.issueNonce("c")).to.not.throw();
  });
});
