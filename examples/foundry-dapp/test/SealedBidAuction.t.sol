// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

// forge runs the functions named test_*: its naming, not mixedCase.
// solhint-disable func-name-mixedcase

import {TimeProof} from "attested-time/contracts/interfaces/ITimeOracle.sol";
import {ITimeConsumer} from "attested-time/contracts/interfaces/ITimeConsumer.sol";
import {TimeTestKit} from "attested-time/contracts/testing/TimeTestKit.sol";
import {SealedBidAuction} from "../src/SealedBidAuction.sol";

/**
 * @notice The few forge cheatcodes these tests use beyond the kit's (signatures as in forge-std's `Vm`). A project
 * with forge-std inherits `Test` next to {TimeTestKit} and uses its `vm` instead; this example does without, so that
 * it installs from npm alone.
 */
interface ICheats {
    function prank(address msgSender) external;
    function deal(address account, uint256 newBalance) external;
    function expectRevert(bytes calldata revertData) external;
}

/**
 * @notice The sealed-bid auction tested the way a dApp team would with forge: {TimeTestKit} deploys the oracle with
 * the public development keys, signs proofs inside the test for any moment, moves the chain clock ({warpTo}) and
 * hands out the usual bad proofs. The same scenarios as examples/dapp's Hardhat tests.
 * @dev Proofs are built before `expectRevert` and `prank`: signing calls the SHA-256 precompile, which would be the
 * "next call" those cheatcodes apply to.
 */
