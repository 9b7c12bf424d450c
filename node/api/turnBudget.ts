/**
 * Work per event-loop turn, bounded: what lets a burst of work (thousands of stream pushes due together) run over
 * several turns, with every other client's I/O in between, instead of in one long turn during which nobody is
 * answered (pushScheduler.ts).
 *
 * A TurnBudget hands out `maxPerTurn` units per turn. The turn boundary is a setImmediate: it runs in the check
 * phase, right after the turn's I/O callbacks, so waiting work resumes after the requests read in that turn.
 */

/**
 * Calls every function, whatever one of them throws, and returns the first error (null when none threw): for
 * callbacks that must all run, such as resuming waiters or uncorking sockets, where one left out would wait for good.
 */
export function callEach<T>(items: Iterable<T>, call: (item: T) => void): { error: unknown } | null {
  let failure: { error: unknown } | null = null;
  for (const item of items) {
    try {
      call(item);
    } catch (error) {
      failure ??= { error };
    }
  }
  return failure;
}

export class TurnBudget {
  readonly #maxPerTurn: number;
  #used = 0;
  #boundaryScheduled = false;
  #waiters: (() => void)[] = [];

  constructor(maxPerTurn: number) {
    if (!Number.isInteger(maxPerTurn) || maxPerTurn < 1) throw new RangeError(`maxPerTurn must be an integer ≥ 1, got ${maxPerTurn}`);
    this.#maxPerTurn = maxPerTurn;
  }

  /** Takes one unit of this turn's allowance; false when it is spent. */
  take(): boolean {
    if (this.#used >= this.#maxPerTurn) return false;
    this.#used += 1;
    this.#scheduleBoundary();
    return true;
  }

  /** Calls `resume` once, at the next turn boundary (when the allowance is renewed). */
  whenRenewed(resume: () => void): void {
    this.#waiters.push(resume);
    this.#scheduleBoundary();
  }

  #scheduleBoundary(): void {
    if (this.#boundaryScheduled) return;
    this.#boundaryScheduled = true;
    setImmediate(() => {
      this.#boundaryScheduled = false;
      this.#used = 0;
      const waiters = this.#waiters;
      this.#waiters = [];
      const failure = callEach(waiters, (resume) => resume());
      if (failure !== null) throw failure.error;
    });
  }
}
