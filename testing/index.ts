/**
 * `attested-time/testing`: a test kit for dApp tests on a local Hardhat chain, as Chainlink Local, MockPyth and
 * RedStone's wrapper are for prices:
 *
 *   const kit = await createTimeTestKit(hre);           // inside loadFixture too
 *   kit.oracle                                          // the deployed oracle's address
 *   kit.proofAt(ns, { nodes: 2, accuracyNs: 100 })      // a valid TimeProof for any moment, signed in-process
 *   await kit.proofNow()                                // one for the chain's clock now (fresh)
 *   await kit.increaseTo(ns)                            // moves the chain clock so that proofAt(ns) is fresh
 *   await kit.invalidProof("expired" | "future" | "high-s" | "unknown-card" | "tampered-accuracy" | "below-quorum")
 *   await kit.explainForConsumer(myContract)            // would a real network's proof pass its guards? If not, why
 *
 * Detail: docs/solidity.md "Testing with Hardhat".
 */
import type { HardhatRuntimeEnvironment } from "hardhat/types";
/*
 * Proofs sign, by default, the accuracy the local network's mesh really signs (LOCAL_MESH_ACCURACY_NS, ~0.15 ms,
 * from `npm run bench:mesh`), not the card's 50 ns: a contract whose bound no software network meets fails its tests
 * here, not on mainnet. The oracle is deployed as the local network deploys it (maxAcceptableDrift at the
 * software-mesh tier, 10 ms), so such proofs verify.
 *
 * It deploys the oracle with the public development card and nodes (protocol/devkeys.ts; no other key is ever
 * used) and refuses any chain but a local Hardhat one (chain id 31337, network "hardhat" or "localhost"). Proofs are
 * signed in the test process: no node server is needed.
 */
// Types only: hre.viem, added by the user's Hardhat viem plugin (hardhat-toolbox-viem loads it); nothing at run time.
import type {} from "@nomicfoundation/hardhat-viem";
import type { Address, Hex } from "viem";
import { explainConsumerProof, type ExplainedConsumerProof } from "../client/explain";
import { LOCAL_MESH_ACCURACY_NS, NS_PER_SECOND, P256_N, SOFTWARE_MESH_ACCURACY_NS } from "../protocol/constants";
import { DEV_CARD_PRIVATE_KEY, DEV_NODE_PRIVATE_KEYS, DEV_OTHER_CARD_PRIVATE_KEY } from "../protocol/devkeys";
import { attest } from "../protocol/sign";
import type { TimeProof } from "../protocol/types";
import { deployAttestedTime, devRegistrations, type AttestedTimeDeployment } from "../deploy";

export const INVALID_PROOF_KINDS = ["expired", "future", "high-s", "unknown-card", "tampered-accuracy", "below-quorum"] as const;
export type InvalidProofKind = (typeof INVALID_PROOF_KINDS)[number];

export interface ProofOptions {
  /** Dev nodes co-signing it, 1 to 3 (default: the oracle's quorum). */
  nodes?: number;
  /** The signed accuracy, ns (default LOCAL_MESH_ACCURACY_NS: what the local network's mesh signs). */
  accuracyNs?: number;
}

export interface TimeTestKit {
  readonly oracle: Address;
  readonly deployment: AttestedTimeDeployment;
  readonly nodeQuorum: number;
  proofAt(nanoMoment: bigint, options?: ProofOptions): TimeProof;
  proofNow(options?: ProofOptions): Promise<TimeProof>;
  /** The chain clock (latest block's timestamp), ns. */
  chainNowNs(): Promise<bigint>;
  /** Mines a block at the second holding `nanoMoment` (never backwards), so that a proof of it is fresh. */
  increaseTo(nanoMoment: bigint): Promise<void>;
  invalidProof(kind: InvalidProofKind): Promise<TimeProof>;
  /**
   * What `consumer` (a TimeConsumer-based contract) does with `proof` (default: a fresh proof as the local network
   * signs it): accepted, or refused with `Invalid time proof` / `Insufficient accuracy` and why (explainConsumerProof).
   */
  explainForConsumer(consumer: Address, proof?: TimeProof): Promise<ExplainedConsumerProof>;
}

export interface CreateTimeTestKitOptions {
  /** Nodes a proof needs (1–3, default 1). */
  nodeQuorum?: number;
  /** Also deploy the scheduler and the bridge (default false: the oracle only, fast). */
  withScheduler?: boolean;
  withBridge?: boolean;
}

const LOCAL_CHAIN_ID = 31337;

