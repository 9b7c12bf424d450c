/**
 * The `npm start` demo: Attested Time end to end on the in-process Hardhat chain, one short line per fact.
 *
 *   1. deploy    a development identity (manufacturer CA, card key + X.509 certificate, node key); the card's
 *                chain is checked off-chain, as an administrator would, then the oracle, the scheduler, the
 *                bridge and the example vault are deployed and the card and node registered (scripts/deploy.ts)
 *   2. proof     the card and the node sign "now"; the proof is verified off-chain and on-chain, submitted, and
 *                read back with getCurrentTime
 *   3. node      an attesting node starts on 127.0.0.1 with fresh dev keys (what `ats-node dev` does); its card
 *                chain is checked and its card and node registered; a proof fetched over REST with the client
 *                library is verified on-chain unchanged; the node is closed and its temp folder removed
 *   4. mesh      a 4-node mesh on 127.0.0.1 (`ats-node cluster`): the four cards and nodes are registered, the
 *                oracle's nodeQuorum set to 3; a proof co-signed by at least 3 nodes, fetched over REST, verifies
 *                on-chain; two nodes stop and the next rounds fail with exactly "Insufficient node responses";
 *                the quorum and accuracy bound go back to the single-node values for the later steps
 *   5. schedule  a contract schedules a call on the scheduler; executing it early is refused; the chain clock moves
 *                on and a keeper executes it with a later proof and earns the bounty
 *   6. vault     ether locked in TimeLockedVault until an attested moment: refused before, released after
 *   7. bridge    a second local deployment; bridge A sends the oracle's time, a relayer carries the CrossChainTime
 *                event to bridge B, which records it; a replay is refused
 *
 * Why the live nodes come third and fourth: their cards read the wall clock, and the oracle accepts a proof at most 60 s older
 * or 15 s newer than the chain clock. A chain clock only moves forward, and steps 4 and 5 move it on by an hour, so
 * the node step runs before them, after mining a block at the wall clock's second when the chain is behind. Every
 * other proof is signed for the chain's own "now" (the latest block's second plus the wall clock's nanoseconds),
 * and the chain clock is moved to exact seconds (evm_setNextBlockTimestamp), so the outcome does not depend on how
 * fast blocks are mined or how busy the machine is.
 *
 * As a library: `runDemo({ hre, log })` returns what happened (the test asserts on it). As a script:
 * `npx hardhat run scripts/demo.ts` (`npm start`) prints it.
 */
import { existsSync } from "node:fs";
import type { HardhatRuntimeEnvironment } from "hardhat/types";
import type { PublicClient, TestClient, WalletClient } from "@nomicfoundation/hardhat-viem/types";
import pino, { type Logger } from "pino";
import { decodeRevert } from "../lib/revert";
import {
  encodeFunctionData,
  formatEther,
  getAddress,
  parseEther,
  parseEventLogs,
  type Abi,
  type Address,
  type Hash,
  type Hex,
  type TransactionReceipt,
} from "viem";
import {
  attest,
  createDevIdentity,
  createVerifyContext,
  DEV_CARD_ACCURACY_NS,
  NS_PER_SECOND,
  p256PublicKeyCoordinates,
  verifyCardCertificateChain,
  verifyTimeProof,
  type CardRecord,
  type CrossChainTime,
  type DevIdentity,
  type ProofJson,
  type TimeProof,
  type VerifyTimeProofContext,
} from "../protocol";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS } from "../protocol/devkeys";
import { startDevNode } from "../node/cli";
import { CLUSTER_MAX_ACCEPTABLE_DRIFT_NS, startDevCluster } from "../node/cluster";
import { createTimeClient } from "../client";
import { deployAttestedTime, NO_EXPIRY_NS, type AttestedTimeDeployment, type ScheduledCall } from "./deploy";

// ------------------------------------------------------------------------------------------------ results

/** A refused call: the custom error (or `Error(string)`) it reverted with, decoded from the revert data. */
export interface DecodedRevert {
  errorName: string;
  args: readonly unknown[];
  /** e.g. `SchedulerTooEarly(executeAt: 2026-…Z, nanoMoment: 2026-…Z)`. */
  text: string;
}

export interface TransactionSummary {
  hash: Hash;
  gasUsed: bigint;
  blockNumber: bigint;
}

export interface DemoResult {
  chainId: number;
  deployment: AttestedTimeDeployment;
  identity: { cardId: Hex; nodeAddress: Address; certificateChainValid: boolean };
  proof: {
    nanoMoment: bigint;
    accuracyNs: number;
    offChain: { valid: boolean; reason: string | null };
    /** A copy with its accuracy lowered by a relayer (the node signed the accuracy). */
    tampered: { offChainReason: string | null; validOnChain: boolean };
    validOnChain: boolean;
    submit: TransactionSummary;
    /** getCurrentTime() after the submission equals the submitted proof. */
    currentTimeMatches: boolean;
  };
  node: {
    restEndpoint: string;
    cardId: Hex;
    nodeAddress: Address;
    certificateChainValid: boolean;
    proof: TimeProof;
    json: ProofJson;
    validOffChain: boolean;
    validOnChain: boolean;
    /** Chain clock minus the node's nanoMoment when it was verified on-chain, ns (negative: proof ahead). */
    ageAtVerificationNs: bigint;
    tempDirRemoved: boolean;
  };
  mesh: {
    nodes: number;
    /** Entries in the proof fetched from the first node (nodes that co-signed it). */
    responders: number;
    threshold: number;
    accuracyNs: number;
    convergenceState: string;
    validOnChainWithQuorum3: boolean;
    /** The error of the first node's rounds once two of the four stopped. */
    errorWithTwoDown: string | null;
  };
  scheduledCall: {
    callee: Address;
    callId: Hex;
    executeAtNs: bigint;
    early: DecodedRevert;
    execute: TransactionSummary;
    executedWith: bigint;
    status: "Executed" | "Failed" | string;
    bountyWei: bigint;
    /** Keeper's balance change plus the gas it paid: the bounty it received, wei. */
    bountyPaidWei: bigint;
    calleeReturn: Hex;
  };
  vault: {
    lockId: bigint;
    amountWei: bigint;
    unlockAtNs: bigint;
    early: DecodedRevert;
    withdraw: TransactionSummary;
    withdrawnWith: bigint;
    withdrawn: boolean;
  };
  bridge: {
    oracleB: Address;
    bridgeA: Address;
    bridgeB: Address;
    messageId: Hex;
    nonce: bigint;
    networkTime: bigint;
    send: TransactionSummary;
    receive: TransactionSummary;
    targetBlock: bigint;
    delivered: boolean;
    replay: DecodedRevert;
  };
  /** One verdict per step, as the summary prints them. */
  checks: DemoChecks;
  elapsedMs: number;
}

