/**
 * wire/manifest.ts: the network manifest's schema and catalog rules (whole bootnode multiaddresses, raw sha2-256
 * CIDv1 evidence, no secrets anywhere), each refusal naming the field.
 */
import { expect } from "chai";
import { createHash } from "node:crypto";
import { ValidationError } from "../../protocol/errors";
import { isRawSha256CidV1, MANIFEST_VERSION, parseManifest } from "../../wire/manifest";

/** A CIDv1 (raw, sha2-256) of `content`, base32 with the "b" prefix. */
function cidOf(content: string, codec = 0x55): string {
  const bytes = Buffer.concat([Buffer.from([0x01, codec, 0x12, 0x20]), createHash("sha256").update(content).digest()]);
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return `b${out}`;
}

const PEER = "12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA";
const valid = () => ({
  version: MANIFEST_VERSION,
  name: "local",
  chain: { evmChainId: 31337, genesisHash: `0x${"ab".repeat(32)}`, ntsVerified: false },
  services: { rpc: "http://127.0.0.1:8545", time: "http://127.0.0.1:8547", explorer: "https://explorer.example" },
  bootnodes: [`/dns4/boot-1.example.org/tcp/30333/ws/p2p/${PEER}`],
  meshPeers: [{ nodeId: `0x${"12".repeat(20)}`, endpoint: "http://127.0.0.1:8080" }],
  contracts: { TimeOracle: `0x${"34".repeat(20)}` },
  trustedCardRootsPem: ["-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"],
  evidence: [cidOf("audit report")],
});

function refusal(json: unknown): ValidationError {
  try {
    parseManifest(json);
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error("accepted");
}

describe("wire/manifest: the network manifest", () => {
  it("accepts a complete manifest", () => {
    expect(parseManifest(valid()).chain.evmChainId).to.equal(31337);
  });

  it("takes a bootnode only as a whole /dns4/…/tcp/30333/ws/p2p/<peer id> multiaddress", () => {
    for (const bootnode of [`/ip4/10.0.0.1/tcp/30333/ws/p2p/${PEER}`, `/dns4/boot.example.org/tcp/30334/ws/p2p/${PEER}`, "boot.example.org:30333", `/dns4/boot.example.org/tcp/30333/p2p/${PEER}`, `/dns4/boot.example.org/tcp/30333/ws/p2p/${PEER}/extra`]) {
      expect(refusal({ ...valid(), bootnodes: [bootnode] }).field, bootnode).to.equal("manifest/bootnodes/0");
    }
  });

  it("takes evidence only as CIDv1, raw codec, sha2-256", () => {
    expect(isRawSha256CidV1(cidOf("x"))).to.equal(true);
    expect(isRawSha256CidV1(cidOf("x", 0x70))).to.equal(false); // dag-pb
    expect(isRawSha256CidV1("QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG")).to.equal(false); // CIDv0
    expect(refusal({ ...valid(), evidence: [cidOf("x", 0x70)] }).field).to.equal("manifest/evidence/0");
  });

  it("refuses anything that looks like a secret, wherever it is", () => {
    expect(refusal({ ...valid(), contracts: { TimeOracle: `0x${"34".repeat(20)}` }, privateKey: "x" }).field).to.equal("manifest/privateKey");
    expect(refusal({ ...valid(), services: { ...valid().services, faucet: `0x${"9f".repeat(32)}` } }).message).to.match(/private key/);
    expect(refusal({ ...valid(), trustedCardRootsPem: ["-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"] }).field).to.equal("manifest/trustedCardRootsPem/0");
  });

  it("takes the time host as ntp://host:port, and ntp:// for no other service", () => {
    for (const endpoint of ["ntp://127.0.0.1:123", "ntp://time.example.org:50123", "ntp://[::1]:123"]) {
      expect(parseManifest({ ...valid(), services: { ...valid().services, "time-host": endpoint } }).services["time-host"], endpoint).to.equal(endpoint);
    }
    for (const endpoint of ["ntp://127.0.0.1", "ntp://127.0.0.1:0", "ntp://127.0.0.1:65536", "ntp://127.0.0.1:123/path", "http://127.0.0.1:123", "udp://127.0.0.1:123"]) {
      expect(refusal({ ...valid(), services: { ...valid().services, "time-host": endpoint } }).field, endpoint).to.equal("manifest/services/time-host");
    }
    expect(refusal({ ...valid(), services: { ...valid().services, explorer: "ntp://127.0.0.1:123" } }).message).to.match(/only for time-host/);
    expect(refusal({ ...valid(), services: { ...valid().services, time: "ntp://127.0.0.1:123" } }).field).to.match(/^manifest\/services/);
  });

  it("names the field of a schema error: a missing time service, an unknown key, a bad genesis hash", () => {
    const { time: _time, ...noTime } = valid().services;
    expect(refusal({ ...valid(), services: noTime }).field).to.match(/^manifest\/services/);
    expect(refusal({ ...valid(), extra: 1 }).field).to.match(/^manifest/);
    expect(refusal({ ...valid(), chain: { ...valid().chain, genesisHash: "0x1234" } }).field).to.equal("manifest/chain/genesisHash");
  });
});
