import { expect } from "chai";
import Database from "better-sqlite3";
import { readFileSync, realpathSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { NotFoundError, RateLimitError, UnavailableError, ValidationError } from "../../../protocol/errors";
import { proofFromJson } from "../../../protocol/json";
import type { CallbackRequest, ResolvedAddress } from "../../../node/schedules/callbackGuard";
import {
  parseExecuteAt,
  retryDelayMs,
  ScheduleService,
  validateCallbackUrl,
  validateExecuteAt,
  type ScheduleDeliveryBody,
  type ScheduleServiceOptions,
} from "../../../node/schedules";
import * as sqlite from "../../../lib/sqlite";
import { createNodeMetrics } from "../../../node/api/metrics";
import { nsToBlob } from "../../../lib/sqlite";
import { buildService, expectRejects, scheduleServiceOptions, startCallbackServer, tempDir, testConfig, waitFor, type CallbackServer } from "../core/helpers";

const MS = 1_000_000n;

function nowNs(): bigint {
  return BigInt(Date.now()) * MS;
}

describe("schedule validation (pure)", () => {
  it("parses executeAt only as a decimal string of ns", () => {
    expect(parseExecuteAt("1732268493123456789")).to.equal(1_732_268_493_123_456_789n);
    expect(parseExecuteAt("0")).to.equal(0n);
    for (const bad of ["-1", "1e18", "0x10", "01", " 1", "1.5", "", 12, null, undefined, "9".repeat(40)]) {
      expect(() => parseExecuteAt(bad), String(bad)).to.throw(ValidationError, "executeAt");
    }
    expect(() => parseExecuteAt(-1n)).to.throw(ValidationError);
  });

  it("bounds executeAt between now − maxPast and now + horizon", () => {
    const window = { nowNs: 1_000_000n * MS, maxHorizonNs: 10n * MS, maxPastNs: 5n * MS };
    expect(validateExecuteAt(window.nowNs + 10n * MS, window)).to.equal(window.nowNs + 10n * MS);
    expect(validateExecuteAt(window.nowNs - 5n * MS, window)).to.equal(window.nowNs - 5n * MS);
    expect(() => validateExecuteAt(window.nowNs + 10n * MS + 1n, window)).to.throw(ValidationError, "in the future");
    expect(() => validateExecuteAt(window.nowNs - 5n * MS - 1n, window)).to.throw(ValidationError, "in the past");
  });

  it("allows only http(s) callbacks to loopback unless a host is allowed (SSRF guard)", () => {
    expect(validateCallbackUrl("http://127.0.0.1:8080/cb", [])).to.equal("http://127.0.0.1:8080/cb");
    expect(validateCallbackUrl("https://localhost/cb", [])).to.equal("https://localhost/cb");
    expect(validateCallbackUrl("http://[::1]:1/", [])).to.equal("http://[::1]:1/");
    expect(validateCallbackUrl("http://127.1/", [])).to.equal("http://127.0.0.1/"); // normalised, still loopback
    expect(() => validateCallbackUrl("http://169.254.169.254/latest/meta-data", [])).to.throw(ValidationError, "not allowed");
    expect(() => validateCallbackUrl("http://example.com/cb", [])).to.throw(ValidationError, "not allowed");
    expect(validateCallbackUrl("http://example.com/cb", ["example.com"])).to.equal("http://example.com/cb");
    expect(validateCallbackUrl("https://dapp.example/cb", ["*"])).to.equal("https://dapp.example/cb");
    expect(validateCallbackUrl("https://93.184.216.34/cb", ["*"])).to.equal("https://93.184.216.34/cb");
    // The wildcard admits public hosts only: private, link-local, CGNAT and IPv6 ULA/link-local/mapped literals
    // must be listed exactly.
    for (const literal of ["169.254.169.254", "10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1", "0.0.0.0", "[fd00::1]", "[fe80::1]", "[::ffff:a00:1]"]) {
      expect(() => validateCallbackUrl(`http://${literal}/cb`, ["*"]), literal).to.throw(ValidationError, "not allowed");
    }
    expect(validateCallbackUrl("http://10.0.0.1/cb", ["*", "10.0.0.1"])).to.equal("http://10.0.0.1/cb");
    expect(() => validateCallbackUrl("ftp://127.0.0.1/x", ["*"])).to.throw(ValidationError, "http or https");
    expect(() => validateCallbackUrl("file:///etc/passwd", ["*"])).to.throw(ValidationError, "http or https");
    expect(() => validateCallbackUrl("http://user:pw@127.0.0.1/", [])).to.throw(ValidationError, "credentials");
    expect(() => validateCallbackUrl("not a url", [])).to.throw(ValidationError, "valid absolute URL");
    expect(() => validateCallbackUrl(`http://127.0.0.1/${"a".repeat(3_000)}`, [])).to.throw(ValidationError, "at most");
    expect(() => validateCallbackUrl(42, [])).to.throw(ValidationError, "callback");
  });

  it("backs off exponentially with bounded jitter", () => {
    expect(retryDelayMs(1, 100, 10_000, () => 0)).to.equal(50);
    expect(retryDelayMs(1, 100, 10_000, () => 0.999999)).to.equal(100);
    expect(retryDelayMs(4, 100, 10_000, () => 0)).to.equal(400);
    expect(retryDelayMs(20, 100, 10_000, () => 0.5)).to.equal(7_500);
    for (let attempt = 1; attempt < 60; attempt += 1) {
      const delay = retryDelayMs(attempt, 100, 10_000, Math.random);
      expect(delay).to.be.within(50, 10_000);
    }
  });
});

/**
 * Temporary data folders, callback servers and started services of one describe block, all released after each
 * test (services first, then servers, then folders), also when the test failed.
 */
function useScheduleFixtures(prefix: string) {
  const dirs: { remove(): void }[] = [];
  const servers: CallbackServer[] = [];
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
    for (const server of servers.splice(0)) await server.close();
    for (const dir of dirs.splice(0)) dir.remove();
  });
  const data = (): string => {
    const dir = tempDir(prefix);
    dirs.push(dir);
    return dir.path;
  };
  return {
    /** Cleanups run after the test (push a stop function; a test that stopped a service itself may pop it). */
    stops,
    data,
    async callbackServer(statuses: number[] = []): Promise<CallbackServer> {
      const server = await startCallbackServer(statuses);
      servers.push(server);
      return server;
    },
    /** A schedule service on its own, with a well-formed (unsigned) proof, stopped after the test. */
    service(overrides: Partial<ScheduleServiceOptions>, { dataDir = data(), start = true } = {}): ScheduleService {
      const schedules = new ScheduleService(scheduleServiceOptions(dataDir, overrides));
      if (start) schedules.start();
      stops.push(() => schedules.stop());
      return schedules;
    },
  };
}