export interface DemoChecks {
  deployed: boolean;
  proof: boolean;
  node: boolean;
  mesh: boolean;
  scheduledCall: boolean;
  vault: boolean;
  bridge: boolean;
}

export interface RunDemoParameters {
  hre: HardhatRuntimeEnvironment;
  /** One human-readable line at a time (console.log for `npm start`; a no-op in tests). */
  log: (line: string) => void;
  /** The attesting node's pino logger (default: silent). */
  nodeLogger?: Logger;
}

// ------------------------------------------------------------------------------------------------ formatting

/** `2026-11-22T22:11:50.123456789Z`: an ns timestamp as an ISO date with all nine fraction digits. */
export function isoNs(valueNs: bigint): string {
  const seconds = valueNs / NS_PER_SECOND;
  const fraction = (valueNs % NS_PER_SECOND).toString().padStart(9, "0");
  return `${new Date(Number(seconds) * 1000).toISOString().slice(0, 19)}.${fraction}Z`;
}

/** `0x1234ab…cdef` */
export function short(hex: string): string {
  return hex.length <= 14 ? hex : `${hex.slice(0, 8)}…${hex.slice(-4)}`;
}

/** A duration in seconds to the millisecond: `60 s`, `0.751 s`. */
function seconds(durationNs: bigint): string {
  const abs = durationNs < 0n ? -durationNs : durationNs;
  const ms = (abs % NS_PER_SECOND) / 1_000_000n;
  const text = `${abs / NS_PER_SECOND}${ms === 0n ? "" : `.${ms.toString().padStart(3, "0")}`} s`;
  return durationNs < 0n ? `-${text}` : text;
}

function gas(value: bigint): string {
  return value.toLocaleString("en-US");
}

function tx(summary: TransactionSummary): string {
  return `tx ${short(summary.hash)}, block ${summary.blockNumber}, gas ${gas(summary.gasUsed)}`;
}

type AbiError = Extract<Abi[number], { type: "error" }>;

/** Error arguments that are moments (ns) print as ISO dates. */
const MOMENT_ARGUMENT = /nanoMoment|executeAt|notBefore|unlockAt|networkTime|deadline/i;

function formatErrorArgs(item: AbiError | undefined, args: readonly unknown[]): string {
  return args
    .map((value, index) => {
      const name = item?.inputs[index]?.name ?? `arg${index}`;
      const shown =
        typeof value === "bigint" && MOMENT_ARGUMENT.test(name)
          ? isoNs(value)
          : typeof value === "string" && value.length > 20
            ? short(value)
            : String(value);
      return `${name}: ${shown}`;
    })
    .join(", ");
}

// ------------------------------------------------------------------------------------------------ reverts

/**
 * Awaits `promise`, which must revert, and decodes its revert data with `abi`. Hardhat's in-process network hands
 * viem the revert data on an inner cause (`data: 0x<selector‖args>`) rather than as a ContractFunctionRevertedError,
 * so both shapes are handled. Throws when the promise resolves or carries no decodable revert data.
 */
export async function captureRevert(promise: Promise<unknown>, abi: Abi): Promise<DecodedRevert> {
  try {
    await promise;
  } catch (error) {
    const decoded = decodeRevert(error, abi);
    if (decoded === undefined) throw error;
    const { errorName, args } = decoded;
    const item = abi.find((entry): entry is AbiError => entry.type === "error" && entry.name === errorName);
    const text =
      errorName === "Error" ? `Error("${String(args[0])}")` : `${errorName}(${formatErrorArgs(item, args)})`;
    return { errorName, args, text };
  }
  throw new Error("expected the call to revert, but it succeeded");
}

// ------------------------------------------------------------------------------------------------ the demo


/** How far the chain clock may run ahead of the wall clock when the live node's proof is checked (60 s max age). */
const MAX_CHAIN_LEAD_NS = 40n * NS_PER_SECOND;

const CALL_STATUS = ["None", "Scheduled", "Executed", "Failed", "Cancelled", "Expired"] as const;

type Receipt = TransactionReceipt & { summary: TransactionSummary };

/** What every step shares: the chain, the accounts, the dev identity and the first deployment. */
interface DemoContext {
  hre: HardhatRuntimeEnvironment;
  log: (line: string) => void;
  publicClient: PublicClient;
  testClient: TestClient;
  chainId: number;
  accounts: { deployer: WalletClient; keeper: WalletClient; depositor: WalletClient; relayer: WalletClient };
  /** Waits for the receipt; throws when the transaction reverted. */
  confirm(hash: Hash, what: string): Promise<Receipt>;
  /** The chain's "now": the latest block's second, with the wall clock's nanoseconds inside that second. */
  chainNowNs(): Promise<bigint>;
  /** Mines a block at `momentNs` rounded up to the second (at least one second after the latest block). */
  moveChainClockTo(momentNs: bigint): Promise<bigint>;
}

