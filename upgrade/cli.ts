/**
 * `ats-upgrade`, the node upgrade agent's command line (bin/ats-upgrade.js runs it from dist/):
 *
 *   ats-upgrade check --plan <file>                       validate a plan (closed schema); print its summary
 *   ats-upgrade run --plan <file> --receipt <file>        run the rollout; write the value-free receipt
 *
 * Anything outside the plan is asked on the terminal; without one (stdin not a TTY) the answer is no.
 * Exit codes: 0 every node upgraded (or already current), 1 refused or stopped (the receipt says why), 2 bad usage.
 * The receipt file is written new (never over another file).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";
import { runUpgrade } from "./agent";
import { errorText, UpgradeRefusal } from "./errors";
import { parsePlan, type AnyPlanNode, type UpgradePlan } from "./plan";

const USAGE = `usage:
  ats-upgrade check --plan <file>
  ats-upgrade run --plan <file> --receipt <file>
docs/upgrade.md describes the plan, the gates and the receipt.`;

export interface UpgradeCliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  confirm: (question: string) => Promise<boolean>;
}

async function terminalConfirm(question: string): Promise<boolean> {
  if (!process.stdin.isTTY) return false;
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(`${question} [y/N] `)).trim());
  } finally {
    rl.close();
  }
}

const DEFAULT_IO: UpgradeCliIo = {
  stdout: (text) => process.stdout.write(`${text}\n`),
  stderr: (text) => process.stderr.write(`${text}\n`),
  confirm: terminalConfirm,
};

function loadPlan(file: string): { plan: UpgradePlan; text: string } {
  const text = readFileSync(file, "utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new UpgradeRefusal("plan-invalid", `${file}: not JSON (${(error as Error).message})`);
  }
  return { plan: parsePlan(json), text };
}

export async function main(argv: string[], io: UpgradeCliIo = DEFAULT_IO): Promise<number> {
  const [command, ...rest] = argv;
  try {
    const { values } = parseArgs({ args: rest, options: { plan: { type: "string" }, receipt: { type: "string" } } });
    if (command === "check" && values.plan !== undefined) {
      const { plan } = loadPlan(values.plan);
      io.stdout(JSON.stringify({ ok: true, release: plan.release.release_id, artifact: plan.release.artifact.kind === "bundle" ? plan.release.artifact.sha256 : plan.release.artifact.digest, order: plan.rolloutOrder, maxParallel: plan.maxParallel ?? 1, adopt: (plan.nodes as AnyPlanNode[]).filter((node) => node.adopt !== undefined).map((node) => node.host) }, null, 2));
      return 0;
    }
    if (command === "run" && values.plan !== undefined && values.receipt !== undefined) {
      const { plan, text } = loadPlan(values.plan);
      const receipt = await runUpgrade({ plan, planText: text, confirm: io.confirm, log: io.stderr });
      writeFileSync(values.receipt, `${JSON.stringify(receipt, null, 2)}\n`, { flag: "wx", mode: 0o644 });
      io.stdout(JSON.stringify({ outcome: receipt.outcome, receipt: values.receipt, refusal: receipt.refusal }, null, 2));
      return receipt.outcome === "completed" ? 0 : 1;
    }
    io.stderr(USAGE);
    return 2;
  } catch (error) {
    if (error instanceof UpgradeRefusal) {
      io.stderr(`ats-upgrade: refused (${error.code}): ${error.message}`);
      return 1;
    }
    if (error instanceof TypeError && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS")) {
      io.stderr(`ats-upgrade: ${error.message}\n${USAGE}`);
      return 2;
    }
    io.stderr(`ats-upgrade: ${errorText(error)}`);
    return 1;
  }
}
