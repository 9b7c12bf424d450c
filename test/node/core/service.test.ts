import { DEV_CARD_DRIVER_ACCURACY_NS } from "../../../protocol/constants";
import { expect } from "chai";
import { createDevIdentity } from "../../../protocol/devca";
import { NotFoundError, UnavailableError, ValidationError } from "../../../protocol/errors";
import { attest } from "../../../protocol/sign";
import type { Hex } from "../../../protocol/types";
import { createTimeServiceFromConfig } from "../../../node/compose";
import { saveKeyDir } from "../../../protocol/keystore";
import { buildService, devIdentity, expectRejects, silentLogger, tempDir, testConfig, waitFor } from "./helpers";

const MS = 1_000_000n;

describe("TimeService", function () {
  this.timeout(60_000);
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function started(overrides: Parameters<typeof testConfig>[1] = {}) {
    const dir = tempDir("service");
    cleanups.push(() => dir.remove());
    const built = await buildService(testConfig(dir.path, overrides));
    await built.service.start();
    cleanups.push(() => built.service.stop());
    return built;
  }

  it("serves the freshest proof, which its own verify() accepts", async () => {
    const { service, identity } = await started();
    await waitFor(() => service.health().status === "ok", 20_000, "ok");
    const signed = service.current();
    expect(service.verify(signed.proof)).to.deep.equal({ valid: true, reason: null });
    const fresh = await service.attestNow();
    expect(fresh.proof.nanoMoment > signed.proof.nanoMoment).to.equal(true);
    const info = service.info();
    expect(info).to.include({ nodeId: identity.nodeAddress, cardId: identity.cardId, accuracyNs: DEV_CARD_DRIVER_ACCURACY_NS, protocol: "ATS/1" });
    expect(info.certificateChainPem).to.deep.equal(identity.certificateChainPem);
    expect(info.tickIntervalNs).to.equal(1_000_000n);
  });

  it("wires refreshAfterNs: off by default; when set, a request that finds an older proof gets a new one", async () => {
    // 60 s ticks: only start() and on-demand refreshes sign.
    const off = await started({ tickIntervalNs: "60000000000" });
    const first = off.service.current();
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(off.service.current()).to.equal(first);
    const on = await started({ tickIntervalNs: "60000000000", refreshAfterNs: "1000000" });
    const before = on.service.current();
    const attestationsBefore = on.service.stats().attestationsTotal;
    await new Promise((resolve) => setTimeout(resolve, 5));
    const refreshed = on.service.current();
    expect(refreshed.proof.nanoMoment > before.proof.nanoMoment).to.equal(true);
    expect(on.service.stats().attestationsTotal).to.equal(attestationsBefore + 1);
  });

  it("proofAtOrAfter: a cached proof when one qualifies, a new one signed at the moment, and an abort ends the wait unsigned", async () => {
    const dir = tempDir("service-at-or-after");
    cleanups.push(() => dir.remove());
    const { service } = await buildService(testConfig(dir.path, { tickIntervalNs: "60000000000" }));
    await service.start();
    cleanups.push(() => service.stop());
    const cached = service.current();
    expect(await service.proofAtOrAfter(cached.proof.nanoMoment)).to.equal(cached);
    const atNs = BigInt(Date.now()) * MS + 50n * MS;
    const later = await service.proofAtOrAfter(atNs);
    expect(later.proof.nanoMoment >= atNs).to.equal(true);
    expect(service.verify(later.proof)).to.deep.equal({ valid: true, reason: null });
    const caller = new AbortController();
    const waiting = service.proofAtOrAfter(BigInt(Date.now()) * MS + 5_000n * MS, caller.signal);
    const attestations = service.stats().attestationsTotal;
    caller.abort(new Error("client went away"));
    let reason: unknown;
    await waiting.catch((error: unknown) => (reason = error));
    expect((reason as Error).message).to.equal("client went away");
    expect(service.stats().attestationsTotal).to.equal(attestations);
  });

  it("stop() ends a delivery waiting for the card clock at once, without signing after stop", async () => {
    // The node clock runs 30 s ahead of the card: a due schedule waits (1 s rounds) for the card to catch up.
    const dir = tempDir("service-stop");
    cleanups.push(() => dir.remove());
    const built = await buildService(testConfig(dir.path, { tickIntervalNs: "60000000000" }), {
      nodeClockNs: () => BigInt(Date.now()) * MS + 30_000n * MS,
    });
    const { service } = built;
    await service.start();
    let stopped = false;
    cleanups.push(async () => {
      if (!stopped) await service.stop();
    });
    const { id } = await service.schedule(service.nowNs(), "http://127.0.0.1:9/callback");
    await new Promise((resolve) => setTimeout(resolve, 300)); // the worker picks the due row and starts waiting
    const attestationsAtStop = service.stats().attestationsTotal;
    const outcome = await Promise.race([
      service.stop().then(() => "stopped"),
      new Promise((resolve) => setTimeout(() => resolve("still waiting after 5 s"), 5_000)),
    ]);
    stopped = true;
    expect(outcome).to.equal("stopped");
    expect(service.stats().attestationsTotal).to.equal(attestationsAtStop);
    // Stopping cost the schedule no attempt: it is resumed as it was at the next start.
    const restarted = await buildService(testConfig(dir.path, { tickIntervalNs: "60000000000" }), {
      nodeClockNs: () => BigInt(Date.now()) * MS + 30_000n * MS,
    });
    await restarted.service.start();
    cleanups.push(() => restarted.service.stop());
    expect(restarted.service.getSchedule(id)).to.include({ status: "scheduled", attempts: 0, lastError: null });
  });

  it("verify() of its own proofs costs no secp256k1 recovery (the attestor seeds the service's memo); others' are memoised", async () => {
    const { service, identity, card } = await started();
    // Counts recoveries by wrapping the backend entry point that protocol/sign.ts calls (CommonJS exports).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const backend = require("../../../protocol/secp256k1") as { recoverUncompressedPublicKey(digest: Uint8Array, signature: Uint8Array, recovery: number): Uint8Array };
    const original = backend.recoverUncompressedPublicKey;
    let recoveries = 0;
    backend.recoverUncompressedPublicKey = (digest, signature, recovery) => {
      recoveries += 1;
      return original(digest, signature, recovery);
    };
    try {
      expect(service.verify(service.current().proof).valid).to.equal(true);
      expect(recoveries).to.equal(0);
      const nowNs = card.readTimeNs();
      // Signed outside the service (attest() seeds no memo it is not given): recovered once, then memoised.
      const outside = attest({ card: identity.cardKey, nodes: [identity.nodeKey], nanoMoment: nowNs, accuracy: 50, nodeTimestampNs: nowNs });
      expect(service.verify(outside).valid).to.equal(true);
      expect(recoveries).to.equal(1);
      expect(service.verify(outside).valid).to.equal(true);
      expect(recoveries).to.equal(1);
    } finally {
      backend.recoverUncompressedPublicKey = original;
    }
  });

  it("verify() reports why a proof fails: bad signature, unknown node, too old, too far ahead, accuracy", async () => {
    const { service, identity, card } = await started();
    const { proof } = service.current();
    const flipped: Hex = `0x${proof.hardwareSignature.slice(2, -2)}${proof.hardwareSignature.endsWith("00") ? "01" : "00"}`;
    expect(service.verify({ ...proof, hardwareSignature: flipped }).reason).to.be.oneOf(["bad-hardware-signature", "high-s"]);
    expect(service.verify({ ...proof, nodeSignature: "0x1234" }).reason).to.equal("node-signature-length");
    expect(service.verify({ ...proof, hardwareSignature: "0x" }).reason).to.equal("hardware-signature-length");

    const stranger = await createDevIdentity({ ca: identity.ca });
    const nowNs = card.readTimeNs();
    const byStranger = attest({ card: identity.cardKey, nodes: [stranger.nodeKey], nanoMoment: nowNs, accuracy: 50, nodeTimestampNs: nowNs });
    expect(service.verify(byStranger).reason).to.equal("unknown-node");
    const unknownCard = attest({ card: stranger.cardKey, nodes: [identity.nodeKey], nanoMoment: nowNs, accuracy: 50, nodeTimestampNs: nowNs });
    expect(service.verify(unknownCard).reason).to.equal("unknown-card");

    const old = nowNs - 61_000n * MS;
    expect(service.verify(attest({ card: identity.cardKey, nodes: [identity.nodeKey], nanoMoment: old, accuracy: 50, nodeTimestampNs: old })).reason).to.equal("too-old");
    const ahead = nowNs + 16_000n * MS;
    expect(service.verify(attest({ card: identity.cardKey, nodes: [identity.nodeKey], nanoMoment: ahead, accuracy: 50, nodeTimestampNs: ahead })).reason).to.equal("too-far-in-future");
    expect(service.verify(attest({ card: identity.cardKey, nodes: [identity.nodeKey], nanoMoment: nowNs, accuracy: 1_001, nodeTimestampNs: nowNs })).reason).to.equal("accuracy-too-low");
    // Malformed input is an answer, not an exception.
    expect(service.verify({ nanoMoment: -1n, hardwareSignature: "0x", nodeSignature: "0x", accuracy: 0 }).reason).to.equal("malformed-proof");
  });

  it("accepts co-signing nodes from trustedNodeAddresses and rejects revoked cards", async () => {
    const identity = await devIdentity();
    const peer = await createDevIdentity({ ca: identity.ca });
    const { service, card } = await started({ trustedNodeAddresses: [peer.nodeAddress] });
    const nowNs = card.readTimeNs();
    const cosigned = attest({ card: identity.cardKey, nodes: [identity.nodeKey, peer.nodeKey], nanoMoment: nowNs, accuracy: 50, nodeTimestampNs: nowNs });
    expect(service.verify(cosigned).valid).to.equal(true);

    const revoked = await started({ revokedCardIds: [identity.cardId] });
    expect(revoked.service.verify(revoked.service.current().proof).reason).to.equal("revoked-card");
  });

  it("checks certificate chains of other cards against the trusted roots", async () => {
    const identity = await devIdentity();
    const otherCard = await createDevIdentity({ ca: identity.ca });
    const rogueCa = await createDevIdentity();
    const { service, card } = await started({ trustedRootsPem: [identity.ca.certificatePem] });
    const nowNs = card.readTimeNs();
    const proof = attest({ card: otherCard.cardKey, nodes: [identity.nodeKey], nanoMoment: nowNs, accuracy: 50, nodeTimestampNs: nowNs });
    expect(service.verify(proof).reason).to.equal("unknown-card");
    expect(service.verify(proof, { certificateChainPem: otherCard.certificateChainPem }).reason).to.equal("certificate-chain-unchecked");
    expect(await service.verifyWithCertificateChain(proof, otherCard.certificateChainPem)).to.deep.equal({ valid: true, reason: null });
    expect(service.verify(proof).valid).to.equal(true); // the card is now known

    const rogue = attest({ card: rogueCa.cardKey, nodes: [identity.nodeKey], nanoMoment: nowNs, accuracy: 50, nodeTimestampNs: nowNs });
    const outcome = await service.verifyWithCertificateChain(rogue, rogueCa.certificateChainPem);
    expect(outcome.valid).to.equal(false);
    if (!outcome.valid) {
      expect(outcome.reason).to.equal("certificate-chain-invalid");
      expect(outcome.detail).to.contain("untrusted-root");
    }
    // A valid chain for a different card than the proof's.
    const mismatch = await service.verifyWithCertificateChain(rogue, otherCard.certificateChainPem);
    expect(mismatch.reason).to.equal("certificate-chain-invalid");
  });

  it("answers HISTORICAL lookups from the archive", async () => {
    const { service } = await started({ archiveIntervalNs: "1000000" });
    await waitFor(() => service.stats().archivedProofs >= 3, 20_000, "archived proofs");
    const latest = service.current();
    const found = service.historical(latest.proof.nanoMoment);
    expect(found.proof.nanoMoment <= latest.proof.nanoMoment).to.equal(true);
    expect(service.verify(found.proof).valid).to.equal(true);
    expect(() => service.historical(1n)).to.throw(NotFoundError, "no archived proof");
    expect(() => service.historical(-1n)).to.throw(ValidationError);
  });

  it("on tamper: current() throws UnavailableError, health says tampered, listeners get the reason", async () => {
    const { service, card } = await started();
    const reasons: string[] = [];
    service.onTamper((reason) => reasons.push(reason));
    service.current();
    card.simulateTamper("case opened");
    expect(() => service.current()).to.throw(UnavailableError, "case opened");
    await expectRejects(service.attestNow(), UnavailableError, "case opened");
    expect(reasons).to.deep.equal(["case opened"]);
    expect(service.health()).to.include({ status: "tampered", reason: "case opened" });
    expect(service.stats().tamperEventsTotal).to.equal(1);
  });

  it("reports degraded while refusing to sign, and starting before start()", async () => {
    const dir = tempDir("service-idle");
    cleanups.push(() => dir.remove());
    const idle = await buildService(testConfig(dir.path));
    expect(idle.service.health().status).to.equal("starting");
    expect(() => idle.service.current()).to.throw(UnavailableError);
    await expectRejects(idle.service.schedule(1n, "http://127.0.0.1/"), UnavailableError, "not started");

    const { service, card } = await started();
    card.simulateMeasuredError(DEV_CARD_DRIVER_ACCURACY_NS + 1);
    await waitFor(() => service.health().status === "degraded", 20_000, "degraded");
    expect(service.health().reason).to.contain(`${DEV_CARD_DRIVER_ACCURACY_NS + 1} ns`);
    expect(service.stats().accuracyRefusalsTotal).to.be.greaterThan(0);
    expect(service.current().proof.accuracy).to.equal(DEV_CARD_DRIVER_ACCURACY_NS); // the last honest proof is still served while fresh
    card.simulateMeasuredError(0);
    await waitFor(() => service.health().status === "ok", 20_000, "ok again");
  });

  it("reports stale (not ok, not degraded) once its latest proof is past maxAttestationAgeNs and nothing is served", async () => {
    const { service, card } = await started({ maxAttestationAgeNs: 200n * MS });
    await waitFor(() => service.health().status === "ok", 20_000, "ok");
    card.simulateMeasuredError(DEV_CARD_DRIVER_ACCURACY_NS + 1); // signing refused from now on: the cached proof only ages
    await waitFor(() => service.health().status === "stale", 20_000, "stale");
    expect(service.health().reason).to.contain(`${DEV_CARD_DRIVER_ACCURACY_NS + 1} ns`);
    expect(() => service.current()).to.throw(UnavailableError, "no fresh attestation");
    card.simulateMeasuredError(0);
    await waitFor(() => service.health().status === "ok", 20_000, "ok again");
  });

  it("builds from a key directory (createTimeServiceFromConfig)", async () => {
    const dir = tempDir("service-keys");
    cleanups.push(() => dir.remove());
    const identity = await devIdentity();
    await saveKeyDir(`${dir.path}/keys`, identity);
    const service = await createTimeServiceFromConfig(testConfig(`${dir.path}/data`, { keyDir: `${dir.path}/keys` }), { logger: silentLogger() });
    await service.start();
    cleanups.push(() => service.stop());
    await waitFor(() => service.health().status === "ok", 20_000, "ok");
    expect(service.info().nodeId).to.equal(identity.nodeAddress);
    expect(service.verify(service.current().proof).valid).to.equal(true);
  });

  it("can be stopped and started again", async () => {
    const { service } = await started();
    await service.stop();
    expect(() => service.current()).to.throw(UnavailableError);
    await service.start();
    await waitFor(() => service.health().status === "ok", 20_000, "ok");
    expect(service.verify(service.current().proof).valid).to.equal(true);
  });
});
