/**
 * Constants copied into assembly are pinned to their single source. TimeOracle's assembly hot path cannot name
 * another contract's constants, so it keeps copies of TimeProofLib's (typehash, domain separator, EIP-712 prefix,
 * curve orders, lengths) and SnapshotLib's (the snapshot layout); here every copy is compared, by the name of the
 * library constant it copies, with that constant, and the library constants with protocol/constants.ts and with
 * their definitions. SnapshotLib's writer is then read back with its own layout constants.
 */
import fs from "node:fs";
import path from "node:path";
import hre from "hardhat";
import { expect } from "chai";
import {
  bytesToBigInt,
  bytesToHex,
  domainSeparator,
  getAddress,
  hexToBytes,
  keccak256,
  numberToHex,
  padHex,
  parseEventLogs,
  toHex,
  type Address,
  type Hex,
} from "viem";
import {
  EIP712_DOMAIN,
  HARDWARE_SIGNATURE_LENGTH,
  HW_MESSAGE_LENGTH,
  HW_MESSAGE_TAG,
  NODE_ENTRY_LENGTH,
  NS_PER_SECOND,
  P256_HALF_N,
  P256_N,
  SECP256K1_HALF_N,
  SECP256K1_N,
  TIME_ATTESTATION_TYPE,
} from "../../protocol";
import { deployOracleFixture, FOREVER_NS, loadFixture } from "./fixtures";

interface NamedWord {
  name: string;
  value: Hex;
}

/** Names to values; refuses duplicate or empty names (a harness slot left unset). */
function byName(words: readonly NamedWord[]): Map<string, Hex> {
  const map = new Map<string, Hex>();
  for (const { name, value } of words) {
    expect(name, "a named constant without a name").to.not.equal("");
    expect(map.has(name), `${name} listed twice`).to.equal(false);
    map.set(name, value);
  }
  return map;
}

/** A number as a right-aligned word, a `bytesN` value as a left-aligned one: as inline assembly sees them. */
const word = (value: bigint | number): Hex => numberToHex(BigInt(value), { size: 32 });
const leftAligned = (value: Hex): Hex => padHex(value, { dir: "right", size: 32 });

async function deployHarnessesFixture() {
  const [admin] = await hre.viem.getWalletClients();
  const oracle = await hre.viem.deployContract("TimeOracleHarness", [admin!.account.address]);
  const proofLib = await hre.viem.deployContract("TimeProofLibHarness", []);
  const snapshotLib = await hre.viem.deployContract("SnapshotLibHarness", []);
  const copies = byName((await oracle.read.assemblyConstants()) as readonly NamedWord[]);
  const library = new Map([
    ...byName((await proofLib.read.namedConstants()) as readonly NamedWord[]),
    ...byName((await snapshotLib.read.layout()) as readonly NamedWord[]),
  ]);
  return { snapshotLib, copies, library };
}

/** SnapshotLib's layout constants as numbers, by their bare names. */
function layoutOf(library: Map<string, Hex>): Record<string, number> {
  const layout: Record<string, number> = {};
  for (const [name, value] of library) {
    if (name.startsWith("SnapshotLib.")) layout[name.slice("SnapshotLib.".length)] = Number(BigInt(value));
  }
  return layout;
}

interface DecodedSnapshot {
  settings: { maxAttestationAgeNs: bigint; maxFutureDriftNs: bigint; maxAcceptableDriftNs: bigint; nodeQuorum: bigint };
  nodes: { node: Address; validFromNs: bigint; validUntilNs: bigint }[];
  cards: { cardId: Hex; publicKeyX: Hex; publicKeyY: Hex; validFromNs: bigint; validUntilNs: bigint }[];
}

