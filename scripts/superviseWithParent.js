"use strict";
// `node scripts/superviseWithParent.js <program> [args…]`: runs a program that cannot preload
// bin/stopWithParent.js (anvil is a native binary; Hardhat node is a Node program, but not one of ours) so that it
// stops when the process that started this one dies, however it dies (SIGKILL, a crash). scripts/chainProcess.ts
// spawns the local chains through it with an IPC channel:
//
// - the program gets this process's stdio (the parent reads its output from the same pipes) and process group;
// - SIGTERM, SIGINT and SIGHUP sent to this process are passed on to the program;
// - when the IPC channel closes (the parent is gone), the program gets SIGTERM;
// - a program still running STOP_GRACE_MS after the first signal it was passed gets SIGKILL;
// - when the program exits, this process exits the same way (its exit code, or the same signal), so the parent sees
//   the program's own end.
//
// If this process itself is SIGKILLed, its program is left running: the parent (scripts/chainProcess.ts) then kills
// the process group, which the program shares.
const { spawn } = require("node:child_process");
const { constants } = require("node:os");

/** How long the program may take to stop after the first signal before it is killed, ms. */
const STOP_GRACE_MS = 10_000;
/** The signals passed on to the program. */
const FORWARDED_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"];

const [program, ...args] = process.argv.slice(2);
if (program === undefined) {
  process.stderr.write("usage: node scripts/superviseWithParent.js <program> [args…]\n");
  process.exit(2);
}

const child = spawn(program, args, { stdio: "inherit" });
let forceTimer;

function pass(signal) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  forceTimer ??= setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
}

for (const signal of FORWARDED_SIGNALS) process.on(signal, () => pass(signal));
if (process.channel !== undefined && process.channel !== null) {
  // The channel never keeps this process alive: the program does, until it exits.
  process.channel.unref();
  process.once("disconnect", () => pass("SIGTERM"));
}

child.once("error", (error) => {
  process.stderr.write(`superviseWithParent: cannot run ${program}: ${error.message}\n`);
  process.exit(127);
});

child.once("exit", (code, signal) => {
  clearTimeout(forceTimer);
  if (signal === null) process.exit(code ?? 1);
  // The same end as the program's: this process's handler for that signal goes, then the signal is raised again;
  // one that Node itself handles (SIGUSR1 starts its inspector, SIGPIPE is ignored) ends it with 128 + its number.
  process.removeAllListeners(signal);
  process.kill(process.pid, signal);
  process.exit(128 + (constants.signals[signal] ?? 0));
});
