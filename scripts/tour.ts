/**
 * The scripted tour of a running local network (scripts/network.ts), as `npm start` prints it: each step is done
 * the way a dApp would do it (a user's transaction), and the relayer does the rest, on its own:
 *
 *   1. a proof from the attesting nodes verifies on-chain (with the oracle's quorum), and a copy whose accuracy a
 *      relayer lowered is refused on-chain and by the node (the nodes signed the accuracy);
 *   2. the same live proof sent to two consumers: the sample vault (hardware-timestamped networks only, 100 ns)
 *      refuses it with `Insufficient accuracy`, explained (signed bound against the contract's, and the tier the
 *      contract needs); AttestedCheckpoint (a software mesh's bound, 10 ms) accepts it;
 *   3. a proof pushed: the relayer's pusher stores a fresh proof in each chain's oracle;
 *   4. a scheduled call fulfilled: a user schedules a call on alpha three seconds ahead, the relayer's keeper
 *      executes it with an attested proof and collects the bounty;
 *   5. a time message bridged: a user sends alpha's time to beta, the relayer delivers it;
 *   6. a replay refused: delivering the same message again reverts with TimeBridgeAlreadyDelivered.
 *
 * Returns what it saw, for the tests (test/relayer/network.test.ts).
 */
import { keccak256, parseEther, parseEventLogs, toHex, type Hex } from "viem";
import { attestedCheckpointAbi, timeBridgeAbi, timeLockedVaultAbi, timeOracleAbi, timeSchedulerAbi } from "../abi";
import { createClusterClient, createTimeClient, explainConsumerProof, type ExplainedConsumerProof } from "../client";
import { decodeRevert } from "../lib/revert";
import { CALL_STATUS, type TimeProof } from "../protocol/types";
import { confirmed, pollUntil } from "./localUser";
import type { LocalChain, LocalNetwork } from "./network";

const NS_PER_MS = 1_000_000n;
/** The call's lead time: long enough that the keeper has to wait for it. */
const CALL_LEAD_MS = 3_000n;

/** What one consumer did with the live proof: the revert string it gave (null: accepted) and the explanation. */
export interface ConsumerOutcome {
  contract: string;
  revertReason: string | null;
  explained: ExplainedConsumerProof;
}

export interface TourResult {
  proof: { endpoint: string; entries: number; quorum: bigint; validOnChain: boolean; tamperedValidOnChain: boolean; tamperedOffChainReason: string | null };
  consumers: { vault: ConsumerOutcome; checkpoint: ConsumerOutcome };
  pushed: { chain: string; nanoMoment: bigint }[];
  call: { callId: Hex; executeAtNs: bigint; executedAtNs: bigint; latenessMs: number; status: string };
  message: { messageId: Hex; sourceBlock: bigint; targetBlock: bigint; networkTimeNs: bigint };
  replay: { errorName: string };
}

function iso(ns: bigint): string {
  return `${new Date(Number(ns / NS_PER_MS)).toISOString().slice(0, -1)}${(ns % NS_PER_MS).toString().padStart(6, "0")}Z`;
}