/** The dev identity and deployment of step 1, used by the later steps. */
interface Deployed {
  identity: DevIdentity;
  cardPublicKey: Hex;
  deployment: AttestedTimeDeployment & { scheduler: Address; bridge: Address; vault: Address };
  oracleAbi: Abi;
  /** The off-chain view of the oracle's registry (protocol/verify.ts), grown as step 3 registers the node. */
  cards: Map<Hex, CardRecord>;
  nodes: Address[];
  /** A proof signed by the dev card and node for `nanoMoment` (the node reads its clock 1 µs later). */
  signProof(nanoMoment: bigint): TimeProof;
}

function verdict(outcome: { valid: boolean; reason?: string | null }): string {
  return outcome.valid ? "valid" : `invalid, reason ${String(outcome.reason)}`;
}

/** The arguments of the first `eventName` event in `receipt`; throws when there is none. */
function eventArgs<T>(abi: Abi, receipt: TransactionReceipt, eventName: string): T {
  const [event] = parseEventLogs({ abi, logs: receipt.logs, eventName }) as unknown as { args: T }[];
  if (event === undefined) throw new Error(`expected a ${eventName} event in tx ${receipt.transactionHash}`);
  return event.args;
}

/** The errors of several ABIs, so that a revert bubbling up through another contract decodes too. */
function errorsOf(...abis: Abi[]): Abi {
  return abis.flatMap((abi) => abi.filter((item) => item.type === "error"));
}

async function deployStep(ctx: DemoContext): Promise<{ deployed: Deployed; result: DemoResult["identity"] }> {
  const { hre, log } = ctx;
  log("");
  log("1. Deploy the oracle, the scheduler, the bridge and the example vault; register a development card and node");
  // The fixed public dev keys (protocol/devkeys.ts) keep the card id and node address the same on every run;
  // the manufacturer CA and the card's certificate are made fresh.
  const identity = await createDevIdentity({
    cardPrivateKey: DEV_CARD_PRIVATE_KEY,
    nodePrivateKey: DEV_NODE_PRIVATE_KEYS[0],
  });
  // What an administrator does before registering a card: check its chain up to the manufacturer's root.
  const chain = await verifyCardCertificateChain({
    chainPem: identity.certificateChainPem,
    trustedRootsPem: [identity.ca.certificatePem],
    nowMs: Date.now(),
    cardId: identity.cardId,
  });
  if (!chain.valid) throw new Error(`the dev card's certificate chain does not verify: ${chain.reason} (${chain.detail})`);
  log(`   card ${identity.cardId}`);
  log(`     certificate "${chain.subject}"`);
  log(`     issued by "${chain.issuer}": chain checked off-chain, valid`);
  log(`   node ${identity.nodeAddress}`);
  const deployment = await deployAttestedTime(hre, {
    deployer: ctx.accounts.deployer,
    cards: [{ publicKey: chain.publicKey }],
    nodes: [{ address: identity.nodeAddress }],
  });
  const { scheduler, bridge, vault } = deployment;
  if (scheduler === undefined || bridge === undefined || vault === undefined) {
    throw new Error("deployAttestedTime deployed no scheduler, bridge or vault");
  }
  log(`   TimeOracle      ${deployment.oracle}  (card and node registered)`);
  log(`   TimeScheduler   ${scheduler}`);
  log(`   TimeBridge      ${bridge}`);
  log(`   TimeLockedVault ${vault}`);
  const oracle = await hre.viem.getContractAt("TimeOracle", deployment.oracle);
  const [maxAgeNs, maxAheadNs, maxDriftNs, quorum] = (await Promise.all([
    oracle.read.maxAttestationAge(),
    oracle.read.maxFutureDrift(),
    oracle.read.maxAcceptableDrift(),
    oracle.read.nodeQuorum(),
  ])) as bigint[];
  log(
    `   oracle settings: a proof may be ${seconds(maxAgeNs!)} old or ${seconds(maxAheadNs!)} ahead of the chain clock,` +
      ` accuracy ≤ ${maxDriftNs} ns, quorum ${quorum} node${quorum === 1n ? "" : "s"}`,
  );
  const deployed: Deployed = {
    identity,
    cardPublicKey: chain.publicKey,
    deployment: { ...deployment, scheduler, bridge, vault },
    oracleAbi: oracle.abi as Abi,
    cards: new Map([[identity.cardId, { publicKey: chain.publicKey, revoked: false }]]),
    nodes: [identity.nodeAddress],
    signProof: (nanoMoment) =>
      attest({
        card: identity.cardKey,
        nodes: [identity.nodeKey],
        nanoMoment,
        accuracy: DEV_CARD_ACCURACY_NS,
        nodeTimestampNs: nanoMoment + 1_000n,
      }),
  };
  return { deployed, result: { cardId: identity.cardId, nodeAddress: identity.nodeAddress, certificateChainValid: chain.valid } };
}

function offChainContext(deployed: Deployed, nowNs: bigint): VerifyTimeProofContext {
  return createVerifyContext({ cards: deployed.cards, nodes: deployed.nodes, nowNs });
}

