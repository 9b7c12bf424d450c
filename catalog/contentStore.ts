/**
 * The evidence gateway's local store: each content is one read-only file named by its identifier
 * (lib/contentId.ts), written once through a temporary file and a rename, so a reader sees it whole or not at
 * all. Nothing is ever fetched from elsewhere: what is served is what was put here (catalog/publish.ts).
 */
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ValidationError } from "../protocol/errors";
import { contentIdOf } from "../lib/contentId";

export interface StoredContent {
  readonly path: string;
  readonly bytes: number;
}

export class ContentStore {
  readonly dir: string;
  readonly maxContentBytes: number;

  constructor(dir: string, maxContentBytes: number) {
    mkdirSync(dir, { recursive: true });
    this.dir = dir;
    this.maxContentBytes = maxContentBytes;
  }

  /** Stores `bytes` (once: the same bytes have the same identifier) and returns their identifier. */
  put(bytes: Uint8Array): string {
    if (bytes.length > this.maxContentBytes) {
      throw new ValidationError("content", `is ${bytes.length} bytes, over the store's bound of ${this.maxContentBytes}`, { bytes: bytes.length });
    }
    const contentId = contentIdOf(bytes);
    const path = join(this.dir, contentId);
    if (existsSync(path)) return contentId;
    const temporary = `${path}.tmp-${process.pid}`;
    try {
      writeFileSync(temporary, bytes, { flag: "w", mode: 0o444 });
      renameSync(temporary, path);
    } catch (error) {
      rmSync(temporary, { force: true });
      throw error;
    }
    chmodSync(path, 0o444);
    return contentId;
  }

  /** The stored content a canonical identifier (parseContentId) names, or null. */
  get(contentId: string): StoredContent | null {
    const path = join(this.dir, contentId);
    try {
      const stats = statSync(path);
      return stats.isFile() ? { path, bytes: stats.size } : null;
    } catch {
      return null;
    }
  }
}
