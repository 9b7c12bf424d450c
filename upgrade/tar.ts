/**
 * The release bundle's container: POSIX ustar, gzip-compressed, written and read here rather than by a `tar`
 * binary, for two reasons.
 *
 * - Reproducible bytes: entries in byte order of their paths, one fixed mtime (the source commit's time), owner
 *   0:0 without names, modes normalised (0644, 0755 for executables and folders), and gzip without a file name or
 *   time stamp. The same dist/ gives the same bundle digest, whatever tar or umask the build machine has.
 * - Safe extraction of an archive that came over the network (extractTarGz): only regular files and folders,
 *   relative paths without `..`, no links or devices, no path twice (a file twice, a file and a folder at one
 *   path, anything below a file); streamed from the gzip file to the disk (zlib's streaming inflate, a 512-byte
 *   header and one chunk in memory at a time), bounded per entry, in total and in entries. A refusal names the
 *   entry and the bound, and removes everything the extraction wrote.
 */
import { createHash, type Hash } from "node:crypto";
import { chmodSync, closeSync, constants as fsConstants, createReadStream, mkdirSync, openSync, rmSync, writeSync } from "node:fs";
import { join, posix } from "node:path";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip, gzipSync } from "node:zlib";
import { UpgradeRefusal } from "./errors";

const BLOCK_BYTES = 512;
/*
 * What one bundle may unpack to. A bundle is checked against its approved digest before it is unpacked, but gzip
 * turns a few kB into gigabytes: the bounds keep a bad archive from filling the agent's disk or memory, whoever
 * made it. A bundle is code: today's unpacks to about 90 MB in some 21,000 files, the largest 2.1 MiB (the
 * better-sqlite3 addon). The writer refuses to write what a reader would refuse (writeTarGz).
 */
/**
 * The whole archive, unpacked (headers and padding included), bytes: 1 GiB, about eleven times today's and room
 * for the writer's own bound on node_modules/ (512 MiB, upgrade/moduleFiles.ts) plus dist/. It bounds the disk an
 * extraction fills (the archive is streamed, never held).
 */
export const MAX_UNPACKED_TAR_BYTES = 1024 * 1024 * 1024;
/**
 * One file, bytes: 64 MiB, thirty times today's largest and above the largest native addon in this repository's
 * whole dev tree (Hardhat's EDR, 38 MB). An entry declaring more is refused before a byte of it is written.
 */
export const MAX_TAR_ENTRY_BYTES = 64 * 1024 * 1024;
/**
 * Entries (files and folders): 200,000, twice the writer's bound on node_modules/ files (upgrade/moduleFiles.ts).
 * It bounds the files an extraction creates and the index of paths kept to refuse duplicates: without it 1 GiB of
 * bare headers is two million empty files.
 */
export const MAX_TAR_ENTRIES = 200_000;

export interface TarLimits {
  /** The whole archive, unpacked, bytes (≤ MAX_UNPACKED_TAR_BYTES). */
  maxUnpackedBytes: number;
  /** One file's content, bytes (≤ MAX_TAR_ENTRY_BYTES). */
  maxEntryBytes: number;
  /** Files and folders (≤ MAX_TAR_ENTRIES). */
  maxEntries: number;
}

export const DEFAULT_TAR_LIMITS: Readonly<TarLimits> = { maxUnpackedBytes: MAX_UNPACKED_TAR_BYTES, maxEntryBytes: MAX_TAR_ENTRY_BYTES, maxEntries: MAX_TAR_ENTRIES };

export interface TarEntry {
  /** Relative POSIX path; folders end without a slash. */
  path: string;
  type: "file" | "directory";
  /** Files only. */
  content?: Buffer;
  executable?: boolean;
}
function octal(value: number, width: number): string {
  // width - 1 digits and a NUL, as ustar writes its numeric fields.
  return `${value.toString(8).padStart(width - 1, "0")}\0`;
}

