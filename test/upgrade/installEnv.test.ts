/**
 * upgrade/installEnv.ts's atomic writes: a write that fails (here: the target is a folder, so the rename fails; or
 * the temporary file cannot be created) leaves no `.tmp-<pid>` file behind, and the file it would replace unchanged.
 */
import { expect } from "chai";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { replaceKeepingPrevious, writeFileAtomically } from "../../upgrade/installEnv";

describe("upgrade/installEnv: atomic writes", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-install-env-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const leftovers = () => readdirSync(dir).filter((name) => name.includes(".tmp-"));

  it("removes its temporary file when the rename fails", () => {
    const target = join(dir, "install.env");
    mkdirSync(join(target, "occupied"), { recursive: true }); // a non-empty folder: a file cannot be renamed over it
    expect(() => writeFileAtomically(target, "x")).to.throw(/EISDIR|ENOTEMPTY|EEXIST/);
    expect(leftovers()).to.deep.equal([]);
  });

  it("removes its temporary file when keeping the previous copy fails, and leaves the file as it was", () => {
    const target = join(dir, "install.env");
    writeFileSync(target, "old\n");
    mkdirSync(join(`${target}.previous`, "occupied"), { recursive: true }); // .previous cannot be replaced
    expect(() => replaceKeepingPrevious(target, "new\n")).to.throw(/EISDIR|ENOTEMPTY|EEXIST/);
    expect(readFileSync(target, "utf8")).to.equal("old\n");
    expect(leftovers()).to.deep.equal([]);
  });

  it("leaves nothing when the temporary file itself cannot be written", () => {
    const target = join(dir, "missing-folder", "install.env");
    expect(() => writeFileAtomically(target, "x")).to.throw(/ENOENT/);
    expect(readdirSync(dir)).to.deep.equal([]);
  });

  it("replaces the file and keeps the previous one when nothing fails", () => {
    const target = join(dir, "install.env");
    writeFileSync(target, "old\n");
    replaceKeepingPrevious(target, "new\n");
    expect(readFileSync(target, "utf8")).to.equal("new\n");
    expect(readFileSync(`${target}.previous`, "utf8")).to.equal("old\n");
    expect(leftovers()).to.deep.equal([]);
  });
});
