/**
 * The logger of `ats-node` (pino, to stderr) in its two formats (setting logFormat, env ATS_LOG_FORMAT, flag
 * `--pretty`):
 *
 *   json    one pino JSON object per line (default: what log collectors read)
 *   pretty  one readable line per entry, `HH:MM:SS.mmm LEVEL message key=value …` (local time), and an error's
 *           stack on the lines below it, indented: for a person at a terminal
 *
 * The pretty form is a small formatter over pino's own lines, not pino-pretty: no dependency, no worker thread,
 * and the same fields as the JSON form (only pid, hostname and the logger name are left out).
 */
import pino, { type Logger } from "pino";
import type { LogFormat, LogLevel } from "./settings";

const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };
/** Fields shown in the line's own slots, or left out. */
const NOT_FIELDS = new Set(["level", "time", "msg", "pid", "hostname", "name", "err"]);

function pad(value: number, width = 2): string {
  return String(value).padStart(width, "0");
}

function fieldText(value: unknown): string {
  if (typeof value === "string") return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}

/** One pino JSON line as a readable line; a line that is not a JSON object is returned as it is. */
export function formatLogLine(line: string): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return line;
  const record = entry as Record<string, unknown>;
  const parts: string[] = [];
  if (typeof record.time === "number") {
    const time = new Date(record.time);
    parts.push(`${pad(time.getHours())}:${pad(time.getMinutes())}:${pad(time.getSeconds())}.${pad(time.getMilliseconds(), 3)}`);
  }
  parts.push((typeof record.level === "number" ? (LEVEL_NAMES[record.level] ?? String(record.level)) : String(record.level)).padEnd(5));
  if (typeof record.msg === "string" && record.msg !== "") parts.push(record.msg);
  for (const [key, value] of Object.entries(record)) {
    if (!NOT_FIELDS.has(key)) parts.push(`${key}=${fieldText(value)}`);
  }
  let text = parts.join(" ");
  const err = record.err as { type?: unknown; message?: unknown; stack?: unknown } | undefined;
  if (typeof err === "object" && err !== null) {
    const detail = typeof err.stack === "string" ? err.stack : `${String(err.type ?? "Error")}: ${String(err.message ?? "")}`;
    text += `\n${detail
      .split("\n")
      .map((stackLine) => `    ${stackLine}`)
      .join("\n")}`;
  }
  return text;
}

export interface CreateCliLoggerParameters {
  level: LogLevel;
  /** The program's name in JSON lines (pino `name`). */
  name: string;
  format: LogFormat;
  /** Where pretty lines go (one call per line, no newline); JSON goes straight to file descriptor 2. */
  writeLine: (line: string) => void;
}

export function createCliLogger(parameters: CreateCliLoggerParameters): Logger {
  const options = { level: parameters.level, name: parameters.name };
  if (parameters.format === "json") return pino(options, pino.destination(2));
  return pino(options, {
    write(chunk: string) {
      for (const line of chunk.split("\n")) if (line !== "") parameters.writeLine(formatLogLine(line));
    },
  });
}
