/**
 * The relayer across real reorgs: two anvil chains (scripts/chainControl.ts: anvil_reorg replaces the last blocks
 * with a competing history of the same height), an attesting node, `ats-relayer` with 3 confirmations and its
 * pusher off (pushes only when asked, POST /push/:chainId). Both chains mine only when a test says so, so that
 * every block, and so every depth, is the test's.
 *
 * - A reorg shallower than the confirmations, with a bridge message, a scheduled call and a proof push in flight:
 *   the message and the call the new history keeps (in another block) are delivered and executed once, the push
 *   whose block was replaced lands once (the relayer sends its own signed transaction again), and the message and
 *   the call the new history dropped were never seen by the relayer: never delivered, never executed, no item.
 * - A reorg deeper than the confirmations, after the relayer acted on a message and a call and while its push is
 *   in flight: the call is orphaned (its item says which block left the chain) and never executed; the message,
 *   whose delivery waits in the target's pool, is orphaned too and its transaction cancelled (a no-op outbids it at
 *   its nonce): never delivered; the push lands once.
 * - A reorg deeper than the confirmations while a confirmed message waits to be sent (held before the submitter by
 *   the fee cap, deterministically): the relayer looks at the message's source event just before each send, finds
 *   it gone and never sends it (orphaned, the store says which event of which block); a message below the reorg,
 *   and a reorg shallower than the confirmations before it, leave a delivery that is made once.
 *
 * Exactly-once is read from the chains (TimeReceived, CallExecuted, the push transaction's receipt) and from the
 * relayer's store after it stopped.
 */
import { expect } from "chai";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import hre from "hardhat";
import pino from "pino";
import { parseEther, parseEventLogs, type Hex, type TransactionReceipt } from "viem";
import { timeBridgeAbi, timeOracleAbi, timeSchedulerAbi } from "../../abi";
import { createTimeClient } from "../../client";
import { CALL_STATUS } from "../../protocol/types";
import { callItemId, messageItemId } from "../../relayer/worker";
import { userTxFields } from "../../scripts/localUser";
import { LOCAL_RELAYER_API_KEY, startLocalNetwork, type LocalChain, type LocalNetwork } from "../../scripts/network";
import { apiItems, deliveriesOf, executionsOf, expectStoreSettled, pollUntil, settledItems, type ApiItem } from "./helpers";

/** Blocks on top of an event before the relayer acts on it. */
const CONFIRMATIONS = 3;
/** The relayer's fee cap here; a base fee of HELD_BASE_FEE_WEI holds every send on a chain (FeeAboveCapError). */
const MAX_FEE_PER_GAS_WEI = 100_000_000_000n;
const HELD_BASE_FEE_WEI = 2n * MAX_FEE_PER_GAS_WEI;
const NORMAL_BASE_FEE_WEI = 1_000_000_000n;