export async function runTour(network: LocalNetwork, log: (line: string) => void, timeoutMs = 60_000): Promise<TourResult> {
  const [alpha, beta] = network.chains as [LocalChain, LocalChain];

  log("1. A proof from the attesting nodes, verified on-chain; a copy with a lowered accuracy refused");
  const cluster = createClusterClient({ endpoints: network.nodes });
  let proofResult: TourResult["proof"];
  let liveProof: TimeProof;
  try {
    const fetched = await pollUntil(() => cluster.getCurrentTime(), "a proof from the nodes", timeoutMs);
    const { proof } = fetched;
    liveProof = proof;
    const entries = (proof.nodeSignature.length - 2) / 160;
    const quorum = await alpha.publicClient.readContract({ address: alpha.deployment.oracle, abi: timeOracleAbi, functionName: "nodeQuorum" });
    const verifies = (candidate: TimeProof) =>
      alpha.publicClient.readContract({ address: alpha.deployment.oracle, abi: timeOracleAbi, functionName: "verifyTimeProof", args: [candidate] });
    const tampered = { ...proof, accuracy: Math.max(0, proof.accuracy - 1) };
    const single = createTimeClient({ endpoint: fetched.endpoint });
    let tamperedOffChainReason: string | null;
    try {
      tamperedOffChainReason = (await single.verifyRemote(tampered)).reason;
    } finally {
      single.close();
    }
    proofResult = { endpoint: fetched.endpoint, entries, quorum, validOnChain: await verifies(proof), tamperedValidOnChain: await verifies(tampered), tamperedOffChainReason };
    log(`   GET ${fetched.endpoint}/time/current: ${iso(proof.nanoMoment)}, accuracy ${proof.accuracy} ns, ${entries} node entries (oracle nodeQuorum ${quorum})`);
    log(`   alpha oracle verifyTimeProof: ${proofResult.validOnChain}`);
    log(`   the same proof with accuracy ${tampered.accuracy} ns (a relayer's edit): on-chain ${proofResult.tamperedValidOnChain}, the node says ${tamperedOffChainReason ?? "valid"}`);
    if (tamperedOffChainReason === "unknown-node") {
      // The rule's name is right but puzzling here: say what happened to the signatures.
      log(`     why: the nodes signed accuracy ${proof.accuracy} ns; with ${tampered.accuracy} ns their signatures no longer match, so each entry recovers to an address no one registered`);
    }
  } finally {
    cluster.close();
  }

  log("2. The same proof sent to two contracts: the sample vault (hardware tier) and AttestedCheckpoint (software mesh tier)");
  const consumers = await sendToConsumers(alpha, liveProof, log);

  log("3. Proof pushed: the relayer keeps each oracle's stored proof fresh");
  const pushed: TourResult["pushed"] = [];
  for (const chain of network.chains) {
    const proof = await pollUntil(
      () => chain.publicClient.readContract({ address: chain.deployment.oracle, abi: timeOracleAbi, functionName: "getCurrentTime" }),
      `a proof stored on ${chain.name}`,
      timeoutMs,
    );
    pushed.push({ chain: chain.name, nanoMoment: proof.nanoMoment });
    log(`   ${chain.name}: oracle ${chain.deployment.oracle} holds a proof of ${iso(proof.nanoMoment)} (accuracy ${proof.accuracy} ns)`);
  }

  log("4. Scheduled call fulfilled: a user schedules a call 3 s ahead on alpha; the relayer's keeper executes it");
  const executeAtNs = BigInt(Date.now()) * NS_PER_MS + CALL_LEAD_MS * NS_PER_MS;
  const scheduled = await confirmed(alpha, alpha.user.writeContract({
    address: alpha.deployment.scheduler!,
    abi: timeSchedulerAbi,
    functionName: "scheduleCall",
    args: [executeAtNs, "0x"],
    value: parseEther("0.001"),
    account: alpha.user.account!,
    chain: alpha.user.chain,
  }));
  const callId = parseEventLogs({ abi: timeSchedulerAbi, logs: scheduled.logs, eventName: "CallScheduled" })[0]!.args.callId;
  log(`   user ${alpha.user.account!.address} scheduled call ${callId} for ${iso(executeAtNs)} with a 0.001 ETH bounty (block ${scheduled.blockNumber})`);
  const status = await pollUntil(
    async () => {
      const value = await alpha.publicClient.readContract({ address: alpha.deployment.scheduler!, abi: timeSchedulerAbi, functionName: "callStatus", args: [callId] });
      return CALL_STATUS[value] === "Scheduled" ? undefined : CALL_STATUS[value];
    },
    "the scheduled call's execution",
    timeoutMs,
  );
  const executedLogs = await alpha.publicClient.getContractEvents({
    address: alpha.deployment.scheduler!,
    abi: timeSchedulerAbi,
    eventName: "CallExecuted",
    args: { callId },
    fromBlock: scheduled.blockNumber,
  });
  const executed = executedLogs[0];
  const executedAtNs = executed?.args.nanoMoment ?? 0n;
  const latenessMs = Number(executedAtNs - executeAtNs) / 1e6;
  log(`   status ${status}: executed by ${executed?.args.executor ?? "?"} with a proof of ${iso(executedAtNs)}, ${latenessMs.toFixed(1)} ms after executeAt (block ${executed?.blockNumber ?? "?"})`);

  log("5. Time message bridged: a user sends alpha's time to beta; the relayer delivers it");
  const sent = await confirmed(alpha, alpha.user.writeContract({
    address: alpha.deployment.bridge!,
    abi: timeBridgeAbi,
    functionName: "sendTime",
    args: [BigInt(beta.chainId)],
    account: alpha.user.account!,
    chain: alpha.user.chain,
  }));
  const { messageId, message } = parseEventLogs({ abi: timeBridgeAbi, logs: sent.logs, eventName: "TimeSent" })[0]!.args;
  log(`   alpha bridge sendTime(${beta.chainId}): message ${messageId}, network time ${iso(message.networkTime)} (block ${sent.blockNumber})`);
  const targetBlock = await pollUntil(
    async () => {
      const block = await beta.publicClient.readContract({ address: beta.deployment.bridge!, abi: timeBridgeAbi, functionName: "deliveredBlock", args: [messageId] });
      return block === 0n ? undefined : block;
    },
    "the message's delivery",
    timeoutMs,
  );
  log(`   beta bridge: delivered in block ${targetBlock}`);

  log("6. Replay refused: delivering the same message again");
  let errorName = "none";
  try {
    await beta.publicClient.simulateContract({
      address: beta.deployment.bridge!,
      abi: timeBridgeAbi,
      functionName: "receiveTime",
      args: [message],
      account: beta.user.account!,
    });
  } catch (error) {
    errorName = decodeRevert(error, timeBridgeAbi)?.errorName ?? "unknown";
  }
  log(`   beta bridge receiveTime(same message): reverts with ${errorName}`);

  return {
    proof: proofResult,
    consumers,
    pushed,
    call: { callId, executeAtNs, executedAtNs, latenessMs, status: status ?? "unknown" },
    message: { messageId, sourceBlock: sent.blockNumber, targetBlock, networkTimeNs: message.networkTime },
    replay: { errorName },
  };
}