/** Splits a path into ustar's prefix (≤ 155) and name (≤ 100) at a slash; throws when it cannot. */
function splitName(path: string): { prefix: string; name: string } {
  if (Buffer.byteLength(path) <= 100) return { prefix: "", name: path };
  for (let cut = path.indexOf("/"); cut !== -1; cut = path.indexOf("/", cut + 1)) {
    const prefix = path.slice(0, cut);
    const name = path.slice(cut + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return { prefix, name };
  }
  throw new Error(`tar: path too long for ustar: ${path}`);
}

function header(entry: TarEntry, mtimeS: number): Buffer {
  const block = Buffer.alloc(BLOCK_BYTES);
  const storedPath = entry.type === "directory" ? `${entry.path}/` : entry.path;
  const { prefix, name } = splitName(storedPath);
  const mode = entry.type === "directory" || entry.executable === true ? 0o755 : 0o644;
  block.write(name, 0, 100, "utf8");
  block.write(octal(mode, 8), 100, "ascii");
  block.write(octal(0, 8), 108, "ascii"); // uid
  block.write(octal(0, 8), 116, "ascii"); // gid
  block.write(octal(entry.type === "file" ? entry.content!.length : 0, 12), 124, "ascii");
  block.write(octal(mtimeS, 12), 136, "ascii");
  block.write("        ", 148, "ascii"); // checksum field counts as spaces while summing
  block.write(entry.type === "file" ? "0" : "5", 156, "ascii");
  block.write("ustar\0", 257, "ascii");
  block.write("00", 263, "ascii");
  block.write(prefix, 345, 155, "utf8");
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, "ascii");
  return block;
}

/** A gzip'd ustar archive of `entries`, sorted by path, every entry stamped `mtimeS`. */
export function writeTarGz(entries: readonly TarEntry[], mtimeS: number): Buffer {
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const parts: Buffer[] = [];
  for (const entry of sorted) {
    parts.push(header(entry, mtimeS));
    if (entry.type === "file") {
      parts.push(entry.content!);
      const padding = (BLOCK_BYTES - (entry.content!.length % BLOCK_BYTES)) % BLOCK_BYTES;
      parts.push(Buffer.alloc(padding));
    }
  }
  parts.push(Buffer.alloc(2 * BLOCK_BYTES)); // end of archive
  const tar = Buffer.concat(parts);
  // A bundle its readers would refuse is not written.
  if (tar.length > MAX_UNPACKED_TAR_BYTES) throw new Error(`tar: ${tar.length} bytes unpacked, above the ${MAX_UNPACKED_TAR_BYTES} a reader accepts`);
  if (sorted.length > MAX_TAR_ENTRIES) throw new Error(`tar: ${sorted.length} entries, above the ${MAX_TAR_ENTRIES} a reader accepts`);
  const large = sorted.find((entry) => entry.type === "file" && entry.content!.length > MAX_TAR_ENTRY_BYTES);
  if (large !== undefined) throw new Error(`tar: ${large.path} is ${large.content!.length} bytes, above the ${MAX_TAR_ENTRY_BYTES} per file a reader accepts`);
  // Node's gzip header carries no name and mtime 0: the bytes depend only on the input and zlib's level.
  return gzipSync(tar, { level: 9 });
}

function field(block: Buffer, offset: number, length: number): string {
  const raw = block.subarray(offset, offset + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? length : end).toString("utf8");
}

function unsafe(reason: string, entry: string, evidence: Readonly<Record<string, string | number>> = {}): never {
  throw new UpgradeRefusal("unsafe-archive", `bundle refused: ${reason}: ${JSON.stringify(entry)}`, { entry, ...evidence });
}

/** A relative path that stays inside the extraction folder, or a refusal naming it. */
function safeRelativePath(path: string): string {
  if (path === "" || path.startsWith("/") || path.includes("\\") || path.includes("\0")) unsafe("not a plain relative path", path);
  const normal = posix.normalize(path);
  if (normal !== path || normal.split("/").includes("..") || normal === ".") unsafe("path leaves the bundle or is not normalised", path);
  return normal;
}

