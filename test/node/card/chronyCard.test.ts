import { expect } from "chai";
import { UnavailableError } from "../../../protocol/errors";
import { decodeHardwareSignature } from "../../../protocol/codec";
import { ChronyTimeCard, chronycRunner, fileCardKey, NO_READING_ERROR_NS, type ChronycRunner } from "../../../node/card/chrony";
import { boundAtNs, parseTracking } from "../../../node/card/chronyTracking";
import type { CardStatus } from "../../../node/card/types";
import { Attestor } from "../../../node/core/attestor";
import { createTimeService } from "../../../node/compose";
import { createNodeMetrics } from "../../../node/api/metrics";
import { attestorSetup, devIdentity, silentLogger, tempDir, testConfig, waitFor } from "../core/helpers";

const SYNCED = "7F000001,127.0.0.1,2,1795836881.775814668,-0.000001752,-0.000000012,0.000000023,-0.016,-0.002,0.083,0.000006583,0.000002910,0.1,Normal\n";
const NOT_SYNCHRONISED = "00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,1.000000000,1.000000000,0.0,Not synchronised\n";
/** chrony's root dispersion 1 s (source long gone): a bound far above any maximum used here. */
const LOOSE = SYNCED.replace("0.000002910", "1.000000000");

/** A chronyc that prints what the test sets (or fails with it), counting its runs. */
function fakeChronyc(initial: string | Error): { run: ChronycRunner; set(next: string | Error): void; runs(): number } {
  let next = initial;
  let runs = 0;
  return {
    run: () => {
      runs += 1;
      return next instanceof Error ? Promise.reject(next) : Promise.resolve(next);
    },
    set: (value) => {
      next = value;
    },
    runs: () => runs,
  };
}

async function chronyCard(chronyc: ReturnType<typeof fakeChronyc>, options: { maxBoundNs?: number; pollIntervalMs?: number } = {}) {
  const identity = await devIdentity();
  const states: CardStatus[] = [];
  const card = new ChronyTimeCard({
    key: fileCardKey(identity.cardKey),
    certificateChainPem: identity.certificateChainPem,
    runChronyc: chronyc.run,
    // Long: the tests drive readings with pollNow(), the timer never fires during a test.
    pollIntervalMs: options.pollIntervalMs ?? 60_000,
    maxBoundNs: options.maxBoundNs ?? 100_000,
    maxClockErrorPpb: 15_000,
    onStateChange: (status) => states.push(status),
  });
  return { card, identity, states };
}

