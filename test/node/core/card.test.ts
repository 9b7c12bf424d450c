import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../../protocol/constants";
import { expect } from "chai";
import { decodeHardwareSignature, hwDigest } from "../../../protocol/codec";
import { UnavailableError } from "../../../protocol/errors";
import { verifyP256 } from "../../../protocol/verify";
import { p256PrivateScalar } from "../../../protocol/keys";
import { P256_HALF_N } from "../../../protocol/constants";
import { verifyCardCertificateChain } from "../../../protocol/certs";
import { DevTimeCard } from "../../../node/card/dev";
import { anchorToWallClock, createAnchoredClock, intersectAnchors, refineAnchor } from "../../../node/card/hostClock";
import { CARD_DRIVERS, createCard } from "../../../node/card";
import { SETTINGS } from "../../../node/config";
import { devIdentity } from "./helpers";

describe("DevTimeCard", () => {
  it("anchors the monotonic timer at a millisecond edge of the wall clock, to within the reads around it", () => {
    // A fake host: the monotonic timer advances 100 ns per read; the wall clock ticks to the next ms at 1,000,000 ns.
    let monotonicNs = 999_000n;
    const sources = {
      monotonicNs: () => (monotonicNs += 100n),
      wallNowMs: () => 1_700_000_000_000 + Number(monotonicNs / 1_000_000n),
    };
    const anchor = anchorToWallClock(sources);
    expect(anchor.wallNs % 1_000_000n).to.equal(0n);
    // The edge at monotonic 1,000,000 (+ n ms for later edges) is located within the reads around it.
    const edgeMonotonicNs = (anchor.wallNs - 1_700_000_000_000_000_000n);
    expect(Number(anchor.monotonicNs - edgeMonotonicNs)).to.be.within(-200, 200);
    expect(Number(anchor.uncertaintyNs)).to.be.within(1, 200);
  });

  it("without a wall-clock edge (a frozen clock) takes the middle of the millisecond and claims ±0.5 ms", () => {
    let monotonicNs = 5_000n;
    let wallMs = 1_700_000_000_000;
    const sources = { wallNowMs: () => wallMs, monotonicNs: () => monotonicNs };
    expect(anchorToWallClock(sources).uncertaintyNs).to.equal(500_000n);
    const clock = createAnchoredClock(sources);
    expect(clock()).to.equal(1_700_000_000_000_500_000n);
    monotonicNs += 1_234n;
    wallMs -= 60_000; // NTP steps the wall clock back: the card clock does not follow
    expect(clock()).to.equal(1_700_000_000_000_501_234n);
  });

  it("combines edges by intersection: wide spans (a preempted spin) still narrow the offset, and keep the truth inside", () => {
    // A busy fake host: each read of the monotonic timer costs 2–30 µs (a fixed pseudo-random sequence), so each
    // edge alone is known to ±10–25 µs, and the edge falls at a different place of each span.
    const trueOffsetNs = 1_700_000_000_000_000_000n;
    const busyHost = () => {
      let monotonicNs = 3_000n;
      let seed = 7;
      return {
        monotonicNs: () => {
          seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
          return (monotonicNs += BigInt(2_000 + (seed % 28_000)));
        },
        wallNowMs: () => Number((trueOffsetNs + monotonicNs) / 1_000_000n),
      };
    };
    // The same 40 edges (as many as the dev card's retries take on a busy host), alone and combined.
    const host = busyHost();
    const singles = Array.from({ length: 40 }, () => anchorToWallClock(host, 1));
    const tightestSingleNs = singles.reduce((min, anchor) => (anchor.uncertaintyNs < min ? anchor.uncertaintyNs : min), singles[0]!.uncertaintyNs);
    const combined = anchorToWallClock(busyHost(), 40);
    expect(Number(tightestSingleNs)).to.be.at.least(5_000);
    expect(Number(combined.uncertaintyNs)).to.be.below(Number(tightestSingleNs) / 2);
    const offsetErrorNs = combined.wallNs - combined.monotonicNs - trueOffsetNs;
    expect(offsetErrorNs <= combined.uncertaintyNs && -offsetErrorNs <= combined.uncertaintyNs, `offset off by ${offsetErrorNs} ns, claimed ±${combined.uncertaintyNs}`).to.equal(true);
  });

  it("intersects two anchors' offset intervals, and refuses to combine across a wall-clock step", () => {
    // Offsets (wallNs - monotonicNs): 1,000 ± 300 and 1,200 ± 200 share [1,000, 1,300].
    const first = { wallNs: 11_000n, monotonicNs: 10_000n, uncertaintyNs: 300n };
    const second = { wallNs: 51_200n, monotonicNs: 50_000n, uncertaintyNs: 200n };
    const both = intersectAnchors(first, second)!;
    expect(both.monotonicNs).to.equal(50_000n);
    expect(both.wallNs - both.monotonicNs - both.uncertaintyNs <= 1_000n).to.equal(true);
    expect(both.wallNs - both.monotonicNs + both.uncertaintyNs >= 1_300n).to.equal(true);
    expect(both.uncertaintyNs).to.equal(150n);
    // The wall clock stepped 1 ms between them: disjoint, so the newer anchor alone is kept.
    const stepped = { wallNs: 1_051_200n, monotonicNs: 50_000n, uncertaintyNs: 200n };
    expect(intersectAnchors(first, stepped)).to.equal(null);
    expect(refineAnchor(first, stepped)).to.deep.equal(stepped);
    expect(refineAnchor(null, first)).to.deep.equal(first);
  });

  it("two clocks anchored on this host agree to within a few microseconds (not the 1 ms of a single Date.now())", () => {
    const first = createAnchoredClock();
    const second = createAnchoredClock();
    // Interleaved reads: the smallest difference over several tries is free of scheduling noise.
    let smallest = 1_000_000_000n;
    for (let i = 0; i < 20; i += 1) {
      const a = first();
      const b = second();
      const difference = a > b ? a - b : b - a;
      if (difference < smallest) smallest = difference;
    }
    expect(Number(smallest)).to.be.below(20_000);
  });

  it("reports its anchor's uncertainty as its measured error: honest, and within the 1 µs a dev node advertises", async () => {
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
    expect(card.measuredErrorNs()).to.be.greaterThan(0);
    expect(card.measuredErrorNs()).to.be.below(DEV_CARD_DRIVER_ACCURACY_NS);
    expect(card.gpsReference()).to.include({ fixState: "simulated", satellites: 0 });
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

  it("latches tamper, notifies listeners once and refuses to sign or to hand its key to the signer thread", async () => {
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem });
    expect(card.exportKeyForSignerThread!()).to.equal(p256PrivateScalar(identity.cardKey));
    const reasons: string[] = [];
    card.onTamper((reason) => reasons.push(reason));
    expect(card.tamperState()).to.deep.equal({ tampered: false, reason: null });
    card.simulateTamper("enclosure opened");
    card.simulateTamper("again");
    expect(reasons).to.deep.equal(["enclosure opened"]);
    expect(card.tamperState()).to.deep.equal({ tampered: true, reason: "enclosure opened" });
    expect(() => card.signHardware(card.readTimeNs())).to.throw(UnavailableError, "enclosure opened");
    expect(() => card.exportKeyForSignerThread!()).to.throw(UnavailableError, "enclosure opened");
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
      'unknown cardDriver "pcie" (known: dev, chrony)',
    );
  });
});