/** A ustar numeric field (octal digits, space/NUL padded); null when it is not one (e.g. GNU's base-256 form). */
function octalField(block: Buffer, offset: number, length: number): number | null {
  const text = field(block, offset, length).trim();
  if (text === "") return 0;
  if (!/^[0-7]+$/u.test(text)) return null;
  const value = Number.parseInt(text, 8);
  return Number.isSafeInteger(value) ? value : null;
}

/** A file of the extracted tree, as the tree digest needs it (upgrade/digest.ts treeDigestOfExtracted). */
export interface ExtractedFile {
  path: string;
  bytes: number;
  /** SHA-256 of the content, hex, computed as it was written. */
  sha256: string;
  executable: boolean;
}

export interface ExtractedTree {
  /** In archive order. */
  files: ExtractedFile[];
  directories: string[];
  /** The archive's unpacked size (headers and padding included). */
  unpackedBytes: number;
}

function checkLimits(limits: Partial<TarLimits>): TarLimits {
  const merged = { ...DEFAULT_TAR_LIMITS, ...limits };
  // A bad bound is the caller's bug, not the archive's: a RangeError, never taken for the archive's fault.
  for (const name of ["maxUnpackedBytes", "maxEntryBytes", "maxEntries"] as const) {
    const value = merged[name];
    if (!Number.isSafeInteger(value) || value < 1 || value > DEFAULT_TAR_LIMITS[name]) {
      throw new RangeError(`tar: ${name} must be an integer in [1, ${DEFAULT_TAR_LIMITS[name]}], got ${value}`);
    }
  }
  return merged;
}

interface OpenFile {
  path: string;
  fd: number;
  hash: Hash;
  /** As its header declares it. */
  size: number;
  /** Still to come. */
  remaining: number;
  executable: boolean;
}

/**
 * The ustar reader behind extractTarGz: fed the inflated stream chunk by chunk, it checks each header, writes
 * each file as its bytes arrive (O_EXCL, never following a link) and keeps only the current header and file.
 */
class TarExtractor {
  readonly files: ExtractedFile[] = [];
  readonly directories: string[] = [];
  /** Bytes inflated so far (whole chunks: what the total bound is checked against). */
  unpackedBytes = 0;
  /** Bytes taken from those so far (up to the end of the last header read, while it is handled). */
  private position = 0;
  private readonly header = Buffer.alloc(BLOCK_BYTES);
  private headerFill = 0;
  private current: OpenFile | null = null;
  private padding = 0;
  private ended = false;
  /** The last entry a header named: the refusal of a bound reached between entries names it. */
  private lastEntry = "";
  /** Every entry's path and type, and every folder the paths imply: duplicates are refused against them. */
  private readonly seen = new Map<string, "file" | "directory">();
  private readonly implied = new Set<string>();

  constructor(
    private readonly root: string,
    private readonly limits: TarLimits,
  ) {}

  write(chunk: Buffer): void {
    this.unpackedBytes += chunk.length;
    if (this.unpackedBytes > this.limits.maxUnpackedBytes) {
      const entry = this.current?.path ?? this.lastEntry;
      unsafe(`the archive unpacks to more than ${this.limits.maxUnpackedBytes} bytes (the bound in total); reached in or after`, entry, {
        unpackedBytes: this.unpackedBytes,
        maxUnpackedBytes: this.limits.maxUnpackedBytes,
      });
    }
    let offset = 0;
    while (offset < chunk.length) {
      if (this.ended) {
        // After the end-of-archive block only zeros (the rest of the marker, a record's padding) may follow.
        if (chunk.subarray(offset).some((byte) => byte !== 0)) unsafe("data after the end-of-archive marker, following", this.lastEntry);
        return;
      }
      const file = this.current;
      if (file !== null) {
        const piece = chunk.subarray(offset, offset + Math.min(file.remaining, chunk.length - offset));
        for (let written = 0; written < piece.length; ) written += writeSync(file.fd, piece, written);
        file.hash.update(piece);
        file.remaining -= piece.length;
        offset += piece.length;
        this.position += piece.length;
        if (file.remaining === 0) this.finishFile(file);
      } else if (this.padding > 0) {
        const skipped = Math.min(this.padding, chunk.length - offset);
        this.padding -= skipped;
        offset += skipped;
        this.position += skipped;
      } else {
        const copied = chunk.copy(this.header, this.headerFill, offset, Math.min(chunk.length, offset + BLOCK_BYTES - this.headerFill));
        this.headerFill += copied;
        offset += copied;
        this.position += copied;
        if (this.headerFill === BLOCK_BYTES) {
          this.headerFill = 0;
          this.onHeader(this.header);
        }
      }
    }
  }

