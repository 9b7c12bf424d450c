/**
 * TimeBridge between two deployments on one chain: oracle A + bridge A (the source) and oracle B + bridge B
 * (the target), each oracle with its own registry of the same dev card and node. Messages are addressed to the
 * chain's own id, so bridge B accepts them. (Two real chains are the relayer's end-to-end test.) The registry
 * epoch's effect on the bridge is in registryEpoch.test.ts.
 */
import hre from "hardhat";
import { expect } from "chai";
import { encodeAbiParameters, getAddress, keccak256, type Hex } from "viem";
import {
  CROSS_CHAIN_TIME_ABI_PARAMETER,
  crossChainTimeForProof,
  encodeTimeProof,
  NS_PER_SECOND,
  type CrossChainTime,
} from "../../protocol";
import { eventOf } from "./apps-helpers";
import { deployOracleFixture, expectRevert, FIXTURE_NOW_NS, FIXTURE_NOW_SECONDS, FOREVER_NS, loadFixture } from "./fixtures";

async function deployBridgeFixture() {
  const base = await deployOracleFixture();
  const { oracle, accounts, cardKey, nodeKeys, publicClient } = base;
  const chainId = BigInt(await publicClient.getChainId());

  // The target side: a second oracle with its own registry (same card and dev node), pinned to the same clock.
  const oracleB = await hre.viem.deployContract("TimeOracleHarness", [accounts.admin.account.address]);
  await oracleB.write.setNow([FIXTURE_NOW_SECONDS]);
  await oracleB.write.grantRole([await oracleB.read.REGISTRAR_ROLE(), accounts.admin.account.address]);
  await oracleB.write.registerCard([cardKey.x, cardKey.y, 0n, FOREVER_NS]);
  await oracleB.write.registerNode([nodeKeys[0]!.address, 0n, FOREVER_NS]);

  const bridgeA = await hre.viem.deployContract("TimeBridge", [oracle.address]);
  const bridgeB = await hre.viem.deployContract("TimeBridge", [oracleB.address]);
  const relayer = accounts.stranger;
  const bridgeBAsRelayer = await hre.viem.getContractAt("TimeBridge", bridgeB.address, { client: { wallet: relayer } });

  const sourceProof = base.freshProof();
  await oracle.write.submitTimeProof([sourceProof]);

  /** Sends the oracle's current time from bridge A to `targetChain`; returns the TimeSent event. */
  async function send(targetChain = chainId) {
    const hash = await bridgeA.write.sendTime([targetChain]);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    const sent = eventOf(bridgeA.abi, receipt, "TimeSent");
    return {
      messageId: sent.messageId as Hex,
      targetChain: sent.targetChain as bigint,
      nonce: sent.nonce as bigint,
      message: sent.message as CrossChainTime,
    };
  }

  /** The arguments a relayer passes to receiveTime: the message as sent, nothing else. */
  function delivery(message: CrossChainTime) {
    return [message] as const;
  }

  return { ...base, oracleB, bridgeA, bridgeB, bridgeBAsRelayer, relayer, chainId, sourceProof, send, delivery };
}

/** keccak256(abi.encode(message)), computed off-chain. */
function messageIdOf(message: CrossChainTime): Hex {
  return keccak256(encodeAbiParameters([CROSS_CHAIN_TIME_ABI_PARAMETER], [message]));
}

/** `hex` with the byte at `index` (0-based, of the decoded bytes) XOR-ed with 0x01. */
function flipByte(hex: Hex, index: number): Hex {
  const position = 2 + index * 2;
  const byte = parseInt(hex.slice(position, position + 2), 16) ^ 0x01;
  return `${hex.slice(0, position)}${byte.toString(16).padStart(2, "0")}${hex.slice(position + 2)}` as Hex;
}

