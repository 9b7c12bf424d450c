/**
 * The mesh as chronyc `sources` shows it, over time: each poll of a node's GET /mesh/state adds, per peer, its
 * offset (peer clock − this node's clock) and the uncertainty of that offset, half the round-trip delay (an offset
 * measured over a round trip δ lies within ±δ/2 of the true one, RFC 5905 §8). Samples are kept per poll, aligned
 * on one time axis as a plot takes them (null where a peer had no sample); at most `maxPolls`, oldest dropped.
 */
import type { MeshStateView } from "./types";

export interface AlignedMeshSeries {
  /** Seconds since the epoch (the browser's clock at each poll). */
  atS: number[];
  peers: { nodeId: string; offsetUs: (number | null)[]; uncertaintyUs: (number | null)[] }[];
}

/** A ns decimal string as µs (a plot needs numbers; the exact ns are in the node table). */
function nsToUs(ns: string | null): number | null {
  return ns === null ? null : Number(BigInt(ns)) / 1_000;
}

interface Poll {
  atS: number;
  byPeer: Map<string, { offsetUs: number | null; uncertaintyUs: number | null }>;
}

export class MeshHistory {
  readonly #polls: Poll[] = [];

  constructor(readonly maxPolls = 600) {}

  /** Adds one poll's peers, read at `atMs` (ms since the epoch). */
  add(state: MeshStateView, atMs: number): void {
    const byPeer = new Map<string, { offsetUs: number | null; uncertaintyUs: number | null }>();
    for (const peer of state.peers) {
      const delayUs = nsToUs(peer.delayNs);
      byPeer.set(peer.nodeId, { offsetUs: nsToUs(peer.offsetNs), uncertaintyUs: delayUs === null ? null : delayUs / 2 });
    }
    this.#polls.push({ atS: atMs / 1_000, byPeer });
    if (this.#polls.length > this.maxPolls) this.#polls.shift();
  }

  /** Every peer seen in the kept polls, sorted by node id, aligned on the polls' times. */
  aligned(): AlignedMeshSeries {
    const ids = [...new Set(this.#polls.flatMap((poll) => [...poll.byPeer.keys()]))].sort();
    return {
      atS: this.#polls.map((poll) => poll.atS),
      peers: ids.map((nodeId) => ({
        nodeId,
        offsetUs: this.#polls.map((poll) => poll.byPeer.get(nodeId)?.offsetUs ?? null),
        uncertaintyUs: this.#polls.map((poll) => poll.byPeer.get(nodeId)?.uncertaintyUs ?? null),
      })),
    };
  }

  /** Offsets held, over every peer and poll: the points the plot draws. */
  pointCount(): number {
    return this.#polls.reduce((sum, poll) => sum + [...poll.byPeer.values()].filter((sample) => sample.offsetUs !== null).length, 0);
  }

  clear(): void {
    this.#polls.length = 0;
  }
}