async function proofStep(ctx: DemoContext, deployed: Deployed): Promise<DemoResult["proof"]> {
  const { hre, log } = ctx;
  log("");
  log("2. Sign a proof for now (card: P-256; node: EIP-712, secp256k1) and verify it off-chain and on-chain");
  const oracle = await hre.viem.getContractAt("TimeOracle", deployed.deployment.oracle);
  const nanoMoment = await ctx.chainNowNs();
  const proof = deployed.signProof(nanoMoment);
  log(`   nanoMoment ${isoNs(nanoMoment)} (${nanoMoment} ns), accuracy ${proof.accuracy} ns`);
  const offChain = verifyTimeProof(proof, offChainContext(deployed, nanoMoment));
  log(`   off-chain verifyTimeProof: ${verdict(offChain)}`);
  const validOnChain = (await oracle.read.verifyTimeProof([proof])) as boolean;
  log(`   on-chain  verifyTimeProof: ${validOnChain}`);
  // The node signs the accuracy too, so a relayer cannot make a proof look more accurate than it is.
  const tampered: TimeProof = { ...proof, accuracy: 10 };
  const tamperedOffChain = verifyTimeProof(tampered, offChainContext(deployed, nanoMoment));
  const tamperedOnChain = (await oracle.read.verifyTimeProof([tampered])) as boolean;
  log("   the same proof with its accuracy lowered to 10 ns (the node signed the accuracy):");
  log(`     off-chain ${verdict(tamperedOffChain)}; on-chain ${tamperedOnChain}`);
  const submit = await ctx.confirm(await oracle.write.submitTimeProof([proof]), "submitTimeProof");
  log(`   submitTimeProof: ${tx(submit.summary)}`);
  const current = (await oracle.read.getCurrentTime()) as TimeProof;
  const currentTimeMatches =
    current.nanoMoment === proof.nanoMoment &&
    current.hardwareSignature === proof.hardwareSignature &&
    current.nodeSignature === proof.nodeSignature &&
    current.accuracy === proof.accuracy;
  const which = currentTimeMatches ? "the submitted proof" : "NOT the submitted proof";
  log(`   getCurrentTime: ${isoNs(current.nanoMoment)}, ${which}`);
  return {
    nanoMoment,
    accuracyNs: proof.accuracy,
    offChain: offChain.valid ? { valid: true, reason: null } : { valid: false, reason: offChain.reason },
    tampered: { offChainReason: tamperedOffChain.valid ? null : tamperedOffChain.reason, validOnChain: tamperedOnChain },
    validOnChain,
    submit: submit.summary,
    currentTimeMatches,
  };
}

async function nodeStep(ctx: DemoContext, deployed: Deployed, nodeLogger: Logger): Promise<DemoResult["node"]> {
  const { hre, log, publicClient } = ctx;
  log("");
  log("3. Start an attesting node on 127.0.0.1 with fresh dev keys, fetch a proof over REST, verify it on-chain");
  // The node's card reads the wall clock. Bring the chain clock up to it first (a chain clock only moves forward:
  // mine a block stamped with the wall clock's second when the chain is behind), and stop with a clear message
  // when the chain is so far ahead that a proof signed now would already be too old for the oracle.
  const wallSeconds = BigInt(Math.floor(Date.now() / 1000));
  const latest = await publicClient.getBlock();
  const chainLeadNs = (latest.timestamp - wallSeconds) * NS_PER_SECOND;
  if (chainLeadNs > MAX_CHAIN_LEAD_NS) {
    throw new Error(
      `the chain clock is ${seconds(chainLeadNs)} ahead of the wall clock, so a proof the node signs now would be ` +
        "too old for the oracle (60 s at most): run the demo on a fresh chain",
    );
  }
  if (chainLeadNs < 0n) await ctx.moveChainClockTo(wallSeconds * NS_PER_SECOND);
  log(
    chainLeadNs < 0n
      ? `   chain clock moved up to the wall clock, which the node's card reads (it was ${seconds(-chainLeadNs)} behind)`
      : `   chain clock ${seconds(chainLeadNs)} ahead of the wall clock, which the node's card reads (fine up to 60 s)`,
  );

  const oracle = await hre.viem.getContractAt("TimeOracle", deployed.deployment.oracle);
  // The same dev node as `ats-node dev`: fresh keys in a temp folder, free ports, the dev CA as trusted root;
  // `env: {}` so this shell's ATS_* variables do not change the demo.
  const devNode = await startDevNode({ env: {}, cwd: process.cwd(), logger: () => nodeLogger });
  let result: DemoResult["node"];
  try {
    log(`   node up: REST ${devNode.node.endpoints.rest}, keys in ${devNode.keyDir}`);
    const client = createTimeClient({ endpoint: devNode.node.endpoints.rest });
    try {
      // The administrator's side: ask the node who it is, check its card's chain against the manufacturer's
      // root (here the dev CA the node was made with), then register its card key and its node address.
      const info = await client.info();
      const nodeId = getAddress(String(info.nodeId));
      const trustedRoot = devNode.trustedRootPem;
      const chain = await verifyCardCertificateChain({
        chainPem: info.certificateChainPem as string[],
        trustedRootsPem: [trustedRoot],
        nowMs: Date.now(),
        cardId: info.cardId as Hex,
      });
      if (!chain.valid) throw new Error(`the node's card chain does not verify: ${chain.reason} (${chain.detail})`);
      if (nodeId !== devNode.nodeAddress || chain.cardId !== devNode.cardId) {
        throw new Error(`the node at ${devNode.node.endpoints.rest} is not the one just started (node ${nodeId}, card ${chain.cardId})`);
      }
      log(`   GET /node/info: node ${nodeId}, card ${chain.cardId}`);
      log("     card certificate chain checked against the dev CA (the manufacturer's root): valid");
      const { x, y } = p256PublicKeyCoordinates(chain.publicKey);
      const card = await ctx.confirm(await oracle.write.registerCard([x, y, 0n, NO_EXPIRY_NS]), "registerCard");
      const node = await ctx.confirm(await oracle.write.registerNode([nodeId, 0n, NO_EXPIRY_NS]), "registerNode");
      log(`   registerCard: ${tx(card.summary)}`);
      log(`   registerNode: ${tx(node.summary)}`);
      deployed.cards.set(chain.cardId, { publicKey: chain.publicKey, revoked: false });
      deployed.nodes.push(nodeId);

      const fetched = await client.getCurrentTime();
      log(`   GET /time/current with createTimeClient: nanoMoment ${isoNs(fetched.proof.nanoMoment)}`);
      for (const line of JSON.stringify(fetched.json, null, 2).split("\n")) log(`     ${line}`);
      const offChain = await client.verify(fetched.proof, {
        context: offChainContext(deployed, BigInt(Date.now()) * 1_000_000n),
      });
      const validOnChain = (await oracle.read.verifyTimeProof([fetched.proof])) as boolean;
      const chainNs = (await publicClient.getBlock()).timestamp * NS_PER_SECOND;
      const ageAtVerificationNs = chainNs - fetched.proof.nanoMoment;
      log(`   off-chain (client.verify): ${verdict(offChain)}`);
      log(`   on-chain verifyTimeProof, the bytes as received: ${validOnChain}`);
      log(`     chain clock ${isoNs(chainNs)}: the proof is ${seconds(ageAtVerificationNs)} old`);
      result = {
        restEndpoint: devNode.node.endpoints.rest,
        cardId: chain.cardId,
        nodeAddress: nodeId,
        certificateChainValid: chain.valid,
        proof: fetched.proof,
        json: fetched.json,
        validOffChain: offChain.valid,
        validOnChain,
        ageAtVerificationNs,
        tempDirRemoved: false,
      };
    } finally {
      client.close();
    }
  } finally {
    await devNode.close();
  }
  result.tempDirRemoved = !existsSync(devNode.keyDir);
  log(`   node closed; temp folder ${result.tempDirRemoved ? "removed" : "NOT removed"}`);
  return result;
}

