// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/**
 * @notice The forge cheatcodes the kit's own tests use beyond the kit's (signatures as in forge-std's `Vm`): this
 * repository does not vendor forge-std, and these tests need only a handful.
 */
interface ITestCheats {
    function readFile(string calldata path) external view returns (string memory data);
    function parseJsonUint(string calldata json, string calldata key) external pure returns (uint256);
    function parseJsonBytes(string calldata json, string calldata key) external pure returns (bytes memory);
    function parseJsonString(string calldata json, string calldata key) external pure returns (string memory);
    function keyExistsJson(string calldata json, string calldata key) external view returns (bool);
    function toString(uint256 value) external pure returns (string memory);
    function expectRevert(bytes calldata revertData) external;
}

/// @dev Where forge serves its cheatcodes.
ITestCheats constant TEST_CHEATS = ITestCheats(0x7109709ECfa91a80626fF3989D68f67F5b1DD12D);
