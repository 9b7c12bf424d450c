/**
 * lib/sqlite.ts: commitDurably runs one commit with synchronous = FULL (the WAL synced before it returns) on a
 * connection that otherwise runs at NORMAL, and leaves it at NORMAL whatever the commit does. WalSync flushes the
 * write-ahead log after NORMAL commits, off the event loop: grouped, and refusing every sync after a failure.
 */
import { expect } from "chai";
import Database from "better-sqlite3";
import { mkdtempSync, realpathSync, rmSync, statSync, symlinkSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { commitDurably, datasync, type FileSync, openDatabase, type SqliteDatabase, WalSync, WalSyncError } from "../../lib/sqlite";

/** SQLite's PRAGMA synchronous values. */
const NORMAL = 1;
const FULL = 2;

describe("lib/sqlite commitDurably", () => {
  let dir: string;
  let db: SqliteDatabase;
  const synchronous = (): unknown => db.pragma("synchronous", { simple: true });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-sqlite-"));
    db = openDatabase({ dataDir: dir, fileName: "test.sqlite", synchronous: "NORMAL" });
    db.exec("CREATE TABLE rows (id INTEGER PRIMARY KEY)");
  });

  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("commits at FULL and returns the connection to NORMAL", () => {
    const insert = db.transaction(() => {
      db.prepare("INSERT INTO rows (id) VALUES (1)").run();
      return synchronous();
    });
    expect(synchronous()).to.equal(NORMAL);
    expect(commitDurably(db, () => insert())).to.equal(FULL);
    expect(synchronous()).to.equal(NORMAL);
    expect(db.prepare("SELECT COUNT(*) AS n FROM rows").get()).to.deep.equal({ n: 1 });
  });

  it("returns the connection to NORMAL when the commit throws (and the transaction is rolled back)", () => {
    const failing = db.transaction(() => {
      db.prepare("INSERT INTO rows (id) VALUES (1)").run();
      throw new Error("refused");
    });
    expect(() => commitDurably(db, () => failing())).to.throw("refused");
    expect(synchronous()).to.equal(NORMAL);
    expect(db.prepare("SELECT COUNT(*) AS n FROM rows").get()).to.deep.equal({ n: 0 });
  });
});

