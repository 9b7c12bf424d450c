/**
 * The NTP time host's socket (node/ntp/server.ts) with a UDP client written here: replies, drops, Kiss-o'-Death
 * and its budget against a fake clock; then the whole node (startNode with ntpEnabled) serving its card's time,
 * the bound and its health (LI 3 while degraded or tampered), and its metrics.
 */
import { expect } from "chai";
import { createSocket, type Socket } from "node:dgram";
import pino from "pino";
import { decodeNtpReply, encodeNtpRequest, encodeNtpTimestamp, nsFromNtpShort, ntpShortFromNs, type DecodedNtpReply, type NtpServerState } from "../../../node/ntp/packet";
import { startNtpServer, type RunningNtpServer } from "../../../node/ntp/server";
import { STATE_REFRESH_NS, type NtpClock } from "../../../node/ntp/source";
import { startTestNode, waitFor, type TestNode } from "../api/helpers";

const NOW_NS = 1_795_000_000_000_000_000n;
const silent = pino({ level: "silent" });

/** A UDP client on 127.0.0.1 that collects every datagram it receives, in order. */
class TestClient {
  readonly received: Buffer[] = [];
  readonly #socket: Socket = createSocket("udp4");
  #waiters: (() => void)[] = [];

  static async open(): Promise<TestClient> {
    const client = new TestClient();
    client.#socket.on("message", (message) => {
      client.received.push(message);
      for (const wake of client.#waiters.splice(0)) wake();
    });
    await new Promise<void>((resolve) => client.#socket.bind(0, "127.0.0.1", resolve));
    return client;
  }

  send(bytes: Uint8Array, port: number): void {
    this.#socket.send(bytes, port, "127.0.0.1");
  }

  /** Waits (bounded) until `count` datagrams have arrived. */
  async waitForCount(count: number, timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.received.length < count) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${count} NTP replies (got ${this.received.length})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.#socket.close();
  }
}

function fakeClock(state: Partial<NtpServerState> = {}): NtpClock & { nowNs: bigint } {
  const clock = {
    nowNs: NOW_NS,
    readTimeNs: () => {
      clock.nowNs += 1_000n; // each read 1 µs later: receive and transmit differ
      return clock.nowNs;
    },
    state: (): NtpServerState => ({ leap: 0, stratum: 1, precisionLog2: -20, rootDelayNs: 0n, rootDispersionNs: 40_000n, referenceId: "GPS", referenceTimeNs: NOW_NS - 1_000_000n, ...state }),
  };
  return clock;
}

function timestamp(unixNs: bigint): Buffer {
  const bytes = Buffer.alloc(8);
  encodeNtpTimestamp(unixNs, bytes, 0);
  return bytes;
}

