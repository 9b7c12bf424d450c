/**
 * Who gets a free delivery slot (docs/protocol.md §9.7): the client with the fewest attempts in flight, suspects
 * (clients whose callbacks failed lately) sharing at most half of the slots, and a client holding k slots taking
 * another only while more than k are free. Clients are keyed by address, so an attacker with more addresses than
 * slots holds every slot for one attempt at most; after that its addresses are suspects.
 */

/** A due row offered to the fair picker: its id, its client, and rows of one client in due order. */
export interface DueCandidate {
  id: string;
  clientKey: string;
}

/** Clients whose callbacks failed lately ("suspects") and the slots they may hold together. */
export interface SuspectPolicy {
  isSuspect(clientKey: string): boolean;
  /** Slots suspects may hold in all, counting those in flight. */
  maxSlots: number;
}

const NO_SUSPECTS: SuspectPolicy = { isSuspect: () => false, maxSlots: Number.POSITIVE_INFINITY };

/** How long a client whose delivery attempt failed counts as a suspect (unless one of its deliveries succeeds). */
export const SUSPECT_WINDOW_MS = 10 * 60_000;
/** Suspects remembered at most (the oldest is forgotten first). */
const MAX_SUSPECTS = 10_000;

/**
 * Chooses up to `room` rows to deliver now, sharing slots across clients: each pick goes to the client with the
 * fewest attempts in flight (counting the picks so far), never beyond `maxPerClient`; among equals a client whose
 * callbacks did not fail lately comes first, then the one whose candidate came first (`candidates` is ordered by
 * due time, so that is the earliest due). Headroom: a client with k attempts in flight takes a slot only while more
 * than k slots are free, so clients that already hold slots always leave one for a client that holds none.
 * Suspects hold at most `suspects.maxSlots` slots together. Pure; O(room · clients).
 */
export function pickFairly<T extends DueCandidate>(
  candidates: readonly T[],
  inFlightByClient: ReadonlyMap<string, number>,
  room: number,
  maxPerClient: number,
  suspects: SuspectPolicy = NO_SUSPECTS,
): T[] {
  const queues = new Map<string, T[]>();
  for (const candidate of candidates) {
    const queue = queues.get(candidate.clientKey);
    if (queue === undefined) queues.set(candidate.clientKey, [candidate]);
    else queue.push(candidate);
  }
  const load = new Map<string, number>();
  for (const key of queues.keys()) load.set(key, inFlightByClient.get(key) ?? 0);
  const suspect = new Set([...queues.keys()].filter((key) => suspects.isSuspect(key)));
  let suspectSlots = 0;
  for (const [key, count] of inFlightByClient) if (suspects.isSuspect(key)) suspectSlots += count;
  const picked: T[] = [];
  while (picked.length < room) {
    let best: string | undefined;
    for (const [key, queue] of queues) {
      const keyLoad = load.get(key) ?? 0;
      if (queue.length === 0 || keyLoad >= maxPerClient || keyLoad >= room - picked.length) continue;
      if (suspect.has(key) && suspectSlots >= suspects.maxSlots) continue;
      if (best === undefined) best = key;
      else {
        const bestLoad = load.get(best) ?? 0;
        if (keyLoad < bestLoad || (keyLoad === bestLoad && suspect.has(best) && !suspect.has(key))) best = key;
      }
    }
    if (best === undefined) break;
    picked.push(queues.get(best)!.shift()!);
    load.set(best, (load.get(best) ?? 0) + 1);
    if (suspect.has(best)) suspectSlots += 1;
  }
  return picked;
}

/**
 * Pending schedules per client and in all. The quota checks run on every schedule request: counting rows in
 * SQLite there cost a scan of up to maxPending index entries per request.
 */
export class PendingCounts {
  readonly #byClient = new Map<string, number>();
  #total = 0;

  get total(): number {
    return this.#total;
  }

  of(clientKey: string): number {
    return this.#byClient.get(clientKey) ?? 0;
  }

  add(clientKey: string, delta: number): void {
    if (delta === 0) return;
    const next = this.of(clientKey) + delta;
    if (next <= 0) this.#byClient.delete(clientKey);
    else this.#byClient.set(clientKey, next);
    this.#total += delta;
  }

  /**
   * Up to `count` clients with pending rows, taking turns: each call goes on where the previous one stopped (a live
   * iterator over the map, so no copy of every key per call), so over successive calls every client is visited
   * whatever the count of clients.
   */
  #rotation: IterableIterator<string> | null = null;
  nextClients(count: number): string[] {
    const wanted = Math.min(count, this.#byClient.size);
    const clients: string[] = [];
    let wrapped = false;
    while (clients.length < wanted) {
      this.#rotation ??= this.#byClient.keys();
      const next = this.#rotation.next();
      if (next.done === true) {
        this.#rotation = null;
        if (wrapped) break; // every key seen in this call (the map shrank meanwhile)
        wrapped = true;
        continue;
      }
      clients.push(next.value);
    }
    return clients;
  }
}

/**
 * Clients whose latest delivery attempt failed within SUSPECT_WINDOW_MS (a success clears them). Bounded: at most
 * MAX_SUSPECTS entries, the oldest dropped (insertion order).
 */
export class FailingClients {
  readonly #failedAtMs = new Map<string, number>();

  note(clientKey: string): void {
    this.#failedAtMs.delete(clientKey);
    if (this.#failedAtMs.size >= MAX_SUSPECTS) {
      const oldest = this.#failedAtMs.keys().next();
      if (oldest.done !== true) this.#failedAtMs.delete(oldest.value);
    }
    this.#failedAtMs.set(clientKey, performance.now());
  }

  clear(clientKey: string): void {
    this.#failedAtMs.delete(clientKey);
  }

  /** Current suspects (expired entries are dropped here). */
  keys(): string[] {
    const nowMs = performance.now();
    for (const [key, atMs] of this.#failedAtMs) if (nowMs - atMs > SUSPECT_WINDOW_MS) this.#failedAtMs.delete(key);
    return [...this.#failedAtMs.keys()];
  }

  policy(maxSlots: number): SuspectPolicy {
    const nowMs = performance.now();
    return {
      isSuspect: (clientKey) => {
        const atMs = this.#failedAtMs.get(clientKey);
        return atMs !== undefined && nowMs - atMs <= SUSPECT_WINDOW_MS;
      },
      maxSlots,
    };
  }
}
