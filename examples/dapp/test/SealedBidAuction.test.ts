/**
 * The sealed-bid auction, tested the way a dApp team would: attested-time/testing deploys the oracle with the
 * public development keys on the in-process Hardhat chain, signs proofs in-process for any moment, moves the chain
 * clock, and hands out the usual bad proofs.
 */
import { expect } from "chai";
import hre from "hardhat";
import { loadFixture } from "@nomicfoundation/hardhat-toolbox-viem/network-helpers";
import { encodeAbiParameters, keccak256, parseEther, type Address, type Hex } from "viem";
import { createTimeTestKit, INVALID_PROOF_KINDS } from "attested-time/testing";
import { timeOracleAbi } from "attested-time/abi";

const SECOND_NS = 1_000_000_000n;

function commitment(bidder: Address, amount: bigint, salt: Hex): Hex {
  return keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }, { type: "bytes32" }], [bidder, amount, salt]));
}

async function expectRevert(promise: Promise<unknown>, reason: string): Promise<void> {
  try {
    await promise;
  } catch (error) {
    expect(String((error as Error).message)).to.contain(reason);
    return;
  }
  expect.fail(`expected a revert with ${reason}`);
}

async function deployAuction() {
  const kit = await createTimeTestKit(hre);
  const startNs = await kit.chainNowNs();
  const biddingEndNs = startNs + 60n * SECOND_NS;
  const revealEndNs = startNs + 120n * SECOND_NS;
  const [seller, alice, bob] = await hre.viem.getWalletClients();
  const auction = await hre.viem.deployContract("SealedBidAuction", [kit.oracle, biddingEndNs, revealEndNs]);
  const as = async (wallet: typeof alice) => hre.viem.getContractAt("SealedBidAuction", auction.address, { client: { wallet } });
  return { kit, auction, biddingEndNs, revealEndNs, seller: seller!, alice: alice!, bob: bob!, asAlice: await as(alice!), asBob: await as(bob!) };
}

