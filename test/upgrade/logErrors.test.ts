/**
 * The log gate (upgrade/logErrors.ts, upgrade/gates.ts logGate) over crafted node.log files read through a local
 * unit: error lines are counted by kind (consensus, database, time-source), a second "node listening" is a restart,
 * warnings are not errors, and the gate fails at a kind's REPEATED_AT threshold even when acceptance.maxLogErrors
 * would allow the lines in total.
 */
import { expect } from "chai";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { logGate } from "../../upgrade/gates";
import { countLogErrors, REPEATED_AT } from "../../upgrade/logErrors";
import { createLocalUnit } from "../../upgrade/localUnit";

/** pino JSON lines as the node writes them (node/server.ts, node/mesh/*, node/core/*). */
const LINES = {
  listening: '{"level":30,"time":1,"pid":7,"msg":"node listening"}',
  meshError: '{"level":50,"time":2,"component":"mesh-transport","kind":"cosign","msg":"mesh handler failed"}',
  roundWarning: '{"level":40,"time":3,"component":"mesh","error":"no quorum","msg":"consensus round failed"}',
  archiveError: '{"level":50,"time":4,"component":"time-service","err":{"message":"SQLITE_BUSY: database is locked"},"msg":"archiving a proof failed"}',
  tickError: '{"level":50,"time":5,"component":"attestor","msg":"attestation tick failed"}',
  readableTamper: "2026-01-02T03:04:05.000Z FATAL time card tampered: attestation stopped",
  wsError: '{"level":50,"time":6,"transport":"ws","msg":"stream push failed"}',
};

describe("upgrade: the log gate counts errors by kind", () => {
  let root: string;
  let units = 0;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "ats-log-gate-"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  /** The log gate over a unit whose node.log is `before` (ahead of the cursor) then `lines`. */
  async function gateOver(lines: readonly string[], maxLogErrors: number, before = "an older process's line\n") {
    const dir = join(root, `unit-${units++}`);
    mkdirSync(dir);
    writeFileSync(join(dir, "unit.json"), JSON.stringify({ configFile: "node.json", modulesDir: root }));
    writeFileSync(join(dir, "node.log"), before);
    const unit = createLocalUnit(dir);
    const logCursor = await unit.logCursor();
    writeFileSync(join(dir, "node.log"), `${before}${lines.map((line) => `${line}\n`).join("")}`);
    return logGate({ unit, logCursor, maxLogErrors });
  }

  it("classifies error lines by kind, counts a second start as a restart, and ignores warnings", () => {
    const counts = countLogErrors([LINES.listening, LINES.roundWarning, LINES.meshError, LINES.archiveError, LINES.tickError, LINES.readableTamper, LINES.wsError, LINES.listening]);
    expect(counts).to.deep.equal({ errors: 5, byKind: { consensus: 1, database: 1, "time-source": 2, restart: 1 } });
    expect(countLogErrors([LINES.listening, LINES.roundWarning, LINES.roundWarning])).to.deep.equal({ errors: 0, byKind: { consensus: 0, database: 0, "time-source": 0, restart: 0 } });
  });

  it("passes one error of each kind within maxLogErrors, and only reads lines after the cursor", async () => {
    const gate = await gateOver([LINES.listening, LINES.meshError, LINES.archiveError, LINES.tickError, LINES.wsError], 4, `${LINES.listening}\n${LINES.archiveError}\n`);
    expect(gate).to.deep.equal({ gate: "logs", passed: true, detail: "4 error lines (at most 4); consensus 1, database 1, time-source 1, restart 0" });
  });

  it("fails a repeated kind even when maxLogErrors allows the lines, naming the kind", async () => {
    expect(REPEATED_AT).to.deep.equal({ consensus: 2, database: 2, "time-source": 2, restart: 1 });
    for (const [lines, kind] of [
      [[LINES.meshError, LINES.meshError], "consensus"],
      [[LINES.archiveError, LINES.archiveError], "database"],
      [[LINES.tickError, LINES.readableTamper], "time-source"],
      [[LINES.listening, LINES.listening], "restart"],
    ] as const) {
      const gate = await gateOver([LINES.listening, ...lines], 10);
      expect(gate.passed, kind).to.equal(false);
      expect(gate.detail, kind).to.match(new RegExp(`; repeated: ${kind}$`));
    }
  });

  it("fails more error lines than maxLogErrors, whatever their kinds", async () => {
    const gate = await gateOver([LINES.listening, LINES.wsError], 0);
    expect(gate).to.deep.equal({ gate: "logs", passed: false, detail: "1 error lines (at most 0); consensus 0, database 0, time-source 0, restart 0" });
  });
});
