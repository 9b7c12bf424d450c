/**
 * Open long-lived streams (WebSocket connections and gRPC StreamTime calls) counted per client, across both
 * transports, so that one API key or address cannot take every slot the node has and push everyone else out,
 * and counted in total, so that streams cannot add timers without bound.
 */
import { RateLimitError, UnavailableError } from "../../protocol/errors";

export class StreamQuota {
  readonly #maxPerClient: number;
  readonly #maxTotal: number;
  readonly #openByClient = new Map<string, number>();
  #total = 0;

  constructor(parameters: { maxPerClient: number; maxTotal: number }) {
    this.#maxPerClient = parameters.maxPerClient;
    this.#maxTotal = parameters.maxTotal;
  }

  /** Open streams in all. */
  get total(): number {
    return this.#total;
  }

  /**
   * Takes a slot for `clientKey`, or throws: RateLimitError ("Rate limit exceeded", 429 / RESOURCE_EXHAUSTED)
   * when this client holds its share already, UnavailableError (503 / UNAVAILABLE) when the node is full.
   * Returns the release function; calling it more than once releases once.
   */
  acquire(clientKey: string): () => void {
    const open = this.#openByClient.get(clientKey) ?? 0;
    if (open >= this.#maxPerClient) throw new RateLimitError({ openStreams: open, maxStreamsPerClient: this.#maxPerClient });
    if (this.#total >= this.#maxTotal) throw new UnavailableError("Too many stream connections", { maxStreams: this.#maxTotal });
    this.#openByClient.set(clientKey, open + 1);
    this.#total += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total -= 1;
      const left = (this.#openByClient.get(clientKey) ?? 1) - 1;
      if (left === 0) this.#openByClient.delete(clientKey);
      else this.#openByClient.set(clientKey, left);
    };
  }
}