describe("SealedBidAuction on attested time", () => {
  it("uses the kit's oracle, which accepts the kit's proofs", async () => {
    const { kit, auction } = await loadFixture(deployAuction);
    const publicClient = await hre.viem.getPublicClient();
    expect((await auction.read.timeOracle()).toLowerCase()).to.equal(kit.oracle.toLowerCase());
    expect(await publicClient.readContract({ address: kit.oracle, abi: timeOracleAbi, functionName: "verifyTimeProof", args: [await kit.proofNow()] })).to.equal(true);
  });

  it("takes sealed bids before the deadline, each bidder under their own key", async () => {
    const { kit, auction, asAlice, asBob, alice, bob } = await loadFixture(deployAuction);
    const aliceProof = await kit.proofNow();
    // Bob acts first with a newer proof: with one key per bidder it does not block Alice's older, still fresh one.
    await kit.increaseTo((await kit.chainNowNs()) + 2n * SECOND_NS);
    await asBob.write.bid([commitment(bob.account.address, parseEther("1"), `0x${"02".repeat(32)}`), await kit.proofNow()], { value: parseEther("2") });
    await asAlice.write.bid([commitment(alice.account.address, parseEther("3"), `0x${"01".repeat(32)}`), aliceProof], { value: parseEther("3") });
    expect(await auction.read.deposits([alice.account.address])).to.equal(parseEther("3"));
    expect(await auction.read.deposits([bob.account.address])).to.equal(parseEther("2"));
    // The same proof twice for one bidder is a replay.
    await expectRevert(asAlice.write.bid([`0x${"03".repeat(32)}`, aliceProof], { value: 1n }), "TimeConsumerProofNotNewer");
  });

  it("refuses a bid at or after the deadline, also with a proof of an earlier moment that is still fresh", async () => {
    const { kit, asAlice, biddingEndNs } = await loadFixture(deployAuction);
    const early = kit.proofAt(biddingEndNs - SECOND_NS);
    await kit.increaseTo(biddingEndNs + SECOND_NS);
    await expectRevert(asAlice.write.bid([`0x${"01".repeat(32)}`, await kit.proofNow()], { value: 1n }), "TimeConsumerTooLate");
    await expectRevert(asAlice.write.bid([`0x${"01".repeat(32)}`, early], { value: 1n }), "TimeConsumerChainPastDeadline");
  });

  for (const kind of INVALID_PROOF_KINDS.filter((name) => name !== "below-quorum")) {
    it(`refuses a bid with a bad proof: ${kind}`, async () => {
      const { kit, asAlice } = await loadFixture(deployAuction);
      await expectRevert(asAlice.write.bid([`0x${"01".repeat(32)}`, await kit.invalidProof(kind)], { value: 1n }), "Invalid time proof");
    });
  }

  it("refuses a bid with a bad proof: below-quorum (an oracle that wants two nodes, a proof signed by one)", async () => {
    const kit = await createTimeTestKit(hre, { nodeQuorum: 2 });
    const startNs = await kit.chainNowNs();
    const auction = await hre.viem.deployContract("SealedBidAuction", [kit.oracle, startNs + 60n * SECOND_NS, startNs + 120n * SECOND_NS]);
    await expectRevert(auction.write.bid([`0x${"01".repeat(32)}`, await kit.invalidProof("below-quorum")], { value: 1n }), "Invalid time proof");
    await auction.write.bid([`0x${"01".repeat(32)}`, await kit.proofNow()], { value: 1n }); // two nodes: accepted
  });

  it("reveals in the window, ends after it, and pays the seller and the losers", async () => {
    const { kit, auction, asAlice, asBob, alice, bob, seller, biddingEndNs, revealEndNs } = await loadFixture(deployAuction);
    const aliceSalt = `0x${"0a".repeat(32)}` as Hex;
    const bobSalt = `0x${"0b".repeat(32)}` as Hex;
    await asAlice.write.bid([commitment(alice.account.address, parseEther("3"), aliceSalt), await kit.proofNow()], { value: parseEther("4") });
    await asBob.write.bid([commitment(bob.account.address, parseEther("2"), bobSalt), await kit.proofNow()], { value: parseEther("2") });
    // Too early to reveal, then inside the window.
    await expectRevert(asAlice.write.reveal([parseEther("3"), aliceSalt, await kit.proofNow()]), "TimeConsumerTooEarly");
    await kit.increaseTo(biddingEndNs + SECOND_NS);
    await expectRevert(asBob.write.reveal([parseEther("5"), bobSalt, await kit.proofNow()]), "AuctionBadReveal");
    await kit.increaseTo(biddingEndNs + 2n * SECOND_NS);
    await asAlice.write.reveal([parseEther("3"), aliceSalt, await kit.proofNow()]);
    await asBob.write.reveal([parseEther("2"), bobSalt, await kit.proofNow()]);
    expect((await auction.read.highestBidder()).toLowerCase()).to.equal(alice.account.address.toLowerCase());
    expect(await auction.read.highestBid()).to.equal(parseEther("3"));
    await expectRevert(auction.write.end([await kit.proofNow()]), "TimeConsumerTooEarly");
    await kit.increaseTo(revealEndNs);
    await auction.write.end([await kit.proofNow()]);
    expect(await auction.read.owed([seller.account.address])).to.equal(parseEther("3"));
    expect(await auction.read.owed([alice.account.address])).to.equal(parseEther("1"));
    expect(await auction.read.owed([bob.account.address])).to.equal(parseEther("2"));
    // Ended once: a newer proof gets past the time guard and meets the auction's own rule.
    await kit.increaseTo(revealEndNs + 2n * SECOND_NS);
    await expectRevert(auction.simulate.end([await kit.proofNow()]), "AuctionAlreadyEnded");
  });
});
