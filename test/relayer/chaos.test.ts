/**
 * The relayer against a misbehaving RPC: a chaos proxy on loopback (./chaosProxy.ts) in front of the target chain
 * drops the answer after eth_sendRawTransaction was accepted, serves a stale eth_getTransactionCount, answers
 * "replacement transaction underpriced", times out; and the chain's base fee spikes above the relayer's fee cap;
 * reorgs take back a settled delivery of ours, and another party's delivery seen only at the head.
 * After each, every message is delivered exactly once and the relayer's store is consistent.
 */
import { expect } from "chai";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import hre from "hardhat";
import pino from "pino";
import { timeBridgeAbi } from "../../abi";
import { RelayerStore } from "../../relayer/store";
import type { NetworkFileJson } from "../../wire/network";
import { callItemId, messageItemId } from "../../relayer/worker";
import { localRelayerAddress, startLocalNetwork, type LocalChain, type LocalNetwork } from "../../scripts/network";
import { confirmed } from "../../scripts/localUser";
import { startRelayerProcess, stopRelayerProcess, type RelayerProcess } from "../../scripts/relayerProcess";
import { startChaosProxy, type ChaosProxy } from "./chaosProxy";
import { deliveriesOf, executionsOf, pollUntil, scheduleCall, sendFreshTime } from "./helpers";

const FEE_CAP_WEI = 200_000_000_000n; // 200 gwei