/** Polls `read` every 50 ms until `done` holds on its value (at most `timeoutMs`); returns the last value. */
async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function meshStep(ctx: DemoContext, deployed: Deployed, nodeLogger: Logger): Promise<DemoResult["mesh"]> {
  const { hre, log } = ctx;
  log("");
  log("4. A 4-node mesh on 127.0.0.1: a proof co-signed by ⌈2n/3⌉ = 3 nodes, verified on-chain with nodeQuorum = 3");
  const oracle = await hre.viem.getContractAt("TimeOracle", deployed.deployment.oracle);
  const previousQuorum = (await oracle.read.nodeQuorum()) as bigint;
  const previousMaxDriftNs = (await oracle.read.maxAcceptableDrift()) as bigint;
  const cluster = await startDevCluster({ nodes: 4, env: {}, cwd: process.cwd(), logger: () => nodeLogger });
  const clients = cluster.nodes.map((node) => createTimeClient({ endpoint: node.endpoints.rest }));
  try {
    for (const [index, node] of cluster.nodes.entries()) {
      const info = await clients[index]!.info();
      const chain = await verifyCardCertificateChain({
        chainPem: info.certificateChainPem as string[],
        trustedRootsPem: [cluster.trustedRootPem],
        nowMs: Date.now(),
        cardId: info.cardId as Hex,
      });
      if (!chain.valid) throw new Error(`mesh node ${node.nodeId}: card chain does not verify: ${chain.reason}`);
      const { x, y } = p256PublicKeyCoordinates(chain.publicKey);
      await ctx.confirm(await oracle.write.registerCard([x, y, 0n, NO_EXPIRY_NS]), "registerCard");
      await ctx.confirm(await oracle.write.registerNode([getAddress(node.nodeId), 0n, NO_EXPIRY_NS]), "registerNode");
      deployed.cards.set(chain.cardId, { publicKey: chain.publicKey, revoked: false });
      deployed.nodes.push(getAddress(node.nodeId));
      log(`   node ${index + 1}: ${node.nodeId}, REST ${node.endpoints.rest}, mesh ${node.endpoints.mesh ?? ""}: card and node registered`);
    }
    // The mesh signs an honest bound (half the loopback round trip plus the card accuracy: microseconds), above the
    // bound the single-node steps use; the administrator raises it for this step and restores it after.
    await ctx.confirm(await oracle.write.setNodeQuorum([3n]), "setNodeQuorum");
    await ctx.confirm(await oracle.write.setMaxAcceptableDrift([CLUSTER_MAX_ACCEPTABLE_DRIFT_NS]), "setMaxAcceptableDrift");
    log(`   oracle: nodeQuorum 3, maxAcceptableDrift ${CLUSTER_MAX_ACCEPTABLE_DRIFT_NS} ns`);
    const rest = cluster.nodes[0]!.endpoints.rest;
    const meshState = async () => (await (await fetch(`${rest}/mesh/state`)).json()) as { convergenceState: string; lastError: string | null; peerCount: number };
    // Converged takes 8 stable rounds; a proof is served as soon as one round succeeded (Converging).
    const converged = await pollUntil(meshState, (state) => state.convergenceState === "Converged", 15_000);
    log(`   GET /mesh/state of node 1: ${converged.convergenceState}, ${converged.peerCount} peers reachable`);
    const fetched = await clients[0]!.getCurrentTime();
    const consensus = fetched.consensus;
    const responders = fetched.proof.nodeSignature.length === 0 ? 0 : (fetched.proof.nodeSignature.length - 2) / 160;
    log(`   GET /time/current: nanoMoment ${isoNs(fetched.proof.nanoMoment)}, ${responders} entries (threshold ${consensus?.threshold ?? "?"}), accuracy ${fetched.proof.accuracy} ns`);
    log(`     consensus: median ${consensus === undefined ? "?" : isoNs(BigInt(consensus.timeNs))}, largest deviation ${consensus?.deviationNs ?? "?"} ns`);
    const validOnChainWithQuorum3 = (await oracle.read.verifyTimeProof([fetched.proof])) as boolean;
    log(`   on-chain verifyTimeProof with nodeQuorum 3: ${validOnChainWithQuorum3}`);
    if (!validOnChainWithQuorum3) {
      // Say why, with the off-chain rules the contract shares (docs/protocol.md §6).
      const chainNs = (await ctx.publicClient.getBlock()).timestamp * NS_PER_SECOND;
      const why = verifyTimeProof(fetched.proof, { ...offChainContext(deployed, chainNs), nodeQuorum: 3, maxAcceptableDriftNs: CLUSTER_MAX_ACCEPTABLE_DRIFT_NS });
      log(`     off-chain verdict with the oracle's settings: ${why.valid ? "valid" : `${why.reason} (${why.detail})`}`);
    }

    await cluster.stopNode(3);
    await cluster.stopNode(2);
    const failing = await pollUntil(meshState, (state) => state.lastError === "Insufficient node responses", 10_000);
    log(`   nodes 3 and 4 stopped: node 1's rounds fail with "${failing.lastError ?? "(none yet)"}" (state ${failing.convergenceState})`);
    return {
      nodes: cluster.nodes.length,
      responders,
      threshold: consensus?.threshold ?? 0,
      accuracyNs: fetched.proof.accuracy,
      convergenceState: converged.convergenceState,
      validOnChainWithQuorum3,
      errorWithTwoDown: failing.lastError,
    };
  } finally {
    for (const client of clients) client.close();
    await cluster.close();
    await ctx.confirm(await oracle.write.setNodeQuorum([previousQuorum]), "setNodeQuorum");
    await ctx.confirm(await oracle.write.setMaxAcceptableDrift([previousMaxDriftNs]), "setMaxAcceptableDrift");
    log(`   mesh closed; oracle back to nodeQuorum ${previousQuorum} and maxAcceptableDrift ${previousMaxDriftNs} ns`);
  }
}

