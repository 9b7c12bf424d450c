/**
 * lib/sqlite.ts: commitDurably runs one commit with synchronous = FULL (the WAL synced before it returns) on a
 * connection that otherwise runs at NORMAL, and leaves it at NORMAL whatever the commit does.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { commitDurably, openDatabase, type SqliteDatabase } from "../../lib/sqlite";

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
