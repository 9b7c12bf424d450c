import { expect } from "chai";
import { createDevIdentity } from "../../../protocol/devca";
import type { Hex } from "../../../protocol/types";
import { KNOWN_CHAIN_TTL_MS, TrustStore, type TrustStoreOptions } from "../../../node/core/trustStore";
import { devIdentity } from "./helpers";

async function store(overrides: Partial<TrustStoreOptions> = {}) {
  const identity = await devIdentity();
  const clock = { ms: Date.now() };
  const trust = new TrustStore({
    ownCard: { cardId: identity.cardId, publicKey: identity.cardPublicKey, certificateChainPem: identity.certificateChainPem },
    ownNodeAddress: identity.nodeAddress,
    trustedNodeAddresses: [],
    revokedCardIds: [],
    trustedRootsPem: [identity.ca.certificatePem],
    nowMs: () => clock.ms,
    ...overrides,
  });
  return { identity, trust, clock };
}

describe("TrustStore (node/core/trustStore.ts)", () => {
  it("knows its own card and node, in any hex case; unknown cards and nodes resolve as unknown", async () => {
    const { identity, trust } = await store({ trustedRootsPem: [] });
    const peer = await createDevIdentity({ ca: identity.ca });
    expect(trust.resolveCard(identity.cardId.toUpperCase().replace("0X", "0x") as Hex)).to.deep.equal({ publicKey: identity.cardPublicKey, revoked: false });
    expect(trust.resolveCard(peer.cardId)).to.equal(undefined);
    expect(trust.isActiveNode(identity.nodeAddress.toLowerCase() as Hex)).to.equal(true);
    expect(trust.isActiveNode(peer.nodeAddress)).to.equal(false);
    // No roots configured: nothing to check, the own card stays trusted; a chain given with a proof is unchecked.
    expect(await trust.checkOwnChain()).to.equal(null);
    expect(trust.chainFailure(peer.cardId, peer.certificateChainPem)?.reason).to.equal("certificate-chain-unchecked");
  });

  it("answers revoked for a revoked card and counts configured trusted nodes as active", async () => {
    const identity = await devIdentity();
    const peer = await createDevIdentity({ ca: identity.ca });
    const { trust } = await store({ revokedCardIds: [identity.cardId.toUpperCase()], trustedNodeAddresses: [peer.nodeAddress] });
    expect(trust.resolveCard(identity.cardId)).to.deep.equal({ publicKey: identity.cardPublicKey, revoked: true });
    expect(trust.isActiveNode(peer.nodeAddress)).to.equal(true);
  });

  it("learns a card from a chain that leads to a trusted root, until the verdict expires", async () => {
    const { identity, trust, clock } = await store();
    const other = await createDevIdentity({ ca: identity.ca });
    expect(trust.chainFailure(other.cardId, other.certificateChainPem)?.reason).to.equal("certificate-chain-unchecked");
    await trust.checkChain(other.certificateChainPem);
    expect(trust.chainFailure(other.cardId, other.certificateChainPem)).to.equal(undefined);
    expect(trust.resolveCard(other.cardId)).to.deep.equal({ publicKey: other.cardPublicKey, revoked: false });
    // The chain certifies `other`, not the node's own card.
    const mismatch = trust.chainFailure(identity.cardId, other.certificateChainPem);
    expect(mismatch?.reason).to.equal("certificate-chain-invalid");
    expect(mismatch?.detail).to.contain("the chain certifies card");

    clock.ms += KNOWN_CHAIN_TTL_MS + 1;
    expect(trust.resolveCard(other.cardId)).to.equal(undefined);
    expect(trust.chainFailure(other.cardId, other.certificateChainPem)?.reason).to.equal("certificate-chain-unchecked");
    await trust.checkChain(other.certificateChainPem); // re-checked
    expect(trust.resolveCard(other.cardId)?.publicKey).to.equal(other.cardPublicKey);
  });

  it("remembers a chain to an untrusted root as invalid, and never learns its card", async () => {
    const { trust } = await store();
    const rogue = await createDevIdentity();
    await trust.checkChain(rogue.certificateChainPem);
    const failure = trust.chainFailure(rogue.cardId, rogue.certificateChainPem);
    expect(failure?.reason).to.equal("certificate-chain-invalid");
    expect(failure?.detail).to.contain("untrusted-root");
    expect(trust.resolveCard(rogue.cardId)).to.equal(undefined);
  });

  it("refuses its own card while its own chain does not lead to a trusted root", async () => {
    const rogueRoot = await createDevIdentity();
    const { identity, trust } = await store({ trustedRootsPem: [rogueRoot.ca.certificatePem] });
    expect(trust.ownChainProblem).to.equal(null); // not checked yet
    const problem = await trust.checkOwnChain();
    expect(problem).to.contain("untrusted-root");
    expect(trust.ownChainProblem).to.equal(problem);
    expect(trust.resolveCard(identity.cardId)).to.equal(undefined);
    expect(trust.chainFailure(identity.cardId, undefined)?.detail).to.equal(`this node's card chain: ${problem}`);

    const good = await store();
    expect(await good.trust.checkOwnChain()).to.equal(null);
    expect(good.trust.chainFailure(identity.cardId, undefined)).to.equal(undefined);
  });
});