  /** The stream ended: anything but a complete archive with its end marker is a truncated one. */
  end(): void {
    if (this.current !== null) unsafe(`truncated file (${this.current.remaining} of its ${this.current.size} bytes missing)`, this.current.path);
    if (this.headerFill !== 0 || this.padding !== 0) unsafe("the archive ends inside a block, after", this.lastEntry);
    if (!this.ended) unsafe("the archive ends without its end-of-archive marker, after", this.lastEntry);
  }

  /** Closes the file being written, if any (after a refusal: the caller then removes the whole tree). */
  abort(): void {
    if (this.current !== null) closeSync(this.current.fd);
    this.current = null;
  }

  private onHeader(block: Buffer): void {
    if (block.every((byte) => byte === 0)) {
      this.ended = true;
      return;
    }
    let sum = 0;
    for (let index = 0; index < BLOCK_BYTES; index++) sum += index >= 148 && index < 156 ? 32 : block[index]!;
    const name = field(block, 0, 100);
    if (octalField(block, 148, 8) !== sum) unsafe("header checksum mismatch", name);
    const prefix = field(block, 345, 155);
    const fullName = prefix === "" ? name : `${prefix}/${name}`;
    this.lastEntry = fullName;
    const type = String.fromCharCode(block[156]!);
    const size = octalField(block, 124, 12);
    const mode = octalField(block, 100, 8);
    if (size === null || mode === null) unsafe("a size or mode that is not a ustar octal number", fullName);
    if (this.seen.size + 1 > this.limits.maxEntries) {
      unsafe(`more than ${this.limits.maxEntries} entries (the bound); the first past it`, fullName, { maxEntries: this.limits.maxEntries });
    }
    if (type === "5") {
      if (size !== 0) unsafe(`a folder with ${size} bytes of content`, fullName);
      const path = safeRelativePath(fullName.replace(/\/$/u, ""));
      this.claim(path, "directory");
      mkdirSync(join(this.root, path), { recursive: true, mode: 0o755 });
      this.directories.push(path);
    } else if (type === "0" || type === "\0") {
      const path = safeRelativePath(fullName);
      if (size > this.limits.maxEntryBytes) {
        unsafe(`a file of ${size} bytes, above the bound of ${this.limits.maxEntryBytes} per file`, path, { bytes: size, maxEntryBytes: this.limits.maxEntryBytes });
      }
      // Its content, padded, plus the end marker must fit what is left: refused before a byte of it is written.
      const needed = this.position + Math.ceil(size / BLOCK_BYTES) * BLOCK_BYTES + 2 * BLOCK_BYTES;
      if (needed > this.limits.maxUnpackedBytes) {
        unsafe(`a file of ${size} bytes that takes the archive past its bound of ${this.limits.maxUnpackedBytes} bytes unpacked`, path, {
          bytes: size,
          unpackedBytes: this.position,
          maxUnpackedBytes: this.limits.maxUnpackedBytes,
        });
      }
      this.claim(path, "file");
      this.openFile(path, size, (mode & 0o111) !== 0);
    } else {
      unsafe(`entry type ${JSON.stringify(type)} (only files and folders are allowed)`, fullName);
    }
  }