/** A transport that connects nowhere: records each request and answers the statuses in turn (then 200). */
function recordingTransport(statuses: number[] = [], onSend: (request: CallbackRequest) => void = () => undefined) {
  const sent: CallbackRequest[] = [];
  const callbackTransport = async (request: CallbackRequest) => {
    sent.push(request);
    onSend(request);
    return statuses.shift() ?? 200;
  };
  return { sent, callbackTransport };
}

describe("scheduled deliveries", function () {
  this.timeout(60_000);
  const { stops, data, callbackServer } = useScheduleFixtures("schedules");

  async function node(dataDir: string, overrides: Parameters<typeof testConfig>[1] = {}) {
    const built = await buildService(testConfig(dataDir, { scheduleBaseBackoffMs: 20, scheduleMaxBackoffMs: 80, ...overrides }));
    await built.service.start();
    stops.push(() => built.service.stop());
    return built;
  }

  it("delivers { id, executeAt, nanoMoment, proof } with a proof taken at or after executeAt", async () => {
    const server = await callbackServer();
    const { service } = await node(data());
    const executeAtNs = nowNs() + 150n * MS;
    const record = await service.schedule(executeAtNs, server.url);
    expect(record).to.include({ status: "scheduled", attempts: 0, callbackUrl: server.url });
    expect(record.id).to.match(/^[0-9a-f-]{36}$/);
    await waitFor(() => service.getSchedule(record.id).status === "delivered", 20_000, "delivery");
    expect(server.received).to.have.length(1);
    const body = server.received[0]!.body as ScheduleDeliveryBody;
    expect(server.received[0]!.headers["idempotency-key"]).to.equal(record.id);
    expect(body.id).to.equal(record.id);
    expect(body.executeAt).to.equal(executeAtNs.toString());
    const { proof } = proofFromJson({ nanoMoment: body.nanoMoment, proof: body.proof });
    expect(proof.nanoMoment >= executeAtNs).to.equal(true);
    expect(service.verify(proof)).to.deep.equal({ valid: true, reason: null });
    const delivered = service.getSchedule(record.id);
    expect(delivered.attempts).to.equal(1);
    expect(delivered.deliveredAtNs).to.not.equal(null);
    expect(delivered.proof?.nanoMoment).to.equal(body.nanoMoment);
    expect(service.stats().schedulesDeliveredTotal).to.equal(1);
  });

  it("survives a restart: a schedule accepted before stop is delivered once after reopening the same dataDir", async () => {
    const server = await callbackServer();
    const dataDir = data();
    const first = await buildService(testConfig(dataDir));
    await first.service.start();
    const record = await first.service.schedule(nowNs() + 300n * MS, server.url);
    await first.service.stop(); // before executeAt

    const second = await node(dataDir);
    expect(second.service.getSchedule(record.id).status).to.equal("scheduled");
    await waitFor(() => second.service.getSchedule(record.id).status === "delivered", 20_000, "delivery after restart");
    expect(server.received).to.have.length(1);
    await second.service.stop();
    stops.pop();

    // A third start finds nothing pending: no redelivery.
    const third = await node(dataDir);
    expect(third.service.getSchedule(record.id).status).to.equal("delivered");
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(server.received).to.have.length(1);
  });

  it("resumes a row left 'delivering' by a crash (at-least-once: receivers dedupe by id)", async () => {
    const server = await callbackServer();
    const dataDir = data();
    const first = await buildService(testConfig(dataDir));
    await first.service.start();
    const record = await first.service.schedule(nowNs() + 60_000n * MS, server.url);
    await first.service.stop();
    // What a crash between "mark delivering" and the answer leaves behind: status delivering, a claim far ahead.
    const db = new Database(join(dataDir, "schedules.sqlite"));
    db.prepare("UPDATE schedules SET status = 'delivering', attempts = 1, execute_at_ns = ?, next_attempt_at_ns = ? WHERE id = ?").run(
      nsToBlob(nowNs()),
      nsToBlob(nowNs() + 3_600_000n * MS),
      record.id,
    );
    db.close();
    const second = await node(dataDir);
    await waitFor(() => second.service.getSchedule(record.id).status === "delivered", 20_000, "redelivery");
    expect(second.service.getSchedule(record.id).attempts).to.equal(2);
    expect(server.received).to.have.length(1);
  });

  it("retries a failing callback with backoff, then succeeds", async () => {
    const server = await callbackServer([500, 503]);
    const { service } = await node(data());
    const record = await service.schedule(nowNs(), server.url);
    await waitFor(() => service.getSchedule(record.id).status === "delivered", 20_000, "delivery after retries");
    const delivered = service.getSchedule(record.id);
    expect(delivered.attempts).to.equal(3);
    expect(delivered.lastError).to.equal(null);
    expect(server.received).to.have.length(3);
    expect(new Set(server.received.map((entry) => (entry.body as ScheduleDeliveryBody).id))).to.deep.equal(new Set([record.id]));
    expect(service.stats().scheduleDeliveryAttemptsTotal).to.equal(3);
  });

  it("reports the pending schedules and how long the most overdue one has waited (timerpc_schedules_pending, timerpc_schedule_backlog_seconds)", async () => {
    // A receiver that holds every request until released: with one delivery slot the second schedule waits, overdue.
    const held: ServerResponse[] = [];
    const receiver = createServer((_request, response) => held.push(response));
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    stops.push(async () => {
      for (const response of held) response.end();
      await new Promise((resolve) => receiver.close(resolve));
    });
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const { service } = await node(data(), { scheduleMaxConcurrentDeliveries: 1, scheduleMaxConcurrentDeliveriesPerClient: 1, scheduleDeliveryTimeoutMs: 30_000 });
    const metrics = createNodeMetrics({ defaultMetrics: false });
    const unbind = metrics.bindService(service);
    stops.push(async () => unbind());
    const series = async (name: string): Promise<number> => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(await metrics.render())?.[1]);
    expect(await series("timerpc_schedules_pending")).to.equal(0);
    expect(await series("timerpc_schedule_backlog_seconds")).to.equal(0);

    await service.schedule(nowNs(), url);
    const waiting = await service.schedule(nowNs(), url);
    await waitFor(() => held.length === 1, 20_000, "the first delivery in flight");
    expect(service.stats()).to.include({ schedulesPending: 2, scheduleEarliestDueNs: waiting.executeAtNs });
    expect(await series("timerpc_schedules_pending")).to.equal(2);
    const backlog = await series("timerpc_schedule_backlog_seconds");
    expect(backlog).to.be.greaterThan(0).and.lessThan(20);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await series("timerpc_schedule_backlog_seconds")).to.be.greaterThan(backlog);

    held.shift()!.end();
    await waitFor(() => held.length === 1, 20_000, "the second delivery in flight");
    held.shift()!.end();
    await waitFor(() => service.stats().schedulesDeliveredTotal === 2, 20_000, "both delivered");
    expect(await series("timerpc_schedules_pending")).to.equal(0);
    expect(await series("timerpc_schedule_backlog_seconds")).to.equal(0);
    const text = await metrics.render();
    expect(text).to.match(/^timerpc_schedules_finished_total\{outcome="delivered"\} 2$/m);
    expect(text).to.match(/^timerpc_schedule_delivery_attempts_total 2$/m);
  });

  it("marks a schedule failed after maxAttempts, with the last error", async () => {
    const server = await callbackServer([500, 500, 500, 500]);
    const { service } = await node(data(), { scheduleMaxAttempts: 2 });
    const record = await service.schedule(nowNs(), server.url);
    await waitFor(() => service.getSchedule(record.id).status === "failed", 20_000, "failure");
    const failed = service.getSchedule(record.id);
    expect(failed.attempts).to.equal(2);
    expect(failed.lastError).to.contain("HTTP 500");
    expect(failed.nextAttemptAtNs).to.equal(null);
    expect(server.received).to.have.length(2);
  });

  it("does not follow redirects (an allowed host cannot bounce the node elsewhere)", async () => {
    const server = await callbackServer([302]);
    const { service } = await node(data(), { scheduleMaxAttempts: 1 });
    const record = await service.schedule(nowNs(), server.url);
    await waitFor(() => service.getSchedule(record.id).status === "failed", 20_000, "failure");
    expect(service.getSchedule(record.id).lastError).to.contain("HTTP 302");
  });

  it("rejects bad input with ValidationError and persists nothing", async () => {
    const server = await callbackServer();
    const dataDir = data();
    const { service } = await node(dataDir);
    const good = await service.schedule(nowNs() + 60_000n * MS, server.url);
    const bad: [unknown, unknown, string][] = [
      [-1n, server.url, "executeAt"],
      ["1e18", server.url, "decimal string"], // JS callers that bypass the types still get a ValidationError
      [nowNs() + 400n * 86_400_000n * MS, server.url, "in the future"],
      [nowNs() - 3_600_000n * MS, server.url, "in the past"],
      [nowNs(), "ftp://127.0.0.1/x", "http or https"],
      [nowNs(), "http://10.0.0.1/internal", "not allowed"],
      [nowNs(), "::::", "valid absolute URL"],
    ];
    for (const [executeAt, url, message] of bad) {
      await expectRejects(service.schedule(executeAt as bigint, url as string), ValidationError, message as string);
    }
    expect(() => service.getSchedule("00000000-0000-4000-8000-000000000000")).to.throw(NotFoundError);
    expect(() => service.getSchedule("'; DROP TABLE schedules; --")).to.throw(NotFoundError);
    expect(service.getSchedule(good.id).status).to.equal("scheduled");
    // The database holds exactly the one good row and is intact.
    expect(readFileSync(join(dataDir, "schedules.sqlite")).subarray(0, 15).toString()).to.equal("SQLite format 3");
  });

  it("refuses new schedules beyond scheduleMaxPending as unavailable (503), not as a field error", async () => {
    const server = await callbackServer();
    const { service } = await node(data(), { scheduleMaxPending: 2 });
    await service.schedule(nowNs() + 60_000n * MS, server.url);
    await service.schedule(nowNs() + 60_000n * MS, server.url);
    // The node's totals stay out of the answer (details only).
    const refusal = await expectRejects(service.schedule(nowNs() + 60_000n * MS, server.url), UnavailableError);
    expect(refusal.message).to.equal("node holds too many pending schedules");
  });

  it("holds each client to scheduleMaxPendingPerClient, so one client cannot fill the node for everyone", async () => {
    const server = await callbackServer();
    const { service } = await node(data(), { scheduleMaxPending: 10, scheduleMaxPendingPerClient: 2 });
    const at = nowNs() + 60_000n * MS;
    await service.schedule(at, server.url, "key:aaaa");
    await service.schedule(at, server.url, "key:aaaa");
    // A quota (429 / RESOURCE_EXHAUSTED), not a field error: the message names the quota, not executeAt.
    const refusal = await expectRejects(service.schedule(at, server.url, "key:aaaa"), RateLimitError);
    expect(refusal.message).to.equal("too many pending schedules for this client (2, limit 2)");
    expect((await service.schedule(at, server.url, "ip:127.0.0.1")).status).to.equal("scheduled");
  });

  it("refuses to start a second node on the same dataDir (it would redeliver the first one's rows)", async function () {
    this.timeout(30_000); // the second open waits out SQLite's busy timeout (5 s) before giving up
    const dataDir = data();
    const first = await node(dataDir);
    const second = await buildService(testConfig(dataDir));
    let refused: unknown;
    try {
      await second.service.start();
    } catch (error) {
      refused = error;
    } finally {
      await second.service.stop();
    }
    expect(refused).to.be.instanceOf(UnavailableError);
    expect((refused as Error).message).to.contain("in use by another node");
    expect((await first.service.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/")).status).to.equal("scheduled");
  });

  it("opens a schedules file written before client keys existed, keeping its rows", async () => {
    const dataDir = data();
    const old = new Database(join(dataDir, "schedules.sqlite"));
    old.exec(`CREATE TABLE schedules (
      id TEXT PRIMARY KEY, execute_at_ns BLOB NOT NULL, callback_url TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('scheduled', 'delivering', 'delivered', 'failed')),
      attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, created_at_ns BLOB NOT NULL, delivered_at_ns BLOB,
      proof_json TEXT, next_attempt_at_ns BLOB,
      CHECK ((status IN ('scheduled', 'delivering')) = (next_attempt_at_ns IS NOT NULL)))`);
    old
      .prepare("INSERT INTO schedules (id, execute_at_ns, callback_url, status, created_at_ns, delivered_at_ns) VALUES (?, ?, ?, 'delivered', ?, ?)")
      .run("old-row", nsToBlob(1n), "http://127.0.0.1:1/", nsToBlob(1n), nsToBlob(2n));
    old.close();
    const { service } = await node(dataDir);
    expect(service.getSchedule("old-row")).to.include({ id: "old-row", status: "delivered" });
  });
});

