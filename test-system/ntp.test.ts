/**
 * The node's NTP time host (node/ntp, docs/protocol.md §9.8) against real NTP clients, as an operator's machines
 * would use it (issue 26.4):
 *
 * - chronyd (Debian `chrony`) as a client: `-x` (it never sets the system clock), a temporary config naming the
 *   node as its one server, its own command socket and pid file in a private temporary folder, no NTP or command
 *   port of its own; `chronyc -h <socket> ntpdata/sources` reads what it measured and decided;
 * - sntp (Debian `sntp`, NTPsec's ntpdig): it always asks port 123, which an unprivileged test cannot bind and the
 *   host's own NTP server may hold, so it runs as itself (`/usr/bin/ntpdig`, its code unchanged) with Python's
 *   getaddrinfo told to give the node's port instead of 123: the request, the checks and the report are sntp's.
 *
 * What a client can check of the node's bound: the true offset between the node's clock and the client's lies
 * within rootDelay/2 + rootDispersion + delay/2 of what the client measures (RFC 5905 §11.2: the root distance,
 * plus the half round trip that path asymmetry can hide). The dev card reads the host clock the client compares
 * against, so the measured offset must lie within that: the node's bound (its root dispersion) plus half the
 * measured delay. The node signs 1 ms here, not the dev card's 1 µs: its clock is the host clock anchored once through
 * a JavaScript event loop, which on a busy shared machine was measured tens of µs from the wall clock the kernel
 * timestamps chronyd's packets with, and the check must hold on such a machine. Each process the tests start binds 127.0.0.1 only and is stopped in afterEach, also on failure.
 * Clients run asynchronously: the node answers from this process's event loop, which a synchronous spawn would stop.
 */
import { expect } from "chai";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestNode, waitFor, type TestNode } from "../test/node/api/helpers";

const CHRONYD = "/usr/sbin/chronyd";
const NS_PER_SECOND = 1e9;

/** A chronyd that only measures: one server (the node), no clock control, its command socket in a private folder. */
class ChronydClient {
  readonly dir = mkdtempSync(join(tmpdir(), "ats-ntp-chronyd-"));
  readonly socketPath = join(this.dir, "chronyd.sock");
  #process: ChildProcess | undefined;
  #log = "";

  /** `pollLog2`: chrony's minpoll = maxpoll, log2 s (−4: every 1/16 s). */
  start(port: number, pollLog2: number): void {
    chmodSync(this.dir, 0o700); // chronyd refuses a command socket in a folder others can write to
    writeFileSync(
      join(this.dir, "chrony.conf"),
      [
        `server 127.0.0.1 port ${port} iburst minpoll ${pollLog2} maxpoll ${pollLog2}`,
        "port 0", // no NTP server of its own
        "cmdport 0", // no UDP command port: the Unix socket only
        `bindcmdaddress ${this.socketPath}`,
        `pidfile ${join(this.dir, "chronyd.pid")}`,
        "",
      ].join("\n"),
    );
    // -d: foreground, log to stderr (read for "KoD"); -x: never touch the system clock; -u root: stay the user it
    // runs as (no switch to _chrony, which could not reach the temporary folder).
    this.#process = spawn(CHRONYD, ["-d", "-x", "-u", "root", "-f", join(this.dir, "chrony.conf")], { stdio: ["ignore", "ignore", "pipe"] });
    this.#process.stderr!.on("data", (chunk: Buffer) => (this.#log = (this.#log + chunk.toString()).slice(-64_000)));
  }

  get log(): string {
    return this.#log;
  }

  /** `chronyc -h <socket> <command>`'s output; rejects with chronyc's words when it fails. */
  async chronyc(...command: string[]): Promise<string> {
    const run = await runProgram("chronyc", ["-h", this.socketPath, ...command]);
    if (run.status !== 0) throw new Error(`chronyc ${command.join(" ")} failed (${run.status}): ${run.stderr}${run.stdout}`);
    return run.stdout;
  }

  /** `chronyc ntpdata` as "Field name" → value, or null before the daemon answers / has data. */
  async ntpdata(): Promise<Record<string, string> | null> {
    let text: string;
    try {
      text = await this.chronyc("ntpdata", "127.0.0.1");
    } catch {
      return null;
    }
    const fields: Record<string, string> = {};
    for (const line of text.split("\n")) {
      const match = /^([^:]+?)\s*:\s(.*)$/.exec(line);
      if (match !== null) fields[match[1]!] = match[2]!.trim();
    }
    return fields["Total valid RX"] === undefined || fields["Total valid RX"] === "0" ? null : fields;
  }

