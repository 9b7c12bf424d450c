/**
 * The listen backlog a server really gets. Linux silently caps every backlog at net.core.somaxconn (4,096 since
 * kernel 5.4, 128 before), so a node asking for more would believe in a queue it does not have.
 */
import { readFileSync } from "node:fs";

/** Where Linux exposes the cap. */
export const SOMAXCONN_PATH = "/proc/sys/net/core/somaxconn";

/** The kernel's cap on a listen backlog (net.core.somaxconn); undefined where it cannot be read (not Linux). */
export function kernelListenBacklogCap(path: string = SOMAXCONN_PATH): number | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
  const cap = Number(text.trim());
  return Number.isSafeInteger(cap) && cap > 0 ? cap : undefined;
}

/** The backlog a listener asking for `requested` gets under `cap` (no cap known: what it asked for). */
export function effectiveListenBacklog(requested: number, cap: number | undefined): number {
  return cap === undefined ? requested : Math.min(requested, cap);
}
