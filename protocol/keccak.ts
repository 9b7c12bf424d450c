/**
 * keccak256 over bytes (the Ethereum hash: original Keccak padding, not SHA-3), the hash of every EIP-712 digest
 * and node address (docs/protocol.md §4). Two interchangeable backends that return the same 32 bytes:
 *
 * - "xkcp": the Keccak team's reference code (XKCP) compiled into the `keccak` npm package (v3, N-API prebuilds,
 *   no compiler needed), several times faster than pure JS (docs/benchmarks.md), called through its sponge class directly: the package's
 *   own `createKeccak()` wraps every hash in a Node.js Transform stream, which costs more than the hash itself;
 * - "noble": @noble/hashes (audited pure JS), the fallback when the addon does not load.
 *
 * The addon is loaded through `node-gyp-build` (resolved from the `keccak` package), which throws when no
 * binary fits, instead of the package main, which silently falls back to its own pure-JS code. A worker thread
 * loads it only behind a native-call gate (protocol/nativeAddon.ts says why), and it must reproduce known answers
 * before it is used.
 */
import { dirname } from "node:path";
import { keccak_256 } from "@noble/hashes/sha3.js";
import { loadNativeAddon } from "./nativeAddon";

/** Which implementation computes keccak256 in this process. */
export type KeccakBackend = "xkcp" | "noble";

export interface KeccakImplementation {
  readonly backend: KeccakBackend;
  /** keccak256(data): 32 bytes, a new Buffer each call. */
  keccak256(data: Uint8Array): Buffer;
}

/** The part of the `keccak` addon's sponge class (src/addon.cc, KeccakWidth1600 sponge) used here; no types ship. */
interface NativeKeccakSponge {
  initialize(rateBits: number, capacityBits: number): void;
  absorb(data: Uint8Array): void;
  /** Pads (Keccak's pad10*1, delimiter 0x01) on the first call, then squeezes `length` bytes. */
  squeeze(length: number): Buffer;
}

type NativeKeccakSpongeClass = new () => NativeKeccakSponge;

/** node-gyp-build: loads the addon binary that fits this platform from a package directory. */
interface NodeGypBuild {
  (packageDirectory: string): unknown;
  path(packageDirectory: string): string;
}

function isNodeGypBuild(value: unknown): value is NodeGypBuild {
  return typeof value === "function" && typeof (value as { path?: unknown }).path === "function";
}

function isNativeKeccakSpongeClass(value: unknown): value is NativeKeccakSpongeClass {
  if (typeof value !== "function") return false;
  const prototype: unknown = value.prototype;
  if (typeof prototype !== "object" || prototype === null) return false;
  const candidate = prototype as Record<string, unknown>;
  return typeof candidate.initialize === "function" && typeof candidate.absorb === "function" && typeof candidate.squeeze === "function";
}

/** keccak256: rate 1088 bits, capacity 512 bits. */
const KECCAK256_RATE_BITS = 1088;
const KECCAK256_CAPACITY_BITS = 512;

/** @noble/hashes: always available. */
export const NOBLE_KECCAK: KeccakImplementation = Object.freeze({
  backend: "noble" as const,
  keccak256(data: Uint8Array): Buffer {
    const digest = keccak_256(data);
    return Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength);
  },
});

function nativeImplementation(Sponge: NativeKeccakSpongeClass): KeccakImplementation {
  // One sponge, re-initialised for every hash: initialize/absorb/squeeze run synchronously in this thread, so no
  // two hashes can interleave, and squeeze returns a fresh Buffer.
  const sponge = new Sponge();
  return Object.freeze({
    backend: "xkcp" as const,
    keccak256(data: Uint8Array): Buffer {
      if (!(data instanceof Uint8Array)) throw new TypeError("keccak256 input must be a Uint8Array");
      sponge.initialize(KECCAK256_RATE_BITS, KECCAK256_CAPACITY_BITS);
      sponge.absorb(data);
      return sponge.squeeze(32);
    },
  });
}

/** Fixed answers (any keccak256 implementation); assertKeccakKnownAnswer adds block-boundary sizes against noble. */
const KNOWN_ANSWERS: readonly { input: Uint8Array; digest: string }[] = [
  { input: new Uint8Array(0), digest: "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470" },
  { input: Buffer.from("abc", "ascii"), digest: "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45" },
];

/** Throws unless `implementation` reproduces the fixed known answers and agrees with @noble/hashes across block sizes. */
export function assertKeccakKnownAnswer(implementation: KeccakImplementation): void {
  for (const { input, digest } of KNOWN_ANSWERS) {
    if (implementation.keccak256(input).toString("hex") !== digest) {
      throw new Error(`keccak backend "${implementation.backend}" failed its known-answer test`);
    }
  }
  for (const length of [1, 135, 136, 137, 200, 272, 300]) {
    const input = Uint8Array.from({ length }, (_, index) => (index * 131 + length) & 0xff);
    if (!implementation.keccak256(input).equals(NOBLE_KECCAK.keccak256(input))) {
      throw new Error(`keccak backend "${implementation.backend}" disagrees with @noble/hashes on ${length} bytes`);
    }
  }
}

const NATIVE_LOAD = loadNativeAddon<KeccakImplementation>({
  load() {
    const packageDirectory = dirname(require.resolve("keccak/package.json"));
    // A native addon is loaded by path at run time (resolved from keccak's own folder): no static import exists.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const nodeGypBuild: unknown = require(require.resolve("node-gyp-build", { paths: [packageDirectory] }));
    if (!isNodeGypBuild(nodeGypBuild)) throw new Error("node-gyp-build does not export the expected functions");
    const modulePath = nodeGypBuild.path(packageDirectory);
    const loaded = nodeGypBuild(packageDirectory);
    if (!isNativeKeccakSpongeClass(loaded)) throw new Error("the keccak addon does not export the expected sponge class");
    return { implementation: nativeImplementation(loaded), modulePath };
  },
  assertKnownAnswer: assertKeccakKnownAnswer,
});

/** The XKCP addon when it loaded (in a worker: only behind a native-call gate) and passed the known-answer test; otherwise null. */
export const NATIVE_KECCAK: KeccakImplementation | null = NATIVE_LOAD.implementation;

/** Absolute path of the loaded addon binary when NATIVE_KECCAK is active. */
export const KECCAK_NATIVE_MODULE_PATH: string | null = NATIVE_LOAD.modulePath;

/** Why the native backend is not active; null when it is. */
export const KECCAK_NATIVE_FAILURE: string | null = NATIVE_LOAD.failure;

const ACTIVE: KeccakImplementation = NATIVE_KECCAK ?? NOBLE_KECCAK;

/** The backend keccak256Bytes uses in this process. */
export const KECCAK_BACKEND: KeccakBackend = ACTIVE.backend;

/** keccak256(data) with the active backend: 32 bytes, a new Buffer each call. */
export const keccak256Bytes: (data: Uint8Array) => Buffer = ACTIVE.keccak256;
