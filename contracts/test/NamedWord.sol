// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/**
 * @notice A constant as inline assembly sees it, with the name of the library constant it is (or copies):
 * `Library.NAME`. Numbers are right-aligned words, `bytesN` values left-aligned (test/contracts/constants.test.ts).
 */
struct NamedWord {
    string name;
    bytes32 value;
}