describe("NTP time host socket (node/ntp/server.ts)", function () {
  this.timeout(20_000);
  let server: RunningNtpServer | undefined;
  let client: TestClient | undefined;
  afterEach(async () => {
    client?.close();
    client = undefined;
    await server?.close();
    server = undefined;
  });

  it("answers a client request: mode 4, origin = the client's transmit timestamp, the clock's receive and transmit", async () => {
    const clock = fakeClock();
    server = await startNtpServer({ host: "127.0.0.1", port: 0, clock, clientIntervalMs: 0, clientBurst: 1, logger: silent });
    expect(server.url).to.equal(`ntp://127.0.0.1:${server.port}`);
    client = await TestClient.open();
    const clientTransmitNs = NOW_NS - 123_456_789n;
    client.send(encodeNtpRequest(clientTransmitNs, 3), server.port);
    await client.waitForCount(1);
    const reply = decodeNtpReply(client.received[0]!, NOW_NS);
    expect(client.received[0]!.length).to.equal(48);
    expect(reply).to.deep.include({ leap: 0, version: 3, mode: 4, stratum: 1, referenceId: "GPS", rootDelayNs: 0n });
    expect(Buffer.from(reply.originTimestamp).equals(timestamp(clientTransmitNs))).to.equal(true);
    expect(reply.receiveNs).to.equal(NOW_NS + 1_000n); // the first read, before anything else
    expect(reply.transmitNs).to.equal(NOW_NS + 2_000n);
    expect(reply.rootDispersionNs).to.equal(nsFromNtpShort(ntpShortFromNs(40_000n)));
    expect(reply.rootDispersionNs >= 40_000n).to.equal(true);
    expect(server.stats().answeredTotal).to.equal(1);
  });

  it("drops short packets, mode 6/7 queries, other modes and versions without a reply, and counts each", async () => {
    server = await startNtpServer({ host: "127.0.0.1", port: 0, clock: fakeClock(), clientIntervalMs: 0, clientBurst: 1, logger: silent });
    client = await TestClient.open();
    const request = encodeNtpRequest(NOW_NS);
    const firstByte = (first: number): Uint8Array => Uint8Array.from([first, ...request.subarray(1)]);
    // ntpq's readvar (mode 6) and ntpdc's monlist (mode 7) as they look on the wire: 12 and 8 bytes of header
    client.send(Uint8Array.from([0x16, 0x02, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]), server.port);
    client.send(Uint8Array.from([0x17, 0x00, 0x03, 0x2a, 0, 0, 0, 0]), server.port);
    client.send(firstByte((2 << 3) | 7), server.port); // a 48-byte mode 7
    client.send(firstByte((4 << 3) | 6), server.port); // a 48-byte mode 6
    client.send(request.subarray(0, 47), server.port);
    client.send(firstByte((4 << 3) | 1), server.port); // symmetric active
    client.send(firstByte((4 << 3) | 4), server.port); // a server reply sent back
    client.send(firstByte((5 << 3) | 3), server.port); // version 5
    client.send(firstByte((0 << 3) | 3), server.port); // version 0
    // The server reads datagrams in order: once this one's reply is here, every one before it was handled.
    client.send(request, server.port);
    await client.waitForCount(1);
    expect(client.received).to.have.length(1);
    expect(decodeNtpReply(client.received[0]!, NOW_NS).mode).to.equal(4);
    const stats = server.stats();
    // The two short control queries count as short: under 48 bytes nothing else is read.
    expect(stats.dropped).to.deep.equal({ short: 3, control: 2, mode: 2, version: 2 });
    expect(stats.answeredTotal).to.equal(1);
  });

  it("answers a client over its rate with a Kiss-o'-Death RATE, and drops over-rate requests once the node-wide budget is spent", async () => {
    const nowMs = 1_000; // the limiters' clock stands still: no token comes back during the test
    server = await startNtpServer({ host: "127.0.0.1", port: 0, clock: fakeClock(), clientIntervalMs: 60_000, clientBurst: 2, kissesPerSecond: 1, logger: silent, nowMs: () => nowMs });
    client = await TestClient.open();
    for (const offsetNs of [1n, 2n, 3n]) {
      client.send(encodeNtpRequest(NOW_NS + offsetNs), server.port);
      await client.waitForCount(Number(offsetNs));
    }
    const [first, second, kiss] = client.received.map((datagram) => decodeNtpReply(datagram, NOW_NS));
    expect([first!.stratum, second!.stratum]).to.deep.equal([1, 1]);
    expect(kiss).to.deep.include({ leap: 3, mode: 4, stratum: 0, referenceId: "RATE" });
    expect(Buffer.from(kiss!.originTimestamp).equals(timestamp(NOW_NS + 3n))).to.equal(true);
    expect(kiss!.transmitNs).to.equal(decodeNtpReply(Buffer.concat([Buffer.alloc(40), timestamp(NOW_NS + 3n)]), NOW_NS).transmitNs); // no server time in it
    // The budget (1 kiss) is spent: the next over-rate request is dropped unanswered (and counted).
    client.send(encodeNtpRequest(NOW_NS + 4n), server.port);
    await waitFor(() => server!.stats().rateLimitedDroppedTotal === 1, "the fourth request to be handled");
    expect(server.stats()).to.deep.include({ answeredTotal: 2, kissOfDeathTotal: 1, rateLimitedDroppedTotal: 1 });
    expect(client.received).to.have.length(3);
  });

  it("leaves a request unanswered, counted, when the clock's state cannot be read, and keeps serving", async () => {
    const clock = fakeClock();
    let broken = true;
    const state = clock.state;
    clock.state = () => (broken ? (() => { throw new RangeError("invalid NTP server state: stratum 0 is not 1–15"); })() : state());
    server = await startNtpServer({ host: "127.0.0.1", port: 0, clock, clientIntervalMs: 0, clientBurst: 1, logger: silent });
    client = await TestClient.open();
    client.send(encodeNtpRequest(NOW_NS), server.port);
    await waitFor(() => server!.stats().stateErrorsTotal === 1, "the request to be handled");
    broken = false;
    client.send(encodeNtpRequest(NOW_NS), server.port);
    await client.waitForCount(1);
    expect(server.stats()).to.deep.include({ answeredTotal: 1, stateErrorsTotal: 1 });
  });

  it("names the port and the setting when the port is taken", async () => {
    server = await startNtpServer({ host: "127.0.0.1", port: 0, clock: fakeClock(), clientIntervalMs: 0, clientBurst: 1, logger: silent });
    const error = await startNtpServer({ host: "127.0.0.1", port: server.port, clock: fakeClock(), clientIntervalMs: 0, clientBurst: 1, logger: silent, settingNames: { port: "ATS_NTP_PORT or ntpPort", host: "ATS_NTP_HOST or ntpHost" } }).then(
      () => null,
      (caught: unknown) => caught as Error,
    );
    expect(error?.message).to.equal(`NTP port ${server.port} is already in use on 127.0.0.1 (another NTP server such as chronyd or ntpd? set ATS_NTP_PORT or ntpPort)`);
  });
});