describe("ChronyTimeCard (node/card/chrony.ts) with a fake chronyc", () => {
  it("is starting before its first reading, then serving with chrony's bound for each moment", async () => {
    const chronyc = fakeChronyc(SYNCED);
    const { card } = await chronyCard(chronyc);
    try {
      const before = card.status();
      if (card.polls === 0) {
        expect(before).to.deep.include({ driver: "chrony", state: "starting", accuracyBoundNs: null });
        expect(card.accuracyBoundNs(card.readTimeNs())).to.equal(null);
        expect(card.measuredErrorNs()).to.equal(NO_READING_ERROR_NS);
      }
      const status = await card.pollNow();
      expect(status).to.deep.include({ driver: "chrony", state: "serving", reason: null, offsetNs: -1752, source: "chrony 7F000001 127.0.0.1 stratum 2, leap status Normal" });
      const reading = card.reading!;
      expect(reading.tracking.line).to.equal(SYNCED.trimEnd());
      // The bound at a moment: chrony's figures (7954 ns) grown at 15 ppm + skew + |residual| since the reading,
      // plus the host-clock anchor's uncertainty.
      const momentNs = card.readTimeNs();
      const expected = boundAtNs(parseTracking(SYNCED), momentNs - reading.cardNs, 15_000n) + reading.clockExtraNs;
      expect(card.accuracyBoundNs(momentNs)).to.equal(Number(expected));
      expect(card.accuracyBoundNs(reading.cardNs + 1_000_000_000n)).to.equal(Number(7_954n + 15_085n + reading.clockExtraNs));
      expect(card.measuredErrorNs()).to.equal(1752);
      // The evidence anyone can recompute the bound from: chrony's line, the reading's moment, the clock allowance, the rate.
      expect(card.status().evidence).to.deep.equal({ report: SYNCED.trimEnd(), readAtNs: reading.cardNs.toString(), clockExtraNs: Number(reading.clockExtraNs), growthPpb: 15_085 });
      const signature = card.signHardware(momentNs);
      expect(decodeHardwareSignature(signature).cardId).to.equal(card.cardId);
      expect(card.gpsReference()).to.equal(null);
      // chronyc says stratum 2 behind 127.0.0.1: the source is stratum 1 (the NTP host serves this card at 2).
      expect(card.ntpUpstream()).to.deep.equal({ stratum: 1, referenceId: 0x7f000001 });
    } finally {
      card.close();
    }
  });

  it("is degraded when chrony is not synchronised, its bound exceeds the maximum, or chronyc fails or prints garbage", async () => {
    const chronyc = fakeChronyc(SYNCED);
    const { card, states } = await chronyCard(chronyc);
    try {
      await card.pollNow();
      chronyc.set(NOT_SYNCHRONISED);
      expect((await card.pollNow()).reason).to.match(/not synchronised/);
      chronyc.set(LOOSE);
      const loose = await card.pollNow();
      expect(loose.state).to.equal("degraded");
      expect(loose.reason).to.match(/^chrony's error bound \d+ ns exceeds chronyMaxBoundNs 100000 ns$/);
      expect(card.accuracyBoundNs(card.readTimeNs())).to.equal(null);
      chronyc.set(new Error("/usr/bin/chronyc -h /x.sock -c -n tracking failed (exit 1): 506 Cannot talk to daemon"));
      expect((await card.pollNow()).reason).to.equal("chrony unreadable: /usr/bin/chronyc -h /x.sock -c -n tracking failed (exit 1): 506 Cannot talk to daemon");
      chronyc.set(SYNCED.replace("0.000002910", "NaN"));
      const garbage = await card.pollNow();
      expect(garbage.state).to.equal("degraded");
      expect(garbage.reason).to.contain("rootDispersion is not a decimal number");
      expect(garbage.reason).to.contain("7F000001,127.0.0.1"); // the line as evidence
      // A failed poll drops trust in the older good reading too: no bound at all, not the old one.
      expect(card.accuracyBoundNs(card.readTimeNs())).to.equal(null);
      chronyc.set(SYNCED);
      expect((await card.pollNow()).state).to.equal("serving");
      // State changes are reported once each, in order (the first may be "starting" if the constructor's poll lost the race).
      expect(states.map((status) => status.state).filter((state) => state !== "starting")).to.deep.equal(["serving", "degraded", "serving"]);
    } finally {
      card.close();
    }
  });

  it("polls on its own timer, one chronyc run at a time, and stops when closed", async () => {
    const chronyc = fakeChronyc(SYNCED);
    const { card } = await chronyCard(chronyc, { pollIntervalMs: 100 });
    const deadline = Date.now() + 10_000;
    while (card.polls < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    card.close();
    expect(card.polls).to.be.at.least(3);
    const runs = chronyc.runs();
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(chronyc.runs()).to.equal(runs);
  });

  it("runs a chronyc program with a timeout and reports what it said", async () => {
    // `false` stands in for a chronyc that fails: the error names the program, its arguments and the exit.
    const failing = chronycRunner({ chronycPath: "/bin/false", socketPath: "/nonexistent/chronyd.sock", timeoutMs: 1_000 });
    let message = "";
    await failing().catch((error: Error) => {
      message = error.message;
    });
    expect(message).to.equal("/bin/false -h /nonexistent/chronyd.sock -c -n tracking failed (exit 1)");
    const missing = chronycRunner({ chronycPath: "/nonexistent/chronyc", socketPath: "/x.sock" });
    await missing().then(
      () => expect.fail("a missing chronyc must fail"),
      (error: Error) => expect(error.message).to.match(/^\/nonexistent\/chronyc -h \/x.sock -c -n tracking failed \(exit ENOENT\)/),
    );
  });

  describe("in the attestor", () => {
    it("signs the card's bound for each moment, not accuracyNs, and refuses while the card is degraded", async () => {
      const chronyc = fakeChronyc(SYNCED);
      const { card } = await chronyCard(chronyc);
      const { options } = await attestorSetup();
      const attestor = new Attestor({ ...options, card, accuracyNs: 100_000, signingErrorBoundNs: 100_000, nodeClockNs: () => card.readTimeNs(), signInWorker: false, ticks: false, logger: silentLogger() });
      const alerts: string[] = [];
      attestor.onAlert((alert) => alerts.push(alert.reason));
      try {
        attestor.start();
        await card.pollNow();
        const signed = attestor.attest();
        const reading = card.reading!;
        const expected = boundAtNs(reading.tracking, signed.proof.nanoMoment - reading.cardNs, 15_000n) + reading.clockExtraNs;
        expect(signed.proof.accuracy).to.equal(Number(expected));
        expect(signed.proof.accuracy).to.be.below(100_000);

        chronyc.set(NOT_SYNCHRONISED);
        await card.pollNow();
        expect(() => attestor.attest()).to.throw(UnavailableError, /card proves no error bound: chrony is not synchronised/);
        expect(() => attestor.assertCanSign()).to.throw(UnavailableError);
        expect(attestor.refusalReason).to.match(/not synchronised/);
        expect(alerts).to.have.length(1);

        chronyc.set(SYNCED);
        await card.pollNow();
        expect(attestor.attest().proof.accuracy).to.be.below(100_000);
        expect(attestor.refusalReason).to.equal(null);

        // A bound within chrony's maximum but above the node's signing bound is refused too.
        const strict = new Attestor({ ...options, card, accuracyNs: 100, signingErrorBoundNs: 100, nodeClockNs: () => card.readTimeNs(), signInWorker: false, ticks: false, logger: silentLogger() });
        strict.start();
        expect(() => strict.attest()).to.throw(UnavailableError, /card error bound \d+ ns exceeds the signing bound 100 ns/);
        strict.stop();
      } finally {
        attestor.stop();
        card.close();
      }
    });
  });

  describe("in the node's reports", () => {
    it("GET /node/info, health and metrics carry the card's state, bound and source; drift is chrony's offset", async () => {
      const dir = tempDir("chrony-report");
      const chronyc = fakeChronyc(SYNCED);
      const { card, identity } = await chronyCard(chronyc);
      const config = testConfig(dir.path, { cardDriver: "chrony", chronyMaxBoundNs: 100_000, maxAcceptableDriftNs: 100_000n, signerThread: "off" });
      const service = createTimeService({ config, card, nodeKey: identity.nodeKey, logger: silentLogger(), ownsCard: true });
      const metrics = createNodeMetrics({ defaultMetrics: false });
      const unbind = metrics.bindService(service);
      try {
        await card.pollNow();
        await service.start();
        await waitFor(() => service.health().status === "ok", 10_000, "a first chrony-bounded proof");
        const info = service.info();
        // The advertised accuracy is the most the node signs; the card's report carries the bound it proves now.
        expect(info.accuracyNs).to.equal(100_000);
        expect(info.card).to.deep.include({ driver: "chrony", state: "serving", reason: null, offsetNs: -1752, source: "chrony 7F000001 127.0.0.1 stratum 2, leap status Normal" });
        expect(info.card!.accuracyBoundNs).to.be.within(7_954, 100_000);
        const health = service.health();
        expect(health.card?.state).to.equal("serving");
        expect(health.measuredErrorNs).to.equal(1752);
        const proof = service.current().proof;
        expect(proof.accuracy).to.be.within(7_954, 100_000);
        const text = await metrics.render();
        expect(text).to.match(/^timerpc_node_drift_ns 1752$/m);
        expect(text).to.match(/^timerpc_card_state\{driver="chrony",state="serving"\} 1$/m);
        const boundSeconds = Number(/^timerpc_card_bound_seconds (\S+)$/m.exec(text)?.[1]);
        expect(boundSeconds).to.be.within(7_954e-9, 100_000e-9);

        chronyc.set(NOT_SYNCHRONISED);
        await card.pollNow();
        const degraded = service.health();
        expect(degraded.status).to.equal("degraded");
        expect(degraded.reason).to.match(/not synchronised/);
        expect(degraded.card).to.deep.include({ state: "degraded", accuracyBoundNs: null });
        expect(service.info().card?.state).to.equal("degraded");
        const after = await metrics.render();
        expect(after).to.match(/^timerpc_card_state\{driver="chrony",state="degraded"\} 1$/m);
        expect(after).to.match(/^timerpc_card_bound_seconds Nan$/m); // prom-client spells NaN so; Prometheus parses it
        await waitFor(() => service.stats().accuracyRefusalsTotal > 0, 10_000, "a refused tick");
      } finally {
        unbind();
        await service.stop();
        dir.remove();
      }
    });
  });
});
