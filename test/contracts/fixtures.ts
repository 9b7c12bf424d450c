/**
 * Shared fixtures of the contract tests: an oracle with a dev card and attesting nodes, proof builders, and
 * `expectRevert`, which asserts a revert by custom-error name and arguments (never by message text).
 */
import hre from "hardhat";
import { loadFixture } from "@nomicfoundation/hardhat-network-helpers";
import { expect } from "chai";
import { BaseError, keccak256, toHex, type Abi, type Address } from "viem";
import { decodeRevert } from "../../lib/revert";
import {
  attest,
  createDevIdentity,
  DEV_CARD_ACCURACY_NS,
  NodeKey,
  NS_PER_SECOND,
  p256PublicKeyCoordinates,
  type DevIdentity,
  type Hex,
  type TimeProof,
} from "../../protocol";

export { loadFixture };

/** Deterministic test keys (scalars derived from labels, never used outside tests). */
export function testScalar(label: string): Hex {
  return keccak256(toHex(`attested-time test key: ${label}`));
}

/** No expiry: the largest uint64. */
import { NO_EXPIRY_NS } from "../../deploy";
export const FOREVER_NS = NO_EXPIRY_NS;

/** The chain clock the oracle harness is pinned to at deployment: 2024-11-22T09:41:33Z, in seconds. */
export const FIXTURE_NOW_SECONDS = 1_732_268_493n;
export const FIXTURE_NOW_NS = FIXTURE_NOW_SECONDS * NS_PER_SECOND;

export interface ProofOptions {
  /** Node keys that co-sign (default: the dev node only). */
  nodes?: readonly NodeKey[];
  /** ns (default: the dev card's 50 ns). */
  accuracy?: number;
  /** Card signing key (default: the dev card). */
  card?: DevIdentity["cardKey"] | Hex;
  /** Each node's own reading, ns (default: nanoMoment + 7). */
  nodeTimestampNs?: bigint;
}

/**
 * Deploys `TimeOracleHarness` (the oracle with a pinnable clock) with the default settings, pinned to
 * FIXTURE_NOW_SECONDS; grants REGISTRAR_ROLE and GUARDIAN_ROLE to their own accounts; registers the dev card
 * (no expiry) and three active nodes (`nodeKeys[0]` is the dev node); `strangerNode` is never registered.
 */
export async function deployOracleFixture() {
  const [admin, registrar, guardian, stranger] = await hre.viem.getWalletClients();
  const publicClient = await hre.viem.getPublicClient();
  const oracle = await hre.viem.deployContract("TimeOracleHarness", [admin.account.address]);
  await oracle.write.setNow([FIXTURE_NOW_SECONDS]);

  const registrarRole = await oracle.read.REGISTRAR_ROLE();
  const guardianRole = await oracle.read.GUARDIAN_ROLE();
  await oracle.write.grantRole([registrarRole, registrar.account.address]);
  await oracle.write.grantRole([guardianRole, guardian.account.address]);
  const asRegistrar = await hre.viem.getContractAt("TimeOracleHarness", oracle.address, {
    client: { wallet: registrar },
  });
  const asGuardian = await hre.viem.getContractAt("TimeOracleHarness", oracle.address, {
    client: { wallet: guardian },
  });
  const asStranger = await hre.viem.getContractAt("TimeOracleHarness", oracle.address, {
    client: { wallet: stranger },
  });

  const dev = await createDevIdentity({ cardPrivateKey: testScalar("card"), nodePrivateKey: testScalar("node 0") });
  const cardKey = { x: p256PublicKeyCoordinates(dev.cardPublicKey).x, y: p256PublicKeyCoordinates(dev.cardPublicKey).y };
  await asRegistrar.write.registerCard([cardKey.x, cardKey.y, 0n, FOREVER_NS]);

  const nodeKeys = [dev.nodeKey, NodeKey.fromPrivateKey(testScalar("node 1")), NodeKey.fromPrivateKey(testScalar("node 2"))];
  for (const key of nodeKeys) await asRegistrar.write.registerNode([key.address, 0n, FOREVER_NS]);
  const strangerNode = NodeKey.fromPrivateKey(testScalar("stranger node"));

  /** A proof signed by the dev card and `options.nodes` (default: the dev node) at `nanoMoment`. */
  function proofAt(nanoMoment: bigint, options: ProofOptions = {}): TimeProof {
    return attest({
      card: options.card ?? dev.cardKey,
      nodes: options.nodes ?? [dev.nodeKey],
      nanoMoment,
      accuracy: options.accuracy ?? DEV_CARD_ACCURACY_NS,
      nodeTimestampNs: options.nodeTimestampNs ?? nanoMoment + 7n,
    });
  }

  /** A proof one second before the pinned clock: fresh under the default settings. */
  function freshProof(options: ProofOptions = {}): TimeProof {
    return proofAt(FIXTURE_NOW_NS - NS_PER_SECOND + 123_456_789n, options);
  }

  return {
    oracle,
    asRegistrar,
    asGuardian,
    asStranger,
    publicClient,
    accounts: { admin, registrar, guardian, stranger },
    roles: { registrarRole, guardianRole, adminRole: await oracle.read.DEFAULT_ADMIN_ROLE() },
    dev,
    cardKey,
    nodeKeys,
    strangerNode,
    proofAt,
    freshProof,
  };
}

