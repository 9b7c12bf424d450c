/**
 * The stream contract "each push carries a moment strictly newer than the previous push on that stream": one
 * instance per stream (a WebSocket subscription, a gRPC StreamTime call), never shared, since two streams advance
 * independently.
 *
 * Why: pushes are timed by the stream's interval while proofs are made by the node's tick, and the two clocks
 * drift; at a 100 ms interval a push now and then came before the next proof and carried the previous push's
 * moment again. A tick with nothing newer sends nothing (the next tick, or the one after, has a newer proof).
 */
import type { SignedTime } from "../core/types";

export class NewerMoments {
  #lastNs: bigint | null = null;

  /** True, and remembered as the last sent, when `signed` is newer than what the stream last sent. */
  admit(signed: SignedTime): boolean {
    const momentNs = signed.proof.nanoMoment;
    if (this.#lastNs !== null && momentNs <= this.#lastNs) return false;
    this.#lastNs = momentNs;
    return true;
  }
}
