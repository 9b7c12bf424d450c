/**
 * Gas benchmark of the on-chain hot paths (`npm run bench:gas`). Not a test: it prints a table.
 *
 * verifyTimeProof is measured as the execution gas of one external call from a contract (contracts/test/GasMeter.sol),
 * in its own transaction: "cold" is the first call (cold oracle account, cold storage slot, cold snapshot
 * account), "warm" a second identical call in the same transaction. Neither includes the 21,000 base gas or the
 * calldata. Other rows are the `gasUsed` of a whole transaction (so they include the 21,000 and the calldata).
 * The floor rows measure the same call on contracts/test/VerifyFloor.sol, which does only the precompile calls and
 * the hashing (no check, no registry read), in the same run; the notes give the oracle's figures as multiples of it.
 */
import os from "node:os";
import hre from "hardhat";
import { time } from "@nomicfoundation/hardhat-network-helpers";
import { decodeEventLog, keccak256, toHex, type Hex } from "viem";
import { NO_EXPIRY_NS } from "../deploy";
import { benchApps } from "./bench-apps";
import { attest, createDevIdentity, DEV_CARD_ACCURACY_NS, NodeKey, NS_PER_SECOND, p256PublicKeyCoordinates, type TimeProof } from "../protocol";

const FOREVER_NS = NO_EXPIRY_NS;

/** Deterministic benchmark keys (labels, not secrets). */
function benchScalar(label: string): Hex {
  return keccak256(toHex(`attested-time bench key: ${label}`));
}

interface Row {
  operation: string;
  gas: number | string;
  goal: string;
  note: string;
}

async function main(): Promise<void> {
  const [admin] = await hre.viem.getWalletClients();
  const publicClient = await hre.viem.getPublicClient();
  const oracle = await hre.viem.deployContract("TimeOracle", [admin.account.address]);
  await oracle.write.grantRole([await oracle.read.REGISTRAR_ROLE(), admin.account.address]);

  const dev = await createDevIdentity({ cardPrivateKey: benchScalar("card"), nodePrivateKey: benchScalar("node 0") });
  const { x, y } = p256PublicKeyCoordinates(dev.cardPublicKey);
  await oracle.write.registerCard([x, y, 0n, FOREVER_NS]);
  const nodes = [dev.nodeKey, NodeKey.fromPrivateKey(benchScalar("node 1")), NodeKey.fromPrivateKey(benchScalar("node 2"))];
  for (const node of nodes) await oracle.write.registerNode([node.address, 0n, FOREVER_NS]);

  const meter = await hre.viem.deployContract("GasMeter", []);
  const nowNs = BigInt(await time.latest()) * NS_PER_SECOND;
  const proofWith = (count: number, nanoMoment: bigint): TimeProof =>
    attest({
      card: dev.cardKey,
      nodes: nodes.slice(0, count),
      nanoMoment,
      accuracy: DEV_CARD_ACCURACY_NS,
      nodeTimestampNs: nanoMoment + 7n,
    });

  /** Cold and warm gas of `verifyTimeProof(proof)` on the contract at `target` (the oracle, or the floor). */
  async function measureVerify(target: Hex, proof: TimeProof): Promise<{ cold: bigint; warm: bigint }> {
    const hash = await meter.write.measureVerify([target, proof]);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    for (const log of receipt.logs) {
      const event = decodeEventLog({ abi: meter.abi, data: log.data, topics: log.topics });
      if (event.eventName === "VerifyGasMeasured") {
        const args = event.args as unknown as { coldGas: bigint; warmGas: bigint; coldValid: boolean; warmValid: boolean };
        if (!args.coldValid || !args.warmValid) throw new Error("the benchmark proof did not verify");
        return { cold: args.coldGas, warm: args.warmGas };
      }
    }
    throw new Error("no VerifyGasMeasured event");
  }

  async function txGas(hash: Hex): Promise<number> {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
    return Number(receipt.gasUsed);
  }

  const one = await measureVerify(oracle.address, proofWith(1, nowNs - NS_PER_SECOND));
  const three = await measureVerify(oracle.address, proofWith(3, nowNs - NS_PER_SECOND));
  const perEntryCold = (three.cold - one.cold) / 2n;
  const perEntryWarm = (three.warm - one.warm) / 2n;

  // The floor: the same call to a contract doing only the precompiles and the hashing (contracts/test/VerifyFloor.sol).
  const floor = await hre.viem.deployContract("VerifyFloor", [x, y]);
  const floorOne = await measureVerify(floor.address, proofWith(1, nowNs - NS_PER_SECOND));
  const floorThree = await measureVerify(floor.address, proofWith(3, nowNs - NS_PER_SECOND));
  const floorPerEntry = (floorThree.warm - floorOne.warm) / 2n;
  const ofFloor = (gas: bigint, floorGas: bigint): string => `${(Number(gas) / Number(floorGas)).toFixed(2)}× the floor`;

  const rows: Row[] = [
    { operation: "verifyTimeProof, 1 node entry, cold", gas: Number(one.cold), goal: "≤ 19,000", note: ofFloor(one.cold, floorOne.cold) },
    { operation: "verifyTimeProof, 1 node entry, warm", gas: Number(one.warm), goal: "≤ 12,000", note: ofFloor(one.warm, floorOne.warm) },
    { operation: "verifyTimeProof, 3 node entries, cold", gas: Number(three.cold), goal: "", note: "call from a contract" },
    { operation: "verifyTimeProof, 3 node entries, warm", gas: Number(three.warm), goal: "", note: "2nd call, same tx" },
    { operation: "each extra node entry (cold)", gas: Number(perEntryCold), goal: "≤ 3,400", note: "(3 − 1 entries) / 2" },
    { operation: "each extra node entry (warm)", gas: Number(perEntryWarm), goal: "≤ 3,400", note: ofFloor(perEntryWarm, floorPerEntry) },
    { operation: "floor: precompiles + hashing, 1 entry, cold", gas: Number(floorOne.cold), goal: "", note: "VerifyFloor" },
    { operation: "floor: precompiles + hashing, 1 entry, warm", gas: Number(floorOne.warm), goal: "", note: "VerifyFloor" },
    { operation: "floor: each extra node entry", gas: Number(floorPerEntry), goal: "", note: "VerifyFloor, (3 − 1) / 2" },
  ];

  // submitTimeProof: first store (zero → non-zero slots) and a later update (non-zero → non-zero).
  rows.push({
    operation: "submitTimeProof, first proof (1 entry)",
    gas: await txGas(await oracle.write.submitTimeProof([proofWith(1, nowNs - NS_PER_SECOND)])),
    goal: "",
    note: "tx gasUsed",
  });
  rows.push({
    operation: "submitTimeProof, newer proof (1 entry)",
    gas: await txGas(await oracle.write.submitTimeProof([proofWith(1, nowNs - NS_PER_SECOND + 1n)])),
    goal: "",
    note: "tx gasUsed",
  });

  rows.push(...(await benchApps(oracle.address, proofWith, nowNs, txGas)));

  console.log(`Gas benchmark — ${new Date().toISOString()}`);
  console.log(`Node ${process.version}, ${os.cpus()[0]?.model ?? "unknown CPU"}, ${os.platform()} ${os.arch()}`);
  console.log(`Hardhat ${hre.config.networks.hardhat.hardfork} hardfork, solc ${hre.config.solidity.compilers[0]?.version}`);
  console.table(rows);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
