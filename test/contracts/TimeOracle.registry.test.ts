/**
 * Registry, roles and settings of the oracle: who may do what (reverts asserted by error name and arguments),
 * the events of every change, and the verification snapshot each change writes.
 */
import { expect } from "chai";
import hre from "hardhat";
import { p256 } from "@noble/curves/nist.js";
import { bytesToHex, concatHex, getAddress, keccak256, parseEventLogs, sha256, toHex, type Address, type Hex } from "viem";
import { DEFAULT_MAX_ACCEPTABLE_DRIFT_NS, DEFAULT_MAX_ATTESTATION_AGE_NS, DEFAULT_MAX_FUTURE_DRIFT_NS, NS_PER_SECOND, NodeKey } from "../../protocol";
import { FIXTURE_NOW_NS, FIXTURE_NOW_SECONDS, FOREVER_NS, deployOracleFixture, expectRevert, loadFixture, testScalar, type OracleFixture } from "./fixtures";

const CardStatus = { None: 0, Active: 1, Revoked: 2 } as const;
const NodeStatus = { None: 0, Active: 1, Inactive: 2 } as const;
const Setting = { MaxAttestationAge: 0, MaxFutureDrift: 1, MaxAcceptableDrift: 2, NodeQuorum: 3 } as const;
const DAY_NS = 86_400n * NS_PER_SECOND;

/** A fresh P-256 public key (x, y) from a label. */
function cardCoordinates(label: string): { x: Hex; y: Hex } {
  const publicKey = bytesToHex(p256.getPublicKey(Buffer.from(testScalar(label).slice(2), "hex"), false));
  return { x: `0x${publicKey.slice(4, 68)}`, y: `0x${publicKey.slice(68)}` };
}

async function eventsOf(f: OracleFixture, hash: Hex) {
  const receipt = await f.publicClient.waitForTransactionReceipt({ hash });
  return parseEventLogs({ abi: f.oracle.abi, logs: receipt.logs }) as unknown as { eventName: string; args: Record<string, unknown> }[];
}

