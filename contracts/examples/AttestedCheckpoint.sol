// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle, TimeProof} from "../interfaces/ITimeOracle.sol";
import {TimeConsumer} from "../TimeConsumer.sol";
import {AccuracyTiers} from "../libraries/AccuracyTiers.sol";

/**
 * @title AttestedCheckpoint
 * @notice The smallest useful consumer, as the README writes one: anyone records that an event (a document hash, an
 * order id) existed at an attested moment. It accepts proofs from a mesh of software clocks
 * ({AccuracyTiers-SOFTWARE_MESH_NS}, 10 ms), so the local network's live proofs pass; compare {TimeLockedVault},
 * which demands a hardware-timestamped network.
 *
 * The action key is the recorder: proofs are public, and one recorder consuming a newer proof never blocks another.
 */
contract AttestedCheckpoint is TimeConsumer {
    /// @notice `recorder` recorded `subject` at the attested moment `nanoMoment` (ns), within `accuracy` ns.
    event Checkpointed(address indexed recorder, bytes32 indexed subject, uint128 nanoMoment, uint32 accuracy);

    /// @param oracle The oracle that verifies the proofs presented to {checkpoint}.
    constructor(ITimeOracle oracle) TimeConsumer(oracle, AccuracyTiers.SOFTWARE_MESH_NS) {}

    /// @notice Records `subject` at the moment `proof` attests (newer than the caller's previous checkpoint).
    function checkpoint(bytes32 subject, TimeProof calldata proof) external {
        uint128 nanoMoment = _consumeTime(proof, bytes32(uint256(uint160(msg.sender))));
        emit Checkpointed(msg.sender, subject, nanoMoment, proof.accuracy);
    }
}