describe("scheduled deliveries: state commits", function () {
  this.timeout(30_000);
  const fixtures = useScheduleFixtures("schedules-commits");

  it("commits a row 'delivering' with its proof before the POST starts, and 30 deliveries due together each end delivered after one attempt", async () => {
    // The transport is where the POST would start: what get() reads there, synchronously, is already committed
    // (the store's writes are transactions on this thread). A POST sent before its commit would see 'scheduled'.
    const seenAtPost: { status: string; attempts: number; hasProof: boolean }[] = [];
    const transport = recordingTransport([], (request) => {
      const row = started.get((JSON.parse(request.body) as ScheduleDeliveryBody).id);
      seenAtPost.push({ status: row.status, attempts: row.attempts, hasProof: row.proof !== null && row.proof !== undefined });
    });
    const started = fixtures.service({ maxConcurrentDeliveries: 16, maxConcurrentDeliveriesPerClient: 16, ...transport });
    const executeAtNs = nowNs() + 100n * MS;
    const records = await Promise.all(Array.from({ length: 30 }, () => started.schedule(executeAtNs, "http://127.0.0.1:1/cb")));
    await waitFor(() => records.every((record) => started.get(record.id).status === "delivered"), 20_000, "30 deliveries");
    expect(seenAtPost).to.have.length(30);
    for (const seen of seenAtPost) expect(seen).to.deep.equal({ status: "delivering", attempts: 1, hasProof: true });
    for (const record of records) expect(started.get(record.id).attempts).to.equal(1);
    expect(started.stats()).to.include({ deliveredTotal: 30, attemptsTotal: 30, storeWriteErrorsTotal: 0 });
  });

  it("flushes an accepted schedule's log before answering, commits a failure durably (synchronous FULL), the rest without an fsync", async () => {
    // Every durable commit: the connection's level (SQLite: 1 NORMAL, 2 FULL) before it and inside it.
    const durable: { before: unknown; inside: unknown }[] = [];
    const original = sqlite.commitDurably;
    (sqlite as { commitDurably: typeof original }).commitDurably = (db, commit) => {
      const before = db.pragma("synchronous", { simple: true });
      return original(db, () => {
        durable.push({ before, inside: db.pragma("synchronous", { simple: true }) });
        return commit();
      });
    };
    // Every flush of the store's files (WalSync), done for real.
    const flushed: string[] = [];
    const syncFile: sqlite.FileSync = async (path, kind) => {
      flushed.push(`${kind} ${path}`);
      return sqlite.datasync(path, kind);
    };
    try {
      const dataDir = fixtures.data();
      // The log is named after the real path (a temporary folder may sit behind a symbolic link).
      const realDir = realpathSync(dataDir);
      const log = `file ${join(realDir, "schedules.sqlite-wal")}`;
      const started = fixtures.service({ maxAttempts: 1, syncFile, ...recordingTransport([200, 500]) }, { dataDir });
      const delivered = await started.schedule(nowNs(), "http://127.0.0.1:1/cb");
      expect(flushed, "the accepted row's log (and its folder, first seen), before its id is returned").to.deep.equal([log, `folder ${realDir}`]);
      expect(durable, "no fsync on the event loop for it").to.deep.equal([]);
      await waitFor(() => started.get(delivered.id).status === "delivered", 20_000, "the delivery");
      // 'delivering' and 'delivered' were committed too, at the connection's own level (NORMAL), and not flushed.
      expect(flushed).to.have.length(2);
      expect(durable).to.deep.equal([]);
      const failed = await started.schedule(nowNs(), "http://127.0.0.1:1/cb");
      expect(flushed.slice(2), "the second accepted row").to.deep.equal([log]);
      await waitFor(() => started.get(failed.id).status === "failed", 20_000, "the failure");
      expect(durable, "its failure").to.deep.equal([{ before: 1, inside: 2 }]);
    } finally {
      (sqlite as { commitDurably: typeof original }).commitDurably = original;
    }
  });

  it("answers an accepted schedule only once its log is flushed", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const flushes: string[] = [];
    const syncFile: sqlite.FileSync = async (path, kind) => {
      flushes.push(kind);
      await gate;
      return sqlite.datasync(path, kind);
    };
    const started = fixtures.service({ syncFile });
    let answered = false;
    const answer = started.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/cb").then((record) => {
      answered = true;
      return record;
    });
    await waitFor(() => flushes.length === 1, 5_000, "the flush");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(answered, "no answer while the flush runs").to.equal(false);
    release();
    const record = await answer;
    expect(started.get(record.id)).to.include({ status: "scheduled" });
  });

  it("answers 503 naming the schedule when its log cannot be flushed, and then refuses new schedules without storing them", async () => {
    const flushes: string[] = [];
    const syncFile: sqlite.FileSync = async (path) => {
      flushes.push(path);
      throw Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" });
    };
    const dataDir = fixtures.data();
    const started = fixtures.service({ syncFile }, { dataDir });
    const refusal = (await expectRejects(started.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/cb", "client-a"), UnavailableError)) as UnavailableError;
    const id = String(refusal.details["scheduleId"]);
    expect(refusal.message).to.equal(
      `the schedule store could not confirm schedule ${id} on disk: it may still be delivered once, under that id; the node takes no new schedules until it restarts`,
    );
    expect(refusal.details).to.include({ code: "EIO" });
    // Committed, only not known to be on disk: the row stays, as the answer says.
    expect(started.get(id)).to.include({ status: "scheduled" });
    const later = (await expectRejects(started.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/cb", "client-b"), UnavailableError)) as UnavailableError;
    expect(later.message).to.equal("the schedule store could not flush to disk (EIO): the node takes no new schedules until it restarts");
    expect(flushes, "nothing flushed after the failure").to.have.length(1);
    expect(started.stats().storeWriteErrorsTotal, "the refusal wrote nothing").to.equal(1);
    await started.stop();
    const db = new Database(join(dataDir, "schedules.sqlite"), { readonly: true });
    try {
      expect(db.prepare("SELECT id FROM schedules").all(), "only the first row was written").to.deep.equal([{ id }]);
    } finally {
      db.close();
    }
  });

  it("writes no schedule queued before a flush failed that it was not told of: it is refused, nothing stored", async () => {
    let failFlush: (error: Error) => void = () => undefined;
    const failing = new Promise<never>((_resolve, reject) => (failFlush = reject));
    let flushes = 0;
    const syncFile: sqlite.FileSync = async () => {
      flushes += 1;
      return failing;
    };
    const dataDir = fixtures.data();
    const started = fixtures.service({ syncFile }, { dataDir });
    const first = started.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/first").then(
      () => null,
      (error: unknown) => error as UnavailableError,
    );
    await waitFor(() => flushes === 1, 5_000, "the first schedule's flush");
    // Admitted now (no failure yet), written at the end of the turn: after the flush below has failed.
    const second = started.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/second").then(
      () => null,
      (error: unknown) => error as UnavailableError,
    );
    failFlush(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
    const [firstRefusal, secondRefusal] = await Promise.all([first, second]);
    expect(firstRefusal?.message).to.match(/could not confirm schedule .* on disk: it may still be delivered once/);
    expect(secondRefusal).to.be.instanceOf(UnavailableError);
    expect(secondRefusal?.message).to.equal("the schedule store could not flush to disk (EIO): the node takes no new schedules until it restarts");
    await started.stop();
    const db = new Database(join(dataDir, "schedules.sqlite"), { readonly: true });
    try {
      expect(db.prepare("SELECT callback_url FROM schedules").all()).to.deep.equal([{ callback_url: "http://127.0.0.1:1/first" }]);
    } finally {
      db.close();
    }
  });

  it("stops new schedules after a failed fsync SQLite reports on the store (a failed mark's durable commit)", async () => {
    const original = sqlite.commitDurably;
    (sqlite as { commitDurably: typeof original }).commitDurably = () => {
      throw new Database.SqliteError("disk I/O error", "SQLITE_IOERR_FSYNC");
    };
    try {
      const started = fixtures.service({ maxAttempts: 1, ...recordingTransport([500]) });
      await started.schedule(nowNs(), "http://127.0.0.1:1/cb");
      await waitFor(() => started.stats().storeWriteErrorsTotal === 1, 20_000, "the failed mark's commit");
      const refusal = await expectRejects(started.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/cb"), UnavailableError);
      expect(refusal.message).to.equal("the schedule store could not flush to disk (SQLITE_IOERR_FSYNC): the node takes no new schedules until it restarts");
    } finally {
      (sqlite as { commitDurably: typeof original }).commitDurably = original;
    }
  });

  it("stop() refuses new schedules, and closes the store only after the flush its last schedules wait for", async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let flushes = 0;
    const syncFile: sqlite.FileSync = async (path, kind) => {
      flushes += 1;
      await gate;
      return sqlite.datasync(path, kind);
    };
    const started = fixtures.service({ syncFile });
    const accepted = started.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/cb");
    await waitFor(() => flushes === 1, 5_000, "the flush");
    let stopped = false;
    const stopping = started.stop().then(() => (stopped = true));
    await expectRejects(started.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/cb"), UnavailableError, "the schedule store is closed");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(stopped, "the store stays open while the flush runs").to.equal(false);
    release();
    const record = await accepted;
    await stopping;
    expect(record.status).to.equal("scheduled");
  });

  /**
   * A started service with one delivery slot, on a store where every write the trigger condition `when` matches
   * fails (a disk fault injected as a SQLite trigger; it rolls back that write's whole batch).
   */
  async function serviceWithWriteFault(event: string, when: string, options: Record<string, unknown> = {}) {
    const dataDir = fixtures.data();
    await fixtures.service({}, { dataDir, start: false }).stop(); // creates the file
    fixtures.stops.pop();
    const db = new Database(join(dataDir, "schedules.sqlite"));
    db.exec(`CREATE TRIGGER injected_write_fault BEFORE ${event} ON schedules WHEN ${when}
      BEGIN SELECT RAISE(ABORT, 'injected write fault'); END`);
    db.close();
    const transport = recordingTransport();
    const schedules = fixtures.service({ maxConcurrentDeliveries: 1, maxConcurrentDeliveriesPerClient: 1, ...transport, ...options }, { dataDir });
    return { schedules, transport };
  }

  it("survives a failed store write: the attempt sends nothing, counts nothing, frees its slot, and the row keeps its state", async () => {
    // For one callback only: every 'delivering' write of its row fails.
    const { schedules, transport } = await serviceWithWriteFault("UPDATE OF status", "NEW.status = 'delivering' AND NEW.callback_url LIKE '%/broken'");
    const broken = await schedules.schedule(nowNs() - 10n * MS, "http://127.0.0.1:1/broken");
    await waitFor(() => schedules.stats().storeWriteErrorsTotal === 1, 20_000, "the failed write");
    // The one slot is free again: a healthy schedule is delivered; the broken row is claimed, not due again yet.
    const healthy = await schedules.schedule(nowNs(), "http://127.0.0.1:1/healthy");
    await waitFor(() => schedules.get(healthy.id).status === "delivered", 20_000, "the healthy delivery");
    expect(transport.sent.map((request) => request.url.pathname)).to.deep.equal(["/healthy"]);
    expect(schedules.get(broken.id)).to.include({ status: "scheduled", attempts: 0 });
    expect(schedules.get(broken.id).lastError ?? null).to.equal(null);
    expect(schedules.stats()).to.include({ storeWriteErrorsTotal: 1, attemptsTotal: 1, deliveredTotal: 1, failedTotal: 0 });
  });

  it("survives a failed claim (a store write of the dispatcher): nothing is sent, and the pass is retried a second later, not at once", async () => {
    const { schedules, transport } = await serviceWithWriteFault("UPDATE OF next_attempt_at_ns", "NEW.status = 'scheduled' AND NEW.callback_url LIKE '%/unclaimable'");
    const stuck = await schedules.schedule(nowNs(), "http://127.0.0.1:1/unclaimable");
    await waitFor(() => schedules.stats().storeWriteErrorsTotal >= 1, 20_000, "the failed claim");
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(schedules.stats().storeWriteErrorsTotal, "no retry within the second").to.equal(1);
    await waitFor(() => schedules.stats().storeWriteErrorsTotal >= 2, 5_000, "the retry a second later");
    expect(transport.sent).to.have.length(0);
    expect(schedules.get(stuck.id)).to.include({ status: "scheduled", attempts: 0 });
  });

  it("answers a schedule its store cannot save with UnavailableError (503), counts it, and frees its quota", async () => {
    // One pending schedule per client: a failed save that kept its place would refuse the client's next one.
    const { schedules } = await serviceWithWriteFault("INSERT", "NEW.callback_url LIKE '%/unsavable'", { maxPendingPerClient: 1 });
    const refusal = await expectRejects(schedules.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/unsavable", "client-a"), UnavailableError);
    expect(refusal.message).to.match(/could not save the schedule; try again later/);
    expect((refusal.cause as Error).message).to.match(/injected write fault/);
    expect((refusal as UnavailableError).details).to.include({ code: "SQLITE_CONSTRAINT_TRIGGER" });
    expect(schedules.stats().storeWriteErrorsTotal).to.equal(1);
    const saved = await schedules.schedule(nowNs() + 60_000n * MS, "http://127.0.0.1:1/fine", "client-a");
    expect(schedules.get(saved.id)).to.include({ status: "scheduled" });
  });
});

describe("scheduled deliveries: SSRF guard at delivery time", function () {
  this.timeout(30_000);
  const { stops, data, callbackServer, service } = useScheduleFixtures("schedules-ssrf");

  /** A fake resolver: each name answers its addresses in turn (the last one repeats); records every lookup. */
  function resolver(answers: Record<string, string[][]>) {
    const lookups: string[] = [];
    const resolveCallbackHost = async (hostname: string): Promise<ResolvedAddress[]> => {
      lookups.push(hostname);
      const queue = answers[hostname] ?? [[]];
      const next = queue.length > 1 ? queue.shift()! : queue[0]!;
      return next.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
    };
    return { lookups, resolveCallbackHost };
  }

  const refusal = (host: string, address: string) =>
    `callback host ${host} resolved to ${address}, a non-public address (list it in scheduleAllowedCallbackHosts to allow)`;

  it("refuses a wildcard-admitted name that resolves to loopback: no connection, every attempt, a clear lastError", async () => {
    const server = await callbackServer();
    const dns = resolver({ "evil.test": [["127.0.0.1"]] });
    const schedules = service({ allowedCallbackHosts: ["*"], resolveCallbackHost: dns.resolveCallbackHost });
    const port = new URL(server.url).port;
    const record = await schedules.schedule(nowNs(), `http://evil.test:${port}/callback`);
    await waitFor(() => schedules.get(record.id).status === "failed", 20_000, "refusal");
    expect(schedules.get(record.id)).to.include({ attempts: 2, lastError: refusal("evil.test", "127.0.0.1") });
    expect(dns.lookups).to.deep.equal(["evil.test", "evil.test"]);
    expect(server.received).to.have.length(0);
    expect(schedules.stats()).to.include({ deliveredTotal: 0, failedTotal: 1 });
  });

  it("refuses wildcard names resolving to private, link-local (metadata), mapped or ULA addresses without connecting", async () => {
    const bad = ["10.0.0.5", "169.254.169.254", "::ffff:10.0.0.1", "fe80::1", "fc00::1", "100.64.0.1", "0.0.0.0"];
    const dns = resolver(Object.fromEntries(bad.map((address, index) => [`n${index}.test`, [["93.184.216.34", address]]])));
    const transport = recordingTransport();
    const schedules = service({ allowedCallbackHosts: ["*"], maxAttempts: 1, ...dns, ...transport });
    const ids = await Promise.all(bad.map(async (_, index) => (await schedules.schedule(nowNs(), `https://n${index}.test/cb`)).id));
    await waitFor(() => ids.every((id) => schedules.get(id).status === "failed"), 20_000, "refusals");
    bad.forEach((address, index) => expect(schedules.get(ids[index]!).lastError, address).to.equal(refusal(`n${index}.test`, address)));
    expect(transport.sent).to.have.length(0);
  });

  it("delivers to an exactly listed name resolving to a non-public address, over a connection pinned to it", async () => {
    const server = await callbackServer();
    const dns = resolver({ "receiver.test": [["127.0.0.1"]] });
    const schedules = service({ allowedCallbackHosts: ["receiver.test"], resolveCallbackHost: dns.resolveCallbackHost });
    const port = new URL(server.url).port;
    const record = await schedules.schedule(nowNs(), `http://receiver.test:${port}/callback`);
    await waitFor(() => schedules.get(record.id).status === "delivered", 20_000, "delivery");
    // receiver.test has no DNS record: the POST reached the server through the one checked lookup only.
    expect(dns.lookups).to.deep.equal(["receiver.test"]);
    expect(server.received).to.have.length(1);
    expect(server.received[0]!.headers).to.include({ host: `receiver.test:${port}`, "idempotency-key": record.id, "user-agent": "ats-node" });
    expect((server.received[0]!.body as ScheduleDeliveryBody).id).to.equal(record.id);
  });

  it("hands the transport exactly the addresses it checked, and checks again at every attempt (DNS rebinding)", async () => {
    const dns = resolver({ "flip.test": [["93.184.216.34"], ["10.0.0.5"]], "internal.test": [["10.1.2.3"]] });
    const transport = recordingTransport([503]);
    const schedules = service({ allowedCallbackHosts: ["*", "internal.test"], ...dns, ...transport });
    const flip = await schedules.schedule(nowNs(), "https://flip.test/cb");
    await waitFor(() => schedules.get(flip.id).status === "failed", 20_000, "refusal on retry");
    expect(schedules.get(flip.id)).to.include({ attempts: 2, lastError: refusal("flip.test", "10.0.0.5") });
    expect(transport.sent.map(({ url, addresses }) => [url.host, addresses])).to.deep.equal([["flip.test", [{ address: "93.184.216.34", family: 4 }]]]);

    const internal = await schedules.schedule(nowNs(), "https://internal.test/cb");
    await waitFor(() => schedules.get(internal.id).status === "delivered", 20_000, "delivery");
    expect(transport.sent[1]!.addresses).to.deep.equal([{ address: "10.1.2.3", family: 4 }]);
    expect(transport.sent[1]!.headers).to.deep.equal({ "content-type": "application/json", "idempotency-key": internal.id, "user-agent": "ats-node" });
  });

  it("re-checks a stored callback against the current list after a restart", async () => {
    const transport = recordingTransport();
    const dns = resolver({ "receiver.test": [["10.0.0.5"]] });
    const dataDir = data();
    const first = service({ allowedCallbackHosts: ["receiver.test"], ...dns, ...transport }, { dataDir, start: false });
    const record = await first.schedule(nowNs(), "https://receiver.test/cb");
    await first.stop(); // never started: nothing delivered
    const second = service({ allowedCallbackHosts: [], maxAttempts: 1, ...dns, ...transport }, { dataDir });
    await waitFor(() => second.get(record.id).status === "failed", 20_000, "refusal");
    expect(second.get(record.id).lastError).to.equal(
      "callback host receiver.test is no longer allowed (loopback only unless scheduleAllowedCallbackHosts lists it)",
    );
    expect(dns.lookups).to.have.length(0);
    expect(transport.sent).to.have.length(0);
  });

  it("fails an attempt whose receiver never answers within deliveryTimeoutMs", async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    stops.push(
      () =>
        new Promise<void>((resolve) => {
          silent.closeAllConnections();
          silent.close(() => resolve());
        }),
    );
    const schedules = service({ deliveryTimeoutMs: 150, maxAttempts: 1 });
    const record = await schedules.schedule(nowNs(), `http://127.0.0.1:${(silent.address() as AddressInfo).port}/cb`);
    await waitFor(() => schedules.get(record.id).status === "failed", 20_000, "timeout");
    expect(schedules.get(record.id).lastError).to.contain("TimeoutError");
  });
});