  /** The selection state of the node in `chronyc -c sources` ("*": selected, "?": unusable, …), or null. */
  async sourceState(): Promise<string | null> {
    try {
      const line = (await this.chronyc("-c", "sources")).split("\n").find((row) => row.includes(",127.0.0.1,"));
      return line?.split(",")[1] ?? null;
    } catch {
      return null;
    }
  }

  async stop(): Promise<void> {
    const child = this.#process;
    this.#process = undefined;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Seconds from chronyc's "0.000012345 seconds" or "-0.000012345 seconds". */
function seconds(text: string | undefined): number {
  const match = /^([+-]?[0-9.]+) seconds/.exec(text ?? "");
  if (match === null) throw new Error(`not a chronyc duration: ${JSON.stringify(text)}`);
  return Number(match[1]);
}

interface SntpRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a program to its end without blocking the event loop (10 s at most); its exit status and output. */
function runProgram(file: string, args: readonly string[]): Promise<SntpRun> {
  return new Promise((resolve) => {
    execFile(file, args, { encoding: "utf8", timeout: 10_000 }, (error, stdout, stderr) => {
      const status = error === null ? 0 : typeof error.code === "number" ? error.code : null;
      resolve({ status, stdout, stderr });
    });
  });
}

/** Waits (bounded) until the asynchronous `predicate` holds. */
async function waitForAsync(predicate: () => Promise<boolean>, what: () => string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** sntp (ntpdig) as shipped, asking 127.0.0.1:`port` instead of :123 (see the module comment), JSON output. */
function sntp(port: number): Promise<SntpRun> {
  const program = [
    "import socket, sys",
    "real_getaddrinfo = socket.getaddrinfo",
    `socket.getaddrinfo = lambda host, port, *rest, **named: real_getaddrinfo(host, ${port}, *rest, **named)`,
    "sys.argv = ['sntp', '-j', '-t', '3', '127.0.0.1']",
    "exec(compile(open('/usr/bin/ntpdig').read(), '/usr/bin/ntpdig', 'exec'))",
  ].join("\n");
  return runProgram("/usr/bin/python3", ["-c", program]);
}

describe("NTP time host with real NTP clients (chronyd, sntp)", function () {
  this.timeout(120_000);
  let t: TestNode | undefined;
  let chronyd: ChronydClient | undefined;
  afterEach(async () => {
    await chronyd?.stop();
    chronyd = undefined;
    await t?.close();
    t = undefined;
  });

  const ntpPort = (node: TestNode): number => Number(new URL(node.node.endpoints.ntp).port);
  /** An NTP-serving node whose signed accuracy a dev card on a busy machine meets (see the module comment). */
  const BOUND_1_MS = { accuracyNs: 1_000_000, maxAcceptableDriftNs: "1000000" };

  it("chronyd selects the node as a stratum-1 source, reads the bound as root dispersion, and measures an offset within it", async () => {
    t = await startTestNode({ overrides: { ntpEnabled: true, ntpPort: 0, ntpClientIntervalMs: 0, ...BOUND_1_MS } });
    const accuracyNs = t.service.info().accuracyNs;
    chronyd = new ChronydClient();
    chronyd.start(ntpPort(t), -4);
    await waitForAsync(async () => (await chronyd!.sourceState()) === "*", () => `chronyd to select the node (log: ${chronyd!.log})`, 30_000);
    const data = await chronyd.ntpdata();
    expect(data, "ntpdata").to.not.equal(null);
    expect(data).to.deep.include({ "Leap status": "Normal", Mode: "Server", Stratum: "1", "Reference ID": "4C4F434C (LOCL)" });
    const rootDispersionS = seconds(data!["Root dispersion"]);
    const rootDelayS = seconds(data!["Root delay"]);
    const offsetS = seconds(data!["Offset"]);
    const delayS = seconds(data!["Peer delay"]);
    // chronyc prints the root dispersion to the µs; the node rounds the bound up to 2^-16 s (15.26 µs) units.
    expect(rootDispersionS * NS_PER_SECOND + 1_000, `root dispersion ${rootDispersionS} s vs the signed accuracy ${accuracyNs} ns`).to.be.at.least(accuracyNs);
    expect(rootDispersionS * NS_PER_SECOND - 1_000, "at most one 15.26 µs unit above it").to.be.at.most(accuracyNs + 15_259);
    expect(rootDelayS).to.equal(0);
    const limitS = rootDelayS / 2 + rootDispersionS + 1e-6 + delayS / 2; // + 1 µs: chronyc's rounding of the dispersion
    expect(Math.abs(offsetS), `|offset| ${offsetS} s (delay ${delayS} s) within root distance + delay/2 = ${limitS} s`).to.be.at.most(limitS);
  });

  it("sntp shows an offset within the node's bound", async () => {
    t = await startTestNode({ overrides: { ntpEnabled: true, ntpPort: 0, ntpClientIntervalMs: 0, ...BOUND_1_MS } });
    await waitFor(() => t!.service.health().status === "ok", "the node to sign"); // before that, it answers LI 3
    const run = await sntp(ntpPort(t));
    expect(run.status, `sntp: ${run.stderr}${run.stdout}`).to.equal(0);
    const report = JSON.parse(run.stdout.trim()) as { offset: number; precision: number; stratum: number; leap: string };
    expect(report).to.deep.include({ stratum: 1, leap: "no-leap" });
    // sntp's "precision" is its error estimate of the offset: the server's root distance plus half the delay.
    expect(report.precision * NS_PER_SECOND, "sntp's error estimate covers the node's bound").to.be.at.least(t.service.info().accuracyNs);
    expect(Math.abs(report.offset), `|offset| ${report.offset} s within ±${report.precision} s`).to.be.at.most(report.precision);
  });

  it("a degraded node answers LI 3: chronyd reads 'Not synchronised' and stops accepting its samples; sntp drops the reply", async () => {
    t = await startTestNode({ overrides: { ntpEnabled: true, ntpPort: 0, ntpClientIntervalMs: 0, ...BOUND_1_MS } });
    chronyd = new ChronydClient();
    chronyd.start(ntpPort(t), -4);
    await waitForAsync(async () => (await chronyd!.sourceState()) === "*", () => `chronyd to select the node (log: ${chronyd!.log})`, 30_000);

    // The card reports an error above the accuracy the node signs: the node refuses to sign (health "degraded").
    t.card.simulateMeasuredError(t.service.info().accuracyNs + 1);
    await waitFor(() => t!.service.health().status === "degraded", "the node to refuse to sign");
    await waitForAsync(async () => (await chronyd!.ntpdata())?.["Leap status"] === "Not synchronised", () => "chronyd to read LI 3", 10_000);
    const before = (await chronyd.ntpdata())!;
    const validBefore = Number(before["Total valid RX"]);
    await waitForAsync(async () => Number((await chronyd!.ntpdata())?.["Total valid RX"] ?? 0) >= validBefore + 8, () => "eight more replies", 10_000);
    const after = (await chronyd.ntpdata())!;
    // Valid packets, not good ones: chrony does not take the time of a server that says it is unsynchronised.
    expect(Number(after["Total good RX"]), `good RX ${before["Total good RX"]} → ${after["Total good RX"]}`).to.equal(Number(before["Total good RX"]));

    const run = await sntp(ntpPort(t));
    expect(run.status).to.equal(1);
    expect(`${run.stderr}${run.stdout}`).to.include("Response dropped: leap not in sync");
  });

  it("a client polling faster than the node allows gets Kiss-o'-Death RATE: chronyd logs it, sntp drops the reply", async () => {
    t = await startTestNode({ overrides: { ntpEnabled: true, ntpPort: 0, ntpClientIntervalMs: 60_000, ntpClientBurst: 2 } });
    chronyd = new ChronydClient();
    chronyd.start(ntpPort(t), -4); // 16 requests a second against a limit of one a minute after a burst of two
    await waitFor(() => chronyd!.log.includes("KoD RATE"), `chronyd to report the Kiss-o'-Death (log: ${chronyd.log})`, 20_000);
    expect(chronyd.log).to.match(/Received KoD RATE from 127\.0\.0\.1/);
    await chronyd.stop();
    chronyd = undefined;

    const run = await sntp(ntpPort(t)); // the same address: its bucket is empty
    expect(run.status).to.equal(1);
    expect(`${run.stderr}${run.stdout}`).to.include("stratum 0, probable KOD packet");
    const metrics = await t.node.metrics.render();
    expect(metrics).to.match(/timerpc_ntp_requests_total\{outcome="rate_limited"\} [1-9]/);
  });
});