/** Deploys the oracle with the development keys on the local Hardhat chain and returns the kit. */
export async function createTimeTestKit(hre: HardhatRuntimeEnvironment, options: CreateTimeTestKitOptions = {}): Promise<TimeTestKit> {
  const publicClient = await hre.viem.getPublicClient();
  const chainId = await publicClient.getChainId();
  if (chainId !== LOCAL_CHAIN_ID || !["hardhat", "localhost"].includes(hre.network.name)) {
    throw new Error(`createTimeTestKit runs on a local Hardhat chain only (chain id ${LOCAL_CHAIN_ID}); this is ${hre.network.name}, chain id ${chainId}`);
  }
  const nodeQuorum = options.nodeQuorum ?? 1;
  if (!Number.isInteger(nodeQuorum) || nodeQuorum < 1 || nodeQuorum > DEV_NODE_PRIVATE_KEYS.length) {
    throw new RangeError(`nodeQuorum must be 1 to ${DEV_NODE_PRIVATE_KEYS.length}, got ${nodeQuorum}`);
  }
  const deployment = await deployAttestedTime(hre, {
    ...devRegistrations(),
    // As the local network deploys it, so that proofs with the mesh's accuracy verify.
    settings: { nodeQuorum: BigInt(nodeQuorum), maxAcceptableDriftNs: BigInt(SOFTWARE_MESH_ACCURACY_NS) },
    scheduler: options.withScheduler ?? false,
    bridge: options.withBridge ?? false,
    example: false,
  });

  function proofAt(nanoMoment: bigint, proofOptions: ProofOptions = {}): TimeProof {
    const count = proofOptions.nodes ?? nodeQuorum;
    if (!Number.isInteger(count) || count < 1 || count > DEV_NODE_PRIVATE_KEYS.length) throw new RangeError(`nodes must be 1 to ${DEV_NODE_PRIVATE_KEYS.length}, got ${count}`);
    return attest({
      card: DEV_CARD_PRIVATE_KEY,
      nodes: DEV_NODE_PRIVATE_KEYS.slice(0, count),
      nanoMoment,
      accuracy: proofOptions.accuracyNs ?? LOCAL_MESH_ACCURACY_NS,
      nodeTimestampNs: nanoMoment,
    });
  }

  async function chainNowNs(): Promise<bigint> {
    return (await publicClient.getBlock({ blockTag: "latest" })).timestamp * NS_PER_SECOND;
  }

  async function increaseTo(nanoMoment: bigint): Promise<void> {
    const targetS = (nanoMoment + NS_PER_SECOND - 1n) / NS_PER_SECOND;
    const nowS = (await chainNowNs()) / NS_PER_SECOND;
    const testClient = await hre.viem.getTestClient();
    await testClient.setNextBlockTimestamp({ timestamp: targetS > nowS ? targetS : nowS + 1n });
    await testClient.mine({ blocks: 1 });
  }

  return {
    oracle: deployment.oracle,
    deployment,
    nodeQuorum,
    proofAt,
    chainNowNs,
    increaseTo,
    proofNow: async (proofOptions) => proofAt(await chainNowNs(), proofOptions),
    explainForConsumer: async (consumer, proof) => explainConsumerProof(publicClient, consumer, proof ?? proofAt(await chainNowNs())),
    async invalidProof(kind) {
      const nowNs = await chainNowNs();
      switch (kind) {
        case "expired":
          return proofAt(nowNs - 3_600n * NS_PER_SECOND);
        case "future":
          return proofAt(nowNs + 3_600n * NS_PER_SECOND);
        case "unknown-card":
          return { ...proofAt(nowNs), hardwareSignature: attest({ card: DEV_OTHER_CARD_PRIVATE_KEY, nodes: DEV_NODE_PRIVATE_KEYS.slice(0, nodeQuorum), nanoMoment: nowNs, accuracy: LOCAL_MESH_ACCURACY_NS, nodeTimestampNs: nowNs }).hardwareSignature };
        case "tampered-accuracy": {
          const proof = proofAt(nowNs);
          return { ...proof, accuracy: proof.accuracy + 1 };
        }
        case "below-quorum":
          if (nodeQuorum === 1) throw new Error("below-quorum needs a kit with nodeQuorum ≥ 2");
          return proofAt(nowNs, { nodes: nodeQuorum - 1 });
        case "high-s": {
          // The same card signature with s replaced by n − s: valid ECDSA, refused as malleable.
          const proof = proofAt(nowNs);
          const bytes = proof.hardwareSignature.slice(2);
          const s = BigInt(`0x${bytes.slice(128, 192)}`);
          const highS = (P256_N - s).toString(16).padStart(64, "0");
          return { ...proof, hardwareSignature: `0x${bytes.slice(0, 128)}${highS}` as Hex };
        }
      }
    },
  };
}
