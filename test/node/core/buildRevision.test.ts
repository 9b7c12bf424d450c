/**
 * The node's source revision (node/core/buildRevision.ts): read from a release install's BUILD-REVISION.json,
 * null without one, and a malformed file is an error naming the file (the upgrade agent's version gate relies on
 * the value, so a guess would be worse than a failed start).
 */
import { expect } from "chai";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BUILD_REVISION_FILE, readBuildRevision } from "../../../node/core/buildRevision";

describe("node: build revision", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-revision-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("reads the 40-hex revision, and null when there is no file", () => {
    const file = join(dir, BUILD_REVISION_FILE);
    expect(readBuildRevision(file)).to.equal(null);
    writeFileSync(file, JSON.stringify({ source_revision: "0123456789abcdef0123456789abcdef01234567" }));
    expect(readBuildRevision(file)).to.equal("0123456789abcdef0123456789abcdef01234567");
  });

  it("refuses a malformed file, naming it", () => {
    const file = join(dir, BUILD_REVISION_FILE);
    for (const [text, why] of [
      ["{", /not JSON/],
      [JSON.stringify({ source_revision: "main" }), /40 lowercase hex digits, got "main"/],
      [JSON.stringify({ source_revision: "0123456789ABCDEF0123456789abcdef01234567" }), /40 lowercase hex/],
      [JSON.stringify({}), /got undefined/],
    ] as const) {
      writeFileSync(file, text);
      expect(() => readBuildRevision(file), text).to.throw(new RegExp(`${BUILD_REVISION_FILE}: [^]*${why.source}`));
    }
  });
});
