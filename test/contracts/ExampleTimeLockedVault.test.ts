/**
 * The example dApp: TimeLockedVault, against the real oracle (fixtures.ts). Its owner deposits ether locked
 * until an attested moment, and withdraws with a time proof showing that moment has come.
 */
import hre from "hardhat";
import { expect } from "chai";
import { getAddress, type Address } from "viem";
import { NS_PER_SECOND } from "../../protocol";
import { eventOf } from "./apps-helpers";
import { deployOracleFixture, expectRevert, FIXTURE_NOW_NS, loadFixture } from "./fixtures";

const UNLOCK_AT = FIXTURE_NOW_NS - 20n * NS_PER_SECOND; // the proofs below are fresh (< 60 s old)
const AMOUNT = 10n ** 18n;

async function deployVaultFixture() {
  const base = await deployOracleFixture();
  const vault = await hre.viem.deployContract("TimeLockedVault", [base.oracle.address]);
  const { stranger } = base.accounts;
  const [, , , , owner] = await hre.viem.getWalletClients();
  const asOwner = await hre.viem.getContractAt("TimeLockedVault", vault.address, { client: { wallet: owner! } });
  const asStranger = await hre.viem.getContractAt("TimeLockedVault", vault.address, { client: { wallet: stranger } });
  const hash = await asOwner.write.deposit([UNLOCK_AT], { value: AMOUNT });
  const receipt = await base.publicClient.waitForTransactionReceipt({ hash });
  const lockId = eventOf(vault.abi, receipt, "Deposited").lockId as bigint;
  return { ...base, vault, asOwner, asStranger, owner: owner!, lockId, depositReceipt: receipt };
}

describe("TimeLockedVault (example consumer)", () => {
  it("records a deposit with its owner, amount and unlock moment", async () => {
    const { vault, owner, lockId, depositReceipt, publicClient } = await loadFixture(deployVaultFixture);
    expect(eventOf(vault.abi, depositReceipt, "Deposited")).to.deep.equal({
      lockId: 0n,
      owner: getAddress(owner.account.address),
      amount: AMOUNT,
      unlockAt: UNLOCK_AT,
    });
    expect(await vault.read.getLock([lockId])).to.deep.equal({
      owner: getAddress(owner.account.address),
      amount: AMOUNT,
      unlockAt: UNLOCK_AT,
    });
    expect(await vault.read.lockCount()).to.equal(1n);
    expect(await publicClient.getBalance({ address: vault.address })).to.equal(AMOUNT);
  });

  it("refuses an empty deposit", async () => {
    const { asOwner, owner } = await loadFixture(deployVaultFixture);
    await expectRevert(asOwner.simulate.deposit([UNLOCK_AT], { account: owner.account.address, value: 0n }), "VaultInvalidAmount", [
      0n,
    ]);
  });

  it("releases the funds to the owner with a proof at or after the unlock moment", async () => {
    const { vault, asOwner, owner, lockId, proofAt, publicClient } = await loadFixture(deployVaultFixture);
    const ownerAddress: Address = owner.account.address;
    const before = await publicClient.getBalance({ address: ownerAddress });
    const hash = await asOwner.write.withdraw([lockId, proofAt(UNLOCK_AT)]);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    const after = await publicClient.getBalance({ address: ownerAddress });

    expect(after - before).to.equal(AMOUNT - receipt.gasUsed * receipt.effectiveGasPrice);
    expect(eventOf(vault.abi, receipt, "Withdrawn")).to.deep.equal({
      lockId,
      owner: getAddress(ownerAddress),
      amount: AMOUNT,
      nanoMoment: UNLOCK_AT,
    });
    expect(await publicClient.getBalance({ address: vault.address })).to.equal(0n);
    expect(await vault.read.lastConsumedNanoMoment([toKey(lockId)])).to.equal(UNLOCK_AT);
    await expectRevert(
      asOwner.simulate.withdraw([lockId, proofAt(UNLOCK_AT + 1n)], { account: owner.account.address }),
      "VaultUnknownLock",
      [lockId],
    );
  });

  it("refuses a withdrawal before the unlock moment", async () => {
    const { asOwner, owner, lockId, proofAt } = await loadFixture(deployVaultFixture);
    await expectRevert(
      asOwner.simulate.withdraw([lockId, proofAt(UNLOCK_AT - 1n)], { account: owner.account.address }),
      "TimeConsumerTooEarly",
      [UNLOCK_AT - 1n, UNLOCK_AT],
    );
  });

  it("refuses a withdrawal by anyone but the owner", async () => {
    const { asStranger, accounts, owner, lockId, proofAt } = await loadFixture(deployVaultFixture);
    await expectRevert(
      asStranger.simulate.withdraw([lockId, proofAt(UNLOCK_AT)], { account: accounts.stranger.account.address }),
      "VaultNotOwner",
      [lockId, getAddress(owner.account.address), getAddress(accounts.stranger.account.address)],
    );
  });

  it("refuses an invalid, an inaccurate and an unknown-lock withdrawal", async () => {
    const { asOwner, owner, lockId, proofAt } = await loadFixture(deployVaultFixture);
    const forged = { ...proofAt(UNLOCK_AT), nanoMoment: UNLOCK_AT + 5n };
    await expectRevert(asOwner.simulate.withdraw([lockId, forged], { account: owner.account.address }), "Error", [
      "Invalid time proof",
    ]);
    await expectRevert(
      asOwner.simulate.withdraw([lockId, proofAt(UNLOCK_AT, { accuracy: 500 })], { account: owner.account.address }),
      "Error",
      ["Insufficient accuracy"],
    );
    await expectRevert(
      asOwner.simulate.withdraw([lockId + 1n, proofAt(UNLOCK_AT)], { account: owner.account.address }),
      "VaultUnknownLock",
      [lockId + 1n],
    );
  });

  it("keys its replay watermark per lock: a newer proof used on one lock never blocks another lock's older one", async () => {
    const { asOwner, lockId, proofAt } = await loadFixture(deployVaultFixture);
    const hash = await asOwner.write.deposit([UNLOCK_AT], { value: AMOUNT });
    expect(hash).to.match(/^0x/);
    const second = lockId + 1n;
    // The second lock is withdrawn first with a newer proof (a front-runner would do exactly this) …
    await asOwner.write.withdraw([second, proofAt(UNLOCK_AT + 11n)]);
    // … and the first lock still takes its older, still fresh proof: one watermark per lock, not per vault.
    await asOwner.write.withdraw([lockId, proofAt(UNLOCK_AT + 10n)]);
    expect(await asOwner.read.lastConsumedNanoMoment([toKey(lockId)])).to.equal(UNLOCK_AT + 10n);
    expect(await asOwner.read.lastConsumedNanoMoment([toKey(second)])).to.equal(UNLOCK_AT + 11n);
  });
});

/** The vault's action key of a lock: the lock id as bytes32. */
function toKey(lockId: bigint): `0x${string}` {
  return `0x${lockId.toString(16).padStart(64, "0")}`;
}