contract SealedBidAuctionTest is TimeTestKit {
    ICheats private constant _VM = ICheats(0x7109709ECfa91a80626fF3989D68f67F5b1DD12D);
    uint128 private constant _SECOND_NS = 1e9;
    /// @dev 2026-01-01T00:00:00Z, ns: where every test starts.
    uint128 private constant _START_NS = 1_767_225_600 * _SECOND_NS;

    address private immutable _ALICE = address(0xA11CE);
    address private immutable _BOB = address(0xB0B);

    SealedBidAuction private _auction;
    uint128 private _biddingEndNs;
    uint128 private _revealEndNs;

    /// @notice A value differs from the expected one.
    error Unexpected(string what, uint256 expected, uint256 actual);

    function setUp() public {
        deployAttestedTime();
        warpTo(_START_NS);
        _biddingEndNs = _START_NS + 60 * _SECOND_NS;
        _revealEndNs = _START_NS + 120 * _SECOND_NS;
        _auction = new SealedBidAuction(timeOracle, _biddingEndNs, _revealEndNs);
        _VM.deal(_ALICE, 10 ether);
        _VM.deal(_BOB, 10 ether);
    }

    function test_usesTheKitsOracle_whichAcceptsTheKitsProofs() public view {
        _assertEq("auction's oracle", uint160(address(timeOracle)), uint160(address(_auction.timeOracle())));
        _assertEq("verifyTimeProof(proofNow())", 1, timeOracle.verifyTimeProof(proofNow()) ? 1 : 0);
    }

    function test_sealedBidsBeforeTheDeadline_eachBidderUnderTheirOwnKey() public {
        TimeProof memory aliceProof = proofNow();
        // Bob acts first with a newer proof: with one key per bidder it does not block Alice's older, fresh one.
        warpTo(chainNowNs() + 2 * _SECOND_NS);
        _bid(_BOB, 2 ether, _commitment(_BOB, 1 ether, bytes32(uint256(2))), proofNow());
        _bid(_ALICE, 3 ether, _commitment(_ALICE, 3 ether, bytes32(uint256(1))), aliceProof);
        _assertEq("Alice's deposit", 3 ether, _auction.deposits(_ALICE));
        _assertEq("Bob's deposit", 2 ether, _auction.deposits(_BOB));
        // The same proof twice for one bidder is a replay.
        bytes32 aliceKey = bytes32(uint256(uint160(_ALICE)));
        _VM.expectRevert(
            abi.encodeWithSelector(
                ITimeConsumer.TimeConsumerProofNotNewer.selector, aliceKey, aliceProof.nanoMoment, aliceProof.nanoMoment
            )
        );
        _bid(_ALICE, 1, bytes32(uint256(3)), aliceProof);
    }

    function test_refusesABidAfterTheDeadline_alsoWithAStillFreshProofOfAnEarlierMoment() public {
        TimeProof memory early = proofAt(_biddingEndNs - _SECOND_NS);
        warpTo(_biddingEndNs + _SECOND_NS);
        TimeProof memory late = proofNow();
        _VM.expectRevert(
            abi.encodeWithSelector(ITimeConsumer.TimeConsumerTooLate.selector, late.nanoMoment, _biddingEndNs)
        );
        _bid(_ALICE, 1, bytes32(uint256(1)), late);
        _VM.expectRevert(
            abi.encodeWithSelector(ITimeConsumer.TimeConsumerChainPastDeadline.selector, chainNowNs(), _biddingEndNs)
        );
        _bid(_ALICE, 1, bytes32(uint256(1)), early);
    }

    function test_refusesEveryBadProof() public {
        for (uint256 kind = 0; kind < uint256(InvalidProofKind.BelowQuorum); ++kind) {
            TimeProof memory proof = invalidProof(InvalidProofKind(kind));
            _VM.expectRevert(abi.encodeWithSignature("Error(string)", "Invalid time proof"));
            _bid(_ALICE, 1, bytes32(uint256(1)), proof);
        }
    }

    function test_refusesAProofBelowQuorum_andTakesOneThatMeetsIt() public {
        deployAttestedTime(2, false, false); // an oracle that wants two nodes
        _auction = new SealedBidAuction(timeOracle, _biddingEndNs, _revealEndNs);
        TimeProof memory oneNode = invalidProof(InvalidProofKind.BelowQuorum);
        _VM.expectRevert(abi.encodeWithSignature("Error(string)", "Invalid time proof"));
        _bid(_ALICE, 1, bytes32(uint256(1)), oneNode);
        _bid(_ALICE, 1, bytes32(uint256(1)), proofNow()); // two nodes: accepted
    }

    function test_revealsInTheWindow_endsAfterIt_andPaysTheSellerAndTheLosers() public {
        bytes32 aliceSalt = bytes32(uint256(0x0a));
        bytes32 bobSalt = bytes32(uint256(0x0b));
        _bid(_ALICE, 4 ether, _commitment(_ALICE, 3 ether, aliceSalt), proofNow());
        _bid(_BOB, 2 ether, _commitment(_BOB, 2 ether, bobSalt), proofNow());
        // Too early to reveal, then inside the window.
        TimeProof memory tooEarly = proofAt(chainNowNs() + 1);
        _VM.expectRevert(
            abi.encodeWithSelector(ITimeConsumer.TimeConsumerTooEarly.selector, tooEarly.nanoMoment, _biddingEndNs)
        );
        _VM.prank(_ALICE);
        _auction.reveal(3 ether, aliceSalt, tooEarly);
        warpTo(_biddingEndNs + _SECOND_NS);
        TimeProof memory inWindow = proofNow();
        _VM.expectRevert(abi.encodeWithSelector(SealedBidAuction.AuctionBadReveal.selector, _BOB));
        _VM.prank(_BOB);
        _auction.reveal(5 ether, bobSalt, inWindow);
        _VM.prank(_ALICE);
        _auction.reveal(3 ether, aliceSalt, inWindow);
        warpTo(_biddingEndNs + 2 * _SECOND_NS);
        inWindow = proofNow();
        _VM.prank(_BOB);
        _auction.reveal(2 ether, bobSalt, inWindow);
        _assertEq("highest bidder", uint160(_ALICE), uint160(_auction.highestBidder()));
        _assertEq("highest bid", 3 ether, _auction.highestBid());
        warpTo(_revealEndNs);
        _auction.end(proofNow());
        _assertEq("owed to the seller", 3 ether, _auction.owed(address(this)));
        _assertEq("owed to Alice", 1 ether, _auction.owed(_ALICE));
        _assertEq("owed to Bob", 2 ether, _auction.owed(_BOB));
        // Ended once: a newer proof gets past the time guard and meets the auction's own rule.
        warpTo(_revealEndNs + 2 * _SECOND_NS);
        TimeProof memory newer = proofNow();
        _VM.expectRevert(abi.encodeWithSelector(SealedBidAuction.AuctionAlreadyEnded.selector));
        _auction.end(newer);
    }

    function _bid(address bidder, uint256 deposit, bytes32 commitment, TimeProof memory proof) private {
        _VM.prank(bidder);
        _auction.bid{value: deposit}(commitment, proof);
    }

    function _commitment(address bidder, uint256 amount, bytes32 salt) private pure returns (bytes32) {
        return keccak256(abi.encode(bidder, amount, salt));
    }

    function _assertEq(string memory what, uint256 expected, uint256 actual) private pure {
        require(actual == expected, Unexpected(what, expected, actual));
    }
}
