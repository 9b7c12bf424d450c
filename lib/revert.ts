/**
 * Decoding a contract revert from a viem error, by Solidity error name and arguments (never by message text).
 * One implementation for the demo, the deploy tooling and the tests.
 */
import { BaseError, ContractFunctionRevertedError, decodeErrorResult, type Abi, type Hex } from "viem";

export interface DecodedRevertData {
  /** The custom error's name; `Error` for a `require`/`revert` string, whose text is `args[0]`. */
  errorName: string;
  args: readonly unknown[];
}

/**
 * The custom error an error chain carries, or undefined when it carries none. viem normally builds a
 * ContractFunctionRevertedError; Hardhat's in-process network instead hands back the raw revert data
 * (`data: 0x<selector‖args>`) on an inner cause, which is decoded here against `abi`.
 */
export function decodeRevert(error: unknown, abi: Abi): DecodedRevertData | undefined {
  if (!(error instanceof BaseError)) return undefined;
  const reverted = error.walk((cause) => cause instanceof ContractFunctionRevertedError);
  if (reverted instanceof ContractFunctionRevertedError && reverted.data !== undefined) {
    return { errorName: reverted.data.errorName, args: reverted.data.args ?? [] };
  }
  const withData = error.walk((cause) => {
    const data = (cause as { data?: unknown } | null)?.data;
    return typeof data === "string" && /^0x[0-9a-fA-F]{8}/.test(data);
  }) as { data: Hex } | null;
  if (withData === null) return undefined;
  const decoded = decodeErrorResult({ abi, data: withData.data });
  return { errorName: decoded.errorName, args: (decoded.args as readonly unknown[] | undefined) ?? [] };
}
