import { expect } from "chai";
import { decodeHardwareSignature, hwDigest } from "../../../protocol/codec";
import { UnavailableError } from "../../../protocol/errors";
import { verifyP256 } from "../../../protocol/verify";
import { P256_HALF_N } from "../../../protocol/constants";
import { verifyCardCertificateChain } from "../../../protocol/certs";
import { DevTimeCard } from "../../../node/card/dev";
import { createAnchoredClock } from "../../../node/card/hostClock";
import { CARD_DRIVERS, createCard } from "../../../node/card";
import { SETTINGS } from "../../../node/config";
import { devIdentity } from "./helpers";

describe("DevTimeCard", () => {
  it("anchors the monotonic timer to the wall clock once", () => {
    let monotonicNs = 5_000n;
    let wallMs = 1_700_000_000_000;
    const clock = createAnchoredClock({ wallNowMs: () => wallMs, monotonicNs: () => monotonicNs });
    expect(clock()).to.equal(1_700_000_000_000_000_000n);
    monotonicNs += 1_234n;
    wallMs -= 60_000; // NTP steps the wall clock back: the card clock does not follow
    expect(clock()).to.equal(1_700_000_000_000_001_234n);
  });

  it("reads ns since the Unix epoch, close to the wall clock and never going back", async () => {
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
    const before = BigInt(Date.now() - 1) * 1_000_000n;
    let previous = card.readTimeNs();
    for (let i = 0; i < 1_000; i += 1) {
      const next = card.readTimeNs();
      expect(next >= previous).to.equal(true);
      previous = next;
    }
    const after = BigInt(Date.now() + 1) * 1_000_000n;
    expect(previous >= before && previous <= after, `${previous} within [${before}, ${after}]`).to.equal(true);
  });

  it("has the cardId of its key and a chain that leads to the dev manufacturer CA", async () => {
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
    expect(card.cardId).to.equal(identity.cardId);
    expect(card.publicKey).to.equal(identity.cardPublicKey);
    const chain = await verifyCardCertificateChain({
      chainPem: card.certificateChainPem,
      trustedRootsPem: [identity.ca.certificatePem],
      nowMs: Date.now(),
      cardId: card.cardId,
    });
    expect(chain.valid).to.equal(true);
  });

  it("signs the hardware message low-S with its P-256 key", async () => {
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
    for (let i = 0; i < 20; i += 1) {
      const nanoMoment = card.readTimeNs();
      const signature = decodeHardwareSignature(card.signHardware(nanoMoment));
      expect(signature.cardId).to.equal(card.cardId);
      expect(BigInt(signature.s) <= P256_HALF_N).to.equal(true);
      expect(verifyP256(hwDigest(card.cardId, nanoMoment), signature.r, signature.s, card.publicKey)).to.equal(true);
    }
  });

  it("latches tamper, notifies listeners once and refuses to sign", async () => {
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
    const reasons: string[] = [];
    card.onTamper((reason) => reasons.push(reason));
    expect(card.tamperState()).to.deep.equal({ tampered: false, reason: null });
    card.simulateTamper("enclosure opened");
    card.simulateTamper("again");
    expect(reasons).to.deep.equal(["enclosure opened"]);
    expect(card.tamperState()).to.deep.equal({ tampered: true, reason: "enclosure opened" });
    expect(() => card.signHardware(card.readTimeNs())).to.throw(UnavailableError, "enclosure opened");
  });

  it("prints no key material", async () => {
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
    expect(JSON.stringify(card)).to.equal(JSON.stringify({ cardId: card.cardId }));
  });
});

describe("card drivers (cardDriver setting)", () => {
  it("builds the driver the setting names, and the setting admits exactly the known drivers", async () => {
    expect(SETTINGS.cardDriver.choices).to.deep.equal(Object.keys(CARD_DRIVERS));
    const identity = await devIdentity();
    const card = createCard("dev", { cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
    try {
      expect(card.certificateChainPem).to.deep.equal(identity.certificateChainPem);
    } finally {
      card.close();
    }
    expect(() => createCard("pcie", { cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem })).to.throw(
      RangeError,
      'unknown cardDriver "pcie" (known: dev)',
    );
  });
});
