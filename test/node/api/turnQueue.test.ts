/**
 * Per-connection message queues that share one budget of messages per event-loop turn.
 */
import { expect } from "chai";
import { TurnBudget } from "../../../node/api/turnBudget";
import { MAX_MESSAGES_PER_PASS, TurnQueue } from "../../../node/api/turnQueue";

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A queue that records what it handles and when it pauses or resumes its connection. */
function recordingQueue(budget: TurnBudget, name: string, events: string[], maxQueued = 10, onHandle: (item: number) => void = () => undefined) {
  return new TurnQueue<number>(budget, {
    handle: (item) => {
      events.push(`${name}${item}`);
      onHandle(item);
    },
    pause: () => events.push(`pause ${name}`),
    resume: () => events.push(`resume ${name}`),
    maxQueued,
  });
}

describe("node/api/turnQueue", () => {
  it("handles at most the shared budget per turn, the rest in later turns in order, with the connection paused meanwhile", async () => {
    const budget = new TurnBudget(3);
    const events: string[] = [];
    const a = recordingQueue(budget, "a", events);
    const b = recordingQueue(budget, "b", events);
    // One read of connection a brings four messages, then one of b brings two.
    for (const item of [1, 2, 3, 4]) expect(a.offer(item)).to.equal(true);
    for (const item of [1, 2]) expect(b.offer(item)).to.equal(true);
    expect(events, "this turn: three, then both connections wait").to.deep.equal(["a1", "a2", "a3", "pause a", "pause b"]);
    expect([a.queued, b.queued]).to.deep.equal([1, 2]);
    await nextTurn();
    expect(events.slice(5), "next turn: the rest, each connection resumed once empty").to.deep.equal(["a4", "resume a", "b1", "b2", "resume b"]);
    // A message of a connection that waits goes behind what waits, never ahead of it.
    events.length = 0;
    for (const item of [5, 6, 7, 8]) a.offer(item);
    a.offer(9);
    await nextTurn();
    await nextTurn();
    expect(events.filter((event) => event.startsWith("a"))).to.deep.equal(["a5", "a6", "a7", "a8", "a9"]);
  });

  it("serves waiting connections round-robin, a pass each, and never handles a new message ahead of waiting ones", async () => {
    expect(MAX_MESSAGES_PER_PASS).to.equal(8);
    const budget = new TurnBudget(20);
    const events: string[] = [];
    const spend = recordingQueue(budget, "c", events, 100);
    for (let n = 1; n <= 20; n += 1) spend.offer(n); // the turn's budget is spent
    const a = recordingQueue(budget, "a", events, 100);
    const b = recordingQueue(budget, "b", events, 100);
    for (let n = 1; n <= 12; n += 1) a.offer(n);
    for (let n = 1; n <= 2; n += 1) b.offer(n);
    events.length = 0;
    await nextTurn();
    const handled = () => events.filter((event) => !event.startsWith("pause") && !event.startsWith("resume"));
    expect(handled(), "a's first pass, then b, then a again next turn").to.deep.equal(["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "b1", "b2"]);
    // The budget has units left in this turn, but a still has messages waiting: a new one goes behind them.
    expect(a.offer(13)).to.equal(true);
    expect(handled()).to.have.length(10);
    await nextTurn();
    expect(handled().slice(10)).to.deep.equal(["a9", "a10", "a11", "a12", "a13"]);
  });

  it("refuses a message beyond maxQueued (the caller closes the connection)", () => {
    const budget = new TurnBudget(1);
    const events: string[] = [];
    const queue = recordingQueue(budget, "a", events, 2);
    expect([queue.offer(1), queue.offer(2), queue.offer(3), queue.offer(4)]).to.deep.equal([true, true, true, false]);
    expect(queue.queued).to.equal(2);
  });

  it("handles nothing more once cleared, also when a handled message clears it (the connection closed)", async () => {
    const budget = new TurnBudget(1);
    const events: string[] = [];
    const holder: { queue?: TurnQueue<number> } = {};
    const queue = recordingQueue(budget, "a", events, 10, (item) => {
      if (item === 2) holder.queue!.clear();
    });
    holder.queue = queue;
    for (const item of [1, 2, 3, 4]) queue.offer(item);
    await nextTurn();
    await nextTurn();
    await nextTurn();
    expect(events, "cleared while paused: read again (a closing handshake needs it)").to.deep.equal(["a1", "pause a", "a2", "resume a"]);
    expect(queue.offer(5)).to.equal(true);
    expect(events).to.have.length(4);
  });

  it("refuses a queue bound below one", () => {
    expect(() => new TurnQueue<number>(new TurnBudget(1), { handle: () => undefined, pause: () => undefined, resume: () => undefined, maxQueued: 0 })).to.throw(RangeError, "maxQueued");
  });
});