export type OracleFixture = Awaited<ReturnType<typeof deployOracleFixture>>;

/** Sorts node keys by address ascending (the order a valid proof's entries must have). */
export function byAddress(keys: readonly NodeKey[]): NodeKey[] {
  return [...keys].sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1));
}

/** The 80-byte entries of a proof's nodeSignature. */
export function splitEntries(nodeSignature: Hex): Hex[] {
  const body = nodeSignature.slice(2);
  const entries: Hex[] = [];
  for (let i = 0; i < body.length; i += 160) entries.push(`0x${body.slice(i, i + 160)}`);
  return entries;
}

/** Joins 80-byte entries into a nodeSignature. */
export function joinEntries(entries: readonly Hex[]): Hex {
  return `0x${entries.map((entry) => entry.slice(2)).join("")}`;
}

let allErrorsAbi: Abi | undefined;
type AbiError = Extract<Abi[number], { type: "error" }>;

/** The custom errors of every compiled contract (deduplicated by signature), to decode raw revert data. */
async function allErrors(): Promise<Abi> {
  if (allErrorsAbi !== undefined) return allErrorsAbi;
  const seen = new Map<string, AbiError>();
  for (const name of await hre.artifacts.getAllFullyQualifiedNames()) {
    const abi: Abi = (await hre.artifacts.readArtifact(name)).abi;
    for (const item of abi) {
      if (item.type !== "error") continue;
      seen.set(`${item.name}(${item.inputs.map((input) => input.type).join(",")})`, item);
    }
  }
  allErrorsAbi = [...seen.values()];
  return allErrorsAbi;
}

/**
 * Awaits `promise` and asserts that it reverted with the custom error `errorName` (and `args`, when given).
 * Walks viem's error chain to the ContractFunctionRevertedError; when Hardhat's in-process
 * provider hands back raw revert data instead, decodes it against the errors of every compiled contract
 * (so errors bubbling up from another contract decode too; `Error(string)` reverts decode as errorName "Error").
 */
export async function expectRevert(promise: Promise<unknown>, errorName: string, args?: readonly unknown[]): Promise<void> {
  let outcome: unknown;
  try {
    outcome = await promise;
  } catch (error) {
    if (!(error instanceof BaseError)) throw error;
    const decoded = decodeRevert(error, await allErrors());
    if (decoded === undefined) expect.fail(`expected a revert with ${errorName}, got: ${error.shortMessage}`);
    expect(decoded.errorName, `error name (${error.shortMessage})`).to.equal(errorName);
    if (args !== undefined) expect(decoded.args, `${errorName} arguments`).to.deep.equal(args);
    return;
  }
  expect.fail(`expected a revert with ${errorName}, but the call returned ${String(outcome)}`);
}

/** Address comparison helper for assertions (viem returns checksummed addresses). */
export function sameAddress(a: Address, b: Address): boolean {
  return a.toLowerCase() === b.toLowerCase();
}
