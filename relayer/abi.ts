/**
 * The part of each contract's ABI the relayer uses, written out so that the relayer runs from dist/ without
 * Hardhat's artifacts. test/relayer/abi.test.ts pins every fragment to the compiled artifacts, so a changed
 * contract fails the tests instead of the relayer at run time.
 */
import { parseAbi } from "viem";

const TIME_PROOF = "(uint128 nanoMoment, bytes hardwareSignature, bytes nodeSignature, uint32 accuracy)";
const CROSS_CHAIN_TIME = "(uint128 networkTime, uint256 targetChain, bytes proof, uint256 targetBlock)";
const SCHEDULED_CALL = "(address caller, uint64 nonce, uint128 executeAt, uint64 window, uint32 gasLimit, uint96 bounty, bytes data)";

export const ORACLE_ABI = parseAbi([
  `function submitTimeProof(${TIME_PROOF} proof)`,
  `function getCurrentTime() view returns (${TIME_PROOF} proof)`,
  `function verifyTimeProof(${TIME_PROOF} proof) view returns (bool valid)`,
  "function maxAttestationAge() view returns (uint64)",
  "function getCard(bytes32 cardId) view returns ((bytes32 publicKeyX, bytes32 publicKeyY, uint64 validFromNs, uint64 validUntilNs, uint8 status) card)",
  "function getNode(address node) view returns ((uint64 validFromNs, uint64 validUntilNs, uint8 status) info)",
  "function revokeCard(bytes32 cardId)",
  "function hasRole(bytes32 role, address account) view returns (bool)",
  "function GUARDIAN_ROLE() view returns (bytes32)",
  "error AccessControlUnauthorizedAccount(address account, bytes32 neededRole)",
  "error TimeOracleInvalidTimeProof(uint128 nanoMoment)",
  "error TimeOracleTimeProofNotNewer(uint128 nanoMoment, uint128 latestNanoMoment)",
  "error TimeOracleNoTime()",
  "error TimeOracleCardRevoked(bytes32 cardId)",
  "error TimeOracleUnknownCard(bytes32 cardId)",
]);

export const BRIDGE_ABI = parseAbi([
  `event TimeSent(bytes32 indexed messageId, uint256 indexed targetChain, uint64 nonce, ${CROSS_CHAIN_TIME} message)`,
  `function receiveTime(${CROSS_CHAIN_TIME} message) returns (bytes32 messageId)`,
  "function deliveredBlock(bytes32 messageId) view returns (uint256)",
  "function latestDelivery() view returns (bytes32 messageId, uint128 networkTime, uint256 targetBlock)",
  "function timeOracle() view returns (address)",
  "function sentCount() view returns (uint64)",
  `function sendTime(uint256 targetChain) returns (bytes32 messageId)`,
  "error TimeBridgeWrongChain(uint256 targetChain, uint256 chainId)",
  "error TimeBridgeTargetBlockSet(uint256 targetBlock)",
  "error TimeBridgeAlreadyDelivered(bytes32 messageId, uint256 deliveredBlock)",
  "error TimeBridgeMalformedProof(uint256 length)",
  "error TimeBridgeTimeMismatch(uint128 networkTime, uint128 nanoMoment)",
  "error TimeBridgeNotNewer(uint128 networkTime, uint128 latestNetworkTime)",
  "error TimeBridgeInvalidProof(bytes32 messageId, uint128 nanoMoment)",
]);

export const SCHEDULER_ABI = parseAbi([
  `event CallScheduled(bytes32 indexed callId, address indexed caller, ${SCHEDULED_CALL} request)`,
  `function executeCall(${SCHEDULED_CALL} request, ${TIME_PROOF} proof) returns (bool success)`,
  `function expireCall(${SCHEDULED_CALL} request)`,
  "function callStatus(bytes32 callId) view returns (uint8)",
  "function timeOracle() view returns (address)",
  "error SchedulerCallNotScheduled(bytes32 callId, uint8 status)",
  "error SchedulerTooEarly(uint128 executeAt, uint128 nanoMoment)",
  "error SchedulerTooLate(uint256 deadline, uint128 nanoMoment)",
  "error SchedulerChainPastDeadline(uint256 deadline, uint256 nowNs)",
  "error SchedulerInvalidProof(bytes32 callId, uint128 nanoMoment)",
  "error SchedulerInsufficientGas(uint256 gasLimit, uint256 gasRequired, uint256 gasAvailable)",
  "error SchedulerNotExpired(uint256 deadline, uint256 nowNs)",
]);

/** ITimeOracle.CardStatus and NodeStatus, by their numeric values. */
export const CARD_STATUS = ["None", "Active", "Revoked"] as const;
export const NODE_STATUS = ["None", "Active", "Inactive"] as const;

/** ITimeScheduler.CallStatus, by its numeric value. */
export const CALL_STATUS = ["None", "Scheduled", "Executed", "Failed", "Cancelled", "Expired"] as const;
export type CallStatusName = (typeof CALL_STATUS)[number];