async function scheduleStep(ctx: DemoContext, deployed: Deployed): Promise<DemoResult["scheduledCall"]> {
  const { hre, log, publicClient, accounts } = ctx;
  log("");
  log("5. Schedule a call on the scheduler for one minute from now; execute it too early, then on time");
  // The callee is contracts/test/SchedulerCallee.sol, a test contract that schedules calls back to itself (here
  // `ping(7)`, which returns 14); the package ships no example callee. Any contract can schedule this way.
  const callee = await hre.viem.deployContract("SchedulerCallee", [deployed.deployment.scheduler], {
    client: { wallet: accounts.deployer },
  });
  // TimeScheduler is its own deployment; it verifies each proof with the oracle's verifyTimeProof.
  const schedulerAsKeeper = await hre.viem.getContractAt("TimeScheduler", deployed.deployment.scheduler, {
    client: { wallet: accounts.keeper },
  });
  const schedulerAbi = schedulerAsKeeper.abi as Abi;
  const executeAtNs = (await ctx.chainNowNs()) + 60n * NS_PER_SECOND;
  const windowNs = 600n * NS_PER_SECOND;
  const gasLimit = 100_000;
  const bountyWei = parseEther("0.01");
  const data = encodeFunctionData({ abi: callee.abi as Abi, functionName: "ping", args: [7n] });
  const scheduled = await ctx.confirm(
    await callee.write.schedule([executeAtNs, windowNs, gasLimit, data], { value: bountyWei }),
    "scheduleCall",
  );
  const { callId, request } = eventArgs<{ callId: Hex; request: ScheduledCall }>(schedulerAbi, scheduled, "CallScheduled");
  log(`   SchedulerCallee ${getAddress(callee.address)} (a test contract) schedules ping(7)`);
  log(`     ${tx(scheduled.summary)}`);
  log(`     callId ${short(callId)}, executeAt ${isoNs(executeAtNs)}, window 10 min, bounty ${formatEther(bountyWei)} ETH`);

  const earlyMoment = await ctx.chainNowNs();
  const early = await captureRevert(
    publicClient.simulateContract({
      address: deployed.deployment.scheduler,
      abi: schedulerAbi,
      functionName: "executeCall",
      args: [request, deployed.signProof(earlyMoment)],
      account: accounts.keeper.account,
    }),
    schedulerAbi,
  );
  log(`   keeper ${short(accounts.keeper.account.address)} executes it with a proof of ${isoNs(earlyMoment)}: refused`);
  log(`     ${early.text}`);

  await ctx.moveChainClockTo(executeAtNs);
  const onTimeMoment = await ctx.chainNowNs();
  log(`   chain clock moved on to ${isoNs(onTimeMoment)} (evm_setNextBlockTimestamp + evm_mine)`);
  const keeperAddress = accounts.keeper.account.address;
  const balanceBefore = await publicClient.getBalance({ address: keeperAddress });
  const executed = await ctx.confirm(
    await schedulerAsKeeper.write.executeCall([request, deployed.signProof(onTimeMoment)]),
    "executeCall",
  );
  const balanceAfter = await publicClient.getBalance({ address: keeperAddress });
  const bountyPaidWei = balanceAfter - balanceBefore + executed.gasUsed * executed.effectiveGasPrice;
  const { returnData } = eventArgs<{ returnData: Hex }>(schedulerAbi, executed, "CallExecuted");
  const status = CALL_STATUS[Number(await schedulerAsKeeper.read.callStatus([callId]))] ?? "unknown";
  log(`   keeper executes it with a proof of ${isoNs(onTimeMoment)}: ${tx(executed.summary)}`);
  log(`     status ${status}; ping returned ${BigInt(returnData)}; bounty paid to the keeper: ${formatEther(bountyPaidWei)} ETH`);
  return {
    callee: getAddress(callee.address),
    callId,
    executeAtNs,
    early,
    execute: executed.summary,
    executedWith: onTimeMoment,
    status,
    bountyWei,
    bountyPaidWei,
    calleeReturn: returnData,
  };
}