describe("lib/sqlite WalSync", () => {
  let dir: string;
  let db: SqliteDatabase;
  let insert: (id: number) => void;

  beforeEach(() => {
    // Real path: the log is named after it (a temporary folder may sit behind a symbolic link).
    dir = realpathSync(mkdtempSync(join(tmpdir(), "ats-walsync-")));
    db = openDatabase({ dataDir: dir, fileName: "test.sqlite", synchronous: "NORMAL" });
    db.exec("CREATE TABLE rows (id INTEGER PRIMARY KEY)");
    const statement = db.prepare("INSERT INTO rows (id) VALUES (?)");
    insert = (id) => statement.run(id);
  });

  afterEach(() => {
    if (db.open) db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A FileSync that records each call and flushes for real. */
  function recording(): { calls: string[]; syncFile: FileSync } {
    const calls: string[] = [];
    return {
      calls,
      syncFile: async (path, kind) => {
        calls.push(`${kind} ${path}`);
        return datasync(path, kind);
      },
    };
  }

  /** A FileSync whose log flushes wait until released, one at a time, in order (folders flush at once). */
  function gated(): { calls: string[]; releaseNext(): Promise<void>; syncFile: FileSync } {
    const calls: string[] = [];
    const gates: (() => void)[] = [];
    return {
      calls,
      releaseNext: async () => {
        while (gates.length === 0) await new Promise((resolve) => setImmediate(resolve));
        gates.shift()!();
      },
      syncFile: async (_path, kind) => {
        calls.push(kind);
        if (kind === "file") await new Promise<void>((resolve) => gates.push(resolve));
        return { inode: 1 };
      },
    };
  }

  /** What a sync rejects with (null when it resolves). */
  const syncFailure = (walSync: WalSync): Promise<WalSyncError | null> =>
    walSync.sync().then(
      () => null,
      (error: unknown) => error as WalSyncError,
    );
  const settledFlags = (promises: Promise<void>[]) => {
    const settled = promises.map(() => false);
    promises.forEach((promise, index) => void promise.then(() => (settled[index] = true)));
    return settled;
  };
  const turns = async (n: number) => {
    for (let i = 0; i < n; i += 1) await new Promise((resolve) => setImmediate(resolve));
  };

  it("flushes the write-ahead log after a NORMAL commit, and its folder the first time it sees that log", async () => {
    const { calls, syncFile } = recording();
    const walSync = new WalSync(db, { syncFile });
    insert(1);
    await walSync.sync();
    expect(calls).to.deep.equal([`file ${join(dir, "test.sqlite-wal")}`, `folder ${dir}`]);
    insert(2);
    await walSync.sync();
    expect(calls.slice(2), "the same log: its folder entry is already on disk").to.deep.equal([`file ${join(dir, "test.sqlite-wal")}`]);
  });

  it("flushes nothing more once the connection is closed (the close checkpointed the log and flushed the database)", async () => {
    const { calls, syncFile } = recording();
    const walSync = new WalSync(db, { syncFile });
    insert(1);
    db.close();
    await walSync.sync();
    expect(calls, "the database file is never opened here (that would drop SQLite's locks)").to.deep.equal([`file ${join(dir, "test.sqlite-wal")}`]);
  });

  it("takes SQLite's automatic checkpoints over, and checkpoints once the log passes its size", () => {
    expect(db.pragma("wal_autocheckpoint", { simple: true }), "SQLite's default").to.equal(1_000);
    const walSync = new WalSync(db, { checkpointWalBytes: 64 * 1024 });
    expect(db.pragma("wal_autocheckpoint", { simple: true })).to.equal(0);
    const uncheckpointedFrames = () => (db.pragma("wal_checkpoint(PASSIVE)") as { log: number; checkpointed: number }[])[0]!;
    insert(1);
    walSync.checkpointIfDue(); // a small log: not due
    const before = statSync(join(dir, "test.sqlite")).size;
    for (let i = 2; i < 400; i += 1) insert(i); // each commit a few pages: well past 64 KiB
    expect(statSync(join(dir, "test.sqlite-wal")).size).to.be.greaterThan(64 * 1024);
    expect(statSync(join(dir, "test.sqlite")).size, "nothing checkpointed automatically").to.equal(before);
    walSync.checkpointIfDue();
    expect(statSync(join(dir, "test.sqlite")).size, "the log's pages copied into the database file").to.be.greaterThan(before);
    const { log, checkpointed } = uncheckpointedFrames();
    expect(checkpointed).to.equal(log);
  });

  it("notes a checkpoint whose flush failed: it rethrows, and every later sync fails", async () => {
    const walSync = new WalSync(db);
    insert(1);
    const pragma = db.pragma.bind(db);
    const fsyncFailure = new Database.SqliteError("disk I/O error", "SQLITE_IOERR_FSYNC");
    (db as { pragma: unknown }).pragma = (source: string, options?: Database.PragmaOptions) => {
      if (source.startsWith("wal_checkpoint")) throw fsyncFailure;
      return pragma(source, options);
    };
    expect(() => walSync.checkpoint()).to.throw(fsyncFailure);
    expect(walSync.failure).to.include({ code: "SQLITE_IOERR_FSYNC" });
    expect(await syncFailure(walSync)).to.include({ code: "WAL_SYNC_FAILED_EARLIER" });
  });

  it("fails when the log is missing while the connection is open, and every later sync", async () => {
    const walSync = new WalSync(db);
    insert(1);
    unlinkSync(join(dir, "test.sqlite-wal"));
    const failed = await syncFailure(walSync);
    expect(failed).to.be.instanceOf(WalSyncError);
    expect(failed).to.include({ code: "WAL_MISSING", message: `${join(dir, "test.sqlite-wal")} is missing while its database is open` });
    expect(walSync.failure).to.equal(failed);
  });

  it("flushes the log under the database file's real path when it was opened through a symbolic link", async () => {
    const linked = join(dir, "linked");
    symlinkSync(dir, linked);
    const viaLink = openDatabase({ dataDir: linked, fileName: "other.sqlite", synchronous: "NORMAL" });
    try {
      viaLink.exec("CREATE TABLE t (x)");
      const { calls, syncFile } = recording();
      await new WalSync(viaLink, { syncFile }).sync();
      expect(calls).to.deep.equal([`file ${join(dir, "other.sqlite-wal")}`, `folder ${dir}`]);
    } finally {
      viaLink.close();
    }
  });

  it("takes a folder that cannot be flushed as SQLite does: not an error, and not tried again for the same log", async () => {
    const calls: string[] = [];
    const walSync = new WalSync(db, {
      syncFile: async (path, kind) => {
        calls.push(kind);
        if (kind === "folder") throw Object.assign(new Error("EINVAL: invalid argument, fsync"), { code: "EINVAL" });
        return datasync(path, kind);
      },
    });
    insert(1);
    await walSync.sync();
    insert(2);
    await walSync.sync();
    expect(calls).to.deep.equal(["file", "folder", "file"]);
    expect(walSync.failure).to.equal(null);
  });

  it("fails every sync after SQLite reported a failed flush of its own on the connection (noteFailure)", async () => {
    const walSync = new WalSync(db);
    const sqliteFailure = Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR_FSYNC" });
    walSync.noteFailure(sqliteFailure);
    insert(1);
    const later = await syncFailure(walSync);
    expect(later).to.include({ code: "WAL_SYNC_FAILED_EARLIER" });
    expect(later!.message).to.match(/an earlier flush of .*test\.sqlite-wal failed \(SQLITE_IOERR_FSYNC\)/);
    expect(walSync.failure?.cause).to.equal(sqliteFailure);
  });

  it("groups callers: those arriving during a flush share the next one, which starts after it", async () => {
    const flushes = gated();
    const walSync = new WalSync(db, { syncFile: flushes.syncFile });
    const first = [walSync.sync(), walSync.sync()];
    await turns(2);
    const second = [walSync.sync(), walSync.sync(), walSync.sync()];
    const settled = settledFlags([...first, ...second]);
    await turns(2);
    expect(flushes.calls, "one flush runs, none waits beside it").to.deep.equal(["file"]);
    await flushes.releaseNext();
    await Promise.all(first);
    expect(settled, "the callers that arrived during the flush wait for the next one").to.deep.equal([true, true, false, false, false]);
    expect(flushes.calls, "the log, its folder (first sight), and the next flush of the log").to.deep.equal(["file", "folder", "file"]);
    await flushes.releaseNext();
    await Promise.all(second);
    expect(flushes.calls, "one flush for the three that waited").to.have.length(3);
    await walSync.idle();
  });

  it("rejects the caller of a failed flush with the file and the code, and every later sync without flushing", async () => {
    const calls: string[] = [];
    const walSync = new WalSync(db, {
      syncFile: async (path) => {
        calls.push(path);
        throw Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" });
      },
    });
    insert(1);
    const failed = await syncFailure(walSync);
    expect(failed).to.be.instanceOf(WalSyncError);
    expect(failed).to.include({ code: "EIO", path: join(dir, "test.sqlite-wal") });
    expect(failed!.message).to.equal(`could not flush ${join(dir, "test.sqlite-wal")} to disk (EIO)`);
    insert(2);
    const later = await syncFailure(walSync);
    expect(later).to.be.instanceOf(WalSyncError);
    expect(later).to.include({ code: "WAL_SYNC_FAILED_EARLIER", path: join(dir, "test.sqlite-wal") });
    expect(later!.message).to.match(/an earlier flush of .*test\.sqlite-wal failed \(EIO\): no commit can be confirmed on disk until the process restarts/);
    expect(calls, "nothing flushed after the failure").to.have.length(1);
  });

  it("rejects the callers of a flush during which SQLite reported a failed fsync of its own", async () => {
    const flushes = gated();
    const walSync = new WalSync(db, { syncFile: flushes.syncFile });
    insert(1);
    const during = syncFailure(walSync);
    await turns(2);
    walSync.noteFailure(Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR_FSYNC" }));
    await flushes.releaseNext();
    const failed = await during;
    expect(failed).to.include({ code: "WAL_SYNC_FAILED_EARLIER" });
  });

  it("refuses an in-memory database (nothing to flush)", () => {
    const memory = new Database(":memory:");
    try {
      expect(() => new WalSync(memory)).to.throw(RangeError, "needs a database file");
    } finally {
      memory.close();
    }
  });
});
