import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { UnavailableError } from "../../../protocol/errors";
import { hwMessage, timeAttestationDigest, timeAttestationForProof } from "../../../protocol/codec";
import { SECP256K1_BACKEND } from "../../../protocol/secp256k1";
import { createRecoveryMemo, signNodeEntry } from "../../../protocol/sign";
import { recoverNodeAddresses, verifyP256Signature } from "../../../protocol/verify";
import type { Hex } from "../../../protocol/types";
import { anchorToWallClock, clockFromAnchor } from "../../../node/card/hostClock";
import type { DevTimeCard } from "../../../node/card/dev";
import type { TimeCard } from "../../../node/card/types";
import { Attestor, defaultSignInWorker } from "../../../node/core/attestor";
import { NodeSignerThread, SIGNER_THREAD_NAME, signerThreadEntry, type NodeSignRequest } from "../../../node/core/signerWorker";
import type { SignedTime } from "../../../node/core/types";
import { createNodeMetrics } from "../../../node/api/metrics";
import { attestorSetup, buildService, expectRejects, tempDir, testConfig, waitFor } from "./helpers";

// Ticks use the thread by default only with pure-JS noble; these tests ask for it explicitly.
const setup = attestorSetup;

const ROOT = join(__dirname, "..", "..", "..");

/** node/core/signerWorker as compiled into dist/ (built first when missing or stale, as bin/ats-node.js does). */
function compiledSignerWorker(): typeof import("../../../node/core/signerWorker") {
  // Plain-JavaScript helpers loaded by path: bin/build-dist.js, and the build output itself.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  (require(join(ROOT, "bin", "build-dist.js")) as { ensureBuilt(options: { log(line: string): void }): boolean }).ensureBuilt({ log: () => undefined });
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(join(ROOT, "dist", "node", "core", "signerWorker.js")) as typeof import("../../../node/core/signerWorker");
}

/** Threads of this process named SIGNER_THREAD_NAME (Linux /proc; a thread that exits meanwhile is not counted). */
function signerThreadsNamed(): number {
  let count = 0;
  for (const tid of readdirSync(`/proc/${process.pid}/task`)) {
    try {
      if (readFileSync(`/proc/${process.pid}/task/${tid}/comm`, "utf8").trim() === SIGNER_THREAD_NAME) count += 1;
    } catch {
      // exited while listed
    }
  }
  return count;
}

/** Records every signer thread the attestor closes (and the promise of its termination). */
function spyOnClose(): { closed: Promise<void>[]; restore(): void } {
  const original = NodeSignerThread.prototype.close;
  const closed: Promise<void>[] = [];
  NodeSignerThread.prototype.close = function close(this: NodeSignerThread): Promise<void> {
    const done = original.call(this);
    closed.push(done);
    return done;
  };
  return { closed, restore: () => void (NodeSignerThread.prototype.close = original) };
}