async function vaultStep(ctx: DemoContext, deployed: Deployed): Promise<DemoResult["vault"]> {
  const { hre, log, publicClient, accounts } = ctx;
  log("");
  log("6. The example consumer: 1 ETH locked in TimeLockedVault for one hour");
  const vault = await hre.viem.getContractAt("TimeLockedVault", deployed.deployment.vault, {
    client: { wallet: accounts.depositor },
  });
  const vaultAbi = vault.abi as Abi;
  const amountWei = parseEther("1");
  const unlockAtNs = (await ctx.chainNowNs()) + 3600n * NS_PER_SECOND;
  const deposited = await ctx.confirm(await vault.write.deposit([unlockAtNs], { value: amountWei }), "deposit");
  const { lockId } = eventArgs<{ lockId: bigint }>(vaultAbi, deposited, "Deposited");
  log(`   ${short(accounts.depositor.account.address)} deposits ${formatEther(amountWei)} ETH until ${isoNs(unlockAtNs)}`);
  log(`     lock ${lockId}: ${tx(deposited.summary)}`);

  const earlyMoment = await ctx.chainNowNs();
  const early = await captureRevert(
    publicClient.simulateContract({
      address: deployed.deployment.vault,
      abi: vaultAbi,
      functionName: "withdraw",
      args: [lockId, deployed.signProof(earlyMoment)],
      account: accounts.depositor.account,
    }),
    [...vaultAbi, ...errorsOf(deployed.oracleAbi)],
  );
  log(`   withdraw with a proof of ${isoNs(earlyMoment)}: refused`);
  log(`     ${early.text}`);

  await ctx.moveChainClockTo(unlockAtNs);
  const moment = await ctx.chainNowNs();
  log(`   chain clock moved on one hour, to ${isoNs(moment)}`);
  const withdrawn = await ctx.confirm(await vault.write.withdraw([lockId, deployed.signProof(moment)]), "withdraw");
  const { amount } = eventArgs<{ amount: bigint }>(vaultAbi, withdrawn, "Withdrawn");
  const lockAfter = (await vault.read.getLock([lockId])) as { amount: bigint };
  log(`   withdraw with a proof of ${isoNs(moment)}: ${formatEther(amount)} ETH released, ${tx(withdrawn.summary)}`);
  return {
    lockId,
    amountWei,
    unlockAtNs,
    early,
    withdraw: withdrawn.summary,
    withdrawnWith: moment,
    withdrawn: amount === amountWei && lockAfter.amount === 0n,
  };
}

async function bridgeStep(ctx: DemoContext, deployed: Deployed): Promise<DemoResult["bridge"]> {
  const { hre, log, publicClient, accounts, chainId } = ctx;
  log("");
  log(`7. Bridge: carry the oracle's time to a second deployment (on this chain too: targetChain ${chainId})`);
  const deploymentB = await deployAttestedTime(hre, {
    deployer: accounts.deployer,
    cards: [{ publicKey: deployed.cardPublicKey }],
    nodes: [{ address: deployed.identity.nodeAddress }],
    scheduler: false,
    example: false,
  });
  const bridgeBAddress = deploymentB.bridge;
  if (bridgeBAddress === undefined) throw new Error("deployAttestedTime deployed no bridge");
  log(`   deployment B: TimeOracle ${deploymentB.oracle} (same card and node registered)`);
  log(`                 TimeBridge ${bridgeBAddress}`);
  const bridgeAAddress = deployed.deployment.bridge;
  const oracleA = await hre.viem.getContractAt("TimeOracle", deployed.deployment.oracle);
  const bridgeA = await hre.viem.getContractAt("TimeBridge", bridgeAAddress);
  const bridgeB = await hre.viem.getContractAt("TimeBridge", bridgeBAddress, { client: { wallet: accounts.relayer } });
  const bridgeAbi = bridgeA.abi as Abi;

  // Oracle A's stored proof is an hour old by now: submit a fresh one first, as a relayer keeps doing.
  const moment = await ctx.chainNowNs();
  const refreshed = await ctx.confirm(await oracleA.write.submitTimeProof([deployed.signProof(moment)]), "submitTimeProof");
  log(`   oracle A submitTimeProof ${isoNs(moment)}: ${tx(refreshed.summary)}`);
  const sent = await ctx.confirm(await bridgeA.write.sendTime([BigInt(chainId)]), "sendTime");
  const { messageId, nonce, message } = eventArgs<{ messageId: Hex; nonce: bigint; message: CrossChainTime }>(
    bridgeAbi,
    sent,
    "TimeSent",
  );
  log(`   bridge A sendTime(${chainId}): ${tx(sent.summary)}`);
  log(`     TimeSent: message ${short(messageId)}, nonce ${nonce}, networkTime ${isoNs(message.networkTime)},`);
  log(`     targetBlock ${message.targetBlock} (the receiving bridge sets it)`);

  // The relayer takes the message from the receipt's logs and delivers it unchanged; anyone may.
  const delivery = [BigInt(chainId), bridgeAAddress, nonce, message] as const;
  const received = await ctx.confirm(await bridgeB.write.receiveTime([...delivery]), "receiveTime");
  const receivedArgs = eventArgs<{ message: CrossChainTime }>(bridgeAbi, received, "TimeReceived");
  const targetBlock = receivedArgs.message.targetBlock;
  const deliveredBlock = (await bridgeB.read.deliveredBlock([messageId])) as bigint;
  log(`   relayer ${short(accounts.relayer.account.address)} receiveTime on bridge B: ${tx(received.summary)}`);
  log(`     TimeReceived: targetBlock ${targetBlock}`);
  const replay = await captureRevert(
    publicClient.simulateContract({
      address: bridgeBAddress,
      abi: bridgeAbi,
      functionName: "receiveTime",
      args: [...delivery],
      account: accounts.relayer.account,
    }),
    [...bridgeAbi, ...errorsOf(deployed.oracleAbi)],
  );
  log(`   the same message delivered again: refused`);
  log(`     ${replay.text}`);
  return {
    oracleB: deploymentB.oracle,
    bridgeA: bridgeAAddress,
    bridgeB: bridgeBAddress,
    messageId,
    nonce,
    networkTime: message.networkTime,
    send: sent.summary,
    receive: received.summary,
    targetBlock,
    delivered: targetBlock === received.blockNumber && deliveredBlock === targetBlock,
    replay,
  };
}

