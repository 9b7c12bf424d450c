import { expect } from "chai";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { effectiveListenBacklog, kernelListenBacklogCap } from "../../lib/listenBacklog";

describe("lib/listenBacklog", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-somaxconn-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("reads the kernel's cap, and nothing from a missing or unreadable value", () => {
    const file = (name: string, text: string): string => {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    };
    expect(kernelListenBacklogCap(file("linux", "4096\n"))).to.equal(4_096);
    expect(kernelListenBacklogCap(file("old-kernel", "128\n"))).to.equal(128);
    expect(kernelListenBacklogCap(join(dir, "missing"))).to.equal(undefined);
    expect(kernelListenBacklogCap(file("garbage", "many\n"))).to.equal(undefined);
    expect(kernelListenBacklogCap(file("zero", "0\n"))).to.equal(undefined);
  });

  it("caps what is asked for at the kernel's cap, when one is known", () => {
    expect(effectiveListenBacklog(4_096, 128)).to.equal(128);
    expect(effectiveListenBacklog(4_096, 4_096)).to.equal(4_096);
    expect(effectiveListenBacklog(100, 4_096)).to.equal(100);
    expect(effectiveListenBacklog(4_096, undefined)).to.equal(4_096);
  });
});
