import { expect } from "chai";
import { GroupCommit } from "../../lib/groupCommit";

describe("GroupCommit (lib/groupCommit.ts)", () => {
  it("writes the items added in one event-loop turn in one write, and resolves each caller only after it", async () => {
    const writes: number[][] = [];
    const commits = new GroupCommit<number>({ write: (items) => writes.push([...items]), maxBatch: 100 });
    let resolved = 0;
    const added = [1, 2, 3].map((item) => commits.add(item).then(() => (resolved += 1)));
    expect(writes, "nothing is written before the turn ends").to.deep.equal([]);
    expect(commits.queued).to.equal(3);
    await Promise.all(added);
    expect(writes).to.deep.equal([[1, 2, 3]]);
    expect(resolved).to.equal(3);
    await commits.add(4);
    expect(writes).to.deep.equal([[1, 2, 3], [4]]);
  });

  it("writes at once when a batch reaches maxBatch, so no transaction grows beyond it", async () => {
    const writes: number[][] = [];
    const commits = new GroupCommit<number>({ write: (items) => writes.push([...items]), maxBatch: 2 });
    const added = [1, 2, 3].map((item) => commits.add(item));
    expect(writes).to.deep.equal([[1, 2]]);
    await Promise.all(added);
    expect(writes).to.deep.equal([[1, 2], [3]]);
  });

  it("rejects every caller of a failed write with its error, and the next batch is written on its own", async () => {
    const failure = new Error("disk full");
    let fail = true;
    const written: number[] = [];
    const commits = new GroupCommit<number>({
      write: (items) => {
        if (fail) throw failure;
        written.push(...items);
      },
      maxBatch: 10,
    });
    const outcomes = await Promise.allSettled([commits.add(1), commits.add(2)]);
    expect(outcomes.map((outcome) => (outcome.status === "rejected" ? outcome.reason : outcome.status))).to.deep.equal([failure, failure]);
    fail = false;
    await commits.add(3);
    expect(written).to.deep.equal([3]);
  });

  it("flush() writes what is queued now (before a store closes), and nothing twice", async () => {
    const writes: number[][] = [];
    const commits = new GroupCommit<number>({ write: (items) => writes.push([...items]), maxBatch: 10 });
    const added = commits.add(7);
    commits.flush();
    expect(writes).to.deep.equal([[7]]);
    await added;
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).to.deep.equal([[7]]);
    expect(() => new GroupCommit<number>({ write: () => undefined, maxBatch: 0 })).to.throw(RangeError, "maxBatch must be a positive integer, got 0");
  });

  it("with a sync, settles the batch's callers only once it has synced, and rejects them all when the sync fails", async () => {
    const writes: number[][] = [];
    const syncs: { resolve: () => void; reject: (error: unknown) => void }[] = [];
    const commits = new GroupCommit<number>({
      write: (items) => writes.push([...items]),
      sync: () => new Promise<void>((resolve, reject) => syncs.push({ resolve, reject })),
      maxBatch: 10,
    });
    let resolved = 0;
    const added = [1, 2].map((item) => commits.add(item).then(() => (resolved += 1)));
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes, "written").to.deep.equal([[1, 2]]);
    expect(resolved, "not yet synced").to.equal(0);
    syncs.shift()!.resolve();
    await Promise.all(added);
    expect(resolved).to.equal(2);

    const failure = new Error("EIO");
    const failed = Promise.allSettled([commits.add(3), commits.add(4)]);
    await new Promise((resolve) => setImmediate(resolve));
    syncs.shift()!.reject(failure);
    expect((await failed).map((outcome) => (outcome.status === "rejected" ? outcome.reason : outcome.status))).to.deep.equal([failure, failure]);
    expect(writes).to.deep.equal([[1, 2], [3, 4]]);
  });
});