/**
 * Step 2: a user sends the live proof to the sample vault (a deposit, then a withdrawal it refuses; simulated, as a
 * wallet would before sending) and to AttestedCheckpoint (a transaction it accepts), and each outcome is explained.
 */
async function sendToConsumers(alpha: LocalChain, proof: TimeProof, log: (line: string) => void): Promise<TourResult["consumers"]> {
  const { vault: vaultAddress, checkpoint: checkpointAddress } = alpha.deployment;
  if (vaultAddress === undefined || checkpointAddress === undefined) throw new Error("the local network deploys the example consumers (deploy option example)");
  const account = alpha.user.account!;
  const deposited = await confirmed(alpha, alpha.user.writeContract({ address: vaultAddress, abi: timeLockedVaultAbi, functionName: "deposit", args: [0n], value: parseEther("0.001"), account, chain: alpha.user.chain }));
  const lockId = parseEventLogs({ abi: timeLockedVaultAbi, logs: deposited.logs, eventName: "Deposited" })[0]!.args.lockId;
  let vaultRevert: string | null = null;
  try {
    await alpha.publicClient.simulateContract({ address: vaultAddress, abi: timeLockedVaultAbi, functionName: "withdraw", args: [lockId, proof], account });
  } catch (error) {
    const decoded = decodeRevert(error, timeLockedVaultAbi);
    vaultRevert = decoded === undefined ? "unknown" : decoded.errorName === "Error" ? String(decoded.args[0]) : decoded.errorName;
  }
  const vault: ConsumerOutcome = { contract: "TimeLockedVault", revertReason: vaultRevert, explained: await explainConsumerProof(alpha.publicClient, vaultAddress, proof) };
  log(`   TimeLockedVault withdraw(lock ${lockId}, proof): ${vaultRevert === null ? "accepted" : `reverts "${vaultRevert}"`}`);
  log(`     why: ${vault.explained.explanation}`);

  const subject = keccak256(toHex("the local network's tour"));
  let checkpointRevert: string | null = null;
  try {
    const receipt = await confirmed(alpha, alpha.user.writeContract({ address: checkpointAddress, abi: attestedCheckpointAbi, functionName: "checkpoint", args: [subject, proof], account, chain: alpha.user.chain }));
    const recorded = parseEventLogs({ abi: attestedCheckpointAbi, logs: receipt.logs, eventName: "Checkpointed" })[0]!.args;
    log(`   AttestedCheckpoint checkpoint(subject, proof): accepted, Checkpointed at ${iso(recorded.nanoMoment)} within ${recorded.accuracy} ns (block ${receipt.blockNumber})`);
  } catch (error) {
    const decoded = decodeRevert(error, attestedCheckpointAbi);
    checkpointRevert = decoded === undefined ? String(error) : decoded.errorName === "Error" ? String(decoded.args[0]) : decoded.errorName;
    log(`   AttestedCheckpoint checkpoint(subject, proof): reverts "${checkpointRevert}"`);
  }
  const checkpoint: ConsumerOutcome = { contract: "AttestedCheckpoint", revertReason: checkpointRevert, explained: await explainConsumerProof(alpha.publicClient, checkpointAddress, proof) };
  log(`     why: ${checkpoint.explained.explanation}`);
  return { vault, checkpoint };
}