describe("relayer against a chaotic RPC (a JSON-RPC chaos proxy in front of the target chain)", function () {
  this.timeout(180_000);
  let dir: string;
  let network: LocalNetwork;
  let alpha: LocalChain;
  let beta: LocalChain;
  let proxy: ChaosProxy;
  let relayer: RelayerProcess | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-chaos-"));
    network = await startLocalNetwork({ hre, dir, meshNodes: 1, nodeLogger: pino({ level: "silent" }) });
    [alpha, beta] = network.chains as [LocalChain, LocalChain];
    proxy = await startChaosProxy(beta.rpcUrl);
    const file = JSON.parse(readFileSync(network.networkFile, "utf8")) as NetworkFileJson;
    file.chains = file.chains.map((chain) => (chain.chainId === beta.chainId ? { ...chain, rpcUrl: proxy.url } : chain));
    writeFileSync(join(dir, "chaos-network.json"), JSON.stringify(file));
    writeFileSync(
      join(dir, "chaos-relayer.json"),
      JSON.stringify({ networkFile: "chaos-network.json", dataDir: "chaos-data", apiPort: 0, pollIntervalMs: 100, retryBaseMs: 100, retryMaxMs: 2_000, rpcTimeoutMs: 500, feeBumpAfterMs: 3_000, maxFeePerGasWei: FEE_CAP_WEI.toString(), pushHeartbeatMs: 0 }),
    );
    relayer = await startRelayerProcess(join(dir, "chaos-relayer.json"), network.relayerEnv);
  });

  after(async () => {
    await stopRelayerProcess(relayer, "SIGKILL");
    await proxy?.close();
    await network?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The message is delivered once, and the relayer holds no open transaction and the chain's nonce. */
  async function expectDeliveredOnce(messageId: `0x${string}`): Promise<void> {
    const itemId = messageItemId(beta.chainId, messageId);
    await pollUntil(async () => {
      const response = await fetch(`${relayer!.api}/items/${itemId}`);
      if (response.status !== 200) return undefined;
      return ((await response.json()) as { item: { status: string } }).item.status === "done" ? true : undefined;
    }, `delivery of ${itemId}`);
    expect(await deliveriesOf(beta, [messageId])).to.deep.equal([1]);
    await pollUntil(async () => {
      const reader = new RelayerStore(join(dir, "chaos-data"));
      try {
        const chainNonce = await beta.publicClient.getTransactionCount({ address: localRelayerAddress() });
        return reader.openTxs(beta.chainId).length === 0 && reader.nextNonce(beta.chainId) === chainNonce ? true : undefined;
      } finally {
        reader.close();
      }
    }, "the store to settle on the chain's nonce");
  }

  it("an answer dropped after eth_sendRawTransaction was accepted: the same transaction is found mined, nothing is sent twice", async () => {
    proxy.inject({ method: "eth_sendRawTransaction", kind: "drop-answer", remaining: 1 });
    const messageId = await sendFreshTime(network, alpha, beta);
    await expectDeliveredOnce(messageId);
    expect(proxy.hits["drop-answer"]).to.equal(1);
  });

  it("a stale eth_getTransactionCount: the relayer never reuses a mined nonce for good and delivers every message once", async () => {
    proxy.inject({ method: "eth_getTransactionCount", kind: "stale-nonce", remaining: 12, lag: 2 });
    const first = await sendFreshTime(network, alpha, beta);
    const second = await sendFreshTime(network, alpha, beta);
    await expectDeliveredOnce(first);
    await expectDeliveredOnce(second);
    expect(proxy.hits["stale-nonce"]).to.be.greaterThan(0);
  });

  it("'replacement transaction underpriced' for a transaction the pool never took: it is sent again", async () => {
    proxy.inject({ method: "eth_sendRawTransaction", kind: "underpriced", remaining: 1 });
    const messageId = await sendFreshTime(network, alpha, beta);
    await expectDeliveredOnce(messageId);
    expect(proxy.hits.underpriced).to.equal(1);
  });

  it("requests that time out: the failure is counted, and the next ticks deliver", async () => {
    proxy.inject({ method: "eth_getTransactionReceipt", kind: "timeout", remaining: 2 });
    proxy.inject({ method: "eth_estimateGas", kind: "timeout", remaining: 1 });
    const messageId = await sendFreshTime(network, alpha, beta);
    await expectDeliveredOnce(messageId);
    expect(proxy.hits.timeout).to.equal(3);
    const failures = await (await fetch(`${relayer!.api}/metrics`)).text();
    expect(failures).to.match(/ats_relayer_(tick_failures_total\{chain="beta"\}|failures_total\{kind="message",reason="Unavailable"\}) [1-9]/);
  });

  it("a transaction stuck in the pool is replaced at the same nonce with higher fees, and only one of them is mined", async () => {
    await beta.control.setIntervalMining(0);
    await beta.control.setAutomine(false);
    let messageId: `0x${string}`;
    try {
      messageId = await sendFreshTime(network, alpha, beta);
      const itemId = messageItemId(beta.chainId, messageId);
      // feeBumpAfterMs is 3 s here: wait for the replacement.
      const txs = await pollUntil(async () => {
        const response = await fetch(`${relayer!.api}/items/${itemId}`);
        if (response.status !== 200) return undefined;
        const body = (await response.json()) as { txs: { hash: string; nonce: number; maxFeePerGas: string }[] };
        return body.txs.length >= 2 ? body.txs : undefined;
      }, "a fee bump", 30_000);
      expect(new Set(txs.map((tx) => tx.nonce)).size, "one nonce").to.equal(1);
      expect(BigInt(txs[1]!.maxFeePerGas) > BigInt(txs[0]!.maxFeePerGas)).to.equal(true);
    } finally {
      await beta.control.setAutomine(true);
      await beta.control.setIntervalMining(1_000);
    }
    await expectDeliveredOnce(messageId);
  });

  it("a reorg deeper than the confirmation depth takes back a settled delivery: the relayer sends it again at its nonce, and the message is delivered once", async () => {
    const snapshot = await beta.control.snapshot();
    const messageId = await sendFreshTime(network, alpha, beta);
    await expectDeliveredOnce(messageId); // settled: done, and the store's nonce is the chain's
    expect(await beta.control.revert(snapshot)).to.equal(true); // the delivery and its confirmations are gone
    expect(await deliveriesOf(beta, [messageId])).to.deep.equal([0]);
    await pollUntil(async () => ((await deliveriesOf(beta, [messageId]))[0] === 1 ? true : undefined), "the delivery again", 60_000);
    await expectDeliveredOnce(messageId);
    const body = (await (await fetch(`${relayer!.api}/items/${messageItemId(beta.chainId, messageId)}`)).json()) as { txs: { nonce: number }[] };
    expect(new Set(body.txs.map((tx) => tx.nonce)).size, "sent again at its own nonce, not a new job").to.equal(1);
  });

  it("another party's delivery seen only at the chain head is not taken as done: when a reorg takes it back, the relayer delivers the message", async () => {
    // No blocks but the ones transactions make, on both chains: the other party's delivery stays at beta's head
    // (not `confirmations` deep), and the relayer sees the message only once alpha moves on.
    await alpha.control.setIntervalMining(0);
    await beta.control.setIntervalMining(0);
    let messageId: `0x${string}`;
    try {
      const snapshot = await beta.control.snapshot();
      messageId = await sendFreshTime(network, alpha, beta);
      const [sent] = await alpha.publicClient.getContractEvents({ address: alpha.deployment.bridge!, abi: timeBridgeAbi, eventName: "TimeSent", args: { messageId }, fromBlock: 0n });
      await confirmed(beta, beta.user.writeContract({ address: beta.deployment.bridge!, abi: timeBridgeAbi, functionName: "receiveTime", args: [sent!.args.message!], account: beta.user.account!, chain: beta.user.chain }));
      expect(await deliveriesOf(beta, [messageId])).to.deep.equal([1]);
      await alpha.control.setIntervalMining(1_000);
      const itemId = messageItemId(beta.chainId, messageId);
      const waiting = await pollUntil(async () => {
        const response = await fetch(`${relayer!.api}/items/${itemId}`);
        if (response.status !== 200) return undefined;
        const { item } = (await response.json()) as { item: { status: string; lastError: string | null } };
        // Taken as done on the head's word (the defect): fail now rather than time out below.
        if (item.status === "done") return item;
        return item.lastError?.includes("not yet at the safe block") === true ? item : undefined;
      }, `the relayer to wait for ${itemId}'s other delivery to be deep enough`);
      expect(waiting.status, "finished on a delivery only the head shows").to.equal("pending");
      expect(await beta.control.revert(snapshot)).to.equal(true); // the other party's delivery is gone
      expect(await deliveriesOf(beta, [messageId])).to.deep.equal([0]);
    } finally {
      await alpha.control.setIntervalMining(1_000);
      await beta.control.setIntervalMining(1_000);
    }
    await expectDeliveredOnce(messageId);
  });

  it("an attesting node that goes away: a due call waits (Unavailable, counted) and runs once a node answers again", async () => {
    // The relayer's node, behind a switch: down, every request to it fails at the socket.
    const switched = createServer((request, response) => {
      if (nodeDown) return void request.socket.destroy();
      let body = "";
      request.on("data", (chunk: Buffer) => (body += chunk.toString()));
      request.on("end", () => {
        fetch(`${network.nodes[0]}${request.url}`, { method: request.method!, headers: { "content-type": "application/json" }, ...(request.method === "POST" ? { body } : {}) })
          .then(async (upstream) => response.writeHead(upstream.status, { "content-type": "application/json" }).end(await upstream.text()))
          .catch(() => request.socket.destroy());
      });
    });
    let nodeDown = true;
    await new Promise<void>((resolve) => switched.listen(0, "127.0.0.1", resolve));
    const nodeUrl = `http://127.0.0.1:${(switched.address() as AddressInfo).port}`;
    const file = JSON.parse(readFileSync(join(dir, "chaos-network.json"), "utf8")) as NetworkFileJson;
    writeFileSync(join(dir, "switched-network.json"), JSON.stringify({ ...file, nodes: [nodeUrl] }));
    writeFileSync(join(dir, "switched-relayer.json"), JSON.stringify({ networkFile: "switched-network.json", dataDir: "switched-data", apiPort: 0, pollIntervalMs: 100, retryBaseMs: 100, retryMaxMs: 500, pushHeartbeatMs: 0 }));
    // The suite's relayer steps aside (it would execute the call with its own, working node).
    await stopRelayerProcess(relayer, "SIGTERM");
    const switchedRelayer = await startRelayerProcess(join(dir, "switched-relayer.json"), network.relayerEnv);
    try {
      const callId = await scheduleCall(alpha, 300);
      const itemId = callItemId(alpha.chainId, callId);
      await pollUntil(async () => {
        const response = await fetch(`${switchedRelayer.api}/items/${itemId}`);
        if (response.status !== 200) return undefined;
        const { item } = (await response.json()) as { item: { status: string; lastErrorName: string | null; attempts: number } };
        return item.status === "pending" && item.lastErrorName === "Unavailable" && item.attempts >= 2 ? true : undefined;
      }, "the call to wait for a node");
      expect(await executionsOf(alpha, [callId])).to.deep.equal([0]);
      const metrics = await (await fetch(`${switchedRelayer.api}/metrics`)).text();
      expect(metrics).to.match(/ats_relayer_failures_total\{kind="call",reason="Unavailable"\} [1-9]/);
      nodeDown = false;
      await pollUntil(async () => ((await executionsOf(alpha, [callId]))[0] === 1 ? true : undefined), "the execution once the node is back");
      expect(await executionsOf(alpha, [callId])).to.deep.equal([1]);
    } finally {
      await stopRelayerProcess(switchedRelayer, "SIGKILL");
      await new Promise<void>((resolve) => switched.close(() => resolve()));
      relayer = await startRelayerProcess(join(dir, "chaos-relayer.json"), network.relayerEnv);
    }
  });

  it("a base fee above the relayer's cap: the message waits, naming the cap, and goes once the fee falls", async () => {
    await beta.control.setNextBlockBaseFeePerGas(FEE_CAP_WEI * 2n);
    await beta.control.mine();
    const messageId = await sendFreshTime(network, alpha, beta);
    const itemId = messageItemId(beta.chainId, messageId);
    await pollUntil(async () => {
      const response = await fetch(`${relayer!.api}/items/${itemId}`);
      if (response.status !== 200) return undefined;
      const { item } = (await response.json()) as { item: { lastError: string | null } };
      return item.lastError?.includes("above the cap") === true ? true : undefined;
    }, "the fee cap to hold the message");
    expect(await deliveriesOf(beta, [messageId])).to.deep.equal([0]);
    // Empty blocks lower the base fee by up to 1/8 each.
    for (let block = 0; block < 12; block++) await beta.control.mine();
    await expectDeliveredOnce(messageId);
  });
});
