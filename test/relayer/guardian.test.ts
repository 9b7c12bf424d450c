/**
 * The relayer's guardian end to end: a node reports a signed tamper alert (GET /mesh/state), the relayer revokes the
 * card on every chain, once; an alert signed by a key no oracle holds active, or with a bad signature, revokes
 * nothing; without GUARDIAN_ROLE the guardian refuses to start. On Hardhat node chains and on anvil (CHAIN_KINDS).
 */
import { expect } from "chai";
import { createPublicKey } from "node:crypto";
import { createServer, type Server } from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import hre from "hardhat";
import pino from "pino";
import { createWalletClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { timeOracleAbi } from "../../abi";
import { cardIdFromPublicKey } from "../../protocol/codec";
import { generateCardKey, generateNodeKey } from "../../protocol/devca";
import { p256PublicKeyCoordinates, p256PublicKeyToUncompressed } from "../../protocol/keys";
import { CARD_STATUS } from "../../protocol/types";
import { signAlert } from "../../wire/mesh";
import type { TamperAlertJson } from "../../wire/rest";
import { loadRelayerConfig } from "../../relayer/config";
import type { NetworkFileJson } from "../../wire/network";
import { startRelayer, type RunningRelayer } from "../../relayer/relayer";
import { CHAIN_KINDS } from "../../scripts/chainProcess";
import { HARDHAT_DEV_KEYS, localRelayerAddress, startLocalNetwork, type LocalChain, type LocalNetwork } from "../../scripts/network";
import { pollUntil } from "./helpers";

const NO_EXPIRY = (1n << 64n) - 1n;

for (const chainKind of CHAIN_KINDS) describe(`relayer guardian on 2 ${chainKind} chains (revokes a card after its node's signed tamper alert)`, function () {
  this.timeout(180_000);
  let dir: string;
  let network: LocalNetwork;
  let fakeNode: Server;
  let fakeNodeUrl: string;
  let alerts: TamperAlertJson[] = [];

  /** The deployer (the oracle's admin and registrar) registers and grants on a chain's oracle. */
  function deployerOf(chain: LocalChain) {
    const wallet = createWalletClient({ account: privateKeyToAccount(HARDHAT_DEV_KEYS.deployer), chain: chain.user.chain, transport: http(chain.rpcUrl) });
    const oracle = { address: chain.deployment.oracle, abi: timeOracleAbi, chain: chain.user.chain } as const;
    const mined = async (pending: Promise<Hex>) => expect((await chain.publicClient.waitForTransactionReceipt({ hash: await pending })).status).to.equal("success");
    return {
      registerNode: (node: Hex, validFromNs: bigint, validUntilNs: bigint) => mined(wallet.writeContract({ ...oracle, functionName: "registerNode", args: [node, validFromNs, validUntilNs] })),
      registerCard: (x: Hex, y: Hex, validFromNs: bigint, validUntilNs: bigint) => mined(wallet.writeContract({ ...oracle, functionName: "registerCard", args: [x, y, validFromNs, validUntilNs] })),
      grantRole: (role: Hex, account: Hex) => mined(wallet.writeContract({ ...oracle, functionName: "grantRole", args: [role, account] })),
    };
  }

  async function cardStatus(chain: LocalChain, cardId: Hex): Promise<string> {
    const card = await chain.publicClient.readContract({ address: chain.deployment.oracle, abi: timeOracleAbi, functionName: "getCard", args: [cardId] });
    return CARD_STATUS[card.status]!;
  }

  function relayerConfig(guardianEnabled: boolean) {
    const file = JSON.parse(readFileSync(network.networkFile, "utf8")) as NetworkFileJson;
    file.nodes = [...file.nodes, fakeNodeUrl];
    writeFileSync(join(dir, "guardian-network.json"), JSON.stringify(file));
    return loadRelayerConfig({
      env: {},
      overrides: { networkFile: join(dir, "guardian-network.json"), dataDir: join(dir, "guardian-data"), signerPrivateKey: HARDHAT_DEV_KEYS.relayer, apiPort: 0, pollIntervalMs: 100, pushHeartbeatMs: 0, guardianEnabled, logLevel: "silent" },
    });
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ats-relayer-guardian-"));
    network = await startLocalNetwork({ hre, dir, meshNodes: 1, chainKind, nodeLogger: pino({ level: "silent" }) });
    // A node that serves only its mesh state, with whatever alerts the test puts there.
    fakeNode = createServer((request, response) => {
      if (request.url === "/mesh/state") response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ tamperAlerts: alerts }));
      else response.writeHead(503).end();
    });
    await new Promise<void>((resolve) => fakeNode.listen(0, "127.0.0.1", resolve));
    fakeNodeUrl = `http://127.0.0.1:${(fakeNode.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise<void>((resolve) => fakeNode?.close(() => resolve()));
    await network?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses to start without GUARDIAN_ROLE, naming the chain and the signer", async () => {
    let message = "";
    try {
      const relayer = await startRelayer(relayerConfig(true), { log: pino({ level: "silent" }) });
      await relayer.stop();
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).to.match(new RegExp(`chain alpha: guardianEnabled, but the signer ${localRelayerAddress()} does not hold GUARDIAN_ROLE`));
  });

  it("revokes the card of a node's signed alert on every chain, once; an alert by an inactive key or a bad signature revokes nothing", async () => {
    // A second attesting node, registered on both chains with its card; and a key registered nowhere.
    const nodeKey = generateNodeKey();
    const cardPublicKey = p256PublicKeyToUncompressed(createPublicKey(generateCardKey()));
    const cardId = cardIdFromPublicKey(cardPublicKey);
    const { x, y } = p256PublicKeyCoordinates(cardPublicKey);
    const victimCard = network.chains[0]!.deployment.cardIds[0]!;
    for (const chain of network.chains) {
      const deployer = deployerOf(chain);
      await deployer.registerNode(nodeKey.address, 0n, NO_EXPIRY);
      await deployer.registerCard(x, y, 0n, NO_EXPIRY);
      const guardianRole = await chain.publicClient.readContract({ address: chain.deployment.oracle, abi: timeOracleAbi, functionName: "GUARDIAN_ROLE" });
      await deployer.grantRole(guardianRole, localRelayerAddress());
    }
    const outsider = generateNodeKey();
    const alert = (key: typeof nodeKey, card: Hex, reason: string): TamperAlertJson => ({
      nodeId: key.address,
      cardId: card.toLowerCase(),
      reason,
      atNs: "1795600000000000000",
      signature: `0x${signAlert(key, key.address, card.toLowerCase() as Hex, 1795600000000000000n, reason).toString("hex")}`,
    });
    const badSignature = { ...alert(nodeKey, victimCard, "tampered"), reason: "altered after signing" };
    alerts = [alert(nodeKey, cardId, "enclosure opened"), alert(outsider, victimCard, "framing the network's card"), badSignature];

    const relayer: RunningRelayer = await startRelayer(relayerConfig(true), { log: pino({ level: "silent" }) });
    try {
      for (const chain of network.chains) {
        await pollUntil(async () => ((await cardStatus(chain, cardId)) === "Revoked" ? true : undefined), `the revocation on ${chain.name}`);
      }
      const items = await pollUntil(async () => {
        const all = relayer.store.items({ kind: "revoke", limit: 10 });
        return all.length === 4 && all.every((item) => item.status === "done" || item.status === "dead") ? all : undefined;
      }, "the guardian's items to settle");
      const byId = new Map(items.map((item) => [item.id, item]));
      for (const chain of network.chains) {
        expect(byId.get(`revoke:${chain.chainId}:${cardId.toLowerCase()}`)?.outcome, chain.name).to.match(/^revoked in block \d+/);
        expect(byId.get(`revoke:${chain.chainId}:${victimCard.toLowerCase()}`)).to.include({ status: "dead" });
        expect(byId.get(`revoke:${chain.chainId}:${victimCard.toLowerCase()}`)!.outcome).to.match(/not an active node on this chain \(None\)/);
        expect(await cardStatus(chain, victimCard), `the network's own card on ${chain.name}`).to.equal("Active");
      }
    } finally {
      await relayer.stop();
    }

    // Restarted, it does nothing again: the items are done.
    const again = await startRelayer(relayerConfig(true), { log: pino({ level: "silent" }) });
    try {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(again.store.items({ kind: "revoke", limit: 10 })).to.have.length(4);
      expect(again.store.items({ kind: "revoke", status: "pending", limit: 10 })).to.deep.equal([]);
    } finally {
      await again.stop();
    }
  });
});
