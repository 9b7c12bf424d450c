/**
 * The release bundle's container: POSIX ustar, gzip-compressed, written and read here rather than by a `tar`
 * binary, for two reasons.
 *
 * - Reproducible bytes: entries in byte order of their paths, one fixed mtime (the source commit's time), owner
 *   0:0 without names, modes normalised (0644, 0755 for executables and folders), and gzip without a file name or
 *   time stamp. The same dist/ gives the same bundle digest, whatever tar or umask the build machine has.
 * - Safe extraction of an archive that came over the network: only regular files and folders, relative paths
 *   without `..`, no links or devices; anything else refuses the whole archive before one byte is written.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join, posix } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { UpgradeRefusal } from "./errors";

const BLOCK_BYTES = 512;
/**
 * Largest archive, uncompressed, that is written or read (1 GiB). A bundle is checked against its approved digest
 * before it is unpacked, but gzip turns a few kB into gigabytes: the bound keeps a bad archive from taking the
 * agent's memory, whoever made it. A bundle is code; today's is a few MB.
 */
export const MAX_UNPACKED_TAR_BYTES = 1024 * 1024 * 1024;

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
  // Node's gzip header carries no name and mtime 0: the bytes depend only on the input and zlib's level.
  return gzipSync(tar, { level: 9 });
}

function field(block: Buffer, offset: number, length: number): string {
  const raw = block.subarray(offset, offset + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? length : end).toString("utf8");
}

function unsafe(reason: string, entry: string): never {
  throw new UpgradeRefusal("unsafe-archive", `bundle refused: ${reason}: ${JSON.stringify(entry)}`, { entry });
}

/** A relative path that stays inside the extraction folder, or a refusal naming it. */
function safeRelativePath(path: string): string {
  if (path === "" || path.startsWith("/") || path.includes("\\") || path.includes("\0")) unsafe("not a plain relative path", path);
  const normal = posix.normalize(path);
  if (normal !== path || normal.split("/").includes("..") || normal === ".") unsafe("path leaves the bundle or is not normalised", path);
  return normal;
}

/**
 * Parses a gzip'd ustar archive into entries, refusing (UpgradeRefusal "unsafe-archive") anything but plain files
 * and folders, and an archive that unpacks to more than `maxUnpackedBytes` (stopped there: never held whole).
 */
export function readTarGz(archive: Buffer, maxUnpackedBytes = MAX_UNPACKED_TAR_BYTES): TarEntry[] {
  // A bad bound is the caller's bug, not the archive's: checked before, so zlib's range error is never taken for "not gzip".
  if (!Number.isSafeInteger(maxUnpackedBytes) || maxUnpackedBytes < 1 || maxUnpackedBytes > MAX_UNPACKED_TAR_BYTES) {
    throw new RangeError(`tar: maxUnpackedBytes must be an integer in [1, ${MAX_UNPACKED_TAR_BYTES}], got ${maxUnpackedBytes}`);
  }
  let tar: Buffer;
  try {
    tar = gunzipSync(archive, { maxOutputLength: maxUnpackedBytes });
  } catch (error) {
    const evidence = { archiveBytes: archive.length, maxUnpackedBytes };
    if ((error as NodeJS.ErrnoException).code === "ERR_BUFFER_TOO_LARGE") {
      throw new UpgradeRefusal("unsafe-archive", `bundle refused: its ${archive.length} bytes unpack to more than ${maxUnpackedBytes}`, evidence);
    }
    throw new UpgradeRefusal("unsafe-archive", `bundle refused: not gzip: ${(error as Error).message}`, evidence);
  }
  const entries: TarEntry[] = [];
  for (let offset = 0; offset + BLOCK_BYTES <= tar.length; ) {
    const block = tar.subarray(offset, offset + BLOCK_BYTES);
    if (block.every((byte) => byte === 0)) break;
    let sum = 0;
    for (let index = 0; index < BLOCK_BYTES; index++) sum += index >= 148 && index < 156 ? 32 : block[index]!;
    const name = field(block, 0, 100);
    if (Number.parseInt(field(block, 148, 8).trim(), 8) !== sum) unsafe("header checksum mismatch", name);
    const prefix = field(block, 345, 155);
    const fullName = prefix === "" ? name : `${prefix}/${name}`;
    const type = String.fromCharCode(block[156]!);
    const size = Number.parseInt(field(block, 124, 12).trim() || "0", 8);
    const mode = Number.parseInt(field(block, 100, 8).trim() || "0", 8);
    offset += BLOCK_BYTES;
    if (type === "5") {
      entries.push({ path: safeRelativePath(fullName.replace(/\/$/, "")), type: "directory" });
    } else if (type === "0" || type === "\0") {
      if (offset + size > tar.length) unsafe("truncated file", fullName);
      entries.push({ path: safeRelativePath(fullName), type: "file", content: Buffer.from(tar.subarray(offset, offset + size)), executable: (mode & 0o111) !== 0 });
      offset += Math.ceil(size / BLOCK_BYTES) * BLOCK_BYTES;
    } else {
      unsafe(`entry type ${JSON.stringify(type)} (only files and folders are allowed)`, fullName);
    }
  }
  return entries;
}

/**
 * Writes entries under `root` (which must not exist yet: a stage is never merged into something else). Files are
 * made read-only (0444, 0555 when executable): an install is immutable once staged.
 */
export function extractEntries(entries: readonly TarEntry[], root: string): void {
  mkdirSync(root, { recursive: false, mode: 0o755 });
  for (const entry of entries) {
    const target = join(root, entry.path);
    if (entry.type === "directory") {
      mkdirSync(target, { recursive: true, mode: 0o755 });
    } else {
      mkdirSync(join(target, ".."), { recursive: true, mode: 0o755 });
      writeFileSync(target, entry.content!, { flag: "wx" });
      chmodSync(target, entry.executable === true ? 0o555 : 0o444);
    }
  }
}
