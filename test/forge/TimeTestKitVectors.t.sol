// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

// forge runs the functions named test_*: its naming, not mixedCase.
// solhint-disable func-name-mixedcase

import {TimeProof} from "../../contracts/interfaces/ITimeOracle.sol";
import {TimeTestKit} from "../../contracts/testing/TimeTestKit.sol";
import {TEST_CHEATS} from "./TestCheats.sol";

/**
 * @notice The Solidity kit signs the TypeScript kit's bytes: every proof of test/vectors/test-kit-v1.json (what
 * `createTimeTestKit` signs, test/vectors/testKitVectors.ts) is rebuilt with {TimeTestKit} and compared field by field.
 */
contract TimeTestKitVectorsTest is TimeTestKit {
    string private constant _VECTORS = "test/vectors/test-kit-v1.json";

    /// @notice A field of a rebuilt proof differs from the vector's.
    error VectorMismatch(string vector, string field, bytes expected, bytes actual);

    function test_validProofsAreTheTypeScriptKits() public {
        string memory json = TEST_CHEATS.readFile(_VECTORS);
        deployAttestedTime();
        uint256 count;
        for (; TEST_CHEATS.keyExistsJson(json, _at(".valid", count)); ++count) {
            string memory vector = _at(".valid", count);
            TimeProof memory proof = proofAt(
                uint128(TEST_CHEATS.parseJsonUint(json, string.concat(vector, ".nanoMoment"))),
                TEST_CHEATS.parseJsonUint(json, string.concat(vector, ".nodes")),
                uint32(TEST_CHEATS.parseJsonUint(json, string.concat(vector, ".accuracyNs")))
            );
            _assertProof(json, vector, proof);
        }
        require(count == 3, VectorMismatch(_VECTORS, ".valid.length", abi.encode(3), abi.encode(count)));
    }

    function test_invalidProofsAreTheTypeScriptKits() public {
        string memory json = TEST_CHEATS.readFile(_VECTORS);
        uint256 count;
        for (; TEST_CHEATS.keyExistsJson(json, _at(".invalid", count)); ++count) {
            string memory vector = _at(".invalid", count);
            uint256 nodeQuorum = TEST_CHEATS.parseJsonUint(json, string.concat(vector, ".nodeQuorum"));
            if (nodeQuorum != timeNodeQuorum) deployAttestedTime(nodeQuorum, false, false);
            warpTo(uint128(TEST_CHEATS.parseJsonUint(json, string.concat(vector, ".chainNowS")) * 1e9));
            uint256 kind = TEST_CHEATS.parseJsonUint(json, string.concat(vector, ".kindIndex"));
            _assertProof(json, vector, invalidProof(InvalidProofKind(kind)));
        }
        // One per kind: the TypeScript kit's INVALID_PROOF_KINDS and InvalidProofKind agree in number and order.
        uint256 kinds = uint256(type(InvalidProofKind).max) + 1;
        require(count == kinds, VectorMismatch(_VECTORS, ".invalid.length", abi.encode(kinds), abi.encode(count)));
    }

    function _assertProof(string memory json, string memory vector, TimeProof memory proof) private pure {
        _assertField(
            vector,
            ".nanoMoment",
            abi.encode(TEST_CHEATS.parseJsonUint(json, _field(vector, ".nanoMoment"))),
            abi.encode(proof.nanoMoment)
        );
        _assertField(
            vector,
            ".hardwareSignature",
            TEST_CHEATS.parseJsonBytes(json, _field(vector, ".hardwareSignature")),
            proof.hardwareSignature
        );
        _assertField(
            vector,
            ".nodeSignature",
            TEST_CHEATS.parseJsonBytes(json, _field(vector, ".nodeSignature")),
            proof.nodeSignature
        );
        _assertField(
            vector,
            ".accuracy",
            abi.encode(TEST_CHEATS.parseJsonUint(json, _field(vector, ".accuracy"))),
            abi.encode(proof.accuracy)
        );
    }

    function _assertField(string memory vector, string memory field, bytes memory expected, bytes memory actual)
        private
        pure
    {
        require(keccak256(expected) == keccak256(actual), VectorMismatch(vector, field, expected, actual));
    }

    function _at(string memory array, uint256 index) private pure returns (string memory) {
        return string.concat(array, "[", TEST_CHEATS.toString(index), "]");
    }

    function _field(string memory vector, string memory field) private pure returns (string memory) {
        return string.concat(vector, ".proof", field);
    }
}
