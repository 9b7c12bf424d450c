/**
 * The log gate's reading of a node's log since its start: error lines counted by kind, and restarts. The node logs
 * pino JSON (`"level":50` error, 60 fatal) or the readable format (`<time> ERROR …`); neither carries a kind, so a
 * line is classified by its text, first match wins:
 *
 *   database     SQLite / storage: the schedule store and the proof archive
 *   consensus    the mesh: rounds, co-signing, peers (component mesh or mesh-transport)
 *   time-source  the time card, the host clock, attestation and signing
 *   other        any other error line
 *
 * A restart is a second "node listening" line: the process the agent started came up again (any level).
 *
 * Detail: docs/upgrade.md §4.
 */
/*
 * "Repeated" is REPEATED_AT[kind] occurrences since the start: one consensus, database or time-source error can be
 * a peer restarting or a transient I/O hiccup, two of one kind is a pattern; a single restart is already one too
 * many. These hold whatever acceptance.maxLogErrors allows in total, so a budget for scattered errors never lets a
 * repeated kind through. Counts only: no log text leaves this module (receipts are value-free).
 */
export const LOG_ERROR_KINDS = ["consensus", "database", "time-source", "restart"] as const;
export type LogErrorKind = (typeof LOG_ERROR_KINDS)[number];

/** Occurrences of a kind since the start at which the log gate fails. */
export const REPEATED_AT: Readonly<Record<LogErrorKind, number>> = { consensus: 2, database: 2, "time-source": 2, restart: 1 };

export interface LogErrorCounts {
  /** Error and fatal lines, every kind included. */
  errors: number;
  byKind: Record<LogErrorKind, number>;
}

/** pino JSON error and fatal levels, or the readable format's ERROR / FATAL column. */
const ERROR_LINE = /"level":(50|60)\b|^\S+ (ERROR|FATAL)\b/;
/** The node's line once its servers listen (node/server.ts): one per process start. */
const STARTED_LINE = /node listening/;
const KIND_PATTERNS: readonly [Exclude<LogErrorKind, "restart">, RegExp][] = [
  ["database", /sqlite|database|\barchiv|schedule store|disk i\/o/i],
  ["consensus", /"component":"mesh(-transport)?"|consensus|co-?sign|\bmesh\b|quorum/i],
  ["time-source", /"component":"attestor"|time card|\bclock\b|accuracy|attestation|signer|tamper|drift/i],
];

export function countLogErrors(lines: readonly string[]): LogErrorCounts {
  const byKind: Record<LogErrorKind, number> = { consensus: 0, database: 0, "time-source": 0, restart: 0 };
  let errors = 0;
  let starts = 0;
  for (const line of lines) {
    if (STARTED_LINE.test(line)) starts++;
    if (!ERROR_LINE.test(line)) continue;
    errors++;
    const kind = KIND_PATTERNS.find(([, pattern]) => pattern.test(line))?.[0];
    if (kind !== undefined) byKind[kind]++;
  }
  // The start the agent made is expected; a resumed node's start may predate the cursor (then 0 lines, 0 restarts).
  byKind.restart = Math.max(0, starts - 1);
  return { errors, byKind };
}

/** The kinds that reached their REPEATED_AT threshold. */
export function repeatedKinds(counts: LogErrorCounts): LogErrorKind[] {
  return LOG_ERROR_KINDS.filter((kind) => counts.byKind[kind] >= REPEATED_AT[kind]);
}