describe(`relayer across real reorgs (2 anvil chains, ${CONFIRMATIONS} confirmations, anvil_reorg)`, function () {
  this.timeout(300_000);
  let dir: string;
  let network: LocalNetwork;
  let alpha: LocalChain;
  let beta: LocalChain;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-reorg-"));
    network = await startLocalNetwork({
      hre,
      dir,
      meshNodes: 1,
      chainKind: "anvil",
      confirmations: CONFIRMATIONS,
      nodeLogger: pino({ level: "silent" }),
      relayerSettings: { pollIntervalMs: 100, retryBaseMs: 200, retryMaxMs: 2_000, pushHeartbeatMs: 0, maxFeePerGasWei: MAX_FEE_PER_GAS_WEI.toString() },
    });
    [alpha, beta] = network.chains as [LocalChain, LocalChain];
  });

  after(async () => {
    await network?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    for (const chain of network.chains) {
      await chain.control.setIntervalMining(0);
      await chain.control.setAutomine(false); // blocks only from control.mine and control.reorg
    }
  });

  afterEach(async () => {
    await network.stopRelayer("SIGKILL");
    for (const chain of network.chains) {
      await chain.control.setAutomine(true);
      await chain.control.setIntervalMining(1_000);
    }
  });

  /** A user's fresh proof stored on `source` and its time sent to `target`: the two transactions, in the pool. */
  async function queueSendTime(source: LocalChain, target: LocalChain): Promise<Hex[]> {
    const client = createTimeClient({ endpoint: network.nodes[0]! });
    try {
      const { proof } = await client.getCurrentTime();
      const store = await source.user.writeContract({ address: source.deployment.oracle, abi: timeOracleAbi, functionName: "submitTimeProof", args: [proof], ...(await userTxFields(source)) });
      const send = await source.user.writeContract({ address: source.deployment.bridge!, abi: timeBridgeAbi, functionName: "sendTime", args: [BigInt(target.chainId)], ...(await userTxFields(source)) });
      return [store, send];
    } finally {
      client.close();
    }
  }

  /** A user's call scheduled `leadMs` ahead, in the pool. */
  async function queueScheduleCall(chain: LocalChain, leadMs: number): Promise<Hex> {
    const executeAt = (BigInt(Date.now()) + BigInt(leadMs)) * 1_000_000n;
    return chain.user.writeContract({ address: chain.deployment.scheduler!, abi: timeSchedulerAbi, functionName: "scheduleCall", args: [executeAt, "0x"], value: parseEther("0.001"), ...(await userTxFields(chain)) });
  }

  async function receipt(chain: LocalChain, hash: Hex): Promise<TransactionReceipt | null> {
    return chain.publicClient.getTransactionReceipt({ hash }).catch(() => null);
  }

  async function succeeded(chain: LocalChain, hash: Hex): Promise<TransactionReceipt> {
    const mined = await receipt(chain, hash);
    expect(mined?.status, `user transaction ${hash}`).to.equal("success");
    return mined!;
  }

  async function messageIdOf(chain: LocalChain, sendHash: Hex): Promise<Hex> {
    return parseEventLogs({ abi: timeBridgeAbi, logs: (await succeeded(chain, sendHash)).logs, eventName: "TimeSent" })[0]!.args.messageId;
  }

  async function callIdOf(chain: LocalChain, scheduleHash: Hex): Promise<Hex> {
    return parseEventLogs({ abi: timeSchedulerAbi, logs: (await succeeded(chain, scheduleHash)).logs, eventName: "CallScheduled" })[0]!.args.callId;
  }

  async function item(id: string): Promise<ApiItem | undefined> {
    return (await apiItems(network.relayer!.api)).find((entry) => entry.id === id);
  }

  /** Asks the relayer for a push on `chain` and waits until its transaction is in the pool; returns the item id and the hash. */
  async function pushInFlight(chain: LocalChain): Promise<{ itemId: string; hash: Hex }> {
    const asked = await fetch(`${network.relayer!.api}/push/${chain.chainId}`, { method: "POST", headers: { "x-api-key": LOCAL_RELAYER_API_KEY } });
    expect(asked.status).to.equal(202);
    return pollUntil(async () => {
      const push = (await apiItems(network.relayer!.api)).find((entry) => entry.id.startsWith(`push:${chain.chainId}:`) && entry.status === "submitted");
      if (push === undefined) return undefined;
      const body = (await (await fetch(`${network.relayer!.api}/items/${push.id}`)).json()) as { txs: { hash: Hex }[] };
      return body.txs.length > 0 ? { itemId: push.id, hash: body.txs[0]!.hash } : undefined;
    }, `a push on ${chain.name} in flight`);
  }

  /** The transactions the relayer recorded for an item (GET /items/<id>). */
  async function txsOf(itemId: string): Promise<{ hash: Hex; state: string }[]> {
    return ((await (await fetch(`${network.relayer!.api}/items/${itemId}`)).json()) as { txs: { hash: Hex; state: string }[] }).txs;
  }

  /** Holds every send on `chain` before the submitter (its base fee above the relayer's cap), or lets them go. */
  async function holdSends(chain: LocalChain, held: boolean): Promise<void> {
    await chain.control.setNextBlockBaseFeePerGas(held ? HELD_BASE_FEE_WEI : NORMAL_BASE_FEE_WEI);
    await chain.control.mine(1);
  }

  async function rawOf(chain: LocalChain, hash: Hex): Promise<Hex> {
    const raw = (await chain.control.call("eth_getRawTransactionByHash", [hash])) as Hex | null;
    if (raw === null) throw new Error(`no raw transaction ${hash} on ${chain.name}`);
    return raw;
  }

  async function resumeMining(): Promise<void> {
    for (const chain of network.chains) {
      await chain.control.setAutomine(true);
      await chain.control.setIntervalMining(1_000);
    }
  }

  /** The push item `itemId` finished once, by a transaction that succeeded on the chain's canonical history. */
  async function expectPushedOnce(chain: LocalChain, itemId: string): Promise<void> {
    const pushed = await item(itemId);
    expect(pushed?.status, itemId).to.equal("done");
    const [, hash] = /by (0x[0-9a-f]{64})$/.exec(pushed!.outcome ?? "") ?? [];
    expect(hash, `the push's outcome names its transaction: ${pushed!.outcome}`).to.be.a("string");
    expect((await receipt(chain, hash as Hex))?.status).to.equal("success");
    const pushes = (await apiItems(network.relayer!.api)).filter((entry) => entry.id.startsWith(`push:${chain.chainId}:`) && entry.id.endsWith(":forced"));
    expect(pushes.map((entry) => entry.id)).to.deep.equal([itemId]);
  }

  it("a reorg shallower than the confirmations: what the new history keeps is delivered, executed and pushed once; what it dropped never", async () => {
    await network.startRelayer();
    // A push on beta, mined with nothing on top of it yet.
    const push = await pushInFlight(beta);
    await beta.control.mine(1);
    expect((await receipt(beta, push.hash))?.status, "the push is mined before the reorg").to.equal("success");
    // A fresh common ancestor: anvil's new blocks count their timestamps from it, and a kept proof must be fresh there.
    await alpha.control.mine(1);
    // Block K: a message and a call the new history will keep. Block O: a message and a call it will drop.
    const kept = [...(await queueSendTime(alpha, beta)), await queueScheduleCall(alpha, 4_000)];
    await alpha.control.mine(1);
    const dropped = [...(await queueSendTime(alpha, beta)), await queueScheduleCall(alpha, 4_000)];
    await alpha.control.mine(1);
    const keptMessage = await messageIdOf(alpha, kept[1]!);
    const keptCall = await callIdOf(alpha, kept[2]!);
    const droppedMessage = await messageIdOf(alpha, dropped[1]!);
    const droppedCall = await callIdOf(alpha, dropped[2]!);
    const keptBlockBefore = (await succeeded(alpha, kept[1]!)).blockHash;

    // alpha: the last 2 blocks (K, O) replaced; the new first block holds K's transactions again. beta: the push's block replaced.
    const keptRaw = await Promise.all(kept.map((hash) => rawOf(alpha, hash)));
    await alpha.control.reorg(2, keptRaw.map((raw) => ({ raw, block: 0 })));
    await beta.control.reorg(1);
    expect((await succeeded(alpha, kept[1]!)).blockHash, "the kept message is in another block").to.not.equal(keptBlockBefore);
    for (const hash of dropped) expect(await receipt(alpha, hash), "a dropped transaction").to.equal(null);
    expect(await receipt(beta, push.hash), "the push is gone with its block").to.equal(null);

    await resumeMining();
    const ids = [messageItemId(beta.chainId, keptMessage), callItemId(alpha.chainId, keptCall), push.itemId];
    const items = await settledItems(network, ids);
    for (const id of ids) expect(items.find((entry) => entry.id === id)?.status, id).to.equal("done");
    expect(await deliveriesOf(beta, [keptMessage, droppedMessage])).to.deep.equal([1, 0]);
    expect(await executionsOf(alpha, [keptCall, droppedCall])).to.deep.equal([1, 0]);
    // The dropped events were never confirmed: the relayer never made items of them.
    const known = items.map((entry) => entry.id);
    expect(known).to.not.include(messageItemId(beta.chainId, droppedMessage));
    expect(known).to.not.include(callItemId(alpha.chainId, droppedCall));
    await expectPushedOnce(beta, push.itemId);
    await expectStoreSettled(network, dir);
  });

  it("a reorg deeper than the confirmations: the call and the message it acted on are orphaned (the store says which block left) and never executed or delivered, the push lands once", async () => {
    await network.startRelayer();
    const leadMs = 6_000;
    const queued = [...(await queueSendTime(alpha, beta)), await queueScheduleCall(alpha, leadMs)];
    const executeAtMs = Date.now() + leadMs;
    await alpha.control.mine(1);
    const sourceBlock = (await succeeded(alpha, queued[1]!)).blockNumber;
    const message = await messageIdOf(alpha, queued[1]!);
    const call = await callIdOf(alpha, queued[2]!);
    const messageItem = messageItemId(beta.chainId, message);
    const callItem = callItemId(alpha.chainId, call);
    // Confirmed: the relayer indexes both; the delivery waits in beta's pool (beta mines nothing), the call for executeAt.
    await alpha.control.mine(CONFIRMATIONS);
    await pollUntil(async () => ((await item(messageItem))?.status === "submitted" && (await item(callItem))?.status === "pending" ? true : undefined), "the relayer acting on both");
    const push = await pushInFlight(alpha);
    await alpha.control.mine(1);
    expect((await receipt(alpha, push.hash))?.status, "the push is mined before the reorg").to.equal("success");

    // Every block from the events' up: CONFIRMATIONS + 2 deep, a new history without any of them.
    await alpha.control.reorg(CONFIRMATIONS + 2);
    for (const hash of [...queued, push.hash]) expect(await receipt(alpha, hash)).to.equal(null);
    await alpha.control.mine(1); // a block on top of the new history, so that the relayer's cursor check sees it
    await pollUntil(async () => {
      const metrics = await (await fetch(`${network.relayer!.api}/metrics`)).text();
      return /ats_relayer_reorgs_total\{chain="alpha"\} [1-9]/.test(metrics) ? true : undefined;
    }, "the walk back");
    const orphaned = await item(callItem);
    expect(orphaned?.status).to.equal("orphaned");
    expect(orphaned?.outcome).to.match(new RegExp(`^orphaned: its source block ${sourceBlock} left the canonical chain \\(a reorg back to (block \\d+|the start block)\\)$`));
    const orphanedMessage = await item(messageItem);
    expect(orphanedMessage?.status).to.equal("orphaned");
    expect(orphanedMessage?.outcome).to.match(new RegExp(`^orphaned: its source block ${sourceBlock} left the canonical chain`));
    // Its delivery, in beta's pool, is cancelled: a no-op at its nonce takes its place there.
    const delivery = await txsOf(messageItem);
    expect(delivery).to.have.length(1);
    await pollUntil(async () => ((await beta.control.call("eth_getTransactionByHash", [delivery[0]!.hash])) === null ? true : undefined), "the delivery's cancellation");

    await resumeMining();
    const items = await settledItems(network, [push.itemId]);
    expect(items.find((entry) => entry.id === messageItem)?.status).to.equal("orphaned");
    expect(await deliveriesOf(beta, [message])).to.deep.equal([0]);
    await expectPushedOnce(alpha, push.itemId);
    // Past executeAt the keeper would have executed a call it still held; an orphaned one stays so.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, executeAtMs - Date.now()) + 1_500));
    expect((await item(callItem))?.status).to.equal("orphaned");
    expect(await executionsOf(alpha, [call])).to.deep.equal([0]);
    const status = await alpha.publicClient.readContract({ address: alpha.deployment.scheduler!, abi: timeSchedulerAbi, functionName: "callStatus", args: [call] });
    expect(CALL_STATUS[status]).to.equal("None");
    await expectStoreSettled(network, dir);
  });

  it("a reorg deeper than the confirmations while a confirmed message waits to be sent: never sent, the store says why; a message below the reorg, and a shallower reorg, leave one delivery", async () => {
    await holdSends(beta, true);
    await network.startRelayer();
    const keptSend = (await queueSendTime(alpha, beta))[1]!;
    await alpha.control.mine(1);
    await alpha.control.mine(CONFIRMATIONS + 2); // kept's block stays below the deep reorg
    const goneSend = (await queueSendTime(alpha, beta))[1]!;
    await alpha.control.mine(1);
    await alpha.control.mine(CONFIRMATIONS);
    const keptBlock = (await succeeded(alpha, keptSend)).blockNumber;
    const goneBlock = (await succeeded(alpha, goneSend)).blockNumber;
    const kept = await messageIdOf(alpha, keptSend);
    const gone = await messageIdOf(alpha, goneSend);
    const keptItem = messageItemId(beta.chainId, kept);
    const goneItem = messageItemId(beta.chainId, gone);
    // Both confirmed, decided, simulated, their source looked at, and held by the fee cap at the submitter.
    await pollUntil(async () => {
      const both = [await item(keptItem), await item(goneItem)];
      return both.every((entry) => entry?.status === "pending" && /above the cap/.test(entry.lastError ?? "")) ? true : undefined;
    }, "both messages held before their send");

    await alpha.control.reorg(CONFIRMATIONS - 1); // shallower than the confirmations: neither message's block
    await alpha.control.reorg(CONFIRMATIONS + 1); // from gone's block up: a history without it
    expect(await receipt(alpha, goneSend), "gone's send is gone").to.equal(null);
    expect((await succeeded(alpha, keptSend)).blockNumber, "kept's send stays in its block").to.equal(keptBlock);
    await alpha.control.mine(1);
    const orphaned = await pollUntil(async () => {
      const entry = await item(goneItem);
      return entry?.status === "orphaned" ? entry : undefined;
    }, "gone's item orphaned by the look at its source");
    expect(orphaned.outcome).to.equal(
      `orphaned: its source event (TimeSent in block ${goneBlock} of alpha) is no longer on the canonical chain (a reorg deeper than the confirmations took it back): never sent`,
    );

    await holdSends(beta, false);
    await resumeMining();
    const items = await settledItems(network, [keptItem, goneItem]);
    expect(items.find((entry) => entry.id === keptItem)?.status).to.equal("done");
    expect(items.find((entry) => entry.id === goneItem)?.status).to.equal("orphaned");
    expect(await deliveriesOf(beta, [kept, gone])).to.deep.equal([1, 0]);
    expect(await txsOf(goneItem), "no transaction was ever signed for it").to.deep.equal([]);
    await expectStoreSettled(network, dir);
  });
});
