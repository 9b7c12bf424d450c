// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

import {ITimeOracle, TimeProof} from "../interfaces/ITimeOracle.sol";

/**
 * @title GasMeter
 * @notice Measures the execution gas of `verifyTimeProof` as one external call from a contract (scripts/bench-gas.ts):
 * the first call in a transaction is cold (it pays the oracle's and the snapshot's cold account access and the
 * cold storage read), the second, identical call is warm. Neither includes the transaction's 21,000 base gas or
 * its calldata.
 */
contract GasMeter {
    /// @notice One measurement: gas of the cold call, of the warm call, and what each returned.
    event VerifyGasMeasured(uint256 coldGas, uint256 warmGas, bool coldValid, bool warmValid);

    function measureVerify(
        ITimeOracle oracle,
        TimeProof calldata proof
    ) external returns (uint256 coldGas, uint256 warmGas, bool coldValid, bool warmValid) {
        bytes memory data = abi.encodeCall(ITimeOracle.verifyTimeProof, (proof));
        (coldGas, coldValid) = _call(address(oracle), data);
        (warmGas, warmValid) = _call(address(oracle), data);
        emit VerifyGasMeasured(coldGas, warmGas, coldValid, warmValid);
    }

    function _call(address target, bytes memory data) private view returns (uint256 used, bool valid) {
        assembly ("memory-safe") {
            // Only the STATICCALL and the callee's execution lie between the two GAS readings (plus the GAS
            // opcode itself, 2 gas). The call's output goes to the scratch space (0x00..0x20).
            mstore(0x00, 0)
            let before := gas()
            let success := staticcall(gas(), target, add(data, 0x20), mload(data), 0x00, 0x20)
            used := sub(before, gas())
            valid := and(success, eq(mload(0x00), 1))
        }
    }
}
