/**
 * Vectors of the test kits' proofs (test/vectors/test-kit-v1.json): what the TypeScript kit (`createTimeTestKit`,
 * testing/index.ts) signs for fixed moments, node counts and accuracies, and the invalid proof of each kind at a
 * fixed chain clock. The Solidity kit (contracts/testing/TimeTestKit.sol) must sign the same bytes: its forge test
 * (test/forge/TimeTestKitVectors.t.sol) reads this file and compares; test/testing/forgeKit.test.ts rebuilds the
 * file from the TypeScript kit, compares it with the committed one, and runs that forge test.
 * `npx hardhat run test/vectors/write-test-kit-vectors.ts` rewrites it (deterministic: RFC 6979 on both sides).
 *
 * Format: integers that can exceed 2^53 are decimal strings, bytes lowercase 0x-hex:
 * {
 *   "valid":   [{ nanoMoment, nodes, accuracyNs, proof: Proof }],                -- kit.proofAt(nanoMoment, {nodes, accuracyNs})
 *   "invalid": [{ kind, kindIndex, nodeQuorum, chainNowS, proof: Proof }]         -- kit.invalidProof(kind) at that clock
 * }
 * Proof = { nanoMoment, hardwareSignature, nodeSignature, accuracy }; kindIndex is the kind's position in
 * INVALID_PROOF_KINDS, the same as TimeTestKit.InvalidProofKind's.
 */
import type { HardhatRuntimeEnvironment } from "hardhat/types";
import { LOCAL_MESH_ACCURACY_NS, NS_PER_SECOND } from "../../protocol/constants";
import type { TimeProof } from "../../protocol/types";
import { createTimeTestKit, INVALID_PROOF_KINDS } from "../../testing";

export const TEST_KIT_VECTORS_FILE_NAME = "test-kit-v1.json";

/** A moment with every digit of its nanoseconds significant: 2026-01-01T00:00:00.123456789Z. */
const MOMENT_NS = 1_767_225_600_123_456_789n;
/** The kit's default (quorum 1, the mesh's accuracy), every node, a card-like accuracy, and two of three nodes. */
const VALID_CASES = [
  { nanoMoment: MOMENT_NS, nodes: 1, accuracyNs: LOCAL_MESH_ACCURACY_NS },
  { nanoMoment: MOMENT_NS, nodes: 3, accuracyNs: 50 },
  { nanoMoment: MOMENT_NS + 1n, nodes: 2, accuracyNs: LOCAL_MESH_ACCURACY_NS },
] as const;
/**
 * Chain clocks (s) of the invalid proofs, far ahead of any test's chain (a Hardhat clock only moves forward): one per
 * kit, quorum 1 for every kind but below-quorum, which needs quorum 2.
 */
const INVALID_CHAIN_NOW_S = { 1: 2_000_000_000n, 2: 2_000_000_100n } as const;

function proofJson(proof: TimeProof) {
  return { nanoMoment: proof.nanoMoment.toString(), hardwareSignature: proof.hardwareSignature, nodeSignature: proof.nodeSignature, accuracy: proof.accuracy };
}

/**
 * Builds the vectors with the TypeScript kit on `hre`'s chain. Moves that chain's clock to 2033: run it inside an
 * `evm_snapshot` / `evm_revert` pair, or in a process of its own.
 */
export async function buildTestKitVectors(hre: HardhatRuntimeEnvironment) {
  const quorumOne = await createTimeTestKit(hre, { nodeQuorum: 1 });
  const valid = VALID_CASES.map((c) => ({ nanoMoment: c.nanoMoment.toString(), nodes: c.nodes, accuracyNs: c.accuracyNs, proof: proofJson(quorumOne.proofAt(c.nanoMoment, { nodes: c.nodes, accuracyNs: c.accuracyNs })) }));
  const invalid = [];
  for (const nodeQuorum of [1, 2] as const) {
    const kit = nodeQuorum === 1 ? quorumOne : await createTimeTestKit(hre, { nodeQuorum });
    const chainNowS = INVALID_CHAIN_NOW_S[nodeQuorum];
    await kit.increaseTo(chainNowS * NS_PER_SECOND);
    if ((await kit.chainNowNs()) !== chainNowS * NS_PER_SECOND) throw new Error(`the chain is past ${chainNowS} s: vectors need a fresh chain`);
    const kinds = INVALID_PROOF_KINDS.filter((kind) => (kind === "below-quorum") === (nodeQuorum === 2));
    for (const kind of kinds) {
      invalid.push({ kind, kindIndex: INVALID_PROOF_KINDS.indexOf(kind), nodeQuorum, chainNowS: chainNowS.toString(), proof: proofJson(await kit.invalidProof(kind)) });
    }
  }
  return {
    version: 1,
    generator: "test/vectors/write-test-kit-vectors.ts",
    note: "Proofs of the TypeScript test kit (createTimeTestKit) with the public development keys; TimeTestKit.sol must sign the same bytes.",
    valid,
    invalid,
  };
}

/** The file's text: two-space JSON and a final newline. */
export async function testKitVectorsText(hre: HardhatRuntimeEnvironment): Promise<string> {
  return `${JSON.stringify(await buildTestKitVectors(hre), null, 2)}\n`;
}