describe("TimeBridge", () => {
  it("sendTime wraps the oracle's current proof in a CrossChainTime message with a nonce and an id of its content", async () => {
    const { bridgeA, oracle, chainId, sourceProof, proofAt, send } = await loadFixture(deployBridgeFixture);
    const first = await send();
    expect(first.message).to.deep.equal(crossChainTimeForProof(sourceProof, chainId));
    expect(first.message.proof).to.equal(encodeTimeProof(sourceProof));
    expect(first.nonce).to.equal(0n);
    expect(first.targetChain).to.equal(chainId);
    expect(first.messageId).to.equal(messageIdOf(first.message));
    expect(await bridgeA.read.messageIdOf([first.message])).to.equal(first.messageId);
    // The same stored proof to the same chain is the same message: one id, whatever the nonce.
    const again = await send();
    expect(again.nonce).to.equal(1n);
    expect(again.messageId).to.equal(first.messageId);
    await oracle.write.submitTimeProof([proofAt(FIXTURE_NOW_NS - NS_PER_SECOND / 2n)]);
    const newer = await send();
    expect(newer.messageId).to.not.equal(first.messageId);
    expect((await send(chainId + 1n)).messageId).to.not.equal(newer.messageId); // another target, another message
    expect(await bridgeA.read.sentCount()).to.equal(4n);
  });

  it("sendTime refuses chain id 0, and reverts with the oracle's error when it holds no time", async () => {
    const { bridgeA, oracleB } = await loadFixture(deployBridgeFixture);
    await expectRevert(bridgeA.simulate.sendTime([0n]), "TimeBridgeInvalidTargetChain", [0n]);
    const emptySource = await hre.viem.deployContract("TimeBridge", [oracleB.address]);
    await expectRevert(emptySource.simulate.sendTime([1n]), "TimeOracleNoTime", []);
  });

  it("receiveTime delivers a message relayed by anyone: sets targetBlock, stores and emits it", async () => {
    const { bridgeB, bridgeBAsRelayer, relayer, publicClient, send, delivery } = await loadFixture(deployBridgeFixture);
    const { messageId, message } = await send();
    const hash = await bridgeBAsRelayer.write.receiveTime(delivery(message));
    const receipt = await publicClient.waitForTransactionReceipt({ hash });

    const received = eventOf(bridgeB.abi, receipt, "TimeReceived");
    expect(received).to.deep.equal({
      messageId,
      networkTime: message.networkTime,
      message: { ...message, targetBlock: receipt.blockNumber },
      relayer: getAddress(relayer.account.address),
    });
    expect(await bridgeB.read.deliveredBlock([messageId])).to.equal(receipt.blockNumber);
    expect(await bridgeB.read.latestDelivery()).to.deep.equal([messageId, message.networkTime, receipt.blockNumber]);
  });

  it("refuses a message for another chain", async () => {
    const { bridgeB, chainId, send, delivery } = await loadFixture(deployBridgeFixture);
    const otherChain = chainId + 1n;
    const { message } = await send(otherChain);
    await expectRevert(bridgeB.simulate.receiveTime(delivery(message)), "TimeBridgeWrongChain", [
      otherChain,
      chainId,
    ]);
  });

  it("refuses a second delivery of the same message", async () => {
    const { bridgeB, send, delivery, publicClient } = await loadFixture(deployBridgeFixture);
    const { messageId, message } = await send();
    const hash = await bridgeB.write.receiveTime(delivery(message));
    const { blockNumber } = await publicClient.waitForTransactionReceipt({ hash });
    await expectRevert(bridgeB.simulate.receiveTime(delivery(message)), "TimeBridgeAlreadyDelivered", [
      messageId,
      blockNumber,
    ]);
  });

  it("whoever delivers first delivers the message for everyone: the relayer finds it delivered under its source id", async () => {
    const { bridgeB, bridgeBAsRelayer, accounts, publicClient, send } = await loadFixture(deployBridgeFixture);
    const { messageId, message } = await send();
    // Someone front-runs the relayer with the message it saw in the source chain's TimeSent event.
    const bridgeBAsStranger = await hre.viem.getContractAt("TimeBridge", bridgeB.address, { client: { wallet: accounts.admin } });
    const { blockNumber } = await publicClient.waitForTransactionReceipt({ hash: await bridgeBAsStranger.write.receiveTime([message]) });
    // What the relayer checks before sending and before giving up: delivered, under the id the source emitted.
    expect(await bridgeB.read.deliveredBlock([messageId])).to.equal(blockNumber);
    expect(await bridgeB.read.latestDelivery()).to.deep.equal([messageId, message.networkTime, blockNumber]);
    await expectRevert(bridgeBAsRelayer.simulate.receiveTime([message]), "TimeBridgeAlreadyDelivered", [messageId, blockNumber]);
  });

  it("refuses an older, still fresh proof after a newer one, and accepts a newer one", async () => {
    const { oracle, bridgeB, proofAt, send, delivery } = await loadFixture(deployBridgeFixture);
    const older = await send();
    await oracle.write.submitTimeProof([proofAt(FIXTURE_NOW_NS - NS_PER_SECOND / 2n)]);
    const newer = await send();
    await bridgeB.write.receiveTime(delivery(newer.message));
    await expectRevert(bridgeB.simulate.receiveTime(delivery(older.message)), "TimeBridgeNotNewer", [
      older.message.networkTime,
      newer.message.networkTime,
    ]);
  });

  describe("tampered messages", () => {
    it("refuses networkTime different from the proof's nanoMoment", async () => {
      const { bridgeB, send, delivery } = await loadFixture(deployBridgeFixture);
      const { message } = await send();
      const tampered = { ...message, networkTime: message.networkTime + 1n };
      await expectRevert(bridgeB.simulate.receiveTime(delivery(tampered)), "TimeBridgeTimeMismatch", [
        tampered.networkTime,
        message.networkTime,
      ]);
    });

    it("refuses a proof with a flipped signature byte (the target oracle rejects it)", async () => {
      const { bridgeB, send, delivery } = await loadFixture(deployBridgeFixture);
      const { message } = await send();
      // abi.encode(TimeProof): tuple offset, 4 head words, hardwareSignature (length word + 96 bytes), then
      // nodeSignature (length word + 80 bytes per entry). Flip a byte of the card id, of s, and of a node entry's r.
      const hardwareSignatureStart = 6 * 32;
      const nodeSignatureStart = hardwareSignatureStart + 96 + 32;
      for (const index of [hardwareSignatureStart + 5, hardwareSignatureStart + 80, nodeSignatureStart + 16 + 3]) {
        const tampered = { ...message, proof: flipByte(message.proof, index) };
        const id = messageIdOf(tampered);
        await expectRevert(bridgeB.simulate.receiveTime(delivery(tampered)), "TimeBridgeInvalidProof", [
          id,
          message.networkTime,
        ]);
      }
    });

    it("refuses proof bytes that are not the canonical abi.encode(TimeProof)", async () => {
      const { bridgeB, send, delivery } = await loadFixture(deployBridgeFixture);
      const { message } = await send();
      const length = (message.proof.length - 2) / 2;
      // An offset pointing far outside the data, a trailing byte, and an empty proof.
      const badOffset = flipByte(message.proof, 2 * 32 + 29); // the hardwareSignature offset word
      for (const [proof, bytes] of [
        [badOffset, length],
        [`${message.proof}00` as Hex, length + 1],
        ["0x" as Hex, 0],
      ] as const) {
        await expectRevert(
          bridgeB.simulate.receiveTime(delivery({ ...message, proof })),
          "TimeBridgeMalformedProof",
          [BigInt(bytes)],
        );
      }
    });

    it("refuses a message that arrives with targetBlock already set", async () => {
      const { bridgeB, send, delivery } = await loadFixture(deployBridgeFixture);
      const { message } = await send();
      await expectRevert(
        bridgeB.simulate.receiveTime(delivery({ ...message, targetBlock: 5n })),
        "TimeBridgeTargetBlockSet",
        [5n],
      );
    });

    it("refuses a proof the target oracle no longer accepts (stale on the target chain's clock)", async () => {
      const { bridgeB, oracleB, send, delivery } = await loadFixture(deployBridgeFixture);
      const { message } = await send();
      await oracleB.write.setNow([FIXTURE_NOW_SECONDS + 120n]);
      await expectRevert(bridgeB.simulate.receiveTime(delivery(message)), "TimeBridgeInvalidProof", [
        messageIdOf(message),
        message.networkTime,
      ]);
    });
  });

  it("refuses the zero address as oracle", async () => {
    await expectRevert(
      hre.viem.deployContract("TimeBridge", ["0x0000000000000000000000000000000000000000"]),
      "TimeBridgeZeroOracle",
      [],
    );
  });
});
