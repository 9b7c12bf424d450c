/**
 * A bounded least-recently-used map: the storage of the caller-owned caches of protocol/ (RecoveryMemo in sign.ts,
 * P256KeyCache in verify.ts). Internal to protocol/ (not re-exported from protocol/index.ts). A Map iterates in
 * insertion order, so re-inserting on a hit makes it an LRU and the first key is the least recently used.
 */
import { ProtocolError } from "./errors";

export class BoundedLru<K, V> {
  readonly #entries = new Map<K, V>();
  readonly maxEntries: number;

  /** Throws ProtocolError unless `maxEntries` is a positive safe integer (`what` names the cache in the error). */
  constructor(maxEntries: number, what: string) {
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
      throw new ProtocolError(`${what}: maxEntries must be a positive integer`, { maxEntries });
    }
    this.maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The value for `key`, which becomes the most recently used; undefined when absent. */
  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value !== undefined) {
      this.#entries.delete(key);
      this.#entries.set(key, value);
    }
    return value;
  }

  /** Stores `value` as the most recently used, evicting the least recently used entry when full. */
  set(key: K, value: V): void {
    if (this.#entries.has(key)) {
      this.#entries.delete(key);
    } else if (this.#entries.size >= this.maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done !== true) this.#entries.delete(oldest.value);
    }
    this.#entries.set(key, value);
  }

  clear(): void {
    this.#entries.clear();
  }
}