/** Decodes a snapshot's code with nothing but SnapshotLib's layout constants. */
function decodeSnapshot(code: Hex, layout: Record<string, number>): DecodedSnapshot {
  const L = (name: string): number => {
    const value = layout[name];
    if (value === undefined) throw new Error(`SnapshotLib.${name} missing from the harness`);
    return value;
  };
  const bytes = hexToBytes(code);
  expect(bytes.slice(0, L("DATA_OFFSET"))).to.deep.equal(new Uint8Array(L("DATA_OFFSET")), "the leading STOP byte");
  const data = bytes.slice(L("DATA_OFFSET"));
  const slice = (offset: number, length: number) => data.slice(offset, offset + length);
  const u64At = (offset: number) => bytesToBigInt(slice(offset, 8));
  const header = bytesToBigInt(slice(0, L("HEADER_LENGTH")));
  const u64 = (shift: number) => (header >> BigInt(shift)) & ((1n << 64n) - 1n);
  const byte = (index: number) => Number((header >> BigInt((31 - index) * 8)) & 0xffn);
  const nodeCount = byte(L("NODE_COUNT_BYTE"));
  const cardCount = byte(L("CARD_COUNT_BYTE"));
  expect(data.length).to.equal(L("HEADER_LENGTH") + nodeCount * L("NODE_RECORD_LENGTH") + cardCount * L("CARD_RECORD_LENGTH"));
  const nodes = Array.from({ length: nodeCount }, (_, i) => {
    const base = L("HEADER_LENGTH") + i * L("NODE_RECORD_LENGTH");
    return {
      node: getAddress(bytesToHex(slice(base, 20))),
      validFromNs: u64At(base + L("NODE_VALID_FROM_OFFSET")),
      validUntilNs: u64At(base + L("NODE_VALID_UNTIL_OFFSET")),
    };
  });
  const cardsStart = L("HEADER_LENGTH") + nodeCount * L("NODE_RECORD_LENGTH");
  const cards = Array.from({ length: cardCount }, (_, i) => {
    const base = cardsStart + i * L("CARD_RECORD_LENGTH");
    return {
      cardId: bytesToHex(slice(base, 32)),
      publicKeyX: bytesToHex(slice(base + L("CARD_PUBLIC_KEY_OFFSET"), 32)),
      publicKeyY: bytesToHex(slice(base + L("CARD_PUBLIC_KEY_OFFSET") + 32, 32)),
      validFromNs: u64At(base + L("CARD_VALID_FROM_OFFSET")),
      validUntilNs: u64At(base + L("CARD_VALID_UNTIL_OFFSET")),
    };
  });
  return {
    settings: {
      maxAttestationAgeNs: u64(L("MAX_ATTESTATION_AGE_SHIFT")),
      maxFutureDriftNs: u64(L("MAX_FUTURE_DRIFT_SHIFT")),
      maxAcceptableDriftNs: u64(L("MAX_ACCEPTABLE_DRIFT_SHIFT")),
      nodeQuorum: BigInt(byte(L("NODE_QUORUM_BYTE"))),
    },
    nodes,
    cards,
  };
}

describe("constants copied into assembly", () => {
  it("each of TimeOracle's copies equals the library constant it is named after", async () => {
    const { copies, library } = await loadFixture(deployHarnessesFixture);
    expect(copies.size).to.be.greaterThan(0);
    for (const [name, value] of copies) {
      expect(library.has(name), `${name}: no such library constant`).to.equal(true);
      expect(value, name).to.equal(library.get(name));
    }
  });

  it("TimeOracleHarness lists every copy TimeOracle.sol declares, under the library name its declaration cites", async () => {
    const { copies } = await loadFixture(deployHarnessesFixture);
    const source = fs.readFileSync(path.join(__dirname, "..", "..", "contracts", "TimeOracle.sol"), "utf8");
    // Every copy is `internal` (so the harness can read it) and has a `/// @dev {Library.NAME}` line right above.
    const declared = [...source.matchAll(/\b(?:uint256|bytes\d+)\s+internal\s+constant\s+(_[A-Z0-9_]+)\s*=/g)].map((m) => m[1]!);
    const cited = [
      ...source.matchAll(/\/\/\/ @dev \{(TimeProofLib|SnapshotLib)\.([A-Z0-9_]+)\}[^\n]*\n\s*(?:uint256|bytes\d+) internal constant (_[A-Z0-9_]+)/g),
    ].map((m) => ({ source: `${m[1]}.${m[2]}`, copy: m[3]! }));
    expect(declared.length, "internal constants in TimeOracle.sol").to.be.greaterThan(0);
    expect(cited.map(({ copy }) => copy), "every internal constant cites the constant it copies").to.deep.equal(declared);
    for (const { source: name, copy } of cited) expect(copy, `${copy} copies ${name}`).to.equal(`_${name.split(".")[1]}`);
    expect([...copies.keys()]).to.have.members(cited.map(({ source: name }) => name));
  });

  it("the library constants are those of protocol/constants.ts and of their definitions", async () => {
    const { library } = await loadFixture(deployHarnessesFixture);
    const expected: Record<string, Hex> = {
      "TimeProofLib.HW_MESSAGE_TAG": leftAligned(HW_MESSAGE_TAG),
      "TimeProofLib.HW_MESSAGE_LENGTH": word(HW_MESSAGE_LENGTH),
      "TimeProofLib.HARDWARE_SIGNATURE_LENGTH": word(HARDWARE_SIGNATURE_LENGTH),
      "TimeProofLib.NODE_ENTRY_LENGTH": word(NODE_ENTRY_LENGTH),
      "TimeProofLib.TIME_ATTESTATION_TYPEHASH": keccak256(toHex(TIME_ATTESTATION_TYPE)),
      "TimeProofLib.TYPED_DATA_PREFIX": leftAligned("0x1901"),
      "TimeProofLib.DOMAIN_SEPARATOR": domainSeparator({ domain: EIP712_DOMAIN }),
      "TimeProofLib.P256_N": word(P256_N),
      "TimeProofLib.P256_HALF_N": word(P256_HALF_N),
      "TimeProofLib.SECP256K1_N": word(SECP256K1_N),
      "TimeProofLib.SECP256K1_HALF_N": word(SECP256K1_HALF_N),
      "TimeProofLib.S_MASK": word((1n << 255n) - 1n),
    };
    for (const [name, value] of Object.entries(expected)) expect(library.get(name), name).to.equal(value);
    expect(P256_HALF_N).to.equal(P256_N >> 1n);
    expect(SECP256K1_HALF_N).to.equal(SECP256K1_N >> 1n);
  });
});

