import { expect } from "chai";
import { attest } from "../../../protocol/sign";
import { ProofArchive } from "../../../node/core/archive";
import { buildSignedTime } from "../../../node/core/signedTime";
import type { SignedTime } from "../../../node/core/types";
import { devIdentity, silentLogger, tempDir } from "./helpers";

const BASE_NS = 1_732_268_493_000_000_000n;
const MS = 1_000_000n;

describe("ProofArchive", () => {
  const dir = tempDir("archive");
  after(() => dir.remove());

  async function signedAt(nanoMoment: bigint): Promise<SignedTime> {
    const identity = await devIdentity();
    const proof = attest({ card: identity.cardKey, nodes: [identity.nodeKey], nanoMoment, accuracy: 50, nodeTimestampNs: nanoMoment + 10n });
    return buildSignedTime(proof, nanoMoment + 20n);
  }

  it("stores one proof per interval, not every tick", async () => {
    const archive = new ProofArchive({ dataDir: `${dir.path}/a`, intervalNs: 100n * MS, capacity: 100, logger: silentLogger() });
    try {
      const stored: boolean[] = [];
      for (const offsetMs of [0n, 1n, 50n, 99n, 100n, 150n, 200n]) stored.push(archive.offer(await signedAt(BASE_NS + offsetMs * MS)));
      expect(stored).to.deep.equal([true, false, false, false, true, false, true]);
      expect(archive.size()).to.equal(3);
    } finally {
      archive.close();
    }
  });

  it("finds the nearest proof at or before a moment, byte-identical to what was produced", async () => {
    const archive = new ProofArchive({ dataDir: `${dir.path}/b`, intervalNs: MS, capacity: 100, logger: silentLogger() });
    try {
      const produced = [];
      for (const offsetMs of [0n, 10n, 20n]) {
        const signed = await signedAt(BASE_NS + offsetMs * MS);
        archive.offer(signed);
        produced.push(signed);
      }
      expect(archive.nearestAtOrBefore(BASE_NS - 1n)).to.equal(undefined);
      expect(archive.nearestAtOrBefore(BASE_NS)?.body).to.equal(produced[0]!.body);
      expect(archive.nearestAtOrBefore(BASE_NS + 15n * MS)?.body).to.equal(produced[1]!.body);
      const last = archive.nearestAtOrBefore(BASE_NS + 1_000n * MS);
      expect(last?.proof).to.deep.equal(produced[2]!.proof);
      expect(last?.producedAtNs).to.equal(produced[2]!.producedAtNs);
      expect(archive.nearestAtOrBefore(-1n)).to.equal(undefined);
      expect(archive.nearestAtOrBefore(1n << 130n)).to.equal(undefined);
    } finally {
      archive.close();
    }
  });

  it("is bounded: evicts the oldest beyond capacity, also across a reopen", async () => {
    const options = { dataDir: `${dir.path}/c`, intervalNs: MS, capacity: 3, logger: silentLogger() };
    let archive = new ProofArchive(options);
    for (let i = 0n; i < 5n; i += 1n) archive.offer(await signedAt(BASE_NS + i * 10n * MS));
    expect(archive.size()).to.equal(3);
    expect(archive.nearestAtOrBefore(BASE_NS + 15n * MS)).to.equal(undefined); // proofs 0 and 1 evicted
    expect(archive.nearestAtOrBefore(BASE_NS + 25n * MS)?.proof.nanoMoment).to.equal(BASE_NS + 20n * MS);
    archive.close();
    archive = new ProofArchive(options);
    try {
      expect(archive.offer(await signedAt(BASE_NS + 40n * MS + 1n))).to.equal(false); // within the interval of the last stored
      archive.offer(await signedAt(BASE_NS + 60n * MS));
      expect(archive.size()).to.equal(3);
      expect(archive.nearestAtOrBefore(BASE_NS + 25n * MS)).to.equal(undefined);
    } finally {
      archive.close();
    }
  });
});
