/**
 * What every program's command line shares besides `start`: `settings [--json]` (the settings table),
 * `--version`, `--help`, and the usage on stderr with exit code 2 for anything else.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { SettingDescription } from "./settings";

export interface ProgramIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export interface ProgramCommands<Io extends ProgramIo> {
  usage: string;
  start(args: string[], io: Io): Promise<number>;
  describeSettings(): SettingDescription[];
}

/** The package's version, from package.json beside the build output. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8")) as { version: string }).version;
}

/** Runs one command of a program; returns the exit code. */
export async function runProgramCommand<Io extends ProgramIo>(argv: string[], io: Io, commands: ProgramCommands<Io>): Promise<number> {
  const [command, ...rest] = argv;
  if (command === "start") return commands.start(rest, io);
  if (command === "settings") {
    const rows = commands.describeSettings();
    const nameWidth = Math.max(...rows.map((row) => row.name.length)) + 1;
    const envWidth = Math.max(...rows.map((row) => row.env.length)) + 1;
    if (rest.includes("--json")) io.stdout(JSON.stringify(rows, null, 2));
    else for (const row of rows) io.stdout(`${row.name.padEnd(nameWidth)} ${row.env.padEnd(envWidth)} ${row.secret ? "(secret)" : JSON.stringify(row.default)}\n    ${row.description}`);
    return 0;
  }
  if (command === "--version") {
    io.stdout(packageVersion());
    return 0;
  }
  if (command === "--help" || command === "-h") {
    io.stdout(commands.usage);
    return 0;
  }
  io.stderr(commands.usage);
  return 2;
}