describe("TimeOracle registry and settings", () => {
  let f: OracleFixture;
  beforeEach(async () => {
    f = await loadFixture(deployOracleFixture);
  });

  describe("cards", () => {
    it("registers a card under sha256(0x04 ‖ x ‖ y) and emits CardRegistered", async () => {
      const { x, y } = cardCoordinates("card A");
      const cardId = sha256(concatHex(["0x04", x, y]));
      const events = await eventsOf(f, await f.asRegistrar.write.registerCard([x, y, 5n, 10n * NS_PER_SECOND]));
      expect(events.find((e) => e.eventName === "CardRegistered")?.args).to.deep.equal({
        cardId,
        publicKeyX: x,
        publicKeyY: y,
        validFromNs: 5n,
        validUntilNs: 10n * NS_PER_SECOND,
      });
      expect(await f.oracle.read.getCard([cardId])).to.deep.equal({
        publicKeyX: x,
        publicKeyY: y,
        validFromNs: 5n,
        validUntilNs: 10n * NS_PER_SECOND,
        status: CardStatus.Active,
      });
      expect(await f.oracle.read.cards()).to.deep.equal([f.dev.cardId, cardId]);
    });

    it("reports the dev card's id as the protocol computes it", async () => {
      expect((await f.oracle.read.getCard([f.dev.cardId])) as { status: number }).to.include({ status: CardStatus.Active });
    });

    it("refuses a key that is not on the curve", async () => {
      const { x, y } = cardCoordinates("card B");
      const badY = toHex(BigInt(y) ^ 1n, { size: 32 });
      await expectRevert(f.asRegistrar.write.registerCard([x, badY, 0n, FOREVER_NS]), "TimeOracleInvalidPublicKey", [x, badY]);
    });

    it("refuses a validity window that ends before it starts", async () => {
      const { x, y } = cardCoordinates("card C");
      await expectRevert(f.asRegistrar.write.registerCard([x, y, 2n, 1n]), "TimeOracleInvalidValidityWindow", [2n, 1n]);
    });

    it("revokes for good: revoked twice or registered again is refused", async () => {
      await f.asRegistrar.write.revokeCard([f.dev.cardId]);
      expect((await f.oracle.read.getCard([f.dev.cardId])) as { status: number }).to.include({ status: CardStatus.Revoked });
      expect(await f.oracle.read.cards()).to.deep.equal([]);
      await expectRevert(f.asRegistrar.write.revokeCard([f.dev.cardId]), "TimeOracleCardRevoked", [f.dev.cardId]);
      await expectRevert(
        f.asRegistrar.write.registerCard([f.cardKey.x, f.cardKey.y, 0n, FOREVER_NS]),
        "TimeOracleCardRevoked",
        [f.dev.cardId],
      );
    });

    it("refuses to revoke an unknown card", async () => {
      const cardId = keccak256("0x01");
      await expectRevert(f.asGuardian.write.revokeCard([cardId]), "TimeOracleUnknownCard", [cardId]);
    });

    it("caps the active cards at MAX_CARDS", async () => {
      const max = Number(await f.oracle.read.MAX_CARDS());
      for (let i = 1; i < max; i += 1) {
        const { x, y } = cardCoordinates(`cap card ${i}`);
        await f.asRegistrar.write.registerCard([x, y, 0n, FOREVER_NS]);
      }
      const { x, y } = cardCoordinates("one card too many");
      await expectRevert(f.asRegistrar.write.registerCard([x, y, 0n, FOREVER_NS]), "TimeOracleTooManyCards", [BigInt(max)]);
      // A revocation frees a place (swap-and-pop keeps the list consistent).
      await f.asGuardian.write.revokeCard([f.dev.cardId]);
      await f.asRegistrar.write.registerCard([x, y, 0n, FOREVER_NS]);
      const listed = (await f.oracle.read.cards()) as Hex[];
      expect(listed).to.have.length(max);
      expect(listed).to.not.include(f.dev.cardId);
    });
  });

  describe("nodes", () => {
    it("registers, deactivates and re-activates a node with events", async () => {
      const node = NodeKey.fromPrivateKey(testScalar("node X")).address;
      let events = await eventsOf(f, await f.asRegistrar.write.registerNode([node, 1n, 2n]));
      expect(events.find((e) => e.eventName === "NodeRegistered")?.args).to.deep.equal({ node, validFromNs: 1n, validUntilNs: 2n });
      expect(await f.oracle.read.getNode([node])).to.deep.equal({ validFromNs: 1n, validUntilNs: 2n, status: NodeStatus.Active });

      events = await eventsOf(f, await f.asGuardian.write.deactivateNode([node]));
      expect(events.find((e) => e.eventName === "NodeDeactivated")?.args).to.deep.equal({
        node,
        deactivatedBy: getAddress(f.accounts.guardian.account.address),
      });
      expect((await f.oracle.read.getNode([node])) as { status: number }).to.include({ status: NodeStatus.Inactive });
      expect(await f.oracle.read.nodes()).to.not.include(node);

      await f.asRegistrar.write.registerNode([node, 0n, FOREVER_NS]);
      expect((await f.oracle.read.getNode([node])) as { status: number }).to.include({ status: NodeStatus.Active });
      expect(await f.oracle.read.nodes()).to.include(node);
    });

    it("refuses the zero address, reversed windows and deactivating an inactive node", async () => {
      const zero: Address = "0x0000000000000000000000000000000000000000";
      await expectRevert(f.asRegistrar.write.registerNode([zero, 0n, 1n]), "TimeOracleInvalidNode", [zero]);
      const node = f.strangerNode.address;
      await expectRevert(f.asRegistrar.write.registerNode([node, 3n, 2n]), "TimeOracleInvalidValidityWindow", [3n, 2n]);
      await expectRevert(f.asGuardian.write.deactivateNode([node]), "TimeOracleNodeNotActive", [node]);
      await f.asGuardian.write.deactivateNode([f.dev.nodeAddress]);
      await expectRevert(f.asGuardian.write.deactivateNode([f.dev.nodeAddress]), "TimeOracleNodeNotActive", [f.dev.nodeAddress]);
    });

    it("caps the active nodes at MAX_NODES", async () => {
      const max = Number(await f.oracle.read.MAX_NODES());
      const registered = ((await f.oracle.read.nodes()) as Address[]).length;
      for (let i = registered; i < max; i += 1) {
        await f.asRegistrar.write.registerNode([NodeKey.fromPrivateKey(testScalar(`cap node ${i}`)).address, 0n, FOREVER_NS]);
      }
      await expectRevert(
        f.asRegistrar.write.registerNode([f.strangerNode.address, 0n, FOREVER_NS]),
        "TimeOracleTooManyNodes",
        [BigInt(max)],
      );
      // Updating an active node's window is not a new registration.
      await f.asRegistrar.write.registerNode([f.dev.nodeAddress, 0n, FOREVER_NS - 1n]);
      // Every registered node still verifies with the full snapshot (merge lookup over 32 sorted records).
      expect(await f.oracle.read.verifyTimeProof([f.freshProof({ nodes: f.nodeKeys })])).to.equal(true);
    });
  });

  describe("roles", () => {
    it("only the registrar registers cards and nodes", async () => {
      const { x, y } = cardCoordinates("card D");
      const role = f.roles.registrarRole;
      for (const [client, account] of [
        [f.oracle, f.accounts.admin],
        [f.asGuardian, f.accounts.guardian],
        [f.asStranger, f.accounts.stranger],
      ] as const) {
        const who = getAddress(account.account.address);
        await expectRevert(client.write.registerCard([x, y, 0n, FOREVER_NS]), "AccessControlUnauthorizedAccount", [who, role]);
        await expectRevert(client.write.registerNode([f.strangerNode.address, 0n, FOREVER_NS]), "AccessControlUnauthorizedAccount", [who, role]);
      }
    });

    it("the guardian can only revoke cards and deactivate nodes", async () => {
      const guardian = getAddress(f.accounts.guardian.account.address);
      await expectRevert(f.asGuardian.write.setNodeQuorum([2n]), "AccessControlUnauthorizedAccount", [guardian, f.roles.adminRole]);
      await expectRevert(
        f.asGuardian.write.grantRole([f.roles.registrarRole, guardian]),
        "AccessControlUnauthorizedAccount",
        [guardian, f.roles.adminRole],
      );
      const events = await eventsOf(f, await f.asGuardian.write.revokeCard([f.dev.cardId]));
      expect(events.find((e) => e.eventName === "CardRevoked")?.args).to.deep.equal({ cardId: f.dev.cardId, revokedBy: guardian });
      await f.asGuardian.write.deactivateNode([f.dev.nodeAddress]);
    });

    it("strangers and the admin without a role can neither revoke nor deactivate", async () => {
      for (const [client, account] of [
        [f.asStranger, f.accounts.stranger],
        [f.oracle, f.accounts.admin],
      ] as const) {
        const who = getAddress(account.account.address);
        await expectRevert(client.write.revokeCard([f.dev.cardId]), "AccessControlUnauthorizedAccount", [who, f.roles.guardianRole]);
        await expectRevert(client.write.deactivateNode([f.dev.nodeAddress]), "AccessControlUnauthorizedAccount", [who, f.roles.guardianRole]);
      }
    });

    it("only the admin changes settings", async () => {
      const registrar = getAddress(f.accounts.registrar.account.address);
      const role = f.roles.adminRole;
      await expectRevert(f.asRegistrar.write.setMaxAttestationAge([1n]), "AccessControlUnauthorizedAccount", [registrar, role]);
      await expectRevert(f.asRegistrar.write.setMaxFutureDrift([1n]), "AccessControlUnauthorizedAccount", [registrar, role]);
      await expectRevert(f.asRegistrar.write.setMaxAcceptableDrift([1n]), "AccessControlUnauthorizedAccount", [registrar, role]);
      await expectRevert(f.asRegistrar.write.setNodeQuorum([1n]), "AccessControlUnauthorizedAccount", [registrar, role]);
    });
  });

  describe("settings", () => {
    it("start at the defaults of docs/protocol.md §6.3", async () => {
      expect(await f.oracle.read.maxAttestationAge()).to.equal(DEFAULT_MAX_ATTESTATION_AGE_NS);
      expect(await f.oracle.read.maxFutureDrift()).to.equal(DEFAULT_MAX_FUTURE_DRIFT_NS);
      expect(await f.oracle.read.maxAcceptableDrift()).to.equal(DEFAULT_MAX_ACCEPTABLE_DRIFT_NS);
      expect(await f.oracle.read.nodeQuorum()).to.equal(1n);
    });

    it("emit SettingChanged with the old and new values", async () => {
      const cases = [
        [f.oracle.write.setMaxAttestationAge, Setting.MaxAttestationAge, DEFAULT_MAX_ATTESTATION_AGE_NS, 120n * NS_PER_SECOND],
        [f.oracle.write.setMaxFutureDrift, Setting.MaxFutureDrift, DEFAULT_MAX_FUTURE_DRIFT_NS, 0n],
        [f.oracle.write.setMaxAcceptableDrift, Setting.MaxAcceptableDrift, DEFAULT_MAX_ACCEPTABLE_DRIFT_NS, 100n],
        [f.oracle.write.setNodeQuorum, Setting.NodeQuorum, 1n, 3n],
      ] as const;
      for (const [write, setting, oldValue, newValue] of cases) {
        const events = await eventsOf(f, await write([newValue]));
        expect(events.find((e) => e.eventName === "SettingChanged")?.args).to.deep.equal({ setting, oldValue, newValue });
      }
      expect(await f.oracle.read.maxAttestationAge()).to.equal(120n * NS_PER_SECOND);
      expect(await f.oracle.read.maxFutureDrift()).to.equal(0n);
      expect(await f.oracle.read.maxAcceptableDrift()).to.equal(100n);
      expect(await f.oracle.read.nodeQuorum()).to.equal(3n);
    });

    it("refuse values out of range, naming the setting and the bounds", async () => {
      const u32max = 0xffff_ffffn;
      const max = await f.oracle.read.MAX_NODES();
      await expectRevert(f.oracle.write.setMaxAttestationAge([0n]), "TimeOracleSettingOutOfRange", [Setting.MaxAttestationAge, 0n, 1n, DAY_NS]);
      await expectRevert(f.oracle.write.setMaxAttestationAge([DAY_NS + 1n]), "TimeOracleSettingOutOfRange", [Setting.MaxAttestationAge, DAY_NS + 1n, 1n, DAY_NS]);
      await expectRevert(f.oracle.write.setMaxFutureDrift([DAY_NS + 1n]), "TimeOracleSettingOutOfRange", [Setting.MaxFutureDrift, DAY_NS + 1n, 0n, DAY_NS]);
      await expectRevert(f.oracle.write.setMaxAcceptableDrift([u32max + 1n]), "TimeOracleSettingOutOfRange", [Setting.MaxAcceptableDrift, u32max + 1n, 0n, u32max]);
      await expectRevert(f.oracle.write.setNodeQuorum([0n]), "TimeOracleSettingOutOfRange", [Setting.NodeQuorum, 0n, 1n, max]);
      await expectRevert(f.oracle.write.setNodeQuorum([(max as bigint) + 1n]), "TimeOracleSettingOutOfRange", [Setting.NodeQuorum, (max as bigint) + 1n, 1n, max]);
      // The edges themselves are accepted (the quorum's upper edge once MAX_NODES nodes are active).
      await f.oracle.write.setMaxAttestationAge([DAY_NS]);
      for (let i = ((await f.oracle.read.nodes()) as Address[]).length; i < Number(max); i += 1) {
        await f.asRegistrar.write.registerNode([NodeKey.fromPrivateKey(testScalar(`quorum edge node ${i}`)).address, 0n, FOREVER_NS]);
      }
      await f.oracle.write.setNodeQuorum([max as bigint]);
      expect(await f.oracle.read.nodeQuorum()).to.equal(max);
    });
  });

  describe("the node quorum against the nodes active now", () => {
    // Active now = what verification accepts at the chain clock: registered, not deactivated, inside its window.

    it("setNodeQuorum refuses a quorum above the active nodes, with the count as evidence; up to it is accepted", async () => {
      await expectRevert(f.oracle.write.setNodeQuorum([4n]), "TimeOracleQuorumAboveActiveNodes", [4n, 3n]);
      expect(await f.oracle.read.nodeQuorum()).to.equal(1n);
      await f.oracle.write.setNodeQuorum([3n]);
      expect(await f.oracle.read.nodeQuorum()).to.equal(3n);
      // Three active nodes meet it: the quorum set is one a proof can reach.
      expect(await f.oracle.read.verifyTimeProof([f.freshProof({ nodes: f.nodeKeys })])).to.equal(true);
    });

    it("counts neither a deactivated node nor one outside its validity window, exactly as verification does", async () => {
      const stranger = f.strangerNode;
      // A window that opens a second after the chain clock: registered, but not active yet.
      await f.asRegistrar.write.registerNode([stranger.address, FIXTURE_NOW_NS + NS_PER_SECOND, FOREVER_NS]);
      expect(await f.oracle.read.verifyTimeProof([f.freshProof({ nodes: [stranger] })])).to.equal(false);
      await expectRevert(f.oracle.write.setNodeQuorum([4n]), "TimeOracleQuorumAboveActiveNodes", [4n, 3n]);
      // Once the window is open it counts (and verifies).
      await f.oracle.write.setNow([FIXTURE_NOW_SECONDS + 1n]);
      expect(await f.oracle.read.verifyTimeProof([f.freshProof({ nodes: [stranger] })])).to.equal(true);
      await f.oracle.write.setNodeQuorum([4n]);
      await f.oracle.write.setNodeQuorum([1n]);
      // A window that closed before the chain clock, and a deactivated node, do not count.
      await f.asRegistrar.write.registerNode([f.nodeKeys[1]!.address, 0n, FIXTURE_NOW_NS]);
      await f.asGuardian.write.deactivateNode([f.nodeKeys[2]!.address]);
      await expectRevert(f.oracle.write.setNodeQuorum([3n]), "TimeOracleQuorumAboveActiveNodes", [3n, 2n]);
      await f.oracle.write.setNodeQuorum([2n]);
    });

    it("deactivating or narrowing a window below the quorum is not refused, and emits NodeQuorumUnreachable as evidence", async () => {
      await f.oracle.write.setNodeQuorum([2n]);
      // Above the quorum afterwards: no evidence needed.
      await f.asRegistrar.write.registerNode([f.strangerNode.address, 0n, FOREVER_NS]);
      let events = await eventsOf(f, await f.asGuardian.write.deactivateNode([f.strangerNode.address]));
      expect(events.map((e) => e.eventName)).to.not.include("NodeQuorumUnreachable");
      events = await eventsOf(f, await f.asGuardian.write.deactivateNode([f.nodeKeys[2]!.address]));
      expect(events.map((e) => e.eventName)).to.not.include("NodeQuorumUnreachable");

      // The guardian's brake: the removal happens, the quorum stays, and the event says it cannot be met.
      events = await eventsOf(f, await f.asGuardian.write.deactivateNode([f.nodeKeys[1]!.address]));
      expect(events.map((e) => e.eventName)).to.include("NodeDeactivated");
      expect(events.find((e) => e.eventName === "NodeQuorumUnreachable")?.args).to.deep.equal({ quorum: 2n, activeNodes: 1n });
      expect(await f.oracle.read.nodeQuorum()).to.equal(2n);
      expect(await f.oracle.read.nodes()).to.deep.equal([getAddress(f.dev.nodeAddress)]);

      // A window narrowed to close before the chain clock counts as a removal too.
      events = await eventsOf(f, await f.asRegistrar.write.registerNode([f.dev.nodeAddress, 0n, FIXTURE_NOW_NS - 1n]));
      expect(events.find((e) => e.eventName === "NodeQuorumUnreachable")?.args).to.deep.equal({ quorum: 2n, activeNodes: 0n });
    });
  });

  describe("verification snapshot", () => {
    it("is rewritten on every change, as an uncallable data contract (code starts with STOP)", async () => {
      const before = (await f.oracle.read.snapshot()) as Address;
      const events = await eventsOf(f, await f.oracle.write.setNodeQuorum([2n]));
      const after = (await f.oracle.read.snapshot()) as Address;
      expect(after).to.not.equal(before);
      expect(events.find((e) => e.eventName === "SnapshotWritten")?.args).to.deep.equal({ snapshot: after, nodeCount: 3n, cardCount: 1n });
      const code = await f.publicClient.getCode({ address: after });
      expect(code?.slice(0, 4)).to.equal("0x00");
      // header (32) + 3 nodes × 36 + 1 card × 112, after the STOP byte.
      expect((code!.length - 2) / 2).to.equal(1 + 32 + 3 * 36 + 112);
    });

    it("lists the nodes sorted by address with their windows", async () => {
      await f.asRegistrar.write.registerNode([f.dev.nodeAddress, 7n, 9n]);
      const code = (await f.publicClient.getCode({ address: (await f.oracle.read.snapshot()) as Address }))!;
      const data = code.slice(4);
      const records = [0, 1, 2].map((i) => data.slice(64 + i * 72, 64 + (i + 1) * 72));
      const addresses = records.map((record) => BigInt(`0x${record.slice(0, 40)}`));
      expect(addresses).to.deep.equal([...addresses].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      const dev = records.find((record) => BigInt(`0x${record.slice(0, 40)}`) === BigInt(f.dev.nodeAddress))!;
      expect(BigInt(`0x${dev.slice(40, 56)}`)).to.equal(7n);
      expect(BigInt(`0x${dev.slice(56, 72)}`)).to.equal(9n);
    });

    it("cannot be called (calls into it run STOP and change nothing)", async () => {
      const address = (await f.oracle.read.snapshot()) as Address;
      const result = await f.publicClient.call({ to: address, data: "0x12345678" });
      expect(result.data).to.equal(undefined);
    });
  });

  it("supports the AccessControl interface (ERC-165)", async () => {
    expect(await f.oracle.read.supportsInterface(["0x7965db0b"])).to.equal(true);
    void hre;
  });
});
