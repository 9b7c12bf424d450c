/**
 * What bench:node's serving-ratio rows compute (scripts/benchUtil.ts): the full-core estimate of a ratio measured
 * with both servers loaded at once, and a process's CPU time from /proc.
 */
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { fullCoreRatio, processCpuSeconds } from "../../scripts/benchUtil";

describe("scripts/benchUtil", () => {
  describe("fullCoreRatio", () => {
    it("leaves a ratio alone when the subject costs nothing idle", () => {
      expect(fullCoreRatio(0.8, 0)).to.equal(0.8);
    });

    it("gives back what a per-second cost took twice from half a core", () => {
      // A subject that idles at 5 % of a core and costs 1/0.9 of the baseline per request: alone on the core it
      // serves 0.95 × 0.9 = 0.855 of the baseline; loaded at once, (0.5 − 0.05) / 0.5 × 0.9 = 0.81.
      expect(fullCoreRatio(0.81, 0.05)).to.be.closeTo(0.855, 1e-12);
    });

    it("refuses an idle share that leaves no half core to serve with, or is not a share", () => {
      for (const share of [0.5, 0.7, -0.01, Number.NaN]) expect(() => fullCoreRatio(0.8, share)).to.throw(RangeError, String(share));
    });
  });

  describe("processCpuSeconds", function () {
    before(function () {
      // /proc is Linux's; elsewhere the function answers null and the bench rows leave the estimate out.
      if (process.platform !== "linux") this.skip();
    });

    it("counts this process's CPU time as it grows, and leaves out the threads it is told to", () => {
      const beforeS = processCpuSeconds(process.pid)!;
      const spinUntilMs = performance.now() + 60;
      while (performance.now() < spinUntilMs) {
        // busy: 60 ms of CPU in this thread
      }
      const afterS = processCpuSeconds(process.pid)!;
      expect(afterS - beforeS).to.be.at.least(0.03);
      // The main thread carries the process's name: without it, the spin is not counted.
      const mainThreadName = readFileSync(`/proc/${process.pid}/task/${process.pid}/comm`, "utf8").trim();
      const withoutMain = processCpuSeconds(process.pid, mainThreadName)!;
      expect(withoutMain).to.be.below(afterS);
    });

    it("answers null for a process that does not exist", () => {
      expect(processCpuSeconds(2 ** 22 + 1)).to.equal(null);
    });
  });
});
