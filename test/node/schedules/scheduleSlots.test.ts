/**
 * Delivery slots of the schedule worker: every attempt ends (POST timer held by the worker, watchdog), and slots
 * are shared fairly across clients.
 */
import { expect } from "chai";
import { RateLimitError } from "../../../protocol/errors";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { CallbackRequest } from "../../../node/schedules/callbackGuard";
import { pickFairly, ScheduleService, type ScheduleServiceOptions } from "../../../node/schedules";
import { scheduleServiceOptions, tempDir, waitFor } from "../core/helpers";

const MS = 1_000_000n;
const nowNs = (): bigint => BigInt(Date.now()) * MS;

/** The engine's garbage collector, made callable for this test process (as `node --expose-gc` would). */
function collectGarbage(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

describe("pickFairly (pure)", () => {
  const rows = (spec: string): { id: string; clientKey: string }[] =>
    spec.split(" ").map((entry, index) => ({ id: `${entry}${index}`, clientKey: entry }));

  it("gives each free slot to the client with the fewest in flight, earliest due first among equals", () => {
    // Client a has many overdue rows before b's and c's.
    const picked = pickFairly(rows("a a a a a a b c b"), new Map(), 16, 16).map((row) => row.clientKey);
    expect(picked.slice(0, 4)).to.deep.equal(["a", "b", "c", "a"]);
  });

  it("counts attempts already in flight and never exceeds the per-client cap", () => {
    const picked = pickFairly(rows("a a a a b"), new Map([["a", 3]]), 8, 4).map((row) => row.clientKey);
    expect(picked).to.deep.equal(["b", "a"]);
    expect(pickFairly(rows("a a a"), new Map([["a", 4]]), 8, 4)).to.deep.equal([]);
  });

  it("lets a lone client take at most half of the free slots, so a newcomer always finds one (headroom)", () => {
    expect(pickFairly(rows("a a a a a a a a a a a a"), new Map(), 16, 16)).to.have.length(8);
  });

  it("leaves a slot for a client holding none while others hold slots (headroom)", () => {
    // Twelve clients (say, one attacker's addresses) each already hold one of 16 slots, with more rows due.
    const inFlight = new Map(Array.from({ length: 12 }, (_, index) => [`x${index}`, 1] as const));
    const attackers = Array.from({ length: 12 }, (_, index) => ({ id: `x${index}`, clientKey: `x${index}` }));
    const picked = pickFairly([...attackers, ...attackers, { id: "v", clientKey: "victim" }], inFlight, 4, 4).map((row) => row.clientKey);
    // With 4 free: holders of 1 may take slots while more than 1 stays free; the victim always gets one.
    expect(picked).to.include("victim");
    expect(picked).to.have.length(3);
    expect(pickFairly(attackers, inFlight, 1, 4)).to.deep.equal([]);
  });

  it("holds suspects (clients whose callbacks failed lately) to their share, and prefers others among equals", () => {
    const suspects = { isSuspect: (key: string) => key.startsWith("x"), maxSlots: 2 };
    const picked = pickFairly(rows("x1 x2 x3 a x4"), new Map(), 16, 4, suspects).map((row) => row.clientKey);
    expect(picked).to.deep.equal(["a", "x1", "x2"]);
    // Suspects already holding their share in flight get nothing more.
    expect(pickFairly(rows("x1 x2"), new Map([["x9", 2]]), 8, 4, suspects)).to.deep.equal([]);
  });

  it("keeps each client's rows in due order", () => {
    const picked = pickFairly(rows("a b a b"), new Map(), 16, 4).map((row) => row.id);
    expect(picked).to.deep.equal(["a0", "b1", "a2", "b3"]);
  });
});

describe("schedule delivery slots", function () {
  this.timeout(30_000);
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  function service(overrides: Partial<ScheduleServiceOptions>): ScheduleService {
    const dir = tempDir("schedule-slots");
    const schedules = new ScheduleService(scheduleServiceOptions(dir.path, { maxAttempts: 1, maxPending: 10_000, ...overrides }));
    schedules.start();
    cleanups.push(() => dir.remove());
    cleanups.push(() => schedules.stop());
    return schedules;
  }

  /** A receiver that accepts every POST and never answers; it gives up only when the request is aborted. */
  function hangingTransport() {
    const started: CallbackRequest[] = [];
    const callbackTransport = (request: CallbackRequest) =>
      new Promise<number>((_resolve, reject) => {
        started.push(request);
        request.signal.addEventListener("abort", () => reject(request.signal.reason as Error), { once: true });
      });
    return { started, callbackTransport };
  }

  /** Callbacks to `/healthy` are answered 200 (and listed in `delivered`); every other one hangs as above. */
  function hangingExceptHealthy() {
    const { started, callbackTransport: hanging } = hangingTransport();
    const delivered: string[] = [];
    const callbackTransport = (request: CallbackRequest) => {
      if (request.url.pathname !== "/healthy") return hanging(request);
      delivered.push(request.url.pathname);
      return Promise.resolve(200);
    };
    return { started, delivered, callbackTransport };
  }

  it("ends a hanging POST after deliveryTimeoutMs even when garbage collection runs meanwhile", async () => {
    // On Node 20 a timeout signal held only by AbortSignal.any() can be collected before it fires.
    const gc = collectGarbage();
    const { started, callbackTransport } = hangingTransport();
    const schedules = service({ deliveryTimeoutMs: 200, callbackTransport });
    const record = await schedules.schedule(nowNs(), "http://127.0.0.1:9/hangs");
    await waitFor(() => started.length === 1, 5_000, "the POST");
    for (let round = 0; round < 5; round += 1) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await waitFor(() => schedules.get(record.id).status === "failed", 5_000, "the attempt to time out");
    expect(schedules.get(record.id).lastError).to.equal("TimeoutError: callback did not answer within 200 ms");
  });

  it("ends an attempt whose transport ignores the abort at the POST timeout (the worker stops waiting for it), freeing its slot", async () => {
    const requests: CallbackRequest[] = [];
    const ignoresAbort = (request: CallbackRequest) => {
      requests.push(request);
      return new Promise<number>(() => undefined);
    };
    const schedules = service({ deliveryTimeoutMs: 100, callbackTransport: ignoresAbort, maxConcurrentDeliveries: 1 });
    const first = await schedules.schedule(nowNs(), "http://127.0.0.1:9/first");
    const second = await schedules.schedule(nowNs(), "http://127.0.0.1:9/second");
    await waitFor(() => schedules.get(second.id).status === "failed", 5_000, "both attempts to end");
    expect(schedules.get(first.id).status).to.equal("failed");
    expect(schedules.get(first.id).lastError).to.equal("TimeoutError: callback did not answer within 100 ms");
    expect(requests.map((request) => request.url.pathname)).to.deep.equal(["/first", "/second"]);
  });

  it("ends an attempt whose proof never comes (watchdog), as a failed attempt without a POST", async () => {
    const { started, callbackTransport } = hangingTransport();
    const never = () => new Promise<never>(() => undefined);
    const schedules = service({ deliveryTimeoutMs: 100, maxProofWaitMs: 50, proofAtOrAfter: never, callbackTransport });
    const record = await schedules.schedule(nowNs(), "http://127.0.0.1:9/never");
    await waitFor(() => schedules.get(record.id).status === "failed", 5_000, "the watchdog");
    expect(schedules.get(record.id).lastError).to.equal("no proof: TimeoutError: attempt did not finish within 150 ms");
    expect(started).to.have.length(0);
  });

  it("delivers a newcomer's schedule while many clients' overdue callbacks hang in every slot they may take", async () => {
    const { started, delivered, callbackTransport } = hangingExceptHealthy();
    const schedules = service({ deliveryTimeoutMs: 60_000, callbackTransport, maxConcurrentDeliveries: 16, maxConcurrentDeliveriesPerClient: 4 });
    // Thirteen attacker addresses, each with overdue rows: more clients than the dispatcher reads candidates for.
    for (let index = 0; index < 13 * 20; index += 1) await schedules.schedule(nowNs() - 50_000n * MS, "http://127.0.0.1:9/hang", `attacker-${index % 13}`);
    await waitFor(() => started.length === 15, 5_000, "the attackers to fill all but one slot");
    const victim = await schedules.schedule(nowNs(), "http://127.0.0.1:9/healthy", "victim");
    await waitFor(() => schedules.get(victim.id).status === "delivered", 5_000, "the newcomer's delivery");
    expect(delivered).to.deep.equal(["/healthy"]);
    expect(started).to.have.length(15);
  });

  it("gives a newcomer the next freed slot though the due rows ahead of its own all belong to the clients that held the slots", async () => {
    const { started, delivered, callbackTransport } = hangingExceptHealthy();
    const schedules = service({ deliveryTimeoutMs: 400, maxAttempts: 5, callbackTransport, maxConcurrentDeliveries: 16, maxConcurrentDeliveriesPerClient: 1 });
    // Sixteen attacker addresses arrive 10 ms apart, each with 40 overdue rows: one slot each, all 16 taken, and
    // their POSTs time out one after another. Each freed slot's client then holds none and has the earliest due
    // rows (more than the dispatcher reads for one slot), so by due order alone it would take the slot back.
    // Each client's rows in one commit (created together), so the setup stays well inside the POST timeout.
    for (let client = 0; client < 16; client += 1) {
      await Promise.all(Array.from({ length: 40 }, () => schedules.schedule(nowNs() - 1_000n * MS, "http://127.0.0.1:9/hang", `attacker-${client}`)));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await waitFor(() => started.length >= 16, 5_000, "the attackers to take all 16 slots");
    const victim = await schedules.schedule(nowNs(), "http://127.0.0.1:9/healthy", "victim");
    const attackerPostsBefore = started.length;
    await waitFor(() => schedules.get(victim.id).status === "delivered", 5_000, "the newcomer's delivery");
    expect(delivered).to.deep.equal(["/healthy"]);
    // The newcomer took one of the first slots that freed (several can free before one dispatch runs), not a slot
    // after the attackers' turns (by due order alone: 8 attacker refills first).
    const refills = started.length - attackerPostsBefore;
    expect(refills, "attacker POSTs that took a freed slot before the newcomer").to.be.at.most(3);
  });

  it("answers a schedule committed by stop() with its record, and the row is there after a restart", async () => {
    const dir = tempDir("schedule-stop");
    cleanups.push(() => dir.remove());
    const options = scheduleServiceOptions(dir.path, { maxAttempts: 1, maxPending: 100 });
    const first = new ScheduleService(options);
    first.start();
    const executeAtNs = nowNs() + 60_000n * MS;
    const accepted = first.schedule(executeAtNs, "http://127.0.0.1:9/later"); // queued for this turn's commit
    await first.stop(); // commits the queued row, then closes the store
    const record = await accepted;
    expect(record).to.include({ status: "scheduled", callbackUrl: "http://127.0.0.1:9/later", attempts: 0 });
    expect(record.executeAtNs).to.equal(executeAtNs);
    const second = new ScheduleService(options);
    cleanups.push(() => second.stop());
    expect(second.get(record.id)).to.deep.equal(record);
  });

  it("keeps half of the slots from clients whose callbacks failed lately, so a newcomer is delivered while they hang", async () => {
    const { started, callbackTransport: hanging } = hangingTransport();
    const failedOnce = new Set<string>();
    const delivered: string[] = [];
    const callbackTransport = (request: CallbackRequest) => {
      const path = request.url.pathname;
      if (path === "/healthy") {
        delivered.push(path);
        return Promise.resolve(200);
      }
      // Each attacker's receiver answers 500 once (its client becomes a suspect), then hangs.
      if (!failedOnce.has(path)) {
        failedOnce.add(path);
        return Promise.resolve(500);
      }
      return hanging(request);
    };
    const schedules = service({ deliveryTimeoutMs: 60_000, maxAttempts: 5, callbackTransport, maxConcurrentDeliveries: 16, maxConcurrentDeliveriesPerClient: 4 });
    // One row per attacker first: each fails once and makes its client a suspect; then many more rows.
    for (let index = 0; index < 20; index += 1) await schedules.schedule(nowNs() - 50_000n * MS, `http://127.0.0.1:9/hang-${index}`, `attacker-${index}`);
    await waitFor(() => failedOnce.size === 20, 5_000, "every attacker's first failure");
    for (let index = 0; index < 20 * 4; index += 1) {
      await schedules.schedule(nowNs() - 50_000n * MS, `http://127.0.0.1:9/hang-${index % 20}`, `attacker-${index % 20}`);
    }
    await waitFor(() => started.length === 8, 5_000, "the suspects to take their share");
    const victim = await schedules.schedule(nowNs(), "http://127.0.0.1:9/healthy", "victim");
    await waitFor(() => schedules.get(victim.id).status === "delivered", 5_000, "the newcomer's delivery");
    expect(delivered).to.deep.equal(["/healthy"]);
    await new Promise((resolve) => setTimeout(resolve, 100)); // more dispatches: the suspects' share holds
    expect(started).to.have.length(8);
  });

  it("does not wake while the only due rows belong to clients that may take no slot (no busy loop)", async () => {
    const { started, callbackTransport } = hangingTransport();
    const schedules = service({ deliveryTimeoutMs: 60_000, callbackTransport, maxConcurrentDeliveries: 16, maxConcurrentDeliveriesPerClient: 4 });
    for (let index = 0; index < 100; index += 1) await schedules.schedule(nowNs() - 1_000n * MS, "http://127.0.0.1:9/hang", "one-client");
    await waitFor(() => started.length === 4, 5_000, "the client's four slots");
    const before = schedules.stats().dispatchesTotal;
    await new Promise((resolve) => setTimeout(resolve, 300));
    // 96 due rows and 12 free slots, yet nothing to do until a delivery ends: not one more pass.
    expect(schedules.stats().dispatchesTotal).to.equal(before);
    expect(started).to.have.length(4);
  });

  it("accepts at most maxCreatesPerSecond new schedules node-wide, from all clients together, refusing the rest with 429 and a Retry-After", async () => {
    const { callbackTransport } = hangingTransport();
    const schedules = service({ maxCreatesPerSecond: 3, callbackTransport, maxPending: 100 });
    const future = nowNs() + 60_000n * MS;
    for (const client of ["a", "b", "c"]) await schedules.schedule(future, "http://127.0.0.1:9/x", client);
    let refusal: unknown;
    try {
      await schedules.schedule(future, "http://127.0.0.1:9/x", "d");
    } catch (error) {
      refusal = error;
    }
    expect(refusal).to.be.instanceOf(RateLimitError);
    expect((refusal as RateLimitError).message).to.equal("the node accepts at most 3 new schedules per second");
    expect((refusal as RateLimitError).details["retryAfterMs"]).to.be.within(1, 334);
  });

  it("delivers another client's schedule while one client's many overdue callbacks hang", async () => {
    const { started, delivered, callbackTransport } = hangingExceptHealthy();
    const schedules = service({ deliveryTimeoutMs: 60_000, callbackTransport, maxConcurrentDeliveries: 16, maxConcurrentDeliveriesPerClient: 4 });
    // The attacker's callbacks were due a minute ago: they sort before everything else.
    for (let index = 0; index < 100; index += 1) await schedules.schedule(nowNs() - 50_000n * MS, "http://127.0.0.1:9/hang", "attacker");
    await waitFor(() => started.length === 4, 5_000, "the attacker's slots to fill");
    const victim = await schedules.schedule(nowNs(), "http://127.0.0.1:9/healthy", "victim");
    await waitFor(() => schedules.get(victim.id).status === "delivered", 5_000, "the victim's delivery");
    expect(delivered).to.deep.equal(["/healthy"]);
    // The attacker holds at most its per-client share of the 16 slots.
    expect(started).to.have.length(4);
  });
});