/** Runs the whole demo on `hre`'s network and returns what happened. */
export async function runDemo(parameters: RunDemoParameters): Promise<DemoResult> {
  const { hre, log } = parameters;
  const startedAtMs = Date.now();
  const publicClient = await hre.viem.getPublicClient();
  const testClient = await hre.viem.getTestClient();
  const [deployer, keeper, depositor, relayer] = await hre.viem.getWalletClients();
  if (deployer === undefined || keeper === undefined || depositor === undefined || relayer === undefined) {
    throw new Error("runDemo needs four accounts (deployer, keeper, depositor, relayer)");
  }
  const chainId = await publicClient.getChainId();
  const ctx: DemoContext = {
    hre,
    log,
    publicClient,
    testClient,
    chainId,
    accounts: { deployer, keeper, depositor, relayer },
    async confirm(hash, what) {
      const receipt = await publicClient.waitForTransactionReceipt({ hash });
      if (receipt.status !== "success") throw new Error(`${what} reverted (tx ${hash})`);
      return { ...receipt, summary: { hash, gasUsed: receipt.gasUsed, blockNumber: receipt.blockNumber } };
    },
    async chainNowNs() {
      const block = await publicClient.getBlock();
      const wallNs = BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
      return block.timestamp * NS_PER_SECOND + (wallNs % NS_PER_SECOND);
    },
    async moveChainClockTo(momentNs) {
      const latest = await publicClient.getBlock();
      const wantedSeconds = (momentNs + NS_PER_SECOND - 1n) / NS_PER_SECOND;
      const timestamp = wantedSeconds > latest.timestamp ? wantedSeconds : latest.timestamp + 1n;
      await testClient.setNextBlockTimestamp({ timestamp });
      await testClient.mine({ blocks: 1 });
      return timestamp;
    },
  };

  log(`Attested Time demo on the in-process Hardhat chain (chain id ${chainId})`);
  const { deployed, result: identity } = await deployStep(ctx);
  const proof = await proofStep(ctx, deployed);
  // The live node before the steps that move the chain clock on (see the top of this file).
  const node = await nodeStep(ctx, deployed, parameters.nodeLogger ?? pino({ level: "silent" }));
  const mesh = await meshStep(ctx, deployed, parameters.nodeLogger ?? pino({ level: "silent" }));
  const scheduledCall = await scheduleStep(ctx, deployed);
  const vault = await vaultStep(ctx, deployed);
  const bridge = await bridgeStep(ctx, deployed);

  const checks: DemoChecks = {
    deployed: identity.certificateChainValid && deployed.deployment.cardIds.length === 1,
    proof: proof.offChain.valid && proof.validOnChain && proof.currentTimeMatches && !proof.tampered.validOnChain,
    node: node.validOffChain && node.validOnChain && node.tempDirRemoved,
    mesh: mesh.responders >= 3 && mesh.validOnChainWithQuorum3 && mesh.errorWithTwoDown === "Insufficient node responses",
    scheduledCall:
      scheduledCall.early.errorName === "SchedulerTooEarly" &&
      scheduledCall.status === "Executed" &&
      scheduledCall.bountyPaidWei === scheduledCall.bountyWei,
    vault: vault.early.errorName === "TimeConsumerTooEarly" && vault.withdrawn,
    bridge: bridge.delivered && bridge.replay.errorName === "TimeBridgeAlreadyDelivered",
  };
  const elapsedMs = Date.now() - startedAtMs;
  const summary: [boolean, string][] = [
    [checks.deployed, "card chain checked; oracle, bridge and vault deployed; card and node registered"],
    [checks.proof, "proof valid off-chain and on-chain, submitted, read back; a tampered copy refused"],
    [checks.node, "live node's REST proof verified on-chain unchanged; node closed, temp dir removed"],
    [checks.mesh, `4-node mesh: ${mesh.responders} co-signers, valid on-chain with nodeQuorum 3; two down: "${mesh.errorWithTwoDown ?? "no error"}"`],
    [checks.scheduledCall, `scheduled call refused early (${scheduledCall.early.errorName}), executed, bounty paid`],
    [checks.vault, `vault refused before the unlock moment (${vault.early.errorName}), released after`],
    [checks.bridge, `bridge message delivered in block ${bridge.targetBlock}, replay refused (${bridge.replay.errorName})`],
  ];
  log("");
  log(`Summary (${(elapsedMs / 1000).toFixed(1)} s)`);
  summary.forEach(([ok, what], index) => log(`  ${ok ? "ok  " : "FAIL"} ${index + 1}. ${what}`));
  return {
    chainId,
    deployment: deployed.deployment,
    identity,
    proof,
    node,
    mesh,
    scheduledCall,
    vault,
    bridge,
    checks,
    elapsedMs,
  };
}

async function main(): Promise<void> {
  // Loaded here, not at the top, so that importing this module from tests does not re-enter the Hardhat runtime.
  const hre = (await import("hardhat")).default;
  const result = await runDemo({
    hre,
    log: (line) => console.log(line),
    nodeLogger: pino({ level: "warn", name: "ats-node" }, pino.destination(2)),
  });
  if (!Object.values(result.checks).every((ok) => ok)) process.exitCode = 1;
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