describe("SnapshotLib", () => {
  it("writes the settings, the nodes sorted by address and the cards where its layout constants say", async () => {
    const { snapshotLib, library } = await loadFixture(deployHarnessesFixture);
    const publicClient = await hre.viem.getPublicClient();
    const settings = { maxAttestationAgeNs: 61n * NS_PER_SECOND, maxFutureDriftNs: 16n * NS_PER_SECOND, maxAcceptableDriftNs: 999n, nodeQuorum: 3n };
    const address = (label: string): Address => getAddress(keccak256(toHex(label)).slice(0, 42));
    const nodes = ["c", "a", "d", "b"].map((label, i) => ({ node: address(label), validFromNs: BigInt(i), validUntilNs: FOREVER_NS - BigInt(i) }));
    const cards = [1, 2].map((i) => ({
      cardId: keccak256(toHex(`card ${i}`)),
      publicKeyX: keccak256(toHex(`x ${i}`)),
      publicKeyY: keccak256(toHex(`y ${i}`)),
      validFromNs: BigInt(i) * 1_000n,
      validUntilNs: BigInt(i) * 2_000n,
    }));
    const receipt = await publicClient.waitForTransactionReceipt({ hash: await snapshotLib.write.write([settings, nodes, cards]) });
    const [written] = parseEventLogs({ abi: snapshotLib.abi, logs: receipt.logs, eventName: "SnapshotWritten" }) as unknown as {
      args: { pointer: Address; size: bigint };
    }[];
    const code = (await publicClient.getCode({ address: written!.args.pointer }))!;
    const layout = layoutOf(library);
    expect(BigInt(hexToBytes(code).length)).to.equal(BigInt(layout.DATA_OFFSET!) + written!.args.size);
    const decoded = decodeSnapshot(code, layout);
    expect(decoded.settings).to.deep.equal(settings);
    expect(decoded.nodes).to.deep.equal([...nodes].sort((a, b) => (BigInt(a.node) < BigInt(b.node) ? -1 : 1)));
    expect(decoded.cards).to.deep.equal(cards);
  });

  it("the oracle's current snapshot reads back as its registry and settings", async () => {
    const f = await loadFixture(deployOracleFixture);
    const publicClient = await hre.viem.getPublicClient();
    const snapshotLib = await hre.viem.deployContract("SnapshotLibHarness", []);
    const layout = layoutOf(byName((await snapshotLib.read.layout()) as readonly NamedWord[]));
    await f.oracle.write.setNodeQuorum([2n]);
    await f.asRegistrar.write.registerNode([f.nodeKeys[1]!.address, 5n, 6n * NS_PER_SECOND]);
    const code = (await publicClient.getCode({ address: (await f.oracle.read.snapshot()) as Address }))!;
    const decoded = decodeSnapshot(code, layout);
    expect(decoded.settings).to.deep.equal({
      maxAttestationAgeNs: await f.oracle.read.maxAttestationAge(),
      maxFutureDriftNs: await f.oracle.read.maxFutureDrift(),
      maxAcceptableDriftNs: await f.oracle.read.maxAcceptableDrift(),
      nodeQuorum: 2n,
    });
    const active = ((await f.oracle.read.nodes()) as Address[]).map((node) => getAddress(node));
    expect(decoded.nodes.map(({ node }) => node)).to.deep.equal([...active].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)));
    for (const record of decoded.nodes) {
      const node = (await f.oracle.read.getNode([record.node])) as { validFromNs: bigint; validUntilNs: bigint };
      expect(record, record.node).to.deep.include({ validFromNs: node.validFromNs, validUntilNs: node.validUntilNs });
    }
    expect(decoded.cards.map(({ cardId }) => cardId)).to.deep.equal(await f.oracle.read.cards());
    const card = (await f.oracle.read.getCard([f.dev.cardId])) as { publicKeyX: Hex; publicKeyY: Hex; validFromNs: bigint; validUntilNs: bigint };
    expect(decoded.cards[0]).to.deep.equal({
      cardId: f.dev.cardId,
      publicKeyX: card.publicKeyX,
      publicKeyY: card.publicKeyY,
      validFromNs: card.validFromNs,
      validUntilNs: card.validUntilNs,
    });
  });
});
