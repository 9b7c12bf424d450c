// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {TimeOracle} from "../TimeOracle.sol";
import {TimeScheduler} from "../TimeScheduler.sol";
import {TimeBridge} from "../TimeBridge.sol";
import {TimeProof} from "../interfaces/ITimeOracle.sol";
import {AccuracyTiers} from "../libraries/AccuracyTiers.sol";
import {TimeProofLib} from "../libraries/TimeProofLib.sol";

/**
 * @notice The forge cheatcodes the kit uses (their signatures as in forge-std's `Vm`), declared here so that the kit
 * needs no forge-std: a test may inherit forge-std's `Test` and {TimeTestKit} side by side, or the kit alone.
 */
interface ITimeTestKitCheats {
    function sign(uint256 privateKey, bytes32 digest) external pure returns (uint8 v, bytes32 r, bytes32 s);
    function signP256(uint256 privateKey, bytes32 digest) external pure returns (bytes32 r, bytes32 s);
    function publicKeyP256(uint256 privateKey) external pure returns (uint256 publicKeyX, uint256 publicKeyY);
    function addr(uint256 privateKey) external pure returns (address keyAddr);
    function warp(uint256 newTimestamp) external;
    function label(address account, string calldata newLabel) external;
}

/**
 * @title TimeTestKit
 * @notice `attested-time/testing` for forge: inherit it in a test, call {deployAttestedTime} in `setUp`, and sign
 * valid (or deliberately invalid) {TimeProof}s for any moment inside the test, with no node running:
 *
 * ```solidity
 * import {Test} from "forge-std/Test.sol";
 * import {TimeTestKit} from "attested-time/contracts/testing/TimeTestKit.sol";
 *
 * contract AuctionTest is Test, TimeTestKit {
 *     function setUp() public {
 *         deployAttestedTime();                          // the oracle, with the development card and nodes
 *         auction = new Auction(timeOracle, ...);
 *     }
 *     function test_bid() public {
 *         warpTo(biddingOpensNs);                        // block.timestamp so that a proof of the moment is fresh
 *         auction.bid(proofAt(biddingOpensNs));          // valid; invalidProof(InvalidProofKind.Expired) is not
 *     }
 * }
 * ```
 *
 * It does what the TypeScript kit (`createTimeTestKit`, testing/index.ts) does, and its proofs are the same bytes
 * for the same moment, nodes and accuracy (test/testing/forgeKit.test.ts compares them): the card signs with
 * `vm.signP256` and the nodes with `vm.sign`, both deterministic (RFC 6979) as the TypeScript signers are, both
 * low-S, with the node entries in ascending address order as the oracle demands (docs/protocol.md §5.3). Proofs sign
 * {LOCAL_MESH_ACCURACY_NS} by default, what the local network's mesh really signs, so a consumer whose bound no
 * software network meets fails here rather than on a real chain; the oracle accepts up to the software-mesh tier.
 *
 * Build a proof before `vm.expectRevert` or `vm.prank`: signing calls the SHA-256 precompile, which would be the
 * "next call" those cheatcodes apply to. Run forge with `evm_version = "osaka"` (or later): from that fork on its EVM
 * has the P-256 precompile at 0x100; before it the oracle verifies card signatures in Solidity (~240,000 gas).
 * @dev FIXED DEVELOPMENT KEYS (protocol/devkeys.ts): public knowledge. The kit is for forge tests only; nothing it
 * deploys or signs may reach a chain that matters.
 */