  /**
   * Records `path` as an entry of `type`, refusing a path already taken: the same path twice (whatever the types),
   * a file where an earlier entry implied a folder, and anything below a file.
   */
  private claim(path: string, type: "file" | "directory"): void {
    const earlier = this.seen.get(path);
    if (earlier !== undefined) unsafe(`the path appears twice (a ${earlier === "file" ? "file" : "folder"}, then a ${type === "file" ? "file" : "folder"})`, path);
    if (type === "file" && this.implied.has(path)) unsafe("a file at a path that earlier entries use as a folder", path);
    for (let cut = path.indexOf("/"); cut !== -1; cut = path.indexOf("/", cut + 1)) {
      const ancestor = path.slice(0, cut);
      if (this.seen.get(ancestor) === "file") unsafe(`a path below the file ${JSON.stringify(ancestor)}`, path, { file: ancestor });
      this.implied.add(ancestor);
    }
    this.seen.set(path, type);
  }

  private openFile(path: string, size: number, executable: boolean): void {
    const target = join(this.root, path);
    mkdirSync(join(target, ".."), { recursive: true, mode: 0o755 });
    let fd: number;
    try {
      // O_EXCL: never onto something there (a case-insensitive file system can map two archive paths onto one).
      fd = openSync(target, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") unsafe("the path appears twice on this file system", path);
      throw error;
    }
    const file: OpenFile = { path, fd, hash: createHash("sha256"), size, remaining: size, executable };
    this.current = file;
    if (size === 0) this.finishFile(file);
  }

  private finishFile(file: OpenFile): void {
    closeSync(file.fd);
    this.current = null;
    // An install is immutable once staged: read-only files (0444, 0555 when executable).
    chmodSync(join(this.root, file.path), file.executable ? 0o555 : 0o444);
    this.files.push({ path: file.path, bytes: file.size, sha256: file.hash.digest("hex"), executable: file.executable });
    this.padding = (BLOCK_BYTES - (file.size % BLOCK_BYTES)) % BLOCK_BYTES;
  }
}

/** Whether `error` is zlib's (a stream that is not gzip, or is cut short), not the reader's or the file system's. */
function isZlibError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return typeof code === "string" && code.startsWith("Z_");
}

/**
 * Extracts the gzip'd ustar archive at `archivePath` into `root`, which must not exist yet (a stage is never
 * merged into something else), streaming: zlib inflates a chunk at a time and each file is written as its bytes
 * arrive, hashed on the way (the returned listing carries each file's SHA-256 for the tree digest). Files are made
 * read-only (0444, 0555 when executable), folders 0755.
 *
 * Refuses (UpgradeRefusal "unsafe-archive", naming the entry, with the sizes and the bound as evidence) anything
 * but plain files and folders with safe relative paths, a path twice, a file above `maxEntryBytes` (before a byte
 * of it is written), an archive past `maxUnpackedBytes` or `maxEntries`, a stream that is not gzip or is cut short,
 * and data after the end marker. After a refusal (or any failure) `root` is removed with everything in it.
 */
export async function extractTarGz(archivePath: string, root: string, limits: Partial<TarLimits> = {}): Promise<ExtractedTree> {
  const bounds = checkLimits(limits);
  mkdirSync(root, { recursive: false, mode: 0o755 });
  const extractor = new TarExtractor(root, bounds);
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      try {
        extractor.write(chunk);
        callback();
      } catch (error) {
        callback(error as Error);
      }
    },
    final(callback) {
      try {
        extractor.end();
        callback();
      } catch (error) {
        callback(error as Error);
      }
    },
  });
  try {
    await pipeline(createReadStream(archivePath), createGunzip(), sink);
  } catch (error) {
    extractor.abort();
    rmSync(root, { recursive: true, force: true });
    if (isZlibError(error)) {
      throw new UpgradeRefusal("unsafe-archive", `bundle refused: not gzip, or cut short: ${(error as Error).message}`, { unpackedBytes: extractor.unpackedBytes });
    }
    throw error;
  }
  return { files: extractor.files, directories: extractor.directories, unpackedBytes: extractor.unpackedBytes };
}
