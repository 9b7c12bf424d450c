import { expect } from "chai";
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { GpsdClient, type GpsdClientEvent, type GpsReferenceSource, type GpsReading } from "../../../node/card/gpsdClient";
import pino from "pino";
import { DevTimeCard } from "../../../node/card/dev";
import { ChronyTimeCard, fileCardKey } from "../../../node/card/chrony";
import { createCard } from "../../../node/card";
import { Attestor } from "../../../node/core/attestor";
import { createTimeService } from "../../../node/compose";
import { ValidationError } from "../../../protocol/errors";
import { attestorSetup, devIdentity, silentLogger, tempDir, testConfig, waitFor } from "../core/helpers";

const TPV_3D = '{"class":"TPV","device":"/dev/pts/1","mode":3,"time":"2026-11-27T09:35:14.000Z","ept":0.005}';
const TPV_NO_FIX = '{"class":"TPV","device":"/dev/pts/1","mode":1}';
const SKY_8 = '{"class":"SKY","device":"/dev/pts/1","nSat":10,"uSat":8,"satellites":[]}';
const PPS = '{"class":"PPS","device":"/dev/pps0","real_sec":100,"real_nsec":0,"clock_sec":100,"clock_nsec":1234}';

/** A gpsd stand-in on 127.0.0.1 (a free port): records what each connection sent, lets the test write and drop. */
async function fakeGpsd(): Promise<{ server: Server; port: number; sockets: Socket[]; received: string[]; send(lines: string): void; dropAll(): void; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  const received: string[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.setEncoding("utf8");
    socket.on("data", (text: string) => received.push(text));
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const live = () => sockets.filter((socket) => !socket.destroyed);
  return {
    server,
    port,
    sockets,
    received,
    send: (lines) => {
      for (const socket of live()) socket.write(lines);
    },
    dropAll: () => {
      for (const socket of live()) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of live()) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A monotonic clock the test moves (ns). */
function fakeMonotonic(startNs = 1_000_000_000n): { now: () => bigint; advanceMs(ms: number): void } {
  let nowNs = startNs;
  return {
    now: () => nowNs,
    advanceMs: (ms) => {
      nowNs += BigInt(ms) * 1_000_000n;
    },
  };
}

describe("gpsd client (node/card/gpsdClient.ts) against a fake gpsd on 127.0.0.1", () => {
  let gpsd: Awaited<ReturnType<typeof fakeGpsd>>;
  let client: GpsdClient | null = null;

  beforeEach(async () => {
    gpsd = await fakeGpsd();
  });

  afterEach(async () => {
    client?.close();
    client = null;
    await gpsd.close();
  });

  it("sends ?WATCH, keeps the latest TPV, SKY and PPS, counts malformed lines and ignores other classes", async () => {
    const clock = fakeMonotonic();
    const events: GpsdClientEvent[] = [];
    client = new GpsdClient({ host: "127.0.0.1", port: gpsd.port, staleAfterMs: 5_000, required: true, monotonicNs: clock.now, onEvent: (event) => events.push(event) }).start();
    await waitFor(() => gpsd.received.join("").includes("\n"), 10_000, "the WATCH command");
    expect(gpsd.received.join("")).to.equal('?WATCH={"enable":true,"json":true,"pps":true};\n');
    expect(client.read(0n).noFixReason).to.equal("no TPV report from gpsd yet");
    // Split across writes and interleaved with what the node ignores and what it cannot parse.
    gpsd.send(`{"class":"VERSION","release":"3.22"}\n${TPV_3D.slice(0, 20)}`);
    gpsd.send(`${TPV_3D.slice(20)}\nnot json\n${SKY_8}\n{"class":"TPV","mode":9}\n${PPS}\n`);
    await waitFor(() => client?.stats().reportsTotal === 3, 10_000, "three reports");
    expect(client.read(5_000_000_000n)).to.deep.equal({ reference: { fixState: "3d", satellites: 8, ppsOffsetNs: 1_234, observedAtNs: "5000000000" }, noFixReason: null });
    expect(client.stats()).to.deep.include({ connected: true, connectsTotal: 1, reportsTotal: 3, malformedLinesTotal: 2 });
    expect(events.filter((event) => event.kind === "malformed").map((event) => (event.kind === "malformed" ? event.error : ""))).to.deep.equal([
      "not JSON (Unexpected token 'o', \"not json\" is not valid JSON): not json",
      "TPV: /mode: Expected union value (got 9)",
    ]);
    // A newer TPV without a fix replaces the fix.
    gpsd.send(`${TPV_NO_FIX}\n`);
    await waitFor(() => client?.stats().reportsTotal === 4, 10_000, "the no-fix report");
    expect(client.read(0n).noFixReason).to.equal("gpsd reports no fix (TPV mode 1 on /dev/pts/1, 8 satellites used)");
  });

  it("drops a fix once its TPV is older than staleAfterMs, with gpsd silent but connected", async () => {
    const clock = fakeMonotonic();
    client = new GpsdClient({ host: "127.0.0.1", port: gpsd.port, staleAfterMs: 3_000, required: true, monotonicNs: clock.now }).start();
    await waitFor(() => gpsd.received.length > 0, 10_000, "the WATCH command");
    gpsd.send(`${TPV_3D}\n${SKY_8}\n`);
    await waitFor(() => client?.stats().reportsTotal === 2, 10_000, "two reports");
    clock.advanceMs(3_000);
    expect(client.read(10_000_000_000n).reference.fixState).to.equal("3d");
    clock.advanceMs(1);
    const stale = client.read(10_000_000_000n);
    expect(stale.reference).to.deep.equal({ fixState: "none", satellites: 0, ppsOffsetNs: 0, observedAtNs: (10_000_000_000n - 3_001_000_000n).toString() });
    expect(stale.noFixReason).to.equal("gpsd's last TPV report (mode 3) is 3001 ms old, stale after 3000 ms");
  });

  it("reconnects with backoff when gpsd drops the connection or is down, says so while disconnected, and keeps the state meanwhile", async () => {
    const clock = fakeMonotonic();
    const events: GpsdClientEvent[] = [];
    client = new GpsdClient({ host: "127.0.0.1", port: gpsd.port, staleAfterMs: 5_000, required: true, monotonicNs: clock.now, reconnectMinMs: 20, reconnectMaxMs: 80, onEvent: (event) => events.push(event) }).start();
    await waitFor(() => gpsd.received.length === 1, 10_000, "the first WATCH");
    gpsd.send(`${TPV_3D}\n`);
    await waitFor(() => client?.stats().reportsTotal === 1, 10_000, "a report");
    gpsd.dropAll();
    await waitFor(() => gpsd.received.length === 2, 10_000, "the WATCH of a second connection");
    expect(client.stats()).to.deep.include({ connected: true, connectsTotal: 2 });
    // The fix from before the reconnect stands: only its age decides.
    expect(client.read(0n).noFixReason).to.equal(null);
    // A clean close (FIN) as a rule; a reset is as good a reason to reconnect.
    expect(events.find((event) => event.kind === "disconnected")).to.deep.include({ kind: "disconnected", retryInMs: 20 });

    // gpsd goes away: refused connects, the delay doubling up to its maximum.
    const { port } = gpsd;
    await gpsd.close();
    await waitFor(() => events.filter((event) => event.kind === "disconnected").length >= 5, 10_000, "refused reconnects");
    const delays = events.filter((event) => event.kind === "disconnected").map((event) => (event.kind === "disconnected" ? event.retryInMs : 0));
    expect(delays.slice(0, 5)).to.deep.equal([20, 20, 40, 80, 80]);
    expect(client.stats().connected).to.equal(false);
    expect(client.stats().lastError).to.match(/^ECONNREFUSED: /);
    clock.advanceMs(5_001);
    expect(client.read(0n).noFixReason).to.match(new RegExp(`^gpsd's last TPV report \\(mode 3\\) is 5001 ms old, stale after 5000 ms; gpsd 127\\.0\\.0\\.1:${port} not connected \\(ECONNREFUSED: `));
  });
});

/** A GPS source the test sets: a fix or a reason for none. */
function settableGps(required: boolean): GpsReferenceSource & { set(noFixReason: string | null): void; closed: boolean } {
  let noFixReason: string | null = "no TPV report from gpsd yet";
  const source = {
    name: "gpsd 127.0.0.1:2947",
    required,
    closed: false,
    read: (cardNowNs: bigint): GpsReading => ({
      reference: { fixState: noFixReason === null ? "3d" : "none", satellites: noFixReason === null ? 8 : 0, ppsOffsetNs: 0, observedAtNs: cardNowNs.toString() },
      noFixReason,
    }),
    set: (next: string | null) => {
      noFixReason = next;
    },
    close: () => {
      source.closed = true;
    },
  };
  return source;
}

describe("a card with a gpsd reference (dev card, attestor, health)", () => {
  it("reports gpsd's reference beside each proof, signs without a fix when it is not required, and closes gpsd with the card", async () => {
    const gps = settableGps(false);
    const { options } = await attestorSetup();
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem, measuredErrorNs: 0, gps });
    const attestor = new Attestor({ ...options, card, nodeClockNs: () => card.readTimeNs() });
    expect(attestor.attest().json.proof.gps?.fixState).to.equal("none");
    gps.set(null);
    expect(attestor.attest().json.proof.gps).to.deep.include({ fixState: "3d", satellites: 8 });
    expect(card.status?.()).to.deep.include({ driver: "dev", state: "serving", reason: null, source: "gpsd 127.0.0.1:2947: 3d fix, 8 satellites, PPS offset 0 ns" });
    card.close();
    expect(gps.closed).to.equal(true);
  });

  it("with gpsRequired: no fix refuses every signature with gpsd's reason, health and info say degraded and why, and a fix resumes signing", async () => {
    const gps = settableGps(true);
    gps.set(null);
    const identity = await devIdentity();
    const card = new DevTimeCard({ cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem, measuredErrorNs: 0, gps });
    const dir = tempDir("gps-required");
    const service = createTimeService({ config: testConfig(dir.path, { tickIntervalNs: 5_000_000n }), card, nodeKey: identity.nodeKey, logger: silentLogger() });
    try {
      await service.start();
      await waitFor(() => service.health().status === "ok", 10_000, "a first proof");
      gps.set("gpsd reports no fix (TPV mode 1 on /dev/pts/1, 0 satellites used)");
      const reason = "GPS fix required (gpsRequired) but gpsd 127.0.0.1:2947: gpsd reports no fix (TPV mode 1 on /dev/pts/1, 0 satellites used); refusing to sign";
      let refusal: unknown;
      try {
        await service.attestNow();
      } catch (error) {
        refusal = error;
      }
      expect(refusal).to.be.instanceOf(Error);
      expect((refusal as Error).message).to.equal(reason);
      const health = service.health();
      expect(health).to.deep.include({ status: "degraded", reason });
      expect(health.card).to.deep.include({ driver: "dev", state: "degraded", reason: reason.replace(/; refusing to sign$/, "") });
      expect(service.info().card?.state).to.equal("degraded");
      const refusalsBefore = service.stats().accuracyRefusalsTotal;
      await waitFor(() => service.stats().accuracyRefusalsTotal > refusalsBefore, 10_000, "a refused tick");
      gps.set(null);
      await waitFor(() => service.health().status === "ok", 10_000, "signing resumed");
      expect((await service.attestNow()).json.proof.gps).to.deep.include({ fixState: "3d" });
    } finally {
      await service.stop();
      dir.remove();
    }
  });
});

const SYNCED = "7F000001,127.0.0.1,2,1795836881.775814668,-0.000001752,-0.000000012,0.000000023,-0.016,-0.002,0.083,0.000006583,0.000002910,0.1,Normal\n";

describe("a chrony card with a gpsd reference", () => {
  it("reports gpsd's reference instead of none; with gpsRequired and no fix it is degraded with gpsd's reason while chrony serves, and the attestor refuses", async () => {
    const gps = settableGps(true);
    const identity = await devIdentity();
    const card = new ChronyTimeCard({
      key: fileCardKey(identity.cardKey),
      certificateChainPem: identity.certificateChainPem,
      runChronyc: () => Promise.resolve(SYNCED),
      pollIntervalMs: 60_000, // readings by pollNow() only
      // Far above chrony's figures plus a loaded host's anchor: this test is about GPS, not chrony's bound.
      maxBoundNs: 100_000_000,
      maxClockErrorPpb: 15_000,
      gps,
    });
    const { options } = await attestorSetup();
    const attestor = new Attestor({ ...options, card, accuracyNs: 100_000_000, signingErrorBoundNs: 100_000_000, nodeClockNs: () => card.readTimeNs(), signInWorker: false, ticks: false, logger: silentLogger() });
    try {
      attestor.start();
      const status = await card.pollNow();
      expect(status).to.deep.include({ driver: "chrony", state: "degraded", reason: "GPS fix required (gpsRequired) but gpsd 127.0.0.1:2947: no TPV report from gpsd yet", accuracyBoundNs: null });
      // chrony's own figures are still reported: only the GPS requirement is missing.
      expect(status.source).to.equal("chrony 7F000001 127.0.0.1 stratum 2, leap status Normal");
      expect(card.gpsReference()).to.deep.include({ fixState: "none", satellites: 0 });
      expect(() => attestor.attest()).to.throw(/^GPS fix required \(gpsRequired\) but gpsd 127\.0\.0\.1:2947: no TPV report from gpsd yet; refusing to sign$/);
      gps.set(null);
      expect(card.status()).to.deep.include({ state: "serving", reason: null });
      const signed = attestor.attest();
      expect(signed.json.proof.gps).to.deep.include({ fixState: "3d", satellites: 8 });
      // chrony's bound is what is signed, whatever gpsd says.
      expect(signed.proof.accuracy).to.equal(card.accuracyBoundNs(signed.proof.nanoMoment));
      expect(attestor.refusalReason).to.equal(null);
    } finally {
      attestor.stop();
      card.close();
    }
    expect(gps.closed).to.equal(true);
  });
});

describe("gpsd settings and createCard", () => {
  it("refuses gpsRequired without gpsdHost", () => {
    const dir = tempDir("gps-config");
    try {
      let caught: unknown;
      try {
        testConfig(dir.path, { gpsRequired: true });
      } catch (error) {
        caught = error;
      }
      expect(caught).to.be.instanceOf(ValidationError);
      expect((caught as ValidationError).field).to.equal("config.gpsRequired");
      expect((caught as Error).message).to.contain("needs gpsdHost");
      expect(testConfig(dir.path, { gpsRequired: true, gpsdHost: "127.0.0.1" })).to.deep.include({ gpsRequired: true, gpsdHost: "127.0.0.1", gpsdPort: 2947, gpsStaleAfterMs: 5_000 });
    } finally {
      dir.remove();
    }
  });

  it("builds the dev card on gpsd when gpsdHost is set, logs gpsd's connection and malformed lines, and closes the connection with the card", async () => {
    const gpsd = await fakeGpsd();
    const dir = tempDir("gps-create");
    const logged: { msg: string; malformedLinesTotal?: number }[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => logged.push(JSON.parse(line) as { msg: string }) });
    const identity = await devIdentity();
    const card = createCard("dev", { cardKey: identity.cardKey, certificateChainPem: identity.certificateChainPem }, testConfig(dir.path, { gpsdHost: "127.0.0.1", gpsdPort: gpsd.port }), logger);
    try {
      await waitFor(() => gpsd.received.length > 0, 10_000, "the WATCH command");
      gpsd.send(`${TPV_3D}\n${SKY_8}\n${"garbage\n".repeat(10)}`);
      await waitFor(() => card.gpsReference()?.satellites === 8, 10_000, "the fix");
      expect(card.gpsReference()).to.deep.include({ fixState: "3d", satellites: 8 });
      // Not required: no refusal, whatever the fix.
      expect(card.signingRefusal?.()).to.equal(null);
      await waitFor(() => logged.some((entry) => entry.malformedLinesTotal === 10), 10_000, "the 10th malformed line logged");
      expect(logged.map((entry) => [entry.msg, entry.malformedLinesTotal])).to.deep.equal([
        ["gpsd connected: watching TPV, SKY and PPS reports", undefined],
        ["gpsd sent a malformed line; dropped", 1],
        ["gpsd sent a malformed line; dropped", 10],
      ]);
    } finally {
      card.close();
      dir.remove();
    }
    await waitFor(() => gpsd.sockets.every((socket) => socket.destroyed || socket.readableEnded), 10_000, "the connection closed");
    await gpsd.close();
  });
});
