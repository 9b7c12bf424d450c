/**
 * The GPS reference from a real gpsd (issue 26.2): gpsfake (Debian package gpsd-clients) starts its own gpsd on a
 * free loopback port and feeds it, through a pty, an NMEA 0183 log the repo ships (test-system/fixtures/). A dev
 * node with gpsdHost/gpsdPort and gpsRequired reads gpsd's JSON (TPV, SKY, PPS). The test checks that
 * - with the 3-D fix log, every proof carries gpsd's reference (fix 3d, the 8 satellites the log's GGA and GSA
 *   use), the proofs still verify (the card's clock is what is signed), and /node/info and /health say serving/ok;
 * - once gpsd replays the no-fix log instead (same port: the node's client reconnects on its own), the node is
 *   degraded, says why in /health and /node/info (gpsd reports no fix, TPV mode 1), and signs nothing: no proof is
 *   published while it stays so, and on-demand signing is refused with the same reason.
 * Each gpsfake runs in its own process group, stopped (SIGTERM, then SIGKILL) after its part and also on failure.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { expect } from "chai";
import pino from "pino";
import { startDevNode, type DevNode } from "../node/devNode";
import { startNode, type RunningNode } from "../node/server";
import type { CardStatus } from "../node/card/types";
import type { SignedTime } from "../node/core/types";
import type { ProofJson } from "../protocol/types";
import { contractProofFromJson } from "../client/contractProof";
import { verifyDevNodeProof } from "./devProof";

const GPSFAKE = "gpsfake";
const FIXTURES = join(__dirname, "fixtures");
/** The satellites the 3-D fix log uses (GGA field 7 "08", twelve GSA slots of which 8 filled). */
const LOG_SATELLITES_USED = 8;
/** Wide enough for the dev card's host-clock anchor under a loaded CI machine: this test is about GPS, not accuracy. */
const ACCURACY_NS = 1_000_000;
const STALE_AFTER_MS = 3_000;

/** A free TCP port on 127.0.0.1 (the kernel's pick, released for gpsd to bind). */
async function freeTcpPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * gpsfake replaying `log` in a loop (no -1: the fix must last as long as the test reads it), 0.1 s per sentence,
 * its gpsd on `port` (gpsd binds loopback only unless -G is given). Its own process group, so that stopping it
 * stops the gpsd it started too.
 */
function startGpsfake(log: string, port: number, output: string[]): ChildProcess {
  const child = spawn(GPSFAKE, ["-q", "-P", String(port), "-c", "0.1", join(FIXTURES, log)], { stdio: ["ignore", "pipe", "pipe"], detached: true });
  for (const stream of [child.stdout, child.stderr]) stream?.setEncoding("utf8").on("data", (chunk: string) => output.push(...chunk.trimEnd().split("\n")));
  return child;
}