describe("Signer thread (node/core/signerWorker.ts)", () => {
  const threads: NodeSignerThread[] = [];
  const attestors: Attestor[] = [];
  afterEach(async () => {
    for (const attestor of attestors.splice(0)) attestor.stop();
    await Promise.all(threads.splice(0).map((thread) => thread.close()));
  });

  it("signs byte for byte what protocol/sign.ts signs, and reports the digest", async () => {
    const { identity, card } = await setup();
    const thread = new NodeSignerThread(identity.nodeKey);
    threads.push(thread);
    expect(thread.backend).to.equal(null);
    await thread.ready;
    expect(thread.backend).to.equal(SECP256K1_BACKEND); // the addon loads in the worker too, behind its native-call gate
    for (const offset of [0n, 1n, 999_999_999n]) {
      const nanoMoment = card.readTimeNs() + offset;
      const request: NodeSignRequest = {
        nanoMoment,
        hardwareSignature: card.signHardware(nanoMoment),
        accuracy: 50,
        nodeTimestampNs: nanoMoment + 123n,
      };
      const att = timeAttestationForProof(request, request.nodeTimestampNs);
      const result = await thread.sign(request);
      expect(result.entry).to.equal(signNodeEntry(identity.nodeKey.exportPrivateKey(), att));
      expect(result.digest).to.equal(timeAttestationDigest(att));
    }
  });

  it("signs the hardware message too when it holds the card key: low-S, verifying with the card's public key, and the entry covers it", async () => {
    const { identity, card } = await setup();
    const thread = new NodeSignerThread(identity.nodeKey, { cardPrivateKey: card.exportKeyForSignerThread!() });
    threads.push(thread);
    await thread.ready;
    expect(thread.signsHardware).to.equal(true);
    for (let i = 0; i < 8; i += 1) {
      const nanoMoment = card.readTimeNs();
      const result = await thread.sign({ nanoMoment, accuracy: 50, nodeTimestampNs: nanoMoment + 9n });
      const { hardwareSignature } = result;
      expect(hardwareSignature.slice(0, 66)).to.equal(identity.cardId);
      // verifyP256Signature refuses high-S: about half of OpenSSL's raw signatures would fail without normalising.
      expect(verifyP256Signature({ message: hwMessage(identity.cardId, nanoMoment) }, `0x${hardwareSignature.slice(66, 130)}`, `0x${hardwareSignature.slice(130)}`, identity.cardPublicKey)).to.equal(true);
      const att = timeAttestationForProof({ nanoMoment, hardwareSignature, accuracy: 50 }, nanoMoment + 9n);
      expect(result.entry).to.equal(signNodeEntry(identity.nodeKey.exportPrivateKey(), att));
    }
    // Without the card key the thread refuses a request that leaves the card's signature to it.
    const plain = new NodeSignerThread(identity.nodeKey);
    threads.push(plain);
    await plain.ready;
    expect(plain.signsHardware).to.equal(false);
    await expectRejects(plain.sign({ nanoMoment: card.readTimeNs(), accuracy: 50, nodeTimestampNs: card.readTimeNs() }), Error, "holds no card key");
  });

  it("attestor: with a card that lets the thread sign, worker ticks never call the card driver's signHardware; without, they do", async () => {
    for (const offersKey of [true, false]) {
      const { options, card, verifyAt } = await setup({ signInWorker: true });
      if (!offersKey) Object.defineProperty(card, "exportKeyForSignerThread", { value: undefined });
      const signHardware = card.signHardware.bind(card);
      let cardSignatures = 0;
      card.signHardware = (nanoMoment: bigint) => {
        cardSignatures += 1;
        return signHardware(nanoMoment);
      };
      const attestor = new Attestor(options);
      attestors.push(attestor);
      attestor.start();
      await waitFor(() => attestor.stats().signer === "worker", 20_000, "the signer thread");
      const before = cardSignatures;
      const workerBefore = attestor.stats().workerAttestationsTotal;
      await waitFor(() => attestor.stats().workerAttestationsTotal >= workerBefore + 5, 20_000, "five worker ticks");
      if (offersKey) expect(cardSignatures, "card driver calls during worker ticks").to.equal(before);
      else {
        // Counted from the start, both: a tick whose card signature came before `before` may complete after
        // `workerBefore` was read, so differences taken at two moments can be one short. Every worker tick completed
        // needed a card signature first, so the card's count is at least the ticks' (read in that order).
        const workerTotal = attestor.stats().workerAttestationsTotal;
        expect(cardSignatures, "card driver calls, at least one per worker tick").to.be.at.least(workerTotal);
      }
      expect(verifyAt(attestor.current().proof)).to.deep.include({ valid: true });
      attestor.stop();
    }
  });

  it("collect() takes a finished signature from the result slot before the event loop has handled its reply", async () => {
    const { identity, card } = await setup();
    const thread = new NodeSignerThread(identity.nodeKey);
    threads.push(thread);
    await thread.ready;
    expect(thread.collect(), "nothing signed yet").to.equal(null);
    const nanoMoment = card.readTimeNs();
    const request: NodeSignRequest = { nanoMoment, hardwareSignature: card.signHardware(nanoMoment), accuracy: 50, nodeTimestampNs: nanoMoment + 7n };
    const signed = thread.sign(request);
    // This thread never yields while it waits: the worker's reply cannot have been handled, only the slot read.
    const deadlineMs = Date.now() + 10_000;
    while (thread.pendingCount > 0 && Date.now() < deadlineMs) expect(thread.collect(), "an answer, not a tick").to.equal(null);
    expect(thread.pendingCount, "the worker wrote the signature within 10 s, and collect() settled it").to.equal(0);
    expect(thread.collect(), "taken once").to.equal(null);
    const att = timeAttestationForProof(request, request.nodeTimestampNs);
    expect(await signed).to.deep.equal({ entry: signNodeEntry(identity.nodeKey.exportPrivateKey(), att), digest: timeAttestationDigest(att), hardwareSignature: request.hardwareSignature });
    // The reply that arrives afterwards answers nothing; the thread goes on signing.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const next = await thread.sign({ ...request, nodeTimestampNs: request.nodeTimestampNs + 1n });
    expect(next.entry).to.equal(signNodeEntry(identity.nodeKey.exportPrivateKey(), timeAttestationForProof(request, request.nodeTimestampNs + 1n)));
  });

  it("runs node/core/signerThread.ts from the sources (bin/register-ts.js in the worker), the sibling .js from dist/", async function () {
    this.timeout(60_000);
    expect(signerThreadEntry()).to.deep.equal({
      filename: join(ROOT, "node", "core", "signerThread.ts"),
      execArgv: ["-r", join(ROOT, "bin", "register-ts.js")],
    });
    const compiled = compiledSignerWorker();
    expect(compiled.signerThreadEntry()).to.deep.equal({ filename: join(ROOT, "dist", "node", "core", "signerThread.js"), execArgv: [] });
    const { identity, card } = await setup();
    const thread = new compiled.NodeSignerThread(identity.nodeKey);
    try {
      await thread.ready;
      expect(thread.backend).to.equal(SECP256K1_BACKEND);
      const nanoMoment = card.readTimeNs();
      const request: NodeSignRequest = { nanoMoment, hardwareSignature: card.signHardware(nanoMoment), accuracy: 50, nodeTimestampNs: nanoMoment + 7n };
      const att = timeAttestationForProof(request, request.nodeTimestampNs);
      expect(await thread.sign(request)).to.deep.equal({ entry: signNodeEntry(identity.nodeKey.exportPrivateKey(), att), digest: timeAttestationDigest(att), hardwareSignature: request.hardwareSignature });
    } finally {
      await thread.close();
    }
  });

  it("rejects a malformed request with the worker's error text, keeps working, and rejects after close()", async () => {
    const { identity, card } = await setup();
    const thread = new NodeSignerThread(identity.nodeKey);
    threads.push(thread);
    await thread.ready; // the sign timeout (1 s) runs from sign(): loading the worker from TypeScript can take about as long
    const nanoMoment = card.readTimeNs();
    const good: NodeSignRequest = { nanoMoment, hardwareSignature: card.signHardware(nanoMoment), accuracy: 50, nodeTimestampNs: nanoMoment };
    await expectRejects(thread.sign({ ...good, hardwareSignature: "0x1234" as Hex }), Error, "96 bytes");
    await expectRejects(thread.sign({ ...good, nanoMoment: 1n << 128n }), Error, "uint128");
    expect((await thread.sign(good)).entry).to.match(/^0x[0-9a-f]{160}$/);
    const pending = expectRejects(thread.sign(good), Error, "closed");
    await thread.close();
    await pending;
    await expectRejects(thread.sign(good), Error, "closed");
    expect(thread.pendingCount).to.equal(0);
  });

  it("rejects a request without a reply in time, and a late reply never answers another request", async () => {
    const { identity, card } = await setup();
    const thread = new NodeSignerThread(identity.nodeKey, { signTimeoutMs: 5 });
    threads.push(thread);
    await thread.ready;
    const nanoMoment = card.readTimeNs();
    const request: NodeSignRequest = { nanoMoment, hardwareSignature: card.signHardware(nanoMoment), accuracy: 50, nodeTimestampNs: nanoMoment };
    // The worker signs one request after the other: 200 at once take far longer than 5 ms in all, so the last
    // ones time out while the first ones are answered.
    const requests = Array.from({ length: 200 }, (_, index) => ({ ...request, nodeTimestampNs: nanoMoment + BigInt(index) }));
    const outcomes = await Promise.allSettled(requests.map((each) => thread.sign(each)));
    const timedOut = outcomes.filter((outcome) => outcome.status === "rejected");
    expect(timedOut.length).to.be.greaterThan(0);
    for (const outcome of timedOut) expect(String((outcome as PromiseRejectedResult).reason)).to.contain("no reply within 5 ms");
    expect(thread.pendingCount).to.equal(0);
    // Every answered request got its own entry (distinct nodeTimestamps), never a reply meant for another.
    outcomes.forEach((outcome, index) => {
      if (outcome.status === "fulfilled") {
        const each = requests[index]!;
        expect(outcome.value.entry).to.equal(signNodeEntry(identity.nodeKey, timeAttestationForProof(each, each.nodeTimestampNs)));
      }
    });
  });

  it("attestor: ticks move to the worker, proofs verify, and the node's own proofs need no recovery", async () => {
    const recoveryMemo = createRecoveryMemo();
    const { options, verifyAt, identity } = await setup({ signInWorker: true, recoveryMemo });
    const attestor = new Attestor(options);
    attestors.push(attestor);
    const seen: SignedTime[] = [];
    attestor.onProof((signed) => seen.push(signed));
    attestor.start();
    expect(() => attestor.current()).to.not.throw(); // the first proof is signed in start(), as before
    await waitFor(() => attestor.stats().workerAttestationsTotal >= 5, 20_000, "five worker-signed proofs");
    expect(attestor.stats().signer).to.equal("worker");
    recoveryMemo.clear();
    const before = attestor.stats().workerAttestationsTotal;
    await waitFor(() => attestor.stats().workerAttestationsTotal >= before + 1, 20_000, "one more worker proof");
    const { proof, body, json } = attestor.current();
    const seeded = recoveryMemo.size;
    expect(seeded).to.be.at.least(1); // seeded by the attestor from the worker's digest
    // The memo answers for the served proof: a hit stores nothing new.
    expect(recoverNodeAddresses(proof, recoveryMemo).map((a) => a.toLowerCase())).to.deep.equal([identity.nodeAddress.toLowerCase()]);
    expect(recoveryMemo.size).to.equal(seeded);
    expect(verifyAt(proof)).to.deep.include({ valid: true, cardId: identity.cardId });
    expect(body).to.equal(JSON.stringify(json));
    for (let i = 1; i < seen.length; i += 1) expect(seen[i]!.proof.nanoMoment > seen[i - 1]!.proof.nanoMoment).to.equal(true);
    // attest() (on demand) still signs synchronously in the calling thread, and the cache never goes back.
    const now = attestor.attest();
    expect(verifyAt(now.proof).valid).to.equal(true);
    expect(attestor.current().proof.nanoMoment >= now.proof.nanoMoment).to.equal(true);
  });

  /**
   * A started attestor signing in the thread, whose node clock the test moves: after jumpPastTick() the cached proof
   * is a tick interval old at once, while the 60 s tick timer stays far off.
   */
  async function attestorWithMovableClock() {
    let offsetNs = 0n;
    const { options, card } = await setup({ signInWorker: true, tickIntervalNs: 60_000_000_000n, maxServeAgeNs: 600_000_000_000n });
    const attestor = new Attestor({ ...options, nodeClockNs: () => card.readTimeNs() + offsetNs });
    attestors.push(attestor);
    attestor.start();
    await waitFor(() => attestor.stats().signer === "worker", 20_000, "the signer thread");
    return { attestor, card, jumpPastTick: () => void (offsetNs = 61_000_000_000n) };
  }

  it("attestor: a proof request starts the next worker tick once the cached proof is a tick interval old, without waiting for the timer", async () => {
    const { attestor, jumpPastTick } = await attestorWithMovableClock();
    const first = attestor.current();
    const attestations = attestor.stats().attestationsTotal;
    expect(attestor.current(), "younger than a tick interval: nothing started").to.equal(first);
    jumpPastTick();
    await waitFor(() => attestor.current() !== first, 10_000, "a tick started by current()");
    expect(attestor.stats()).to.include({ attestationsTotal: attestations + 1, workerAttestationsTotal: 1 });
    expect(attestor.current().proof.nanoMoment > first.proof.nanoMoment).to.equal(true);
  });

  it("attestor: a request-started tick that finds the card tampered makes that very request fail; a failing tick is not retried by every request", async () => {
    for (const fault of ["tamper", "driver error"] as const) {
      const { attestor, card, jumpPastTick } = await attestorWithMovableClock();
      const cached = attestor.current();
      // The card changes without telling its listeners (a driver that only reports when asked).
      let asked = 0;
      card.tamperState = () => {
        asked += 1;
        if (fault === "driver error") throw new Error("card driver: I/O error");
        return { tampered: true, reason: "enclosure opened" };
      };
      jumpPastTick(); // the next request starts a tick
      if (fault === "tamper") {
        expect(() => attestor.current()).to.throw(UnavailableError, "enclosure opened");
        expect(attestor.tamperReason).to.equal("enclosure opened");
      } else {
        for (let i = 0; i < 50; i += 1) expect(attestor.current()).to.equal(cached);
        expect(asked, "one tick tried by the requests, not fifty").to.equal(1);
        expect(attestor.stats().tickErrorsTotal).to.equal(1);
      }
      attestor.stop();
    }
  });

  it("attestor: tamper stops serving at once, and a reply still in the worker is discarded", async () => {
    const { options, card } = await setup({ signInWorker: true });
    let attestor: Attestor | null = null;
    let tamperOnNextSign = false;
    // Tamper right after the card signed a worker tick: the request is posted, its reply arrives afterwards.
    const trapCard: TimeCard = {
      cardId: card.cardId,
      publicKey: card.publicKey,
      certificateChainPem: card.certificateChainPem,
      readTimeNs: () => card.readTimeNs(),
      signHardware: (nanoMoment: bigint): Hex => {
        const signature = card.signHardware(nanoMoment);
        if (tamperOnNextSign && attestor?.stats().signer === "worker") {
          tamperOnNextSign = false;
          queueMicrotask(() => card.simulateTamper("enclosure opened"));
        }
        return signature;
      },
      tamperState: () => card.tamperState(),
      gpsReference: () => card.gpsReference(),
      onTamper: (listener) => card.onTamper(listener),
      measuredErrorNs: () => card.measuredErrorNs(),
      close: () => card.close(),
    };
    attestor = new Attestor({ ...options, card: trapCard });
    attestors.push(attestor);
    const spy = spyOnClose();
    try {
      let proofsAfterTamper = 0;
      let tampered = false;
      const tampers: string[] = [];
      attestor.onTamper((reason) => {
        tampered = true;
        tampers.push(reason);
      });
      attestor.onProof(() => {
        if (tampered) proofsAfterTamper += 1;
      });
      attestor.start();
      await waitFor(() => attestor.stats().workerAttestationsTotal >= 2, 20_000, "worker-signed proofs");
      tamperOnNextSign = true;
      await waitFor(() => tampered, 20_000, "the tamper");
      expect(() => attestor.current()).to.throw(UnavailableError, "time card tampered: enclosure opened");
      const count = attestor.stats().attestationsTotal;
      await Promise.all(spy.closed); // the worker was terminated on tamper
      expect(spy.closed.length).to.be.at.least(1);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(attestor.stats().attestationsTotal).to.equal(count);
      expect(proofsAfterTamper).to.equal(0);
      expect(tampers).to.deep.equal(["enclosure opened"]);
      expect(() => attestor.current()).to.throw(UnavailableError, "enclosure opened");
    } finally {
      spy.restore();
    }
  });

  /** Counts NodeSignerThread.sign() calls (the per-tick requests a self-ticking thread does without). */
  function spyOnSign(): { calls(): number; restore(): void } {
    const original = NodeSignerThread.prototype.sign;
    let calls = 0;
    NodeSignerThread.prototype.sign = function sign(this: NodeSignerThread, request) {
      calls += 1;
      return original.call(this, request);
    };
    return { calls: () => calls, restore: () => void (NodeSignerThread.prototype.sign = original) };
  }

  /**
   * A started attestor whose signer thread ticks on its own (the dev card's clock and the node clock are host-clock
   * anchors), with every proof it publishes; `prepareCard` runs before start(). Waits for three proofs of the thread
   * unless `waitForThreadTicks` is false.
   */
  async function selfTickingAttestor({ prepareCard, waitForThreadTicks = true }: { prepareCard?: (card: DevTimeCard) => void; waitForThreadTicks?: boolean } = {}) {
    const { options, card, verifyAt, identity } = await setup({ signInWorker: true });
    prepareCard?.(card);
    const nodeClockAnchor = anchorToWallClock();
    // The attestor's error log lines (its messages), besides the silent logger.
    const errors: string[] = [];
    const logger = Object.create(options.logger) as typeof options.logger;
    logger.child = (() => {
      const child = Object.create(options.logger) as typeof options.logger;
      child.error = ((first: unknown, second?: unknown) => void errors.push(String(typeof first === "string" ? first : second))) as typeof child.error;
      return child;
    }) as unknown as typeof logger.child;
    const attestor = new Attestor({ ...options, logger, nodeClockNs: clockFromAnchor(nodeClockAnchor), nodeClockAnchor });
    attestors.push(attestor);
    const proofs: SignedTime[] = [];
    attestor.onProof((signed) => proofs.push(signed));
    attestor.start();
    if (waitForThreadTicks) await waitFor(() => attestor.stats().workerAttestationsTotal >= 3, 20_000, "three proofs the thread made on its own");
    return { attestor, card, verifyAt, identity, proofs, errors };
  }

  it("attestor, self-ticking: the thread makes whole ticks on its own; the serving thread requests none, signs nothing, and takes them from the slot", async () => {
    const signs = spyOnSign();
    try {
      const { attestor, card, verifyAt, identity, proofs } = await selfTickingAttestor();
      expect(attestor.stats()).to.include({ signer: "worker", selfTicking: true });
      expect(signs.calls(), "one sign request: the known-answer test").to.equal(1);
      let cardSignatures = 0;
      const signHardware = card.signHardware.bind(card);
      card.signHardware = (nanoMoment) => {
        cardSignatures += 1;
        return signHardware(nanoMoment);
      };
      const before = attestor.stats().workerAttestationsTotal;
      await waitFor(() => attestor.stats().workerAttestationsTotal >= before + 20, 20_000, "twenty more ticks");
      expect(signs.calls(), "still one sign request").to.equal(1);
      expect(cardSignatures, "the card driver signed nothing in the serving thread").to.equal(0);
      for (let i = 1; i < proofs.length; i += 1) expect(proofs[i]!.proof.nanoMoment > proofs[i - 1]!.proof.nanoMoment).to.equal(true);
      const { proof } = attestor.current();
      expect(verifyAt(proof)).to.deep.include({ valid: true, cardId: identity.cardId });
      expect(proof.accuracy).to.equal(50);
      expect(attestor.stats().lastSignDurationNs! > 0n).to.equal(true);
      // Without yielding to the event loop (no timer, no message can run), requests still see the thread's new ticks.
      const first = attestor.current();
      const deadlineMs = Date.now() + 5_000;
      while (attestor.current() === first && Date.now() < deadlineMs);
      expect(attestor.current(), "a tick taken from the slot by a request").to.not.equal(first);
      expect(attestor.current().proof.nanoMoment > first.proof.nanoMoment).to.equal(true);
    } finally {
      signs.restore();
    }
  });

  it("attestor, self-ticking: the card leaving its accuracy bound stops the thread's proofs at once and withholds its permit; back within it, they resume", async () => {
    const { attestor, card, proofs } = await selfTickingAttestor();
    const permits: boolean[] = [];
    const grantTicks = NodeSignerThread.prototype.grantTicks;
    NodeSignerThread.prototype.grantTicks = function (this: NodeSignerThread, granted: boolean) {
      permits.push(granted);
      grantTicks.call(this, granted);
    };
    try {
      card.simulateMeasuredError(51); // the bound is 50
      const published = proofs.length;
      const refusedAtNs = card.readTimeNs();
      await new Promise((resolve) => setTimeout(resolve, 50));
      // Whatever the thread signed before its permit was withdrawn is dropped, not served.
      expect(proofs.length, "no proof published after the card left its bound").to.equal(published);
      expect(permits.at(-1), "the permit is withheld").to.equal(false);
      expect(attestor.refusalReason).to.include("measured error 51 ns exceeds the signing bound 50 ns");
      expect(attestor.stats().accuracyRefusalsTotal).to.be.above(0);
      card.simulateMeasuredError(0);
      await waitFor(() => proofs.length >= published + 3, 20_000, "proofs again");
      expect(permits.at(-1)).to.equal(true);
      expect(attestor.refusalReason).to.equal(null);
      for (const { proof } of proofs.slice(published)) expect(proof.nanoMoment > refusedAtNs).to.equal(true);
    } finally {
      NodeSignerThread.prototype.grantTicks = grantTicks;
    }
  });

  it("attestor, self-ticking: tamper stops serving at once and terminates the thread; nothing is published after it", async () => {
    const spy = spyOnClose();
    try {
      const { attestor, card, proofs } = await selfTickingAttestor();
      card.simulateTamper("enclosure opened");
      const published = proofs.length;
      expect(() => attestor.current()).to.throw(UnavailableError, "time card tampered: enclosure opened");
      expect(spy.closed.length).to.equal(1);
      await Promise.all(spy.closed);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(proofs.length).to.equal(published);
      expect(attestor.stats()).to.include({ signer: "main-thread", selfTicking: false });
    } finally {
      spy.restore();
    }
  });

  it("self-ticking thread: ticks signed before the permit was withheld are never handed over, even once it is granted again", async () => {
    const { identity, card } = await setup();
    const cardClock = card.clockAnchorForSignerThread();
    expect(cardClock).to.not.equal(null);
    const thread = new NodeSignerThread(identity.nodeKey, {
      cardPrivateKey: card.exportKeyForSignerThread!(),
      selfTicking: { intervalNs: 1_000_000n, accuracyNs: 50, cardClock: cardClock!, nodeClock: anchorToWallClock() },
    });
    threads.push(thread);
    await thread.ready;
    expect(thread.selfTicking).to.equal(true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(thread.collect(), "no tick while the permit is withheld").to.equal(null);
    thread.grantTicks(true); // epoch 1
    await waitFor(() => thread.collect() !== null, 10_000, "a tick of epoch 1");
    await new Promise((resolve) => setTimeout(resolve, 30)); // more ticks of epoch 1, not collected
    thread.grantTicks(false);
    // Without yielding: the thread finishes the tick it may be signing (epoch 1) and then signs no more.
    const quietUntilMs = Date.now() + 30;
    while (Date.now() < quietUntilMs);
    thread.grantTicks(true); // epoch 2: what the slot holds now is of epoch 1
    const seen: number[] = [];
    const deadlineMs = Date.now() + 10_000;
    while (seen.length < 3 && Date.now() < deadlineMs) {
      const tick = thread.collect();
      if (tick !== null) seen.push(tick.permitEpoch);
      else await new Promise((resolve) => setImmediate(resolve));
    }
    expect(seen, "ticks of the new epoch only").to.deep.equal([2, 2, 2]);
  });

  it("self-ticking thread: the stall watchdog calls a live thread alive, and gives it a fresh period after the caller itself was stalled", async () => {
    const { identity, card } = await setup();
    const thread = new NodeSignerThread(identity.nodeKey, {
      cardPrivateKey: card.exportKeyForSignerThread!(),
      signTimeoutMs: 100,
      selfTicking: { intervalNs: 1_000_000n, accuracyNs: 50, cardClock: card.clockAnchorForSignerThread()!, nodeClock: anchorToWallClock() },
    });
    threads.push(thread);
    await thread.ready;
    expect(thread.ticksOverdue(), "withheld: never overdue").to.equal(false);
    thread.grantTicks(true);
    // Asked at the attestor's pace, right after a collect(), as SelfTickingTicks.tick does (node/core/tickStrategies.ts): never overdue while it ticks.
    const untilMs = Date.now() + 400;
    while (Date.now() < untilMs) {
      thread.collect();
      expect(thread.ticksOverdue()).to.equal(false);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // This thread stalls for three sign timeouts (nothing collected meanwhile): not a verdict on the worker.
    const stalledUntilMs = Date.now() + 300;
    while (Date.now() < stalledUntilMs);
    expect(thread.ticksOverdue(), "the caller was stalled itself").to.equal(false);
    // Asked again at its pace but never collecting (as if the thread wrote nothing): overdue after the timeout.
    await waitFor(() => thread.ticksOverdue(), 5_000, "overdue once nothing is seen for the sign timeout");
  });

  it("attestor, self-ticking: a thread that stops delivering ticks, or signs a moment ahead of the card clock, is closed and ticks sign in the serving thread", async () => {
    // A thread gone quiet (its ticks never reach the slot: collect() sees nothing) while it holds the permit.
    const collect = NodeSignerThread.prototype.collect;
    try {
      const { attestor, proofs } = await selfTickingAttestor();
      NodeSignerThread.prototype.collect = () => null;
      await waitFor(() => attestor.stats().signer === "main-thread", 20_000, "the fallback after the sign timeout");
      expect(attestor.stats().tickErrorsTotal).to.equal(1);
      const published = proofs.length;
      const fromThread = attestor.stats().workerAttestationsTotal;
      await waitFor(() => proofs.length >= published + 5, 20_000, "proofs signed in the serving thread");
      expect(attestor.stats().workerAttestationsTotal, "none from the thread since").to.equal(fromThread);
    } finally {
      NodeSignerThread.prototype.collect = collect;
    }
    // A thread whose card clock is not the card's (an anchor 1 s ahead).
    const { attestor, card, proofs: served } = await selfTickingAttestor({
      waitForThreadTicks: false,
      prepareCard: (devCard) => {
        const anchor = devCard.clockAnchorForSignerThread()!;
        devCard.clockAnchorForSignerThread = () => ({ ...anchor, wallNs: anchor.wallNs + 1_000_000_000n });
      },
    });
    await waitFor(() => attestor.stats().tickErrorsTotal === 1 && attestor.stats().signer === "main-thread", 20_000, "the thread closed");
    // Ticks go on in the serving thread (whether the timer's check or a request took the bad tick).
    const before = served.length;
    await waitFor(() => served.length >= before + 5, 20_000, "proofs signed in the serving thread after the fallback");
    expect(attestor.stats().workerAttestationsTotal).to.equal(0);
    for (const { proof } of served) expect(proof.nanoMoment <= card.readTimeNs()).to.equal(true);
  });

  it("attestor, self-ticking: a thread whose first tick does not verify is closed before any of its ticks is published", async () => {
    // The thread's first tick, as the serving thread reads it, carries a node entry that is not the node's signature.
    const collect = NodeSignerThread.prototype.collect;
    let corrupted = 0;
    NodeSignerThread.prototype.collect = function corruptFirstTick(this: NodeSignerThread) {
      const record = collect.call(this);
      if (record === null || record.kind !== "tick" || corrupted > 0) return record;
      corrupted += 1;
      const flipped = record.entry[40] === "0" ? "1" : "0"; // a hex digit inside r
      return { ...record, entry: `${record.entry.slice(0, 40)}${flipped}${record.entry.slice(41)}` as Hex };
    };
    try {
      const { attestor, verifyAt, proofs, errors } = await selfTickingAttestor({ waitForThreadTicks: false });
      await waitFor(() => attestor.stats().tickErrorsTotal === 1 && attestor.stats().signer === "main-thread", 20_000, "the thread closed");
      expect(corrupted).to.equal(1);
      expect(errors, "closed by the first-tick check").to.deep.equal(["signer thread's first tick does not verify; signing in the main thread from now on"]);
      expect(attestor.stats().workerAttestationsTotal, "nothing of the thread published").to.equal(0);
      const before = proofs.length;
      await waitFor(() => proofs.length >= before + 5, 20_000, "proofs signed in the serving thread after the fallback");
      for (const { proof } of proofs) expect(verifyAt(proof).valid).to.equal(true);
    } finally {
      NodeSignerThread.prototype.collect = collect;
    }
  });

  it("attestor: a card or node clock that is not a host-clock anchor keeps ticks requested one at a time", async () => {
    const signs = spyOnSign();
    try {
      // setup()'s node clock is the card's readTimeNs: not an anchor the thread could read.
      const { options } = await setup({ signInWorker: true });
      const attestor = new Attestor(options);
      attestors.push(attestor);
      attestor.start();
      await waitFor(() => attestor.stats().workerAttestationsTotal >= 3, 20_000, "three worker ticks");
      expect(attestor.stats()).to.include({ signer: "worker", selfTicking: false });
      expect(signs.calls(), "a sign request per tick, after the known-answer test").to.be.at.least(4);
    } finally {
      signs.restore();
    }
  });

  it("attestor: stop() terminates the worker; a restart spawns a new one", async () => {
    const { options } = await setup({ signInWorker: true });
    const attestor = new Attestor(options);
    attestors.push(attestor);
    const spy = spyOnClose();
    try {
      attestor.start();
      await waitFor(() => attestor.stats().signer === "worker", 20_000, "the worker");
      attestor.stop();
      expect(spy.closed).to.have.length(1);
      await spy.closed[0]; // resolves once the thread has exited
      expect(attestor.stats().signer).to.equal("main-thread");
      expect(() => attestor.current()).to.throw(UnavailableError);
      attestor.start();
      await waitFor(() => attestor.stats().signer === "worker", 20_000, "the second worker");
      const before = attestor.stats().workerAttestationsTotal;
      await waitFor(() => attestor.stats().workerAttestationsTotal > before, 20_000, "a proof from the second worker");
      attestor.stop();
      expect(spy.closed).to.have.length(2);
      await spy.closed[1];
    } finally {
      spy.restore();
    }
  });

  it("names its thread for top -H (Linux /proc)", async function () {
    if (process.platform !== "linux") this.skip(); // the name is written through /proc/thread-self/comm, Linux only
    const { identity } = await setup();
    const thread = new NodeSignerThread(identity.nodeKey);
    await thread.ready;
    expect(signerThreadsNamed()).to.be.at.least(1);
    await thread.close();
    // Counted again once it has exited: the name belonged to that thread (not one left by an earlier test).
    const afterClose = signerThreadsNamed();
    const another = new NodeSignerThread(identity.nodeKey);
    threads.push(another);
    await another.ready;
    expect(signerThreadsNamed()).to.equal(afterClose + 1);
  });

  it("closing threads in the middle of their signatures, and exiting the process meanwhile, never aborts it", function () {
    this.timeout(120_000);
    if (SECP256K1_BACKEND === "noble") this.skip(); // no libsecp256k1 addon here: the thread signs in pure JS, nothing to gate
    // A thread terminated inside a libsecp256k1 or XKCP call aborts the whole process ("terminate called after
    // throwing an instance of 'Napi::Error'"): the native-call gate must prevent it. A child process keeps three
    // threads signing back to back, closes two of them at random moments, and exits (process.exit) while the
    // third still signs; without the gate nearly every such termination aborted.
    const script = `
      const { NodeSignerThread } = require(${JSON.stringify(join(ROOT, "node", "core", "signerWorker.ts"))});
      const { generateNodeKey } = require(${JSON.stringify(join(ROOT, "protocol", "devca.ts"))});
      const request = { nanoMoment: 1700000000000000000n, hardwareSignature: "0x" + "11".repeat(96), accuracy: 50, nodeTimestampNs: 1700000000000000001n };
      // 16 chains of sign requests, each asking again as soon as its answer is in: the thread never idles.
      const keepSigning = (thread) => thread.sign(request).then(() => keepSigning(thread), () => undefined);
      (async () => {
        const nodeKey = generateNodeKey();
        let closed = 0;
        for (let round = 0; round < 3; round += 1) {
          const thread = new NodeSignerThread(nodeKey, { signTimeoutMs: 60000 });
          await thread.ready;
          console.log("backend " + thread.backend);
          for (let chain = 0; chain < 16; chain += 1) keepSigning(thread);
          await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 30));
          if (round < 2) {
            await thread.close();
            closed += 1;
          } else {
            setTimeout(() => { console.log("exiting after " + closed + " closes"); process.exit(0); }, Math.random() * 10);
          }
        }
      })();`;
    const child = spawnSync(process.execPath, ["-r", join(ROOT, "bin", "register-ts.js"), "-e", script], { encoding: "utf8", timeout: 100_000 });
    expect(child.stderr).to.not.contain("terminate called");
    expect({ status: child.status, signal: child.signal }).to.deep.equal({ status: 0, signal: null });
    expect(child.stdout).to.contain("exiting after 2 closes");
    expect(child.stdout).to.contain(`backend ${SECP256K1_BACKEND}`);
  });

  it("the node's signerThread setting: 'on' signs ticks in the thread, 'off' in the serving thread, 'auto' in the thread when it can tick on its own on ≥ 2 cores", async function () {
    this.timeout(60_000);
    // buildService's node can self-tick (dev card, host-clock node clock): 'auto' uses the thread on ≥ 2 cores.
    const expected = { on: "worker", off: "main-thread", auto: defaultSignInWorker(true) ? "worker" : "main-thread" } as const;
    const signs = spyOnSign();
    try {
      for (const setting of ["on", "off", "auto"] as const) {
        const dir = tempDir("ats-signer-setting-");
        const { service } = await buildService(testConfig(join(dir.path, "data"), { signerThread: setting }));
        try {
          await service.start();
          await waitFor(() => service.stats().attestationSigner === expected[setting] && service.stats().attestationsTotal >= 3, 30_000, `ticks signing in the ${expected[setting]} (${setting})`);
          await new Promise((resolve) => setTimeout(resolve, 100)); // time for a thread to take over, were one started
          expect(service.stats().attestationSigner, setting).to.equal(expected[setting]);
          // Operators see the mode in /metrics (one series, value 1).
          const metrics = createNodeMetrics({ defaultMetrics: false });
          const unbind = metrics.bindService(service);
          try {
            const mode = expected[setting] === "worker" ? "self-ticking-thread" : "main-thread";
            expect((await metrics.render()).match(/^timerpc_attestation_signer\{.*$/gm), setting).to.deep.equal([`timerpc_attestation_signer{signer="${mode}"} 1`]);
          } finally {
            unbind();
          }
          if (expected[setting] === "worker") {
            // The node's clocks are host-clock anchors and the dev card's key may travel: the thread ticks on its own.
            const requests = signs.calls();
            const attestations = service.stats().attestationsTotal;
            await waitFor(() => service.stats().attestationsTotal >= attestations + 10, 30_000, `ten more ticks (${setting})`);
            expect(signs.calls(), `no sign request per tick (${setting})`).to.equal(requests);
          }
        } finally {
          await service.stop();
          dir.remove();
        }
      }
    } finally {
      signs.restore();
    }
  });

  it("'auto' (defaultSignInWorker): the thread when it can tick on its own and a second core is there, or when signing is pure-JS noble", () => {
    const noble = SECP256K1_BACKEND === "noble";
    expect(defaultSignInWorker(true, 2)).to.equal(true);
    expect(defaultSignInWorker(true, 1), "one core").to.equal(noble);
    expect(defaultSignInWorker(false, 8), "ticks it could only be asked for").to.equal(noble);
  });

  it("attestor: by default ticks that could not self-tick use the thread only when signing is pure-JS noble", async () => {
    const { options, verifyAt } = await setup();
    const attestor = new Attestor(options);
    attestor.start();
    try {
      await waitFor(() => attestor.stats().attestationsTotal >= 3, 5_000, "ticks");
      await new Promise((resolve) => setTimeout(resolve, 100)); // time for a thread to load, were one started
      expect(attestor.stats().signer).to.equal(SECP256K1_BACKEND === "noble" ? "worker" : "main-thread");
      expect(verifyAt(attestor.current().proof).valid).to.equal(true);
    } finally {
      attestor.stop();
    }
  });

  it("attestor: signInWorker=false never starts a thread", async () => {
    const { options, verifyAt } = await setup({ signInWorker: false });
    const attestor = new Attestor(options);
    attestors.push(attestor);
    const spy = spyOnClose();
    try {
      attestor.start();
      await waitFor(() => attestor.stats().attestationsTotal >= 5, 20_000, "five proofs");
      expect(attestor.stats()).to.include({ signer: "main-thread", workerAttestationsTotal: 0 });
      expect(verifyAt(attestor.current().proof).valid).to.equal(true);
      attestor.stop();
      expect(spy.closed).to.have.length(0);
    } finally {
      spy.restore();
    }
  });
});