abstract contract TimeTestKit {
    /// @notice The §6 rules {invalidProof} breaks, one proof each (the kinds of the TypeScript kit, same order).
    enum InvalidProofKind {
        Expired,
        Future,
        HighS,
        UnknownCard,
        TamperedAccuracy,
        BelowQuorum
    }

    /**
     * @notice What `npm run bench:mesh` measured the local network's mesh to sign (p99, rounded up to 10 µs), ns:
     * the default accuracy of {proofAt}. Mirrors `LOCAL_MESH_ACCURACY_NS` of protocol/constants.ts
     * (test/testing/forgeKit.test.ts compares them).
     */
    uint32 internal constant LOCAL_MESH_ACCURACY_NS = 150_000;

    /// @notice The development card's P-256 scalar (protocol/devkeys.ts `DEV_CARD_PRIVATE_KEY`).
    uint256 internal constant DEV_CARD_PRIVATE_KEY = 0x1b0baf96075236dcc25caeea1386cf4ca4dedbaf99d4c20ebed1fc909abdcdd4;
    /// @notice A second card, never registered (`DEV_OTHER_CARD_PRIVATE_KEY`): the signer of unknown-card proofs.
    uint256 internal constant DEV_OTHER_CARD_PRIVATE_KEY =
        0x1d70b0ef6c458d7c917592fe0737132d6792968376323514ffdf9c502feb75e9;
    /// @notice The development nodes' secp256k1 scalars (`DEV_NODE_PRIVATE_KEYS`), in the TypeScript kit's order.
    uint256 internal constant DEV_NODE_0_PRIVATE_KEY =
        0x74d6e1439a88cc7c3b6a3e5d5a212458bfbe75223b289f3a0e9d451a3a962a6a;
    uint256 internal constant DEV_NODE_1_PRIVATE_KEY =
        0xc51f235dd29ea10ef6141d522c8655a3bc01105b262de5f7f2ecfb890650854c;
    uint256 internal constant DEV_NODE_2_PRIVATE_KEY =
        0xc23b9b9fb0cda9ef1aba881aea7020dec71b329a5b3b5f03f595bade134828c7;
    /// @notice How many development nodes there are: the largest quorum and node count.
    uint256 internal constant DEV_NODE_COUNT = 3;

    /// @notice How far {invalidProof}'s expired and future proofs lie from the chain clock, ns: beyond every default.
    uint128 internal constant INVALID_PROOF_OFFSET_NS = 3_600 * 1e9;

    /// @dev `address(uint160(uint256(keccak256("hevm cheat code"))))`, where forge serves its cheatcodes.
    ITimeTestKitCheats private constant _CHEATS = ITimeTestKitCheats(0x7109709ECfa91a80626fF3989D68f67F5b1DD12D);
    /// @dev Open validity windows, as scripts/deploy.ts registers the development keys (`NO_EXPIRY_NS`).
    uint64 private constant _NO_EXPIRY_NS = type(uint64).max;

    /// @notice The oracle {deployAttestedTime} deployed (its admin and registrar: this test contract).
    TimeOracle internal timeOracle;
    /// @notice The scheduler on {timeOracle}, when asked for; else address 0.
    TimeScheduler internal timeScheduler;
    /// @notice The bridge on {timeOracle}, when asked for; else address 0.
    TimeBridge internal timeBridge;
    /// @notice Nodes a proof needs, as set on {timeOracle}: how many sign {proofAt}'s one-argument form.
    uint256 internal timeNodeQuorum;

    /// @notice {deployAttestedTime} was asked for a quorum or a proof for a node count outside 1..DEV_NODE_COUNT.
    error TimeTestKitNodeCountOutOfRange(uint256 nodes, uint256 maxNodes);
    /// @notice A proof was asked for before {deployAttestedTime}: the kit knows no quorum yet.
    error TimeTestKitNotDeployed();
    /// @notice A below-quorum proof needs a quorum of at least 2 (one node less must still be a proof).
    error TimeTestKitBelowQuorumNeedsQuorum(uint256 nodeQuorum);
    /**
     * @notice An expired proof lies INVALID_PROOF_OFFSET_NS before the chain clock, which is earlier than that (forge
     * starts at `block.timestamp` 1): {warpTo} a real moment first.
     */
    error TimeTestKitChainClockTooEarly(uint256 chainNowNs, uint256 minChainNowNs);

    // ================================================================================================ deployment

    /// @notice {deployAttestedTime} with a quorum of 1 and the oracle only (fast).
    function deployAttestedTime() internal returns (TimeOracle) {
        return deployAttestedTime(1, false, false);
    }

    /**
     * @notice Deploys the oracle as the local network does (scripts/deploy.ts with the development registrations):
     * this contract is its admin and registrar; the development card and the three nodes are registered with open
     * windows; `maxAcceptableDrift` is the software-mesh tier (10 ms) so that proofs signing the mesh's accuracy
     * verify; the quorum is `nodeQuorum`. Optionally the scheduler and the bridge next to it.
     * @param nodeQuorum Nodes a proof needs, 1 to DEV_NODE_COUNT.
     */
    function deployAttestedTime(uint256 nodeQuorum, bool withScheduler, bool withBridge)
        internal
        returns (TimeOracle oracle)
    {
        _checkNodeCount(nodeQuorum);
        oracle = new TimeOracle(address(this));
        oracle.grantRole(oracle.REGISTRAR_ROLE(), address(this));
        (uint256 cardX, uint256 cardY) = _CHEATS.publicKeyP256(DEV_CARD_PRIVATE_KEY);
        oracle.registerCard(bytes32(cardX), bytes32(cardY), 0, _NO_EXPIRY_NS);
        for (uint256 i = 0; i < DEV_NODE_COUNT; ++i) {
            oracle.registerNode(_CHEATS.addr(devNodePrivateKey(i)), 0, _NO_EXPIRY_NS);
        }
        oracle.setMaxAcceptableDrift(AccuracyTiers.SOFTWARE_MESH_NS);
        // After the registrations: the oracle refuses a quorum above its active nodes.
        // casting to 'uint64' is safe because nodeQuorum ≤ DEV_NODE_COUNT (checked above)
        // forge-lint: disable-next-line(unsafe-typecast)
        oracle.setNodeQuorum(uint64(nodeQuorum));
        _CHEATS.label(address(oracle), "TimeOracle");
        timeOracle = oracle;
        timeNodeQuorum = nodeQuorum;
        if (withScheduler) {
            timeScheduler = new TimeScheduler(oracle);
            _CHEATS.label(address(timeScheduler), "TimeScheduler");
        }
        if (withBridge) {
            timeBridge = new TimeBridge(oracle);
            _CHEATS.label(address(timeBridge), "TimeBridge");
        }
    }

    // ================================================================================================ proofs

    /// @notice A valid proof of `nanoMoment`: the quorum of development nodes, {LOCAL_MESH_ACCURACY_NS}.
    function proofAt(uint128 nanoMoment) internal view returns (TimeProof memory) {
        if (timeNodeQuorum == 0) revert TimeTestKitNotDeployed();
        return proofAt(nanoMoment, timeNodeQuorum, LOCAL_MESH_ACCURACY_NS);
    }

    /**
     * @notice A proof of `nanoMoment` signed by the card and the first `nodes` development nodes over `accuracyNs`,
     * each node's timestamp being `nanoMoment` (as the TypeScript kit signs). Valid on {timeOracle} when `nodes`
     * meets the quorum, `accuracyNs` its `maxAcceptableDrift` and the chain clock makes the moment fresh ({warpTo}).
     * Needs no deployment: the keys are fixed.
     */
    function proofAt(uint128 nanoMoment, uint256 nodes, uint32 accuracyNs)
        internal
        view
        returns (TimeProof memory proof)
    {
        _checkNodeCount(nodes);
        (bytes32 cardId, bytes32 r, bytes32 s) = _signHardware(DEV_CARD_PRIVATE_KEY, nanoMoment);
        proof.nanoMoment = nanoMoment;
        proof.hardwareSignature = abi.encodePacked(cardId, r, s);
        proof.accuracy = accuracyNs;
        proof.nodeSignature = _signNodeEntries(cardId, nanoMoment, accuracyNs, r, s, nodes);
    }

    /// @notice {proofAt} of the chain clock now: fresh.
    function proofNow() internal view returns (TimeProof memory) {
        return proofAt(chainNowNs());
    }

    /// @notice The chain clock, ns: `block.timestamp * 1e9`, as the oracle reads it.
    function chainNowNs() internal view returns (uint128) {
        return uint128(block.timestamp * TimeProofLib.NS_PER_SECOND);
    }

    /**
     * @notice Sets `block.timestamp` to the second holding `nanoMoment`, rounded up, so that a proof of it is
     * fresh: at most 1 s in the future of the chain clock, well inside the oracle's `maxFutureDrift`. Unlike the
     * TypeScript kit's `increaseTo` on a Hardhat chain, forge's clock may also move backwards.
     */
    function warpTo(uint128 nanoMoment) internal {
        _CHEATS.warp((uint256(nanoMoment) + TimeProofLib.NS_PER_SECOND - 1) / TimeProofLib.NS_PER_SECOND);
    }

    /**
     * @notice A proof the oracle refuses for one §6 rule (docs/protocol.md §6.2), everything else valid, built as
     * the TypeScript kit's `invalidProof` builds it around the chain clock now.
     */
    function invalidProof(InvalidProofKind kind) internal view returns (TimeProof memory proof) {
        uint128 nowNs = chainNowNs();
        if (kind == InvalidProofKind.Expired) {
            if (nowNs < INVALID_PROOF_OFFSET_NS) revert TimeTestKitChainClockTooEarly(nowNs, INVALID_PROOF_OFFSET_NS);
            return proofAt(nowNs - INVALID_PROOF_OFFSET_NS);
        }
        if (kind == InvalidProofKind.Future) return proofAt(nowNs + INVALID_PROOF_OFFSET_NS);
        if (kind == InvalidProofKind.BelowQuorum) {
            if (timeNodeQuorum < 2) revert TimeTestKitBelowQuorumNeedsQuorum(timeNodeQuorum);
            return proofAt(nowNs, timeNodeQuorum - 1, LOCAL_MESH_ACCURACY_NS);
        }
        proof = proofAt(nowNs);
        if (kind == InvalidProofKind.TamperedAccuracy) {
            // The nodes signed the accuracy: any change breaks every entry.
            ++proof.accuracy;
        } else if (kind == InvalidProofKind.HighS) {
            // The same card signature with s replaced by n − s: valid ECDSA, refused as malleable (§3).
            (bytes32 cardId, bytes32 r, bytes32 s) = _decodeHardwareSignature(proof.hardwareSignature);
            proof.hardwareSignature = abi.encodePacked(cardId, r, TimeProofLib.P256_N - uint256(s));
        } else {
            // UnknownCard: an unregistered card's signature of the same moment, under the registered card's entries.
            (bytes32 cardId, bytes32 r, bytes32 s) = _signHardware(DEV_OTHER_CARD_PRIVATE_KEY, nowNs);
            proof.hardwareSignature = abi.encodePacked(cardId, r, s);
        }
    }

    // ================================================================================================ keys

    /// @notice Development node `index` (0..DEV_NODE_COUNT - 1)'s secp256k1 scalar.
    function devNodePrivateKey(uint256 index) internal pure returns (uint256) {
        if (index == 0) return DEV_NODE_0_PRIVATE_KEY;
        if (index == 1) return DEV_NODE_1_PRIVATE_KEY;
        if (index == 2) return DEV_NODE_2_PRIVATE_KEY;
        revert TimeTestKitNodeCountOutOfRange(index + 1, DEV_NODE_COUNT);
    }

    /// @notice The development card's id: sha256 of its uncompressed public key 0x04 ‖ X ‖ Y (docs/protocol.md §3).
    function devCardId() internal pure returns (bytes32) {
        return _cardId(DEV_CARD_PRIVATE_KEY);
    }

    // ================================================================================================ private

    function _checkNodeCount(uint256 nodes) private pure {
        if (nodes == 0 || nodes > DEV_NODE_COUNT) revert TimeTestKitNodeCountOutOfRange(nodes, DEV_NODE_COUNT);
    }

    function _cardId(uint256 cardPrivateKey) private pure returns (bytes32) {
        (uint256 x, uint256 y) = _CHEATS.publicKeyP256(cardPrivateKey);
        return sha256(abi.encodePacked(bytes1(0x04), x, y));
    }

    /// @dev The card's signature of the hardware message (TimeProofLib.hwDigest), s normalised to the low half.
    function _signHardware(uint256 cardPrivateKey, uint128 nanoMoment)
        private
        view
        returns (bytes32 cardId, bytes32 r, bytes32 s)
    {
        cardId = _cardId(cardPrivateKey);
        (r, s) = _CHEATS.signP256(cardPrivateKey, TimeProofLib.hwDigest(cardId, nanoMoment));
        // forge 1.7 already returns low-S; normalising here keeps the protocol's rule (§3) independent of that.
        if (uint256(s) > TimeProofLib.P256_HALF_N) s = bytes32(TimeProofLib.P256_N - uint256(s));
    }

    /// @dev The first `nodes` development nodes' 80-byte entries, concatenated in ascending address order.
    function _signNodeEntries(
        bytes32 cardId,
        uint128 nanoMoment,
        uint32 accuracyNs,
        bytes32 r,
        bytes32 s,
        uint256 nodes
    ) private pure returns (bytes memory nodeSignature) {
        bytes32 digest = TimeProofLib.timeAttestationDigest(
            cardId,
            nanoMoment,
            accuracyNs,
            TimeProofLib.hardwareSignatureHash(r, s),
            nanoMoment // nodeTimestamp: the TypeScript kit's nodes read the moment itself
        );
        uint256[] memory keys = _keysByAddress(nodes);
        for (uint256 i = 0; i < nodes; ++i) {
            nodeSignature = bytes.concat(nodeSignature, _signNodeEntry(keys[i], digest, nanoMoment));
        }
    }

    /// @dev One entry: nodeTimestamp (16) ‖ r (32) ‖ yParityAndS (32), EIP-2098 compact and low-S (EIP-2).
    function _signNodeEntry(uint256 nodePrivateKey, bytes32 digest, uint128 nodeTimestamp)
        private
        pure
        returns (bytes memory)
    {
        (uint8 v, bytes32 r, bytes32 s) = _CHEATS.sign(nodePrivateKey, digest);
        uint256 yParity = v - 27;
        if (uint256(s) > TimeProofLib.SECP256K1_HALF_N) {
            // As for the card (forge returns low-S already): n − s signs the same digest with the other y, so the
            // parity flips with it.
            s = bytes32(TimeProofLib.SECP256K1_N - uint256(s));
            yParity ^= 1;
        }
        return abi.encodePacked(nodeTimestamp, r, bytes32((yParity << 255) | uint256(s)));
    }

    /// @dev The first `nodes` development node keys, sorted by address ascending (insertion sort: at most 3).
    function _keysByAddress(uint256 nodes) private pure returns (uint256[] memory keys) {
        keys = new uint256[](nodes);
        for (uint256 i = 0; i < nodes; ++i) {
            uint256 key = devNodePrivateKey(i);
            address keyAddress = _CHEATS.addr(key);
            uint256 j = i;
            for (; j > 0 && _CHEATS.addr(keys[j - 1]) > keyAddress; --j) {
                keys[j] = keys[j - 1];
            }
            keys[j] = key;
        }
    }

    function _decodeHardwareSignature(bytes memory hardwareSignature)
        private
        pure
        returns (bytes32 cardId, bytes32 r, bytes32 s)
    {
        return abi.decode(hardwareSignature, (bytes32, bytes32, bytes32));
    }
}
