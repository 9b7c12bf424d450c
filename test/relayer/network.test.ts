/**
 * The relayer end to end, once on two Hardhat node processes and once on two anvil processes (CHAIN_KINDS), with a
 * real attesting node and `ats-relayer` as a child process (scripts/network.ts); the chains' controls are
 * scripts/chainControl.ts, so the same steps run on both. Exactly-once is read from the chains themselves (TimeReceived / CallExecuted events) and
 * from the relayer's own store after it stopped (no open transaction, its nonce equal to the chain's).
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import hre from "hardhat";
import pino from "pino";
import { parseEther, parseEventLogs, type Hex } from "viem";
import { timeSchedulerAbi } from "../../abi";
import { CALL_STATUS } from "../../protocol/types";
import { CRASH_POINTS } from "../../relayer/submitter";
import { callItemId, messageItemId } from "../../relayer/worker";
import { CHAIN_KINDS } from "../../scripts/chainProcess";
import { startLocalNetwork, type LocalChain, type LocalNetwork } from "../../scripts/network";
import { runTour } from "../../scripts/tour";
import { apiItems, deliveriesOf, executionsOf, expectStoreSettled, pollUntil, scheduleCall, sendFreshTime, settledItems } from "./helpers";

for (const chainKind of CHAIN_KINDS) describe(`relayer end to end (2 ${chainKind} chains, an attesting node, ats-relayer processes)`, function () {
  this.timeout(240_000);
  let dir: string;
  let network: LocalNetwork;
  let alpha: LocalChain;
  let beta: LocalChain;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-e2e-"));
    network = await startLocalNetwork({ hre, dir, meshNodes: 1, chainKind, nodeLogger: pino({ level: "silent" }), relayerSettings: { pollIntervalMs: 100, retryBaseMs: 200, retryMaxMs: 2_000 } });
    [alpha, beta] = network.chains as [LocalChain, LocalChain];
  });

  after(async () => {
    await network?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  afterEach(async () => {
    await network.stopRelayer("SIGKILL");
  });

  const expectStoreConsistent = () => expectStoreSettled(network, dir);

  it("runs the tour: a live proof refused by the sample vault (explained) and accepted by AttestedCheckpoint, a proof pushed, a scheduled call executed by the keeper, a message bridged, its replay refused", async () => {
    await network.startRelayer();
    const result = await runTour(network, () => undefined);
    expect(result.proof).to.include({ entries: 1, quorum: 1n, validOnChain: true, tamperedValidOnChain: false });
    expect(result.proof.tamperedOffChainReason).to.be.a("string").and.not.equal("");
    // The live proof: the sample vault (100 ns) refuses it, explained; the software-mesh consumer accepts it.
    expect(result.consumers.vault.revertReason).to.equal("Insufficient accuracy");
    expect(result.consumers.vault.explained).to.include({ accepted: false, refusal: "Insufficient accuracy", maxAccuracyNs: 100 });
    expect(result.consumers.vault.explained.explanation).to.match(/^refused with "Insufficient accuracy": the proof's signed bound is [\d,]+ ns and the contract accepts at most 100 ns; this contract needs a hardware-timestamped network .*tier AccuracyTiers\.HARDWARE_TIMESTAMPED_NS \(100 ns\)$/);
    expect(result.consumers.checkpoint.revertReason).to.equal(null);
    expect(result.consumers.checkpoint.explained).to.include({ accepted: true, refusal: null, maxAccuracyNs: 10_000_000 });
    expect(result.pushed.map((p) => p.chain)).to.deep.equal(["alpha", "beta"]);
    expect(result.call.status).to.equal("Executed");
    expect(result.call.executedAtNs >= result.call.executeAtNs).to.equal(true);
    expect(result.message.targetBlock > 0n).to.equal(true);
    expect(result.replay.errorName).to.equal("TimeBridgeAlreadyDelivered");
    expect(await deliveriesOf(beta, [result.message.messageId])).to.deep.equal([1]);
    await expectStoreConsistent();
  });

  for (const point of CRASH_POINTS) {
    it(`delivers every message and executes every call exactly once across a crash ${point} of a submission`, async () => {
      const relayer = await network.startRelayer({ ATS_RELAYER_TEST_CRASH_AT: `${point}:1` });
      const exited = new Promise<NodeJS.Signals | null>((resolve) => relayer.child.once("exit", (_code, signal) => resolve(signal)));
      const messages: Hex[] = [];
      const calls: Hex[] = [];
      // Both directions, so that the crash hits whichever chain submits first.
      messages.push(await sendFreshTime(network, alpha, beta));
      messages.push(await sendFreshTime(network, beta, alpha));
      calls.push(await scheduleCall(alpha, 500));
      expect(await exited, "the relayer crashed at the hook").to.equal("SIGKILL");
      network.relayer = undefined;
      messages.push(await sendFreshTime(network, alpha, beta));
      await network.startRelayer();
      const ids = [messageItemId(beta.chainId, messages[0]!), messageItemId(alpha.chainId, messages[1]!), messageItemId(beta.chainId, messages[2]!), callItemId(alpha.chainId, calls[0]!)];
      const items = await settledItems(network, ids);
      for (const id of ids) expect(items.find((item) => item.id === id)?.status, id).to.equal("done");
      expect(await deliveriesOf(beta, [messages[0]!, messages[2]!])).to.deep.equal([1, 1]);
      expect(await deliveriesOf(alpha, [messages[1]!])).to.deep.equal([1]);
      expect(await executionsOf(alpha, calls)).to.deep.equal([1]);
      await expectStoreConsistent();
    });
  }

  it("delivers exactly once across SIGKILLs at random moments while messages and calls keep coming", async () => {
    const messages: Hex[] = [];
    const calls: Hex[] = [];
    for (let round = 0; round < 3; round++) {
      await network.startRelayer();
      messages.push(await sendFreshTime(network, alpha, beta));
      calls.push(await scheduleCall(alpha, 200));
      messages.push(await sendFreshTime(network, alpha, beta));
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.floor(Math.random() * 600)));
      await network.stopRelayer("SIGKILL");
    }
    await network.startRelayer();
    const ids = [...messages.map((id) => messageItemId(beta.chainId, id)), ...calls.map((id) => callItemId(alpha.chainId, id))];
    const items = await settledItems(network, ids);
    for (const id of ids) expect(items.find((item) => item.id === id)?.status, id).to.equal("done");
    expect(await deliveriesOf(beta, messages)).to.deep.equal(messages.map(() => 1));
    expect(await executionsOf(alpha, calls)).to.deep.equal(calls.map(() => 1));
    await expectStoreConsistent();
  });

  it("re-broadcasts a transaction the target chain dropped from its pool, at the same nonce", async () => {
    await beta.control.setIntervalMining(0);
    await beta.control.setAutomine(false);
    try {
      await network.startRelayer();
      const messageId = await sendFreshTime(network, alpha, beta);
      const itemId = messageItemId(beta.chainId, messageId);
      const submitted = await pollUntil(async () => {
        const response = await fetch(`${network.relayer!.api}/items/${itemId}`);
        if (response.status !== 200) return undefined;
        const body = (await response.json()) as { item: { status: string }; txs: { hash: Hex; nonce: number }[] };
        return body.item.status === "submitted" && body.txs.length > 0 ? body.txs[0]! : undefined;
      }, "the message's submission");
      expect(await beta.control.dropTransaction(submitted.hash)).to.equal(true);
      await beta.control.setAutomine(true);
      await beta.control.setIntervalMining(1_000);
      const items = await settledItems(network, [itemId]);
      expect(items.find((item) => item.id === itemId)?.status).to.equal("done");
      expect(await deliveriesOf(beta, [messageId])).to.deep.equal([1]);
      const receipt = await beta.publicClient.getTransactionReceipt({ hash: submitted.hash });
      expect(receipt.status, "the same signed transaction was mined").to.equal("success");
      await expectStoreConsistent();
    } finally {
      await beta.control.setAutomine(true);
      await beta.control.setIntervalMining(1_000);
    }
  });

  it("delivers again, once, when a reorg of the target chain removes an unconfirmed delivery", async () => {
    await beta.control.setIntervalMining(0); // no block on top of the delivery: it stays unconfirmed
    try {
      const snapshot = await beta.control.snapshot();
      await network.startRelayer();
      const messageId = await sendFreshTime(network, alpha, beta);
      await pollUntil(async () => ((await deliveriesOf(beta, [messageId]))[0] === 1 ? true : undefined), "the first delivery");
      expect(await beta.control.revert(snapshot)).to.equal(true);
      expect(await deliveriesOf(beta, [messageId])).to.deep.equal([0]);
      await beta.control.setIntervalMining(1_000);
      const itemId = messageItemId(beta.chainId, messageId);
      const items = await settledItems(network, [itemId]);
      expect(items.find((item) => item.id === itemId)?.status).to.equal("done");
      expect(await deliveriesOf(beta, [messageId])).to.deep.equal([1]);
      await expectStoreConsistent();
    } finally {
      await beta.control.setIntervalMining(1_000);
    }
  });

  it("never acts on an event of a block that is not yet confirmed, and forgets it when a reorg removes it", async () => {
    // The relayer waits for 1 confirmation: with no block on top, the message is seen by nobody but the chain.
    await alpha.control.setIntervalMining(0);
    try {
      await network.startRelayer();
      const snapshot = await alpha.control.snapshot();
      const orphan = await sendFreshTime(network, alpha, beta);
      expect(await alpha.control.revert(snapshot)).to.equal(true);
      await alpha.control.setIntervalMining(1_000);
      const kept = await sendFreshTime(network, alpha, beta);
      const keptId = messageItemId(beta.chainId, kept);
      await settledItems(network, [keptId]);
      const items = await apiItems(network.relayer!.api);
      expect(items.map((item) => item.id)).to.not.include(messageItemId(beta.chainId, orphan));
      expect(await deliveriesOf(beta, [orphan, kept])).to.deep.equal([0, 1]);
    } finally {
      await alpha.control.setIntervalMining(1_000);
    }
  });

  it("walks back to the common ancestor after a source reorg below its cursor, and cancels the delivery in flight of a message whose send it took back: never delivered", async () => {
    await alpha.control.setIntervalMining(0);
    await beta.control.setIntervalMining(0);
    await beta.control.setAutomine(false); // the delivery waits in beta's pool
    try {
      await network.startRelayer();
      const snapshot = await alpha.control.snapshot();
      const message = await sendFreshTime(network, alpha, beta);
      await alpha.control.mine(1); // one confirmation: the relayer indexes the message and sends its delivery
      const itemId = messageItemId(beta.chainId, message);
      await pollUntil(async () => ((await apiItems(network.relayer!.api)).find((item) => item.id === itemId)?.status === "submitted" ? true : undefined), "the delivery's submission");
      expect(await alpha.control.revert(snapshot)).to.equal(true);
      await alpha.control.mine(4); // another history, longer than the cursor's
      await pollUntil(async () => {
        const metrics = await (await fetch(`${network.relayer!.api}/metrics`)).text();
        return /ats_relayer_reorgs_total\{chain="alpha"\} [1-9]/.test(metrics) ? true : undefined;
      }, "the walk back");
      const orphaned = (await apiItems(network.relayer!.api)).find((item) => item.id === itemId);
      expect(orphaned?.status).to.equal("orphaned");
      expect(orphaned?.outcome).to.match(/^orphaned: its source block \d+ left the canonical chain/);
      // The delivery waiting in beta's pool is cancelled: a no-op at its nonce takes its place there.
      const { txs } = (await (await fetch(`${network.relayer!.api}/items/${itemId}`)).json()) as { txs: { hash: Hex }[] };
      expect(txs).to.have.length(1);
      await pollUntil(async () => ((await beta.control.call("eth_getTransactionByHash", [txs[0]!.hash])) === null ? true : undefined), "the delivery's cancellation");
      await alpha.control.setIntervalMining(1_000);
      await beta.control.setAutomine(true);
      await beta.control.setIntervalMining(1_000);
      const items = await settledItems(network, []);
      expect(items.find((item) => item.id === itemId)?.status).to.equal("orphaned");
      expect(await deliveriesOf(beta, [message])).to.deep.equal([0]);
      await pollUntil(async () => (network.relayer !== undefined && (await fetch(`${network.relayer.api}/health`)).status === 200 ? true : undefined), "health");
      await expectStoreConsistent();
    } finally {
      await beta.control.setAutomine(true);
      await alpha.control.setIntervalMining(1_000);
      await beta.control.setIntervalMining(1_000);
    }
  });

  it("cancels a scheduled call whose CallScheduled block a reorg took back after it was indexed: orphaned, never executed", async () => {
    await alpha.control.setIntervalMining(0);
    try {
      await network.startRelayer();
      const snapshot = await alpha.control.snapshot();
      const leadMs = 2_000;
      const callId = await scheduleCall(alpha, leadMs);
      const executeAtMs = Date.now() + leadMs;
      await alpha.control.mine(1); // one confirmation: the relayer indexes the call and waits for executeAt
      const itemId = callItemId(alpha.chainId, callId);
      await pollUntil(async () => ((await apiItems(network.relayer!.api)).find((item) => item.id === itemId)?.status === "pending" ? true : undefined), "the call's indexing");
      expect(await alpha.control.revert(snapshot)).to.equal(true);
      await alpha.control.mine(4); // another history, longer than the cursor's: the call never happened in it
      await pollUntil(async () => {
        const metrics = await (await fetch(`${network.relayer!.api}/metrics`)).text();
        return /ats_relayer_reorgs_total\{chain="alpha"\} [1-9]/.test(metrics) ? true : undefined;
      }, "the walk back");
      expect((await apiItems(network.relayer!.api)).find((item) => item.id === itemId)?.status, "the store says why").to.equal("orphaned");
      // Past executeAt, the keeper would have executed a call it still held; an orphaned one stays so.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, executeAtMs - Date.now()) + 1_500));
      expect((await apiItems(network.relayer!.api)).find((item) => item.id === itemId)?.status).to.equal("orphaned");
      expect(await executionsOf(alpha, [callId])).to.deep.equal([0]);
      const status = await alpha.publicClient.readContract({ address: alpha.deployment.scheduler!, abi: timeSchedulerAbi, functionName: "callStatus", args: [callId] });
      expect(CALL_STATUS[status]).to.equal("None");
      await alpha.control.setIntervalMining(1_000); // blocks again, so that the relayer's pushes settle
      await expectStoreConsistent();
    } finally {
      await alpha.control.setIntervalMining(1_000);
    }
  });

  it("expires a call whose window the chain clock has passed, refunding its caller, and finishes the item as expired", async () => {
    const executeAtNs = (BigInt(Date.now()) + 1_000n) * 1_000_000n;
    const hash = await alpha.user.writeContract({
      address: alpha.deployment.scheduler!,
      abi: timeSchedulerAbi,
      functionName: "scheduleCall",
      args: [executeAtNs, 12_000_000_000n, 50_000, "0x"], // the shortest window: 12 s
      value: parseEther("0.001"),
      account: alpha.user.account!,
      chain: alpha.user.chain,
    });
    const receipt = await alpha.publicClient.waitForTransactionReceipt({ hash });
    const scheduled = parseEventLogs({ abi: timeSchedulerAbi, logs: receipt.logs, eventName: "CallScheduled" })[0]!;
    // The chain clock moves 30 s ahead (the wall clock does not): the window is over by the chain's clock only.
    await alpha.control.increaseTime(30);
    await alpha.control.mine();
    await network.startRelayer();
    const itemId = callItemId(alpha.chainId, scheduled.args.callId);
    const items = await settledItems(network, [itemId]);
    expect(items.find((item) => item.id === itemId)?.outcome).to.match(/^expired in block \d+/);
    const status = await alpha.publicClient.readContract({ address: alpha.deployment.scheduler!, abi: timeSchedulerAbi, functionName: "callStatus", args: [scheduled.args.callId] });
    expect(CALL_STATUS[status]).to.equal("Expired");
    expect(await executionsOf(alpha, [scheduled.args.callId])).to.deep.equal([0]);
  });
});