async function stopGroup(child: ChildProcess | null): Promise<void> {
  if (child === null || child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal); // the group of the gpsfake this test started: gpsfake and its gpsd
    } catch {
      // already gone
    }
  };
  signalGroup("SIGTERM");
  const timer = setTimeout(() => signalGroup("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
  // gpsd may outlive gpsfake by a moment: make sure nothing of the group is left.
  signalGroup("SIGKILL");
}

async function waitUntil<T>(what: string, timeoutMs: number, probe: () => Promise<T | null> | T | null, evidence: () => string = () => ""): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${evidence() === "" ? "" : `\n${evidence()}`}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("GPS reference from a real gpsd fed by gpsfake (test-system)", function () {
  this.timeout(180_000);

  let gpsfake: ChildProcess | null = null;
  let node: DevNode | null = null;
  const gpsfakeOutput: string[] = [];

  after(async () => {
    await node?.close();
    await stopGroup(gpsfake);
  });

  it("reports gpsd's 3-D fix beside proofs that still verify; with gpsRequired and no fix the node is degraded, says why, and signs nothing", async () => {
    const port = await freeTcpPort();
    gpsfake = startGpsfake("gps-3d-fix.nmea", port, gpsfakeOutput);
    let running: RunningNode | null = null;
    node = await startDevNode({
      startNode: async (parameters) => (running = await startNode(parameters)),
      env: {},
      cwd: process.cwd(),
      logger: () => pino({ level: "silent" }),
      overrides: {
        gpsdHost: "127.0.0.1",
        gpsdPort: port,
        gpsRequired: true,
        gpsStaleAfterMs: STALE_AFTER_MS,
        accuracyNs: ACCURACY_NS,
        maxAcceptableDriftNs: BigInt(ACCURACY_NS),
        grpcEnabled: false,
      },
    });
    const { service, endpoints } = running!;
    const cardState = () => `card: ${JSON.stringify(service.info().card)}\ngpsfake:\n${gpsfakeOutput.join("\n")}`;

    // gpsd's first SKY of a cycle can be partial (the GSV sentences arrive one by one): wait for the whole fix.
    const serving = await waitUntil(
      "the node to serve with gpsd's 3-D fix",
      60_000,
      () => {
        const card = service.info().card;
        return service.health().status === "ok" && card?.state === "serving" && card.source?.includes(`3d fix, ${LOG_SATELLITES_USED} satellites`) === true ? card : null;
      },
      cardState,
    );
    expect(serving).to.deep.include({ driver: "dev", reason: null, accuracyBoundNs: null });
    expect(serving.source).to.equal(`gpsd 127.0.0.1:${port}: 3d fix, ${LOG_SATELLITES_USED} satellites, PPS offset 0 ns`);

    // Over REST: the proof carries gpsd's reference (unsigned), and verifies: the card's clock signed the moment.
    const body = await waitUntil("a proof with the 8 satellites", 30_000, async () => {
      const json = (await (await fetch(`${endpoints.rest}/time/current`)).json()) as ProofJson;
      return json.proof.gps?.satellites === LOG_SATELLITES_USED ? json : null;
    });
    const gps = body.proof.gps!;
    // gpsfake's pty carries no PPS: no edge, offset 0.
    expect(gps).to.deep.include({ fixState: "3d", satellites: LOG_SATELLITES_USED, ppsOffsetNs: 0 });
    // Observed when gpsd's last TPV arrived, on the card's clock: before the moment, within the staleness bound.
    const observedAgeNs = BigInt(body.nanoMoment) - BigInt(gps.observedAtNs);
    expect(observedAgeNs >= 0n && observedAgeNs <= BigInt(STALE_AFTER_MS) * 1_000_000n, `observed ${observedAgeNs} ns before the moment`).to.equal(true);
    const proof = contractProofFromJson(body);
    const verdict = verifyDevNodeProof(proof, node.nodeAddress, BigInt(ACCURACY_NS));
    expect(verdict, JSON.stringify(verdict)).to.deep.include({ valid: true });
    const healthOk = (await (await fetch(`${endpoints.rest}/health`)).json()) as { status: string; card: CardStatus };
    expect(healthOk.status).to.equal("ok");

    // gpsd now replays the no-fix log on the same port; the node's client reconnects by itself.
    await stopGroup(gpsfake);
    gpsfake = startGpsfake("gps-no-fix.nmea", port, gpsfakeOutput);
    const published: SignedTime[] = [];
    service.onProof((signed) => published.push(signed));
    const noFix = /^GPS fix required \(gpsRequired\) but gpsd 127\.0\.0\.1:\d+: gpsd reports no fix \(TPV mode 1 on \/dev\/pts\/\d+, 0 satellites used\)$/;
    const degradedCard = await waitUntil("the card to report gpsd's no-fix", 60_000, () => {
      const card = service.info().card;
      return card?.state === "degraded" && noFix.test(card.reason ?? "") ? card : null;
    }, cardState);
    expect(degradedCard.source).to.equal(`gpsd 127.0.0.1:${port}: no fix, 0 satellites, PPS offset 0 ns`);

    // Signs nothing: an on-demand proof is refused with gpsd's reason, and no tick publishes one while refusals
    // are counted (each refused tick is one).
    const refusal = await service.attestNow().then(
      () => null,
      (error: Error) => error.message,
    );
    expect(refusal).to.match(/GPS fix required \(gpsRequired\) but gpsd 127\.0\.0\.1:\d+: (gpsd reports no fix \(TPV mode 1|gpsd's last TPV report)/);
    const publishedWhenRefused = published.length;
    const refusalsBefore = service.stats().accuracyRefusalsTotal;
    await waitUntil("20 refused ticks", 30_000, () => (service.stats().accuracyRefusalsTotal >= refusalsBefore + 20 ? true : null));
    expect(published.length).to.equal(publishedWhenRefused);

    // GET /health and /node/info say degraded and why (the last proof is still within its serving age).
    const health = (await (await fetch(`${endpoints.rest}/health`)).json()) as { status: string; reason: string; card: CardStatus };
    expect(health.status).to.equal("degraded");
    expect(health.reason).to.match(/^GPS fix required \(gpsRequired\) but gpsd 127\.0\.0\.1:\d+: .*; refusing to sign$/);
    expect(health.card.state).to.equal("degraded");
    const info = (await (await fetch(`${endpoints.rest}/node/info`)).json()) as { card: CardStatus };
    expect(info.card).to.deep.include({ driver: "dev", state: "degraded" });
    expect(info.card.reason).to.match(noFix);
  });
});
