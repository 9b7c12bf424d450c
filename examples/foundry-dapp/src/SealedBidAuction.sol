// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {TimeConsumer} from "attested-time/contracts/TimeConsumer.sol";
import {ITimeOracle, TimeProof} from "attested-time/contracts/interfaces/ITimeOracle.sol";
import {AccuracyTiers} from "attested-time/contracts/libraries/AccuracyTiers.sol";

/**
 * @title SealedBidAuction
 * @notice A commit-reveal auction on attested time: bids are sealed (a hash plus a deposit) strictly before
 * `biddingEndNs`, revealed in `[biddingEndNs, revealEndNs)`, and the auction ends at or after `revealEndNs`.
 *
 * Every action consumes a proof under an action key: one per bidder, so that another bidder consuming a newer proof
 * first (proofs are public) never blocks anyone; and one for ending the auction. The bidding deadline is a true
 * deadline: {TimeConsumer-onlyBefore} bounds the chain clock too, so a still-fresh proof of an earlier moment
 * cannot bid after it.
 */
contract SealedBidAuction is TimeConsumer {
    bytes32 private constant _END_KEY = keccak256("SealedBidAuction.end");

    address public immutable seller;
    uint128 public immutable biddingEndNs;
    uint128 public immutable revealEndNs;

    mapping(address bidder => bytes32 commitment) public commitments;
    mapping(address bidder => uint256 amount) public deposits;
    mapping(address account => uint256 amount) public owed;
    address public highestBidder;
    uint256 public highestBid;
    bool public ended;

    event BidSealed(address indexed bidder, uint256 deposit, uint128 nanoMoment);
    event BidRevealed(address indexed bidder, uint256 amount);
    event AuctionEnded(address winner, uint256 amount);

    error AuctionInvalidWindow(uint128 biddingEndNs, uint128 revealEndNs);
    error AuctionEmptyDeposit();
    error AuctionNoCommitment(address bidder);
    error AuctionBadReveal(address bidder);
    error AuctionAlreadyEnded();
    error AuctionTransferFailed(address to, uint256 amount);

    /// @dev Proofs from a mesh of software clocks are accepted (10 ms): the local network's, and the test kit's.
    constructor(
        ITimeOracle oracle,
        uint128 biddingEnd,
        uint128 revealEnd
    ) TimeConsumer(oracle, AccuracyTiers.SOFTWARE_MESH_NS) {
        if (revealEnd <= biddingEnd) revert AuctionInvalidWindow(biddingEnd, revealEnd);
        seller = msg.sender;
        biddingEndNs = biddingEnd;
        revealEndNs = revealEnd;
    }

    /// @notice Seals a bid: `commitment = keccak256(abi.encode(bidder, amount, salt))`, with a deposit ≥ amount.
    function bid(bytes32 commitment, TimeProof calldata proof) external payable onlyBefore(proof, _bidderKey(msg.sender), biddingEndNs) {
        if (msg.value == 0) revert AuctionEmptyDeposit();
        commitments[msg.sender] = commitment;
        deposits[msg.sender] += msg.value;
        emit BidSealed(msg.sender, msg.value, proof.nanoMoment);
    }

    /// @notice Opens a sealed bid; what the deposit holds beyond a losing or winning amount becomes withdrawable.
    function reveal(
        uint256 amount,
        bytes32 salt,
        TimeProof calldata proof
    ) external onlyWithin(proof, _bidderKey(msg.sender), biddingEndNs, revealEndNs) {
        bytes32 commitment = commitments[msg.sender];
        if (commitment == 0) revert AuctionNoCommitment(msg.sender);
        uint256 deposit = deposits[msg.sender];
        if (keccak256(abi.encode(msg.sender, amount, salt)) != commitment || amount > deposit) revert AuctionBadReveal(msg.sender);
        delete commitments[msg.sender];
        delete deposits[msg.sender];
        if (amount > highestBid) {
            if (highestBidder != address(0)) owed[highestBidder] += highestBid;
            highestBidder = msg.sender;
            highestBid = amount;
            owed[msg.sender] += deposit - amount;
        } else {
            owed[msg.sender] += deposit;
        }
        emit BidRevealed(msg.sender, amount);
    }

    /// @notice Ends the auction once the reveal window is over: the seller is owed the highest bid.
    function end(TimeProof calldata proof) external onlyAfter(proof, _END_KEY, revealEndNs) {
        if (ended) revert AuctionAlreadyEnded();
        ended = true;
        owed[seller] += highestBid;
        emit AuctionEnded(highestBidder, highestBid);
    }

    /// @notice Pays out what the caller is owed; after the end, an unrevealed deposit is returned too.
    function withdraw() external {
        uint256 amount = owed[msg.sender];
        if (ended && commitments[msg.sender] != 0) {
            amount += deposits[msg.sender];
            delete commitments[msg.sender];
            delete deposits[msg.sender];
        }
        owed[msg.sender] = 0;
        (bool ok, ) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert AuctionTransferFailed(msg.sender, amount);
    }

    function _bidderKey(address bidder) private pure returns (bytes32) {
        return bytes32(uint256(uint160(bidder)));
    }
}