describe("NTP time host of a node (startNode with ntpEnabled)", function () {
  this.timeout(30_000);
  let t: TestNode | undefined;
  let client: TestClient | undefined;
  afterEach(async () => {
    client?.close();
    client = undefined;
    await t?.close();
    t = undefined;
  });

  async function ask(port: number): Promise<DecodedNtpReply> {
    const before = client!.received.length;
    client!.send(encodeNtpRequest(BigInt(Date.now()) * 1_000_000n), port);
    await client!.waitForCount(before + 1);
    return decodeNtpReply(client!.received[before]!, BigInt(Date.now()) * 1_000_000n);
  }

  /** Waits out the NTP state's reuse interval, so that the next reply reflects the health read now. */
  const pastStateRefresh = () => new Promise((resolve) => setTimeout(resolve, Number(STATE_REFRESH_NS / 1_000_000n) + 5));

  it("serves the card's time at stratum 1 with the signed accuracy as root dispersion; LI 3 while degraded, again 0 after; LI 3 once tampered", async () => {
    t = await startTestNode({ overrides: { ntpEnabled: true, ntpPort: 0, ntpHost: "127.0.0.1", ntpClientIntervalMs: 0 } });
    const port = Number(new URL(t.node.endpoints.ntp).port);
    expect(t.node.endpoints.ntp).to.equal(`ntp://127.0.0.1:${port}`);
    client = await TestClient.open();
    await waitFor(() => t!.service.health().status === "ok", "the node to sign");
    await pastStateRefresh();

    const cardBeforeNs = t.service.cardNowNs();
    const reply = await ask(port);
    const cardAfterNs = t.service.cardNowNs();
    expect(reply).to.deep.include({ leap: 0, version: 4, mode: 4, stratum: 1, referenceId: "LOCL", precisionLog2: -20, rootDelayNs: 0n });
    const accuracyNs = BigInt(t.service.info().accuracyNs);
    expect(reply.rootDispersionNs >= accuracyNs, `${reply.rootDispersionNs} ≥ ${accuracyNs}`).to.equal(true);
    expect(reply.rootDispersionNs - accuracyNs < 15_259n).to.equal(true); // at most one short-format unit more
    // Receive and transmit are card-clock readings made while the request was handled.
    expect(reply.receiveNs >= cardBeforeNs - 1n && reply.transmitNs <= cardAfterNs + 1n && reply.receiveNs <= reply.transmitNs).to.equal(true);
    expect(reply.referenceTimeNs !== null && reply.referenceTimeNs <= reply.receiveNs).to.equal(true);

    t.card.simulateMeasuredError(t.service.info().accuracyNs + 1);
    await waitFor(() => t!.service.health().status === "degraded", "the node to refuse to sign");
    await pastStateRefresh();
    const degraded = await ask(port);
    expect(degraded).to.deep.include({ leap: 3, stratum: 1, referenceId: "LOCL" });

    t.card.simulateMeasuredError(0);
    await waitFor(() => t!.service.health().status === "ok", "the node to sign again");
    await pastStateRefresh();
    expect((await ask(port)).leap).to.equal(0);

    t.card.simulateTamper("enclosure opened");
    await waitFor(() => t!.service.health().status === "tampered", "the tamper to latch");
    await pastStateRefresh();
    expect((await ask(port)).leap).to.equal(3);
  });

  it("counts answers, Kiss-o'-Death replies and drops in the node's metrics", async () => {
    t = await startTestNode({ overrides: { ntpEnabled: true, ntpPort: 0, ntpClientIntervalMs: 3_600_000, ntpClientBurst: 1 } });
    const port = Number(new URL(t.node.endpoints.ntp).port);
    client = await TestClient.open();
    client.send(Uint8Array.from([0x17, 0, 3, 0x2a, ...new Uint8Array(44)]), port); // mode 7, 48 bytes
    await ask(port);
    const kiss = await ask(port); // burst 1: the second request within the hour is over the rate
    expect(kiss).to.deep.include({ stratum: 0, referenceId: "RATE", leap: 3 });
    const text = await t.node.metrics.render();
    expect(text).to.include('timerpc_ntp_requests_total{outcome="answered"} 1');
    expect(text).to.include('timerpc_ntp_requests_total{outcome="rate_limited"} 1');
    expect(text).to.include('timerpc_ntp_packets_dropped_total{reason="control"} 1');
    expect(text).to.include('timerpc_ntp_packets_dropped_total{reason="short"} 0');
  });

  it("is off by default: no ntp endpoint", async () => {
    t = await startTestNode();
    expect(t.node.endpoints.ntp).to.equal("");
    expect(await t.node.metrics.render()).not.to.include("timerpc_ntp_requests_total{");
  });
});
